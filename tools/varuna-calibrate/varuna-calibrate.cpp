//===- varuna-calibrate.cpp - Measure a job once for the planner ----------===//
//
//   varuna-calibrate JOBDIR [-o FILE] [--micro-batches 1,2,4] [--repeats 5]
//                    [--warmup 2] [--compute-threads 1] [--concurrent N]
//                    [--ring-sizes 2,4] [--no-comm]
//   (as ranks on several hosts) varuna-calibrate JOBDIR --across-hosts
//
// Writes JOBDIR/calibration.json (docs/simulator.md): per section and
// micro-batch size the forward and backward seconds, memory and optimizer
// step (Target/ATen/Calibrate.h, through the job's generated code), and --
// from two ranks on this machine over the same Gloo transport training uses
// -- the one-way send time by message size, the all-reduce time by size on
// rings of --ring-sizes ranks (default 2 and 4), and that of k rings of 2
// all-reducing at once (k = the largest ring size / 2), as the k devices of
// one host do.
// Sections are timed by N processes at once (default: one per core), each
// on its own core's share, as in training, where every core runs a rank;
// the file holds the mean of their medians. Then by 2N processes: the
// slowdown beyond an even share of the cores when ranks outnumber them
// ("oversubscribed"; --no-oversubscribed skips it).
//
//===----------------------------------------------------------------------===//

#include "varuna/Support/ByteSize.h"
#include "varuna/Support/JSON.h"
#include "varuna/Support/JobDigest.h"
#include "varuna/Support/ToolInit.h"
#include "varuna/Dialect/Varuna/IR/VarunaDialect.h"
#include "varuna/Target/ATen/Calibrate.h"
#include "varuna/runtime/Agreement.h"
#include "varuna/runtime/Launch.h"
#include "varuna/runtime/Transport.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <fstream>
#include <ctime>
#include <optional>
#include <thread>

namespace cl = llvm::cl;

static cl::OptionCategory toolOptions("varuna-calibrate options");

static cl::opt<std::string> jobDir(cl::Positional, cl::Required,
                                   cl::desc("<JOBDIR from varuna-compile>"),
                                   cl::cat(toolOptions));
static cl::opt<std::string> output("o",
                                   cl::desc("Output (default "
                                            "JOBDIR/calibration.json)"),
                                   cl::cat(toolOptions));
static cl::list<int64_t> microBatches("micro-batches", cl::CommaSeparated,
                                      cl::desc("Micro-batch sizes (1,2,4)"),
                                      cl::cat(toolOptions));
static cl::opt<int> repeats("repeats", cl::init(5), cl::desc("Timed runs"),
                            cl::cat(toolOptions));
static cl::opt<int> warmup("warmup", cl::init(2), cl::desc("Untimed runs"),
                           cl::cat(toolOptions));
static cl::opt<double> commTimeout(
    "timeout", cl::init(60),
    cl::desc("Seconds any rendezvous, send, receive or all-reduce of the "
             "communication measurements may wait (default 60; a 16 MiB "
             "message over a link slower than ~2 Mbit/s needs more)"),
    cl::cat(toolOptions));
static cl::opt<int> threads("compute-threads", cl::init(1),
                            cl::desc("Threads while timing sections (what one "
                                     "rank gets when ranks fill the cores)"),
                            cl::cat(toolOptions));
static cl::list<int> ringSizes(
    "ring-sizes", cl::CommaSeparated,
    cl::desc("All-reduce ring sizes to time (2,4; ranks on this machine)"),
    cl::cat(toolOptions));
static cl::opt<bool> noComm("no-comm", cl::init(false),
                            cl::desc("Skip the communication measurements"),
                            cl::cat(toolOptions));
static cl::opt<int> concurrent(
    "concurrent", cl::init(0),
    cl::desc("Processes timing the sections at once (default: one per core; "
             "1: this process alone)"),
    cl::cat(toolOptions));
static cl::opt<bool> acrossHosts(
    "across-hosts", cl::init(false),
    cl::desc("Run as ranks on several hosts (started by torchrun, srun or "
             "scripts/netns.sh, which set RANK, WORLD_SIZE, MASTER_ADDR, "
             "MASTER_PORT): time sends and all-reduces between them and add "
             "them to the calibration as \"across_hosts\" (rank 0 writes)"),
    cl::cat(toolOptions));
static cl::opt<double, false, varuna::ByteSizeParser> memoryLimit(
    "memory", cl::init(0),
    cl::desc("Memory the timing processes may use together (bytes, or "
             "16GiB, 2.5G) "
             "(default: what /proc/meminfo says is available); each holds "
             "the whole model, so fewer run at once when they do not fit"),
    cl::cat(toolOptions));
