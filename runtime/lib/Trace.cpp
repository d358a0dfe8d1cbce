//===- Trace.cpp - Timeline of a rank, Chrome-trace JSON ------------------===//

#include "varuna/runtime/Trace.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

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
  if (!enabled)
    return;
  auto us = [](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               t.time_since_epoch())
        .count();
  };
  events.push_back({name, args, lane, us(start),
                    std::max<int64_t>(0, us(end) - us(start)), step});
}

void Trace::write(const std::string &path, int pid,
                  const std::string &processName) const {
  std::string tmp = path + ".tmp";
  {
    std::ofstream os(tmp);
    if (!os)
      throw std::runtime_error("cannot write the trace '" + tmp + "'");
    os << "{\"traceEvents\": [\n";
    os << "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " << pid
       << ", \"args\": {\"name\": \"" << escape(processName) << "\"}},\n";
    os << "{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": " << pid
       << ", \"args\": {\"sort_index\": " << pid << "}},\n";
    const char *lanes[] = {"compute", "communication", "all-reduce"};
    for (int l = 0; l < 3; ++l)
      os << "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " << pid
         << ", \"tid\": " << l << ", \"args\": {\"name\": \"" << lanes[l]
         << "\"}},\n";
    for (size_t i = 0; i < events.size(); ++i) {
      const Event &e = events[i];
      os << "{\"name\": \"" << escape(e.name) << "\", \"ph\": \"X\", \"pid\": "
         << pid << ", \"tid\": " << e.lane << ", \"ts\": " << e.ts
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
    if (!os)
      throw std::runtime_error("error writing the trace '" + tmp + "'");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw std::runtime_error("cannot rename '" + tmp + "' to '" + path + "'");
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
  std::string tmp = out + ".tmp";
  {
    std::ofstream os(tmp);
    if (!os)
      throw std::runtime_error("cannot write the trace '" + tmp + "'");
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
  }
  if (std::rename(tmp.c_str(), out.c_str()) != 0)
    throw std::runtime_error("cannot rename '" + tmp + "' to '" + out + "'");
}

} // namespace varuna::rt
