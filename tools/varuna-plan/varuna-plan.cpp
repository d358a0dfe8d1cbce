//===- varuna-plan.cpp - Pick P x D for a compiled job --------------------===//
//
//   varuna-plan JOBDIR --devices G --batch M [--micro-batch m]
//               [--schedule varuna|gpipe|1f1b] [--memory BYTES]
//               [--flops-per-second F] [--link-gbps B] [--latency-us L]
//               [-o plan.json]
//   varuna-plan JOBDIR --simulate --stages P --replicas D --batch M ...
//               [--timeline FILE]
//
// Reads JOBDIR/manifest.json (per-section FLOPs, parameter bytes, cut
// sizes, the partition for every P), turns FLOPs into seconds with an
// assumed rate (no calibration yet: it says so), and sweeps P with the
// simulator (include/varuna/Plan/Planner.h). docs/simulator.md.
//
//===----------------------------------------------------------------------===//

#include "varuna/Plan/Planner.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;
using namespace varuna::plan;

static cl::opt<std::string> jobDir(cl::Positional, cl::Required,
                                   cl::desc("<JOBDIR from varuna-compile>"));
static cl::opt<int> devices("devices", cl::init(0), cl::desc("Devices G"));
static cl::opt<int64_t> batch("batch", cl::Required,
                              cl::desc("Global batch M"));
static cl::opt<int64_t> microBatch("micro-batch", cl::init(1),
                                   cl::desc("Micro-batch size m"));
static cl::opt<std::string> scheduleName("schedule", cl::init("varuna"),
                                         cl::desc("varuna, gpipe or 1f1b"));
static cl::opt<double> memory("memory", cl::init(0),
                              cl::desc("Device memory in bytes (0: any)"));
static cl::opt<double> flopRate(
    "flops-per-second", cl::init(2e10),
    cl::desc("Assumed FLOP/s of one device (static estimates)"));
static cl::opt<double> linkGbps("link-gbps", cl::init(10),
                                cl::desc("Link bandwidth, Gbit/s"));
static cl::opt<double> latencyUs("latency-us", cl::init(50),
                                 cl::desc("Message latency, microseconds"));
static cl::opt<std::string> output("o", cl::desc("Write the chosen plan (JSON)"));
static cl::opt<bool> simulateOne("simulate",
                                 cl::desc("Simulate one P x D (--stages, "
                                          "--replicas) and print its numbers"));
static cl::opt<int> stages("stages", cl::init(1), cl::desc("P (--simulate)"));
static cl::opt<int> replicas("replicas", cl::init(1),
                             cl::desc("D (--simulate)"));
static cl::opt<std::string> timeline(
    "timeline", cl::desc("--simulate: write the Chrome-trace timeline"));

static int fail(const llvm::Twine &msg) {
  llvm::errs() << "varuna-plan: error: " << msg << "\n";
  return 1;
}