static cl::opt<bool> noOversubscribed(
    "no-oversubscribed", cl::init(false),
    cl::desc("Skip timing the sections with twice as many processes as "
             "cores (the slowdown when ranks outnumber cores)"),
    cl::cat(toolOptions));
static cl::opt<std::string> commOut("comm-out", cl::Hidden,
                                    cl::desc("(rank mode) where rank 0 writes"),
                                    cl::cat(toolOptions));
static cl::opt<std::string>
    sectionsOut("sections-out", cl::Hidden,
                cl::desc("(rank mode) this rank writes its section timings to "
                         "<path>.<RANK>"),
                cl::cat(toolOptions));

static int fail(const llvm::Twine &msg) {
  llvm::errs() << "varuna-calibrate: error: " << msg << "\n";
  return 1;
}

/// --ring-sizes, with 2 always among them (the planner's baseline).
static std::vector<int> ringSizesOrDefault() {
  std::vector<int> r(ringSizes.begin(), ringSizes.end());
  if (r.empty())
    r = {2, 4};
  if (std::find(r.begin(), r.end(), 2) == r.end())
    r.push_back(2);
  std::sort(r.begin(), r.end());
  r.erase(std::unique(r.begin(), r.end()), r.end());
  return r;
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// This process's CPU time so far, all threads (the transport's included).
static double processCpuSeconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

/// Rank mode: ping-pong between ranks 0 and 1, then all-reduces on rings of
/// each size of `ringSizes` (ranks 0 .. R-1; the others wait) and, but
/// `acrossHosts`, rings of 2 all-reducing at once; rank 0 writes them
/// to `outPath`. Besides the times, rank 0's CPU time (process CPU: the
/// kernel's copies and the transport's threads) per message end (half a
/// round trip's) and per all-reduce: what communication takes from compute
/// when ranks share cores. `acrossHosts`: the ranks must be on other hosts
/// (hostIdentity) -- ranks 0 and 1, who time the sends, must; two others
/// on one host are warned about.
static int measureComm(const std::vector<int> &ringSizes,
                       const std::string &outPath, bool acrossHosts) {
  bool concurrentRings = !acrossHosts;
  using Clock = std::chrono::steady_clock;
  try {
    auto opts = varuna::rt::transportOptionsFromEnv();
    opts.timeout = std::chrono::milliseconds(
        static_cast<int64_t>(commTimeout * 1000.0));
    auto t = varuna::rt::connectGloo(opts);
    int me = t->rank();
    if (acrossHosts) {
      std::vector<int64_t> host =
          varuna::rt::gatherHashes(t->world(), varuna::rt::hostIdentity());
      if (host[0] == host[1])
        return fail(
            "--across-hosts: ranks 0 and 1 run on one host (the same boot "
            "id, network namespace and host name), so their sends would "
            "time this host's loopback, not the link between hosts: start "
            "one rank per host (torchrun --nnodes, srun, or scripts/netns.sh "
            "for namespaces with a real link)");
      bool warned = me != 0; // rank 0 says it, once
      for (size_t i = 0; i < host.size() && !warned; ++i)
        for (size_t j = i + 1; j < host.size() && !warned; ++j)
          if (host[i] == host[j]) {
            llvm::errs() << "varuna-calibrate: warning: ranks " << i
                         << " and " << j << " run on one host: the rings "
                         << "that hold both time a loopback hop among the "
                            "links between hosts\n";
            warned = true;
          }
    }
    // Up to 64 MiB on this host (a big stage's gradients, an embedding's,
    // are all-reduced at that size: extrapolating from 16 MiB predicted a
    // 102 MB all-reduce a third fast); 16 MiB across hosts, whose links may
    // be slow.
    std::vector<int64_t> sizes = {1024, 16384, 262144, 1048576, 4194304,
                                  16777216};
    if (!acrossHosts)
      sizes.push_back(67108864);
    llvm::json::Array sendBytes, sendSeconds, sendCpu;
    for (int64_t bytes : sizes) {
      at::Tensor buf = at::zeros({bytes / 4}, at::kFloat);
      std::vector<double> oneWay, cpu;
      for (int it = 0; it < warmup + repeats; ++it) {
        t->world().barrier();
        double c = processCpuSeconds();
        auto a = Clock::now();
        if (me == 0) {
          t->send(buf, 1, 1)->wait();
          t->recv(buf, 1, 2)->wait();
        } else if (me == 1) {
          t->recv(buf, 0, 1)->wait();
          t->send(buf, 0, 2)->wait();
        }
        double rt = std::chrono::duration<double>(Clock::now() - a).count();
        if (it >= warmup) {
          oneWay.push_back(rt / 2);
          cpu.push_back((processCpuSeconds() - c) / 2);
        }
      }
      sendBytes.push_back(bytes);
      sendSeconds.push_back(median(oneWay));
      sendCpu.push_back(median(cpu));
    }
    // One all-reduce per size on `g` (none: this rank only keeps pace),
    // each timed after `sync`: {"bytes": [...], "seconds": [medians]}.
    auto timeAllreduce = [&](varuna::rt::Group *g, varuna::rt::Group &sync) {
      llvm::json::Array arBytes, arSeconds, arCpu;
      for (int64_t bytes : sizes) {
        std::vector<at::Tensor> v{at::zeros({bytes / 4}, at::kFloat)};
        std::vector<double> ar, cpu;
        for (int it = 0; it < warmup + repeats; ++it) {
          sync.barrier();
          double c = processCpuSeconds();
          auto a = Clock::now();
          if (g)
            g->allreduceSum(v);
          if (it >= warmup) {
            ar.push_back(
                std::chrono::duration<double>(Clock::now() - a).count());
            cpu.push_back(processCpuSeconds() - c);
          }
        }
        arBytes.push_back(bytes);
        arSeconds.push_back(median(ar));
        arCpu.push_back(median(cpu));
      }
      return llvm::json::Object{{"bytes", std::move(arBytes)},
                                {"seconds", std::move(arSeconds)},
                                {"cpu_seconds", std::move(arCpu)}};
    };
    llvm::json::Array rings;
    llvm::json::Object ring2;
    for (int R : ringSizes) {
      std::vector<int> members;
      for (int r = 0; r < R; ++r)
        members.push_back(r);
      if (me < R) {
        auto g = t->group("ring" + std::to_string(R), members);
        llvm::json::Object o = timeAllreduce(g.get(), *g);
        o["ranks"] = R;
        if (R == 2)
          ring2 = o;
        rings.push_back(std::move(o));
      }
      t->world().barrier();
    }
    // k rings of 2 at once ({0,1}, {2,3}, ...), as k devices of one host
    // all-reduce their stages' gradients together: rank 0's times.
    int k = concurrentRings ? t->size() / 2 : 0;
    llvm::json::Object concurrent;
    if (k >= 2) {
      std::unique_ptr<varuna::rt::Group> g;
      if (me < 2 * k) // an odd last rank only waits
        g = t->group("pair" + std::to_string(me / 2),
                     {me / 2 * 2, me / 2 * 2 + 1});
      concurrent = timeAllreduce(g.get(), t->world());
      concurrent["rings"] = k;
      concurrent["ranks"] = 2;
    }
    if (me == 0) {
      std::error_code ec;
      llvm::raw_fd_ostream os(outPath, ec);
      if (ec)
        return fail("cannot write '" + outPath + "'");
      llvm::json::Object out{
          {"send", llvm::json::Object{{"bytes", std::move(sendBytes)},
                                      {"seconds", std::move(sendSeconds)},
                                      {"cpu_seconds", std::move(sendCpu)}}},
          {"allreduce", std::move(ring2)},
          {"allreduce_rings", std::move(rings)}};
      if (k >= 2)
        out["allreduce_concurrent"] = std::move(concurrent);
      os << llvm::json::Value(std::move(out));
    }
  } catch (const std::exception &e) {
    const char *rank = std::getenv("RANK");
    return fail(std::string("rank ") + (rank ? rank : "?") + ": " + e.what());
  }
  return 0;
}

/// Reads a JSON object file; an error names the file.
static llvm::Expected<llvm::json::Object> readObject(const std::string &path) {
  auto buf = llvm::MemoryBuffer::getFile(path);
  if (!buf)
    return llvm::createStringError(buf.getError(), "cannot read '" + path +
                                                       "': " +
                                                       buf.getError().message());
  auto v = varuna::parseUserJSON((*buf)->getBuffer());
  if (!v)
    return llvm::createStringError(
        std::make_error_code(std::errc::invalid_argument),
        "'" + path + "' is not JSON: " + llvm::toString(v.takeError()));
  if (!v->getAsObject())
    return llvm::createStringError(
        std::make_error_code(std::errc::invalid_argument),
        "'" + path + "' is not a JSON object");
  return std::move(*v->getAsObject());
}

/// Writes `o` to `path` through a temporary file and a rename, so a reader
/// never sees half a file.
static int writeObjectAtomically(llvm::json::Object o, const std::string &path) {
  std::string tmp = path + ".tmp";
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(tmp, ec);
    if (ec)
      return fail("cannot write '" + tmp + "': " + ec.message());
    os << llvm::formatv("{0:2}", llvm::json::Value(std::move(o))) << "\n";
  }
  if (auto ec = llvm::sys::fs::rename(tmp, path))
    return fail("cannot rename '" + tmp + "': " + ec.message());
  return 0;
}

