//===- Trace.cpp - Timeline of a rank, Chrome-trace JSON ------------------===//

#include "varuna/runtime/Trace.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <sys/stat.h>

namespace varuna::rt {

static std::string escape(const std::string &s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (static_cast<unsigned char>(c) < 0x20)
      continue;
    out += c;
  }
  return out;
}

void Trace::span(const std::string &name, Lane lane, Clock::time_point start,
                 Clock::time_point end, const std::string &args) {
  if (!enabled || (step >= 0 && (step < keepFirst || step > keepLast)))
    return;
  auto us = [](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               t.time_since_epoch())
        .count();
  };
  events.push_back({name, args, lane, us(start),
                    std::max<int64_t>(0, us(end) - us(start)), step});
}

/// Writes `path` whole or not at all: into PATH.tmp, then renamed over it.
/// A symbolic link is written through (its target replaced; the link was
/// replaced by a file); a path that exists but is no regular file
/// (/dev/stdout, a pipe) is refused: renaming over it replaced /dev/stdout.
static void writeWhole(const std::string &path,
                       const std::function<void(std::ostream &)> &body) {
  auto failed = [&](const std::string &what, int err) {
    return std::runtime_error("cannot write the trace '" + path + "': " +
                              what + std::strerror(err));
  };
  std::string target = path;
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    if (char *real = ::realpath(path.c_str(), nullptr)) {
      target = real;
      std::free(real);
    }
  }
  if (::stat(target.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw std::runtime_error("cannot write the trace '" + path +
                             "': it exists and is not a regular file");
  std::string tmp = target + ".tmp";
  {
    std::ofstream os(tmp);
    if (!os)
      throw failed("creating '" + tmp + "': ", errno);
    body(os);
    os.flush();
    if (!os) {
      int err = errno;
      std::remove(tmp.c_str());
      throw failed("writing '" + tmp + "': ", err);
    }
  }
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    throw failed("renaming '" + tmp + "': ", err);
  }
}

void Trace::write(const std::string &path, int pid,
                  const std::string &processName) const {
  // Spans of one lane may overlap: the gradient buckets' all-reduces run
  // concurrently. Chrome's trace format wants a thread's complete events
  // nested, so each overlapping span goes to the first of the lane's extra
  // threads (3, 4, ...: "all-reduce 2", ...) free at its start.
  struct Row {
    int lane, tid;
    int64_t end;
  };
  std::vector<Row> rows;
  for (int l = 0; l < 3; ++l)
    rows.push_back({l, l, std::numeric_limits<int64_t>::min()});
  std::vector<size_t> byStart(events.size());
  for (size_t i = 0; i < events.size(); ++i)
    byStart[i] = i;
  std::stable_sort(byStart.begin(), byStart.end(), [&](size_t a, size_t b) {
    return events[a].ts < events[b].ts;
  });
  std::vector<int> tid(events.size());
  std::vector<int> extra(3, 0); // extra threads per lane
  std::vector<std::pair<int, std::string>> threadNames;
  const char *lanes[] = {"compute", "communication", "all-reduce"};
  for (int l = 0; l < 3; ++l)
    threadNames.push_back({l, lanes[l]});
  for (size_t i : byStart) {
    const Event &e = events[i];
    Row *free = nullptr;
    for (Row &r : rows)
      if (r.lane == e.lane && r.end <= e.ts) {
        free = &r;
        break;
      }
    if (!free) {
      int t = static_cast<int>(rows.size());
      rows.push_back({e.lane, t, std::numeric_limits<int64_t>::min()});
      threadNames.push_back(
          {t, std::string(lanes[e.lane]) + " " +
                  std::to_string(++extra[e.lane] + 1)});
      free = &rows.back();
    }
    free->end = e.ts + e.dur;
    tid[i] = free->tid;
  }
  writeWhole(path, [&](std::ostream &os) {
    os << "{\"traceEvents\": [\n";
    os << "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " << pid
       << ", \"args\": {\"name\": \"" << escape(processName) << "\"}},\n";
    os << "{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": " << pid
       << ", \"args\": {\"sort_index\": " << pid << "}},\n";
    for (auto &[t, name] : threadNames)
      os << "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " << pid
         << ", \"tid\": " << t << ", \"args\": {\"name\": \"" << name
         << "\"}},\n";
    for (size_t i = 0; i < events.size(); ++i) {
      const Event &e = events[i];
      os << "{\"name\": \"" << escape(e.name) << "\", \"ph\": \"X\", \"pid\": "
         << pid << ", \"tid\": " << tid[i] << ", \"ts\": " << e.ts
         << ", \"dur\": " << e.dur;
      std::string args = e.args;
      if (e.step >= 0)
        args = "\"step\": " + std::to_string(e.step) +
               (args.empty() ? "" : ", " + args);
      if (!args.empty())
        os << ", \"args\": {" << args << "}";
      os << "}" << (i + 1 < events.size() ? ",\n" : "\n");
    }
    os << "]}\n";
  });
}

void mergeTraces(const std::vector<std::string> &inputs,
                 const std::string &out) {
  // The files are ours (one event per line): shift "ts" to the earliest.
  std::vector<std::string> lines;
  int64_t first = std::numeric_limits<int64_t>::max();
  for (const std::string &in : inputs) {
    std::ifstream is(in);
    if (!is)
      throw std::runtime_error("missing trace '" + in + "'");
    std::string line;
    std::getline(is, line);
    if (line.rfind("{\"traceEvents\"", 0) != 0)
      throw std::runtime_error("'" + in + "' is not a varuna trace");
    while (std::getline(is, line)) {
      if (line.empty() || line[0] != '{')
        continue;
      if (line.back() == ',')
        line.pop_back();
      size_t p = line.find("\"ts\": ");
      if (p != std::string::npos)
        first = std::min<int64_t>(first, std::stoll(line.substr(p + 6)));
      lines.push_back(line);
    }
  }
  if (first == std::numeric_limits<int64_t>::max())
    first = 0;
  writeWhole(out, [&](std::ostream &os) {
    os << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
    for (size_t i = 0; i < lines.size(); ++i) {
      std::string l = lines[i];
      size_t p = l.find("\"ts\": ");
      if (p != std::string::npos) {
        size_t end = l.find(',', p);
        int64_t ts = std::stoll(l.substr(p + 6)) - first;
        l = l.substr(0, p + 6) + std::to_string(ts) + l.substr(end);
      }
      os << l << (i + 1 < lines.size() ? ",\n" : "\n");
    }
    os << "]}\n";
  });
}

} // namespace varuna::rt