static std::vector<int64_t> ints(const llvm::json::Array *a) {
  std::vector<int64_t> out;
  if (a)
    for (const llvm::json::Value &v : *a)
      out.push_back(v.getAsInteger().value_or(0));
  return out;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::AddExtraVersionPrinter([](llvm::raw_ostream &os) {
    os << "varuna-plan (Varuna " VARUNA_VERSION ")\n";
  });
  cl::ParseCommandLineOptions(argc, argv, "Varuna planner\n");

  llvm::SmallString<256> path(jobDir);
  llvm::sys::path::append(path, "manifest.json");
  auto buf = llvm::MemoryBuffer::getFile(path);
  if (!buf)
    return fail("cannot read '" + path + "': run varuna-compile first");
  auto json = llvm::json::parse((*buf)->getBuffer());
  if (!json)
    return fail("'" + path + "': " + llvm::toString(json.takeError()));
  const llvm::json::Object *m = json->getAsObject();
  const llvm::json::Array *secs = m ? m->getArray("sections") : nullptr;
  if (!secs || secs->empty())
    return fail("'" + path + "' has no sections");

  PlanInput in;
  if (flopRate <= 0 || linkGbps <= 0 || latencyUs < 0)
    return fail("--flops-per-second and --link-gbps must be positive");
  for (const llvm::json::Value &v : *secs) {
    const llvm::json::Object *s = v.getAsObject();
    PlanSection ps;
    ps.forwardSeconds =
        s->getNumber("flops_per_example").value_or(0) / flopRate;
    ps.backwardSeconds =
        s->getNumber("backward_flops_per_example").value_or(0) / flopRate;
    ps.paramBytes = s->getNumber("param_bytes").value_or(0);
    in.sections.push_back(ps);
  }
  if (const llvm::json::Array *cuts = m->getArray("cut_points"))
    for (const llvm::json::Value &v : *cuts)
      in.cutBytesPerExample.push_back(
          v.getAsObject()->getNumber("bytes_per_example").value_or(0));
  if (const llvm::json::Array *parts = m->getArray("partitions"))
    for (const llvm::json::Value &v : *parts) {
      const llvm::json::Object *p = v.getAsObject();
      int P = static_cast<int>(p->getInteger("stages").value_or(0));
      in.boundaries[P] = ints(p->getArray("boundaries"));
      in.stageMemoryBytes[P] = ints(p->getArray("stage_memory_bytes"));
    }
  in.globalBatch = batch;
  in.microBatch = microBatch;
  in.memoryLimitBytes = memory;
  in.link.latencySeconds = latencyUs * 1e-6;
  in.link.bytesPerSecond = linkGbps * 1e9 / 8;
  in.allreduceBytesPerSecond = in.link.bytesPerSecond;
  bool known = false;
  for (ScheduleKind k : {ScheduleKind::Varuna, ScheduleKind::GPipe,
                         ScheduleKind::OneFOneB})
    if (scheduleName == scheduleKindName(k)) {
      in.schedule = k;
      known = true;
    }
  if (!known)
    return fail("--schedule must be varuna, gpipe or 1f1b, not '" +
                scheduleName + "'");

  llvm::outs() << "planning from the compiler's static cost estimates (no "
                  "calibration file): "
               << llvm::format("%.3g FLOP/s per device, links of %g Gbit/s "
                               "and %g us\n",
                               flopRate.getValue(), linkGbps.getValue(),
                               latencyUs.getValue());

  if (simulateOne) {
    std::string error;
    SimulationConfig c = configFor(in, stages, replicas, error);
    if (!error.empty())
      return fail(error);
    c.recordTimeline = !timeline.empty();
    SimulationResult r = simulate(c);
    if (!r.ok())
      return fail(r.error);
    llvm::outs() << llvm::format(
        "P=%d x D=%d, %d micro-batches of %lld: %.4f s per mini-batch, "
        "%.1f examples/s; busy:",
        stages.getValue(), replicas.getValue(), c.numMicroBatches,
        static_cast<long long>(microBatch.getValue()), r.minibatchSeconds,
        double(batch) / r.minibatchSeconds);
    for (double b : r.busyFraction)
      llvm::outs() << llvm::format(" %.2f", b);
    llvm::outs() << "\n";
    if (!timeline.empty()) {
      std::error_code ec;
      llvm::raw_fd_ostream os(timeline, ec);
      if (ec)
        return fail("cannot write '" + timeline + "': " + ec.message());
      os << timelineJson(r, stages);
    }
    return 0;
  }

  if (devices < 1)
    return fail("--devices must be at least 1");
  in.devices = devices;
  PlanResult plan = planSweep(in);
  for (const std::string &s : plan.skipped)
    llvm::outs() << "  skipped " << s << "\n";
  if (!plan.ok())
    return fail(plan.error);
  llvm::outs() << "P      D      m      micro    seconds      examples/s   "
                  "idle\n";
  for (const PlanRow &r : plan.rows)
    llvm::outs() << llvm::format("%-6d %-6d %-6lld %-8lld %-12.4f %-12.1f %d\n",
                                 r.stages, r.replicas,
                                 static_cast<long long>(r.microBatch),
                                 static_cast<long long>(r.microBatches),
                                 r.seconds, r.examplesPerSecond,
                                 r.idleDevices);
  const PlanRow &best = plan.rows.front();
  llvm::outs() << "chosen: --stages " << best.stages << " --replicas "
               << best.replicas << " --micro-batch " << best.microBatch
               << " --schedule " << scheduleName << "\n";
  if (!output.empty()) {
    std::error_code ec;
    llvm::raw_fd_ostream os(output, ec);
    if (ec)
      return fail("cannot write '" + output + "': " + ec.message());
    llvm::json::Object o{{"stages", best.stages},
                         {"replicas", best.replicas},
                         {"micro_batch", best.microBatch},
                         {"schedule", scheduleName},
                         {"estimated_seconds", best.seconds},
                         {"source", "static estimates"}};
    os << llvm::json::Value(std::move(o)) << "\n";
  }
  return 0;
}