/// --across-hosts: this process is one rank of WORLD_SIZE >= 2 on different
/// hosts. All time sends (ranks 0 and 1) and all-reduces (rings of the
/// --ring-sizes that fit the world); rank 0 adds them to its host's
/// calibration file as "across_hosts" (that file must exist: run
/// varuna-calibrate on one host first).
static int calibrateAcrossHosts() {
  if (std::string why = varuna::rt::adoptSlurmRank(); !why.empty())
    return fail("srun: " + why);
  const char *rank = std::getenv("RANK");
  const char *world = std::getenv("WORLD_SIZE");
  if (!rank || !world)
    return fail("--across-hosts runs as one rank of several: start it with "
                "torchrun, srun or scripts/netns.sh (RANK and WORLD_SIZE, or "
                "srun's SLURM_PROCID and SLURM_STEP_NUM_TASKS, are not set)");
  int size = std::atoi(world);
  if (size < 2)
    return fail("--across-hosts needs at least 2 ranks (WORLD_SIZE is " +
                llvm::Twine(world) + ")");
  std::string path = output.empty() ? (jobDir + "/calibration.json") : output;
  bool writer = std::string(rank) == "0";
  if (writer && !llvm::sys::fs::exists(path))
    return fail("'" + path + "' does not exist: run varuna-calibrate " +
                jobDir + " on one host first (the other ranks will time out "
                "waiting for this one)");
  std::vector<int> rings;
  for (int r : ringSizesOrDefault())
    if (r <= size)
      rings.push_back(r);
  std::string part = path + ".across.tmp";
  // What --across-hosts keeps: sends and rings (concurrent rings of one
  // host are measured on one host).
  if (int rc = measureComm(rings, part, /*acrossHosts=*/true))
    return rc;
  if (!writer)
    return 0;
  auto comm = readObject(part);
  auto cal = comm ? readObject(path) : llvm::Expected<llvm::json::Object>(
                                           llvm::json::Object{});
  llvm::sys::fs::remove(part);
  if (!comm)
    return fail(llvm::toString(comm.takeError()));
  if (!cal)
    return fail(llvm::toString(cal.takeError()));
  llvm::json::Object across{{"ranks", size}};
  for (const char *key : {"send", "allreduce_rings"})
    if (llvm::json::Value *v = comm->get(key))
      across[key] = std::move(*v);
  (*cal)["across_hosts"] = std::move(across);
  if (int rc = writeObjectAtomically(std::move(*cal), path))
    return rc;
  llvm::outs() << "added sends and all-reduces across " << size
               << " hosts to " << path << "\n";
  return 0;
}

/// One section list entry per section (the calibration.json format).
static llvm::json::Array
sectionsJson(const std::vector<varuna::SectionTiming> &timings) {
  llvm::json::Array sections;
  for (auto [k, t] : llvm::enumerate(timings)) {
    llvm::json::Array f, b, in, w, held, peak;
    for (double x : t.forwardSeconds)
      f.push_back(x);
    for (double x : t.backwardSeconds)
      b.push_back(x);
    for (double x : t.inputSeconds)
      in.push_back(x);
    for (double x : t.weightSeconds)
      w.push_back(x);
    for (int64_t x : t.heldBytes)
      held.push_back(x);
    for (int64_t x : t.peakBytes)
      peak.push_back(x);
    sections.push_back(llvm::json::Object{{"index", int64_t(k)},
                                          {"forward_seconds", std::move(f)},
                                          {"backward_seconds", std::move(b)},
                                          {"input_seconds", std::move(in)},
                                          {"weight_seconds", std::move(w)},
                                          {"held_bytes", std::move(held)},
                                          {"peak_bytes", std::move(peak)},
                                          {"optimizer_seconds",
                                           t.optimizerSeconds}});
  }
  return sections;
}

/// The processes' section lists merged: times averaged, memory the most
/// any process saw (the same in all, but for allocator noise).
static llvm::json::Array meanOfParts(std::vector<llvm::json::Array> &parts) {
  llvm::json::Array merged = parts.front();
  double n = double(parts.size());
  for (size_t k = 0; k < merged.size(); ++k) {
    llvm::json::Object &out = *merged[k].getAsObject();
    for (const char *key :
         {"forward_seconds", "backward_seconds", "input_seconds",
          "weight_seconds"}) {
      llvm::json::Array &a = *out.getArray(key);
      for (size_t i = 0; i < a.size(); ++i) {
        double sum = 0;
        for (llvm::json::Array &p : parts)
          sum += (*(*p[k].getAsObject()).getArray(key))[i].getAsNumber().value_or(0);
        a[i] = sum / n;
      }
    }
    for (const char *key : {"held_bytes", "peak_bytes"}) {
      llvm::json::Array &a = *out.getArray(key);
      for (size_t i = 0; i < a.size(); ++i) {
        int64_t most = 0;
        for (llvm::json::Array &p : parts)
          most = std::max(most, (*(*p[k].getAsObject()).getArray(key))[i]
                                    .getAsInteger()
                                    .value_or(0));
        a[i] = most;
      }
    }
    double sum = 0;
    for (llvm::json::Array &p : parts)
      sum += p[k].getAsObject()->getNumber("optimizer_seconds").value_or(0);
    out["optimizer_seconds"] = sum / n;
  }
  return merged;
}

static unsigned cores() { return std::max(1u, std::thread::hardware_concurrency()); }

/// MemAvailable of /proc/meminfo in bytes, or 0 when unknown.
static double availableMemoryBytes() {
  // (Read as a stream: /proc files have size 0, and a MemoryBuffer of the
  // file was empty -- so the memory was never known without --memory.)
  std::ifstream in("/proc/meminfo");
  std::string key;
  unsigned long long kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:")
      return double(kb) * 1024;
  return 0;
}

/// Bytes one timing process holds at least: each runs every section of the
/// job, so the whole model's parameters, their gradients and a working
/// copy (3x the parameters: what a 278M-parameter GPT measured, 3.3 GB).
static double bytesPerTimingProcess(const std::string &jobDir) {
  llvm::Expected<llvm::json::Object> manifest =
      varuna::loadJobManifest(jobDir);
  if (!manifest) {
    llvm::consumeError(manifest.takeError());
    return 0; // unknown: as many processes as asked
  }
  return 3.0 * manifest->getNumber("trainable_parameter_bytes").value_or(0);
}

/// A lower bound of the bytes one example takes while its sections are
/// timed: its inputs and the activations at every cut (from the manifest;
/// 0 when unknown). A section's own intermediates come on top.
static double bytesPerExample(const std::string &jobDir) {
  llvm::Expected<llvm::json::Object> manifest =
      varuna::loadJobManifest(jobDir);
  if (!manifest) {
    llvm::consumeError(manifest.takeError());
    return 0;
  }
  double bytes = 0;
  if (const llvm::json::Array *cuts = manifest->getArray("cut_points"))
    for (const llvm::json::Value &c : *cuts)
      if (const llvm::json::Object *o = c.getAsObject())
        bytes += o->getNumber("bytes_per_example").value_or(0);
  if (const llvm::json::Array *specs = manifest->getArray("input_specs"))
    for (const llvm::json::Value &v : *specs) {
      const llvm::json::Object *o = v.getAsObject();
      const llvm::json::Array *shape = o ? o->getArray("shape") : nullptr;
      if (!shape)
        continue;
      double n = 1;
      for (const llvm::json::Value &d : *shape)
        if (auto text = d.getAsString()) {
          int64_t k = 0;
          if (!text->getAsInteger(10, k))
            n *= double(k);
        }
      std::optional<llvm::StringRef> dtype = o->getString("dtype");
      bool wide = dtype && (dtype->endswith("64"));
      bytes += n * (wide ? 8 : 4);
    }
  return bytes;
}

/// How many timing processes fit this machine's available memory (at
/// least 1), given that `wanted` were asked for.
static int processesThatFit(int wanted, double perProcess, double available) {
  if (perProcess <= 0 || available <= 0)
    return wanted;
  double fit = std::floor(0.8 * available / perProcess);
  return fit >= wanted ? wanted : std::max(1, int(fit));
}

/// Sum of every section's forward + backward seconds at every size.
static double computeSeconds(const llvm::json::Array &sections) {
  double sum = 0;
  for (const llvm::json::Value &v : sections)
    if (const llvm::json::Object *o = v.getAsObject())
      for (const char *key : {"forward_seconds", "backward_seconds"})
        if (const llvm::json::Array *a = o->getArray(key))
          for (const llvm::json::Value &x : *a)
            sum += x.getAsNumber().value_or(0);
  return sum;
}

/// `processes` copies of this tool time the sections at the same time (rank
/// mode, --sections-out); their section lists, merged.
static llvm::Expected<llvm::json::Array>
timeSectionsConcurrently(const char *argv0, int processes,
                         const std::vector<int64_t> &ms) {
  auto error = [](const llvm::Twine &msg) {
    return llvm::createStringError(std::make_error_code(std::errc::io_error),
                                   msg);
  };
  std::string base = (output.empty() ? jobDir + "/calibration.json"
                                     : std::string(output)) +
                     ".sections";
  std::vector<std::string> args = {
      llvm::sys::fs::getMainExecutable(argv0, (void *)&fail), jobDir,
      "--repeats", std::to_string(repeats), "--warmup",
      std::to_string(warmup), "--compute-threads", std::to_string(threads),
      "--sections-out", base};
  std::string sizes;
  for (int64_t m : ms)
    sizes += (sizes.empty() ? "" : ",") + std::to_string(m);
  args.push_back("--micro-batches=" + sizes);
  varuna::rt::LaunchOptions launch;
  launch.argv = args;
  launch.worldSize = processes;
  launch.env = {"OMP_NUM_THREADS=" + std::to_string(threads)};
  if (varuna::rt::launchLocalRanks(launch) != 0)
    return error("timing the sections with " + llvm::Twine(processes) +
                 " processes failed");
  std::vector<llvm::json::Array> parts;
  for (int r = 0; r < processes; ++r) {
    std::string part = base + "." + std::to_string(r);
    auto buf = llvm::MemoryBuffer::getFile(part);
    auto parsed = buf ? llvm::json::parse((*buf)->getBuffer())
                      : llvm::Expected<llvm::json::Value>(error("missing"));
    if (!parsed)
      return error("cannot read '" + part +
                   "': " + llvm::toString(parsed.takeError()));
    if (!parsed->getAsArray())
      return error("'" + part + "' is not a list of sections");
    parts.push_back(std::move(*parsed->getAsArray()));
    llvm::sys::fs::remove(part);
  }
  return meanOfParts(parts);
}

int main(int argc, char **argv) {
  varuna::ToolInit init(argc, argv);
  // Only our options in --help, not the ones LLVM registers.
  cl::HideUnrelatedOptions(toolOptions);
  cl::ParseCommandLineOptions(argc, argv, "Varuna calibration\n");
  if (repeats < 1)
    return fail("--repeats must be at least 1, not " + llvm::Twine(repeats));
  if (warmup < 0)
    return fail("--warmup must not be negative, not " + llvm::Twine(warmup));
  if (!(commTimeout > 0))
    return fail("--timeout must be positive");
  if (threads < 1)
    return fail("--compute-threads must be at least 1, not " +
                llvm::Twine(threads));
  for (int r : ringSizes)
    if (r < 2)
      return fail("--ring-sizes must be at least 2 (got " + llvm::Twine(r) +
                  ")");
  if (concurrent < 0)
    return fail("--concurrent must not be negative");
  if (std::getenv("RANK") && !commOut.empty())
    return measureComm(ringSizesOrDefault(), commOut, /*acrossHosts=*/false);
  if (acrossHosts)
    return calibrateAcrossHosts();

  std::vector<int64_t> ms(microBatches.begin(), microBatches.end());
  if (ms.empty())
    ms = {1, 2, 4};
  for (int64_t m : ms)
    if (m < 1)
      return fail("--micro-batches must be positive");
  // Increasing and distinct, as the planner reads them (it interpolates
  // between neighbours and takes the first as the smallest).
  llvm::sort(ms);
  ms.erase(std::unique(ms.begin(), ms.end()), ms.end());

  mlir::MLIRContext ctx;
  ctx.loadDialect<varuna::VarunaDialect, mlir::func::FuncDialect>();
  ctx.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &ctx);
  llvm::SmallString<256> ir(jobDir), lib(jobDir);
  llvm::sys::path::append(ir, "job.mlir");
  llvm::sys::path::append(lib, "libstages.so");
  // (Said once: MLIR's parser would say "could not open input file" first.)
  if (!llvm::sys::fs::exists(ir))
    return fail("cannot read '" + ir + "': " +
                (llvm::sys::fs::is_directory(jobDir)
                     ? "run varuna-compile first"
                     : "'" + jobDir + "' is not a job directory (" +
                           "varuna-compile MODEL -o " + jobDir + ")"));
  auto job = mlir::parseSourceFile<mlir::ModuleOp>(ir, sourceMgr, &ctx);
  if (!job)
    return fail("cannot read '" + ir + "': run varuna-compile first");
  // Where the calibration goes, checked before the minute of timing (it
  // was found unwritable after it, in the words of a temporary file).
  if (sectionsOut.empty()) {
    std::string path =
        output.empty() ? (jobDir + "/calibration.json") : output.getValue();
    if (llvm::sys::fs::is_directory(path))
      return fail("-o '" + path + "' is a directory: give the file to write "
                  "(e.g. " + path + "/calibration.json)");
    std::string probe = path + ".tmp";
    std::error_code ec;
    { llvm::raw_fd_ostream os(probe, ec); }
    if (ec)
      return fail("cannot write '" + path + "': " + ec.message());
    llvm::sys::fs::remove(probe);
  }

  at::set_num_threads(threads);
  varuna::CalibrationOptions options;
  options.microBatches = ms;
  if (auto config = varuna::loadJobTrainingConfig(jobDir)) {
    options.optimizer = config->optimizer;
    options.precision = config->precision;
    options.clipGradNorm = config->clipGradNorm;
  } else {
    return fail(llvm::toString(config.takeError()));
  }
  options.repeats = repeats;
  options.warmup = warmup;
  if (llvm::sys::fs::exists(lib)) {
    llvm::SmallString<256> abs(lib);
    llvm::sys::fs::make_absolute(abs);
    options.stageLibrary = abs.str().str();
  } else if (!std::getenv("RANK")) {
    // What is timed is not what varuna-run will run (it refuses the job
    // without --engine reference): say so once, in the calibration too.
    llvm::errs() << "varuna-calibrate: warning: '" << lib
                 << "' does not exist (a job compiled with --no-build): "
                    "timing the reference engine, which varuna-run uses "
                    "only with --engine reference\n";
  }
  auto t0 = std::chrono::steady_clock::now();
  int processes = concurrent > 0 ? concurrent.getValue() : int(cores());
  // Each timing process holds the whole model: as many as the memory takes
  // (a model that barely fits one stage is still calibrated, by fewer).
  double perProcess = bytesPerTimingProcess(jobDir),
         available = memoryLimit > 0 ? double(memoryLimit)
                                     : availableMemoryBytes();
  // (Below a megabyte in KB or bytes: "take 0 MB, and 0 MB is available".)
  auto size = [](double b) {
    std::string s;
    llvm::raw_string_ostream os(s);
    if (b >= 1e9)
      os << llvm::format("%.1f GB", b / 1e9);
    else if (b >= 1e6)
      os << llvm::format("%.1f MB", b / 1e6);
    else if (b >= 1e3)
      os << llvm::format("%.1f KB", b / 1e3);
    else
      os << llvm::format("%.0f bytes", b);
    return s;
  };
  if (sectionsOut.empty() && available > 0) {
    // A micro-batch whose examples alone exceed the memory: said before a
    // timing process dies of it (LLVM's "out of memory" abort).
    double perExample = bytesPerExample(jobDir);
    int64_t largest = ms.back();
    if (perExample > 0 && double(largest) * perExample > available)
      return fail("--micro-batches " + llvm::Twine(largest) +
                  ": its examples' inputs and activations at the cuts alone "
                  "take " + size(double(largest) * perExample) + ", and " +
                  size(available) + " of memory is available (--memory)");
  }
  if (sectionsOut.empty()) {
    int fit = processesThatFit(processes, perProcess, available);
    if (fit < processes)
      llvm::errs() << "varuna-calibrate: warning: timing the sections with "
                   << fit << " process(es), not " << processes
                   << ": each holds the whole model (about "
                   << size(perProcess) << "), and " << size(available)
                   << " of memory is available (--memory)\n";
    processes = fit;
    // More threads than cores: every timing is slowed by the others', and
    // the plan would expect a slower machine than its runs will see.
    if (int64_t(processes) * threads > int64_t(cores()))
      llvm::errs() << "varuna-calibrate: warning: " << processes
                   << " timing process(es) x --compute-threads " << threads
                   << " is more threads than the " << cores()
                   << " cores: the sections are timed slower than ranks "
                      "with as many threads each would run (varuna-run "
                      "shares the cores among its ranks)\n";
  }
  llvm::json::Array sections;
  std::optional<llvm::json::Object> oversubscribed;
  if (!sectionsOut.empty() || processes == 1) {
    auto timings = varuna::calibrateSections(*job, options);
    if (mlir::failed(timings))
      return 1;
    sections = sectionsJson(*timings);
    if (!sectionsOut.empty()) { // rank mode: hand them to the parent
      const char *rank = std::getenv("RANK");
      std::string path = sectionsOut + "." + (rank ? rank : "0");
      std::error_code ec;
      llvm::raw_fd_ostream os(path, ec);
      if (ec)
        return fail("cannot write '" + path + "'");
      os << llvm::json::Value(std::move(sections));
      return 0;
    }
  } else {
    auto timed = timeSectionsConcurrently(argv[0], processes, ms);
    if (!timed)
      return fail(llvm::toString(timed.takeError()));
    sections = std::move(*timed);
    // Twice as many processes as cores: how much slower than sharing the
    // cores evenly (2x) a task runs when ranks outnumber cores (context
    // switches, caches): the planner's --shared-cores model uses it.
    bool overFits =
        processesThatFit(2 * processes, perProcess, available) ==
        2 * processes;
    if (!noOversubscribed && processes >= int(cores()) && !overFits)
      llvm::errs() << "varuna-calibrate: warning: not timing "
                   << 2 * processes
                   << " processes at once (oversubscribed): their copies of "
                      "the model do not fit the memory\n";
    else if (!noOversubscribed && processes >= int(cores())) {
      auto over = timeSectionsConcurrently(argv[0], 2 * processes, ms);
      if (!over)
        return fail(llvm::toString(over.takeError()));
      // Shared evenly, 2p processes on c cores run 2p / c times slower
      // than alone, p of them max(1, p / c) times: the ratio of the two
      // (2 here, as p >= c) is what even sharing explains. (Dividing by
      // 2p / c held for p = c only: --concurrent 8 on 2 cores wrote 0.18.)
      double base = computeSeconds(sections), more = computeSeconds(*over);
      double even = std::max(1.0, 2.0 * processes / cores()) /
                    std::max(1.0, double(processes) / cores());
      if (base > 0)
        oversubscribed = llvm::json::Object{
            {"processes", 2 * processes},
            {"cores", cores()},
            {"slowdown", more / base / even}};
    }
  }
  size_t sectionCount = sections.size();
  llvm::json::Array mbs;
  for (int64_t m : ms)
    mbs.push_back(m);
  llvm::json::Object out{{"format", "varuna-calibration-1"},
                         {"job_digest", varuna::jobFileDigest(ir)},
                         {"threads", threads.getValue()},
                         {"concurrent", processes},
                         {"engine", options.stageLibrary.empty() ? "reference"
                                                                 : "generated"},
                         {"micro_batches", std::move(mbs)},
                         {"sections", std::move(sections)}};
  if (oversubscribed)
    out["oversubscribed"] = std::move(*oversubscribed);

  std::string path = output.empty() ? (jobDir + "/calibration.json") : output;
  if (!noComm) {
    std::string part = path + ".comm.tmp";
    varuna::rt::LaunchOptions launch;
    launch.argv = {llvm::sys::fs::getMainExecutable(argv[0], (void *)&fail),
                   jobDir, "--comm-out", part, "--repeats",
                   std::to_string(repeats), "--warmup",
                   std::to_string(warmup), "--timeout",
                   std::to_string(commTimeout.getValue())};
    std::string rings;
    for (int r : ringSizesOrDefault())
      rings += (rings.empty() ? "" : ",") + std::to_string(r);
    launch.argv.push_back("--ring-sizes=" + rings);
    launch.worldSize = ringSizesOrDefault().back();
    launch.env = {"OMP_NUM_THREADS=1"};
    if (varuna::rt::launchLocalRanks(launch) != 0)
      return fail("the communication measurement failed");
    auto comm = readObject(part);
    if (!comm)
      return fail("the communication measurements: " +
                  llvm::toString(comm.takeError()));
    for (auto &kv : *comm)
      out[kv.first] = kv.second;
    llvm::sys::fs::remove(part);
  }
  if (int rc = writeObjectAtomically(std::move(out), path))
    return rc;
  llvm::outs() << "wrote " << path << " ("
               << sectionCount << " sections x " << ms.size()
               << " micro-batch sizes"
               << (noComm ? "" : ", send and all-reduce by size") << ") in "
               << llvm::format("%.1f", std::chrono::duration<double>(
                                           std::chrono::steady_clock::now() - t0)
                                           .count())
               << " s\n";
  return 0;
}
