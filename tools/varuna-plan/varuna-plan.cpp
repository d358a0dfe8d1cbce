//===- varuna-plan.cpp - Pick P x D for a compiled job --------------------===//
//
//   varuna-plan JOBDIR --devices G --batch M [--micro-batch m]
//               [--schedule varuna|gpipe|1f1b|zb] [--memory BYTES]
//               [--optimizer-state-copies N] [--devices-per-host K]
//               [--calibration FILE]
//               [--flops-per-second F] [--link-gbps B] [--latency-us L]
//               [-o plan.json]
//   varuna-plan JOBDIR --simulate --stages P --replicas D --batch M ...
//               [--timeline FILE]
//
// Reads JOBDIR/manifest.json (per-section FLOPs, parameter bytes, cut
// sizes, the partition for every P) and, when there is one,
// JOBDIR/calibration.json (measured section times and memory by micro-batch
// size, send and all-reduce times by size); without it, FLOPs become seconds
// at an assumed rate and it says so. Without --micro-batch, m is chosen from
// the calibration (chooseMicroBatch; smaller if no P fits the memory), 1
// without one. Then P is swept with the simulator
// (include/varuna/Plan/Planner.h). docs/simulator.md.
//
//===----------------------------------------------------------------------===//

#include "varuna/Support/ByteSize.h"
#include "varuna/Support/JSON.h"
#include "varuna/Support/JobDigest.h"
#include "varuna/Support/ToolInit.h"
#include "varuna/Compiler/TrainingConfig.h"
#include "varuna/Plan/Partition.h"
#include "varuna/Plan/Planner.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <cstdio>

namespace cl = llvm::cl;
using namespace varuna::plan;

static cl::OptionCategory toolOptions("varuna-plan options");

static cl::opt<std::string> jobDir(cl::Positional, cl::Required,
                                   cl::desc("<JOBDIR from varuna-compile>"),
                                   cl::cat(toolOptions));
static cl::opt<int> devices("devices", cl::init(0), cl::desc("Devices G"),
                            cl::cat(toolOptions));
static cl::opt<int64_t>
    batch("batch", cl::init(0),
          cl::desc("Global batch M (default: the training configuration's "
                   "global_batch_size)"),
          cl::cat(toolOptions));
static cl::opt<int64_t> microBatch(
    "micro-batch", cl::init(0),
    cl::desc("Micro-batch size m (default: the training configuration's "
             "micro_batch_size, else chosen from the calibration)"),
    cl::cat(toolOptions));
static cl::opt<std::string> scheduleName(
    "schedule", cl::init("varuna"),
    cl::desc("varuna, gpipe, 1f1b or zb; auto: sweep every schedule too and "
             "pick the fastest that fits (not with --simulate)"),
    cl::cat(toolOptions));
static cl::opt<double, false, varuna::ByteSizeParser>
    memory("memory", cl::init(0),
           cl::desc("Device memory (bytes, or 16GiB, 2.5G; 0: any)"),
           cl::cat(toolOptions));
static cl::opt<int> devicesPerHost(
    "devices-per-host", cl::init(1),
    cl::desc("Devices per host: their stages' all-reduces share its network "
             "(1: one device per host, the paper's spot VMs)"),
    cl::cat(toolOptions));
static cl::opt<double> stateCopies(
    "optimizer-state-copies", cl::init(2),
    cl::desc("Optimizer state per parameter, for memory (default: the "
             "training configuration's optimizer -- AdamW, LAMB 2; SGD 0, 1 "
             "with momentum)"),
    cl::cat(toolOptions));
static cl::opt<std::string> configPath(
    "config",
    cl::desc("The training configuration varuna-run will be given (default: "
             "the one the job was compiled with): its optimizer's state, "
             "whether the step all-reduces the gradient norm (clipping, "
             "LAMB) and global_batch_size"),
    cl::cat(toolOptions));
static cl::opt<double>
    flopRate("flops-per-second", cl::init(2e10),
             cl::desc("Assumed FLOP/s of one device (static estimates)"),
             cl::cat(toolOptions));
static cl::opt<double> linkGbps("link-gbps", cl::init(10),
                                cl::desc("Link bandwidth, Gbit/s"),
                                cl::cat(toolOptions));
static cl::opt<double> latencyUs("latency-us", cl::init(50),
                                 cl::desc("Message latency, microseconds"),
                                 cl::cat(toolOptions));
static cl::opt<double> jitterUs(
    "jitter-us", cl::init(0),
    cl::desc("Per-message jitter, microseconds: each activation / gradient "
             "message takes uniformly +/- this much longer (as varuna-run "
             "--emulate-jitter-ms); each time is the mean of 8 seeded draws"),
    cl::cat(toolOptions));
static cl::opt<std::string>
    output("o", cl::desc("Write the chosen plan (JSON)"), cl::cat(toolOptions));
static cl::opt<std::string> calibrationPath(
    "calibration",
    cl::desc("Measured costs (varuna-calibrate's calibration.json; default: "
             "JOBDIR/calibration.json if present)"),
    cl::cat(toolOptions));
static cl::opt<bool> simulateOne("simulate",
                                 cl::desc("Simulate one P x D (--stages, "
                                          "--replicas) and print its numbers"),
                                 cl::cat(toolOptions));
static cl::opt<int> stages("stages", cl::init(1), cl::desc("P (--simulate)"),
                           cl::cat(toolOptions));
static cl::opt<int64_t> scheduleLatency(
    "schedule-latency", cl::init(-1),
    cl::desc("Message latency Varuna's static order plans for, in forward "
             "times (as varuna-run's; default: from the link)"),
    cl::cat(toolOptions));
static cl::opt<double> bucketMB(
    "bucket-mb", cl::init(25),
    cl::desc("Data-parallel gradient bucket size in MiB, as varuna-run's "
             "(buckets overlap the last backward; default 25)"),
    cl::cat(toolOptions));
static cl::opt<std::string> messagePrecision(
    "message-precision", cl::init("fp32"),
    cl::desc("fp32 | bf16, as varuna-run's: bf16 halves the bytes of each "
             "stage boundary's messages (taken as all fp32)"),
    cl::cat(toolOptions));
static cl::opt<int> sharedCores(
    "shared-cores", cl::init(0),
    cl::desc("All ranks run on one machine with this many cores (more "
             "ranks than cores slow each other down); default: a device "
             "per rank"),
    cl::cat(toolOptions));
static cl::opt<int> replicas("replicas", cl::init(1),
                             cl::desc("D (--simulate)"), cl::cat(toolOptions));
static cl::opt<std::string>
    timeline("timeline",
             cl::desc("--simulate: write the Chrome-trace timeline"),
             cl::cat(toolOptions));

static int fail(const llvm::Twine &msg) {
  llvm::outs().flush(); // what was printed so far comes first
  llvm::errs() << "varuna-plan: error: " << msg << "\n";
  return 1;
}

/// "812 KB", "3.4 MB", "12.1 GB".
static std::string bytesText(double b) {
  const char *unit[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) {
    b /= 1000;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g %s", b, unit[u]);
  return buf;
}

/// The numbers of a JSON array (a missing one: none; a non-number: 0).
static std::vector<double> doubles(const llvm::json::Array *a) {
  std::vector<double> out;
  if (a)
    for (const llvm::json::Value &v : *a)
      out.push_back(v.getAsNumber().value_or(0));
  return out;
}

static std::vector<int64_t> ints(const llvm::json::Array *a) {
  std::vector<int64_t> out;
  if (a)
    for (const llvm::json::Value &v : *a)
      out.push_back(v.getAsInteger().value_or(0));
  return out;
}

/// `o`'s "bytes" and "seconds" (a varuna-calibrate measurement; or another
/// series of it, such as "cpu_seconds").
static std::pair<std::vector<double>, std::vector<double>>
bytesAndSeconds(const llvm::json::Object *o, const char *series = "seconds") {
  if (!o)
    return {};
  return {doubles(o->getArray("bytes")), doubles(o->getArray(series))};
}

/// Fit of seconds = a + bytes * b over (bytes, seconds) (or another series
/// of `o`), least squares weighted by 1 / seconds: the sizes span 1 KB to
/// 64 MiB, and plain least squares let the noise of the largest set the
/// latency (one 16 MiB sample 30% slow took it from 50 us to 571 us, above
/// every measured time up to 1 MB); weighted by 1 / seconds^2 (relative
/// errors) the small messages set the bandwidth too, which a rate-limited
/// link passes in a burst (a 1 Gbit/s tbf link read as 1.18).
static std::pair<double, double> fitLine(const llvm::json::Object *o,
                                         const char *series = "seconds") {
  auto [x, y] = bytesAndSeconds(o, series);
  if (x.size() != y.size() || x.size() < 2)
    return {0, 0};
  double w = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    double wi = 1.0 / std::max(y[i], 1e-9);
    w += wi;
    sx += wi * x[i];
    sy += wi * y[i];
    sxx += wi * x[i] * x[i];
    sxy += wi * x[i] * y[i];
  }
  double slope = (w * sxy - sx * sy) / std::max(1e-300, w * sxx - sx * sx);
  double icpt = (sy - slope * sx) / w;
  return {std::max(0.0, icpt), std::max(1e-15, slope)};
}

/// Seconds of one micro-batch of size m from measurements at sizes `ms`:
/// the measured value, else linear between (or beyond) the nearest two.
static double atMicroBatch(const std::vector<double> &ms,
                           const llvm::json::Array *secs, double m) {
  std::vector<double> t = doubles(secs);
  if (t.size() != ms.size() || t.empty())
    return 0;
  if (ms.size() == 1)
    return t[0] * m / ms[0];
  size_t i = 1;
  while (i + 1 < ms.size() && ms[i] < m)
    ++i;
  double w = (m - ms[i - 1]) / (ms[i] - ms[i - 1]);
  return std::max(0.0, t[i - 1] + w * (t[i] - t[i - 1]));
}

/// A number as %g prints it ("1e+308", "-100", "nan").
static std::string numberText(double d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", d);
  return buf;
}

/// What is wrong with a calibration's numbers ("" when nothing): every
/// field the planner reads must hold finite, non-negative numbers of the
/// right count -- before, a string or a short array silently became 0 (a
/// section timed as free), a negative send time an 8 Tbit/s link.
static std::string calibrationProblem(const llvm::json::Object &co,
                                      size_t numSections) {
  auto series = [](const llvm::json::Object *o, llvm::StringRef key,
                   size_t n, bool optional) -> std::string {
    const llvm::json::Value *v = o->get(key);
    if (!v)
      return optional ? "" : "'" + key.str() + "' is missing";
    const llvm::json::Array *a = v->getAsArray();
    if (!a || (n && a->size() != n) || (!n && a->size() < 2))
      return "'" + key.str() + "' must be an array of " +
             (n ? std::to_string(n) : std::string("at least 2")) +
             " numbers";
    for (const llvm::json::Value &x : *a) {
      std::optional<double> d = x.getAsNumber();
      if (!d || !std::isfinite(*d) || *d < 0 || *d > 1e15)
        return "'" + key.str() + "' holds " +
               (d ? numberText(*d) : std::string("a non-number")) +
               ", outside [0, 1e15]";
    }
    return "";
  };
  const llvm::json::Array *ms = co.getArray("micro_batches");
  if (!ms || ms->empty())
    return "'micro_batches' must be a non-empty array";
  int64_t last = 0;
  for (const llvm::json::Value &v : *ms) {
    std::optional<int64_t> m = v.getAsInteger();
    if (!m || *m <= last || *m > (int64_t(1) << 30))
      return "'micro_batches' must be increasing positive integers up to "
             "2^30 (run varuna-calibrate again)";
    last = *m;
  }
  const llvm::json::Array *cs = co.getArray("sections");
  for (size_t k = 0; cs && k < cs->size() && k < numSections; ++k) {
    const llvm::json::Object *c = (*cs)[k].getAsObject();
    if (!c)
      return "sections[" + std::to_string(k) + "] is not an object";
    if (const llvm::json::Value *i = c->get("index");
        i && i->getAsInteger() != std::optional<int64_t>(k))
      return "sections[" + std::to_string(k) + "] has 'index' " +
             llvm::formatv("{0}", *i).str() + ": the sections must be in "
             "order, each with its own index";
    for (auto [key, optional] :
         {std::pair<const char *, bool>{"forward_seconds", false},
          {"backward_seconds", false},
          {"peak_bytes", false},
          {"weight_seconds", true},
          {"input_seconds", true}}) {
      if (const llvm::json::Array *a = c->getArray(key);
          optional && a && a->empty())
        continue; // measured only for zb
      if (std::string why = series(c, key, ms->size(), optional); !why.empty())
        return "sections[" + std::to_string(k) + "]: " + why;
    }
    if (const llvm::json::Value *o = c->get("optimizer_seconds")) {
      std::optional<double> d = o->getAsNumber();
      if (!d || !std::isfinite(*d) || *d < 0)
        return "sections[" + std::to_string(k) +
               "]: 'optimizer_seconds' must be a finite non-negative number";
    }
  }
  // A message measurement: "bytes" and "seconds" (and "cpu_seconds") of
  // the same count, the sizes increasing, the times growing with them
  // (a fit without a positive bandwidth read as an 8 Tbit/s link).
  auto measurement = [&](const llvm::json::Object *o) -> std::string {
    const llvm::json::Array *b = o->getArray("bytes");
    for (const char *key : {"bytes", "seconds"})
      if (std::string why = series(o, key, b ? b->size() : 0, false);
          !why.empty())
        return why;
    if (std::string why = series(o, "cpu_seconds", b->size(), true);
        !why.empty())
      return why;
    std::vector<double> bytes = doubles(b);
    for (size_t i = 1; i < bytes.size(); ++i)
      if (bytes[i] <= bytes[i - 1])
        return "'bytes' must be increasing message sizes (run "
               "varuna-calibrate again)";
    if (fitLine(o).second <= 1e-15)
      return "'seconds' do not grow with 'bytes' (the fit has no "
             "bandwidth): measure again";
    return "";
  };
  auto comm = [&](const llvm::json::Object &parent, const std::string &prefix,
                  const char *key) -> std::string {
    const llvm::json::Value *v = parent.get(key);
    if (!v)
      return "";
    const llvm::json::Object *o = v->getAsObject();
    if (!o)
      return "'" + prefix + key + "' is not an object";
    if (std::string why = measurement(o); !why.empty())
      return prefix + key + ": " + why;
    return "";
  };
  // Measured rings: [{"ranks": R >= 2, bytes, seconds}, ...].
  auto rings = [&](const llvm::json::Object &parent,
                   const std::string &prefix) -> std::string {
    const llvm::json::Value *v = parent.get("allreduce_rings");
    if (!v)
      return "";
    const llvm::json::Array *a = v->getAsArray();
    if (!a)
      return "'" + prefix + "allreduce_rings' is not an array";
    for (size_t i = 0; i < a->size(); ++i) {
      std::string at = prefix + "allreduce_rings[" + std::to_string(i) + "]";
      const llvm::json::Object *r = (*a)[i].getAsObject();
      if (!r)
        return at + " is not an object";
      std::optional<int64_t> R = r->getInteger("ranks");
      if (!R || *R < 2 || *R > (1 << 20))
        return at + ": 'ranks' must be an integer in [2, 2^20]";
      if (std::string why = measurement(r); !why.empty())
        return at + ": " + why;
    }
    return "";
  };
  for (const char *key : {"send", "allreduce", "allreduce_concurrent"})
    if (std::string why = comm(co, "", key); !why.empty())
      return why;
  if (std::string why = rings(co, ""); !why.empty())
    return why;
  if (const llvm::json::Value *v = co.get("across_hosts")) {
    const llvm::json::Object *a = v->getAsObject();
    if (!a)
      return "'across_hosts' is not an object";
    if (!a->get("send"))
      return "across_hosts: 'send' is missing";
    if (std::string why = comm(*a, "across_hosts.", "send"); !why.empty())
      return why;
    if (std::string why = rings(*a, "across_hosts."); !why.empty())
      return why;
  }
  if (const llvm::json::Value *v = co.get("oversubscribed")) {
    const llvm::json::Object *o = v->getAsObject();
    std::optional<double> d = o ? o->getNumber("slowdown") : std::nullopt;
    if (!d || !std::isfinite(*d) || *d <= 0 || *d > 1000)
      return "oversubscribed: 'slowdown' must be a number in (0, 1000]";
  }
  if (const llvm::json::Value *v = co.get("threads")) {
    std::optional<int64_t> t = v->getAsInteger();
    if (!t || *t < 1 || *t > 4096)
      return "'threads' must be an integer in [1, 4096] (the compute "
             "threads a rank was measured with)";
  }
  if (const llvm::json::Value *v = co.get("engine")) {
    std::optional<llvm::StringRef> e = v->getAsString();
    if (!e || (*e != "generated" && *e != "reference"))
      return "'engine' must be \"generated\" or \"reference\"";
  }
  return "";
}

int main(int argc, char **argv) {
  varuna::ToolInit init(argc, argv);
  // Only our options in --help, not the ones LLVM registers.
  cl::HideUnrelatedOptions(toolOptions);
  cl::ParseCommandLineOptions(argc, argv, "Varuna planner\n");

  llvm::SmallString<256> path(jobDir);
  llvm::sys::path::append(path, "manifest.json");
  if (!llvm::sys::fs::exists(path))
    return fail("cannot read '" + path + "': run varuna-compile first");
  llvm::Expected<llvm::json::Object> manifest =
      varuna::loadJobManifest(jobDir);
  if (!manifest)
    return fail(llvm::toString(manifest.takeError()));
  const llvm::json::Object *m = &*manifest;
  const llvm::json::Array *secs = m->getArray("sections");
  if (!secs || secs->empty())
    return fail("'" + path + "' has no sections");

  PlanInput in;
  if (!(flopRate > 0) || !(linkGbps > 0))
    return fail("--flops-per-second and --link-gbps must be positive");
  if (!(latencyUs >= 0))
    return fail("--latency-us must not be negative, not " +
                numberText(latencyUs));
  if (!(jitterUs >= 0) || !std::isfinite(jitterUs))
    return fail("--jitter-us must be a non-negative number, not " +
                numberText(jitterUs));
  if (!(memory >= 0))
    return fail("--memory must be a number of bytes (0: any), not " +
                numberText(memory));
  // (Asked before the calibration is read and described.)
  if (!simulateOne && !devices.getNumOccurrences())
    return fail("--devices G is required: the number of devices to plan "
                "for (or --simulate --stages P --replicas D for one "
                "configuration)");
  if (batch.getNumOccurrences() && (batch < 1 || batch > (int64_t(1) << 40)))
    return fail("--batch must be in [1, 2^40] examples, not " +
                llvm::Twine(batch));
  // Measured costs, when there are any.
  std::string calPath = calibrationPath;
  if (calPath.empty()) {
    llvm::SmallString<256> p(jobDir);
    llvm::sys::path::append(p, "calibration.json");
    if (llvm::sys::fs::exists(p))
      calPath = p.str().str();
  }
  std::optional<llvm::json::Value> cal;
  if (!calPath.empty()) {
    auto cbuf = llvm::MemoryBuffer::getFile(calPath);
    if (!cbuf)
      return fail("cannot read the calibration '" + calPath + "': " +
                  (llvm::sys::fs::is_directory(calPath)
                       ? std::string("it is a directory")
                       : cbuf.getError().message()));
    auto parsed = varuna::parseUserJSON((*cbuf)->getBuffer());
    if (!parsed)
      return fail("'" + calPath + "': " + llvm::toString(parsed.takeError()));
    const llvm::json::Object *co = parsed->getAsObject();
    if (!co || co->getString("format") != "varuna-calibration-1")
      return fail("'" + calPath + "' is not a varuna-calibrate output");
    const llvm::json::Array *cs = co->getArray("sections");
    if (!cs || cs->size() != secs->size())
      return fail("'" + calPath + "' has " +
                  llvm::Twine(cs ? cs->size() : 0) + " sections, the job " +
                  llvm::Twine(secs->size()) +
                  ": it was measured on another job (or the job was "
                  "compiled again since): run varuna-calibrate on this one");
    if (std::string why = calibrationProblem(*co, secs->size()); !why.empty())
      return fail("'" + calPath + "': " + why);
    // Calibrations since the job's digest was recorded: of this job?
    if (std::optional<llvm::StringRef> digest = co->getString("job_digest")) {
      llvm::SmallString<256> ir(jobDir);
      llvm::sys::path::append(ir, "job.mlir");
      std::string mine = varuna::jobFileDigest(ir);
      if (!mine.empty() && *digest != mine)
        return fail("'" + calPath + "' was measured on another job (job.mlir "
                    "digest " + *digest + ", this job's " + mine +
                    "): run varuna-calibrate on this one");
    } else if (co->get("job_digest")) {
      return fail("'" + calPath + "': 'job_digest' must be a string");
    } else {
      // (Older calibrations, or one edited: planned from, but said.)
      llvm::errs() << "varuna-plan: warning: '" << calPath
                   << "' records no job_digest: it cannot be matched to this "
                      "job (another job's timings would plan it wrongly); "
                      "run varuna-calibrate again to record it\n";
    }
    cal = std::move(*parsed);
  }
  for (const llvm::json::Value &v : *secs) {
    const llvm::json::Object *s = v.getAsObject();
    PlanSection ps;
    ps.forwardSeconds =
        s->getNumber("flops_per_example").value_or(0) / flopRate;
    ps.backwardSeconds =
        s->getNumber("backward_flops_per_example").value_or(0) / flopRate;
    ps.paramBytes = s->getNumber("param_bytes").value_or(0);
    ps.largestParamBytes = s->getNumber("largest_param_bytes").value_or(0);
    // The gradients' buckets as the runtime packs them (manifests since
    // gradient_bytes was recorded; older ones: by the bytes alone).
    const llvm::json::Array *names = s->getArray("parameters");
    const llvm::json::Array *grads = s->getArray("gradient_bytes");
    if (names && grads && names->size() == grads->size())
      for (size_t i = 0; i < names->size(); ++i)
        ps.gradients.emplace_back(
            (*names)[i].getAsString().value_or("").str(),
            (*grads)[i].getAsNumber().value_or(0));
    // Manifests since it was recorded (older ones: not modelled).
    ps.runningStatsBytes = s->getNumber("running_stats_bytes").value_or(0);
    in.sections.push_back(ps);
  }
  if (messagePrecision != "fp32" && messagePrecision != "bf16")
    return fail("--message-precision must be fp32 or bf16, not '" +
                messagePrecision + "'");
  double wireShare = messagePrecision == "bf16" ? 0.5 : 1.0;
  if (const llvm::json::Array *cuts = m->getArray("cut_points"))
    for (const llvm::json::Value &v : *cuts)
      in.cutBytesPerExample.push_back(
          wireShare *
          v.getAsObject()->getNumber("bytes_per_example").value_or(0));
  // Tied parameters (older manifests give no bytes: not modelled) and the
  // global norm's all-reduce.
  if (const llvm::json::Array *ties = m->getArray("ties"))
    for (const llvm::json::Value &v : *ties) {
      const llvm::json::Object *t = v.getAsObject();
      PlanInput::Tie tie;
      tie.bytes = t ? t->getNumber("bytes").value_or(0) : 0;
      if (tie.bytes > 0 && t->getArray("sections")) {
        tie.sections = ints(t->getArray("sections"));
        in.ties.push_back(tie);
      }
    }
  if (const llvm::json::Array *reds = m->getArray("global_reductions"))
    for (const llvm::json::Value &v : *reds)
      if (const llvm::json::Object *r = v.getAsObject())
        in.normSync |= r->getString("name") == "grad_norm";
  if (const llvm::json::Array *parts = m->getArray("partitions"))
    for (const llvm::json::Value &v : *parts) {
      const llvm::json::Object *p = v.getAsObject();
      int P = static_cast<int>(p->getInteger("stages").value_or(0));
      in.boundaries[P] = ints(p->getArray("boundaries"));
    }
  // One stage holds every section: a job compiled for one depth
  // (varuna-compile --stages P) still trains, and is planned, at P = 1.
  if (!in.sections.empty() && !in.boundaries.count(1))
    in.boundaries[1] = {0, int64_t(in.sections.size())};
  // The measured sizes, and the sections' costs at a size m.
  std::vector<double> ms;
  if (cal)
    if (const llvm::json::Array *a = cal->getAsObject()->getArray("micro_batches"))
      for (const llvm::json::Value &v : *a)
        ms.push_back(v.getAsNumber().value_or(1));
  if (cal && ms.empty())
    return fail("'" + calPath + "' has no micro_batches");
  auto costsAt = [&](int64_t mb) {
    if (!cal)
      return;
    const llvm::json::Array *cs = cal->getAsObject()->getArray("sections");
    double m = double(mb);
    for (size_t k = 0; k < in.sections.size(); ++k) {
      const llvm::json::Object *c = (*cs)[k].getAsObject();
      if (!c)
        continue;
      in.sections[k].forwardSeconds =
          atMicroBatch(ms, c->getArray("forward_seconds"), m) / m;
      in.sections[k].backwardSeconds =
          atMicroBatch(ms, c->getArray("backward_seconds"), m) / m;
      if (const llvm::json::Array *w = c->getArray("weight_seconds");
          w && !w->empty())
        in.sections[k].weightSeconds = atMicroBatch(ms, w, m) / m;
      if (const llvm::json::Array *i = c->getArray("input_seconds");
          i && !i->empty())
        in.sections[k].inputSeconds = atMicroBatch(ms, i, m) / m;
      in.sections[k].workingBytesPerExample =
          atMicroBatch(ms, c->getArray("peak_bytes"), m) / m;
      in.sections[k].optimizerSeconds =
          c->getNumber("optimizer_seconds").value_or(0);
    }
  };
  in.memoryLimitBytes = memory;
  in.rankBaselineBytes = double(varuna::plan::kRankBaselineBytes);
  // What the training configuration changes in a step: the optimizer's
  // state (memory) and the global norm's all-reduce (clipping, LAMB) --
  // the run's configuration may add clipping the compiled job had not.
  bool microBatchFromConfig = false;
  llvm::Expected<varuna::TrainingConfig> config =
      configPath.empty() ? varuna::loadJobTrainingConfig(jobDir)
                         : varuna::loadTrainingConfig(configPath);
  if (!config) {
    if (!configPath.empty())
      return fail(llvm::toString(config.takeError()));
    llvm::consumeError(config.takeError()); // an older job: the defaults
    in.stateCopies = stateCopies;
  } else {
    in.normSync |= config->needsGlobalGradNorm();
    in.stateCopies = stateCopies.getNumOccurrences()
                         ? double(stateCopies)
                         : double(config->optimizer.stateCopies());
    // The batch and the micro-batch size, as varuna-run takes them: the
    // configuration's unless given (a micro-batch size the user fixed is
    // not chosen again); a different value given is warned.
    auto fromConfig = [](cl::opt<int64_t> &opt, std::optional<int64_t> value,
                         const char *key, const char *note) {
      if (!value)
        return false;
      if (!opt.getNumOccurrences()) {
        opt = *value;
        return true;
      }
      if (opt != *value)
        llvm::errs() << "varuna-plan: warning: the training configuration "
                        "has "
                     << key << " " << *value << "; this plan is for --"
                     << opt.ArgStr << " " << opt << note << "\n";
      return false;
    };
    fromConfig(batch, config->globalBatchSize, "global_batch_size",
               " (varuna-run --plan trains the plan's)");
    microBatchFromConfig = fromConfig(microBatch, config->microBatchSize,
                                      "micro_batch_size", "");
  }
  if (batch < 1)
    return fail("give --batch (or global_batch_size in the training "
                "configuration)");
  in.globalBatch = batch;
  in.devicesPerHost = devicesPerHost;
  if (devicesPerHost < 1)
    return fail("--devices-per-host must be at least 1");
  if (sharedCores < 0)
    return fail("--shared-cores must not be negative");
  in.sharedCores = sharedCores;
  if (scheduleLatency.getNumOccurrences() &&
      (scheduleLatency < 0 ||
       scheduleLatency > varuna::plan::kMaxPlannedLatency))
    return fail("--schedule-latency must be in [0, " +
                llvm::Twine(varuna::plan::kMaxPlannedLatency) +
                "] forward times, not " + llvm::Twine(scheduleLatency));
  in.scheduleLatency = scheduleLatency;
  if (!(bucketMB > 0))
    return fail("--bucket-mb must be positive");
  in.bucketBytes = bucketMB * 1048576.0;
  if (microBatch < 0 || stateCopies < 0)
    return fail("--micro-batch and --optimizer-state-copies must not be "
                "negative");
  in.link.latencySeconds = latencyUs * 1e-6;
  in.link.bytesPerSecond = linkGbps * 1e9 / 8;
  in.allreduceBytesPerSecond = in.link.bytesPerSecond;
  if (cal) {
    const llvm::json::Object *co = cal->getAsObject();
    if (const llvm::json::Object *send = co->getObject("send")) {
      auto [lat, perByte] = fitLine(send);
      in.link.latencySeconds = lat;
      in.link.bytesPerSecond = 1.0 / perByte;
    }
    if (const llvm::json::Object *ar = co->getObject("allreduce")) {
      // Measured on a ring of 2, where 2 (D-1)/D = 1.
      auto [lat, perByte] = fitLine(ar);
      in.allreduceBytesPerSecond = 1.0 / perByte;
      in.allreduceLatencySeconds = lat;
    }
    // The CPU communication costs (used with --shared-cores; calibrations
    // before they were measured have none).
    if (const llvm::json::Object *send = co->getObject("send");
        send && send->getArray("cpu_seconds")) {
      auto [lat, perByte] = fitLine(send, "cpu_seconds");
      in.messageCpu = {lat, perByte};
    }
    if (const llvm::json::Object *ar = co->getObject("allreduce");
        ar && ar->getArray("cpu_seconds")) {
      auto [lat, perByte] = fitLine(ar, "cpu_seconds");
      in.allreduceCpu = {lat, perByte};
    }
    if (const llvm::json::Object *cc = co->getObject("allreduce_concurrent")) {
      // Per-ring time of k rings at once over one ring's, at the sizes both
      // measured from 1 MB up (where bandwidth, not latency, decides).
      auto [b, t] = bytesAndSeconds(cc);
      auto [b1, t1] = bytesAndSeconds(co->getObject("allreduce"));
      double sum = 0, sum1 = 0;
      for (size_t i = 0; i < b.size() && i < t.size(); ++i)
        for (size_t j = 0; j < b1.size() && j < t1.size(); ++j)
          if (b[i] == b1[j] && b[i] >= 1 << 20) {
            sum += t[i];
            sum1 += t1[j];
          }
      if (sum1 > 0) {
        in.concurrent.rings = int(cc->getInteger("rings").value_or(0));
        in.concurrent.slowdown = sum / sum1;
      }
    }
    auto readRings = [&](const llvm::json::Array *rings,
                         std::vector<PlanInput::Ring> &out) {
      if (rings)
        for (const llvm::json::Value &v : *rings) {
          const llvm::json::Object *r = v.getAsObject();
          int R = r ? int(r->getInteger("ranks").value_or(0)) : 0;
          if (R < 2)
            continue;
          auto [lat, perByte] = fitLine(r);
          out.push_back({R, lat, 2.0 * (R - 1) / R / perByte});
        }
    };
    readRings(co->getArray("allreduce_rings"), in.allreduceRings);
    if (const llvm::json::Object *o = co->getObject("oversubscribed"))
      in.oversubscribedSlowdown =
          std::max(1.0, o->getNumber("slowdown").value_or(1.0));
    // Measured between hosts (varuna-calibrate --across-hosts).
    if (const llvm::json::Object *across = co->getObject("across_hosts")) {
      if (const llvm::json::Object *send = across->getObject("send")) {
        auto [lat, perByte] = fitLine(send);
        in.remoteLink = LinkModel{lat, 1.0 / perByte, 0};
      }
      readRings(across->getArray("allreduce_rings"), in.remoteRings);
    }
  }
  // Jitter (on top of the measured or given links, this host's and
  // others').
  in.link.jitterSeconds = jitterUs * 1e-6;
  // auto: the sweep covers every schedule as well.
  std::vector<ScheduleKind> kinds;
  if (scheduleName == "auto") {
    if (simulateOne)
      return fail("--simulate needs one schedule, not auto");
    kinds.assign(std::begin(kScheduleKinds), std::end(kScheduleKinds));
  } else if (std::optional<ScheduleKind> k = scheduleKindNamed(scheduleName)) {
    in.schedule = *k;
    kinds = {*k};
  } else {
    return fail(std::string("--schedule must be ") + kScheduleKindNames +
                " (or auto), not '" + scheduleName + "'");
  }

  // --latency-us / --link-gbps given with a calibration: the network
  // between hosts to plan for (a slower one than measured, or one not
  // measured); this host's measured links stay for ranks on one host.
  bool linkGiven =
      latencyUs.getNumOccurrences() || linkGbps.getNumOccurrences();
  if (cal && linkGiven) {
    LinkModel remote = in.remoteLink.value_or(in.link);
    if (latencyUs.getNumOccurrences())
      remote.latencySeconds = latencyUs * 1e-6;
    if (linkGbps.getNumOccurrences())
      remote.bytesPerSecond = linkGbps * 1e9 / 8;
    in.remoteLink = remote;
    // A ring over such links: each step a latency, the bytes at the
    // link's rate (2 (R-1)/R of them, as the measured rings).
    in.remoteRings = {{2, remote.latencySeconds, remote.bytesPerSecond}};
  }
  if (cal) {
    // A calibration without messages (varuna-calibrate --no-comm) leaves
    // the links at --latency-us / --link-gbps: said, not passed off as
    // measured.
    const llvm::json::Object *co = cal->getAsObject();
    bool sendMeasured = co->getObject("send") != nullptr,
         allreduceMeasured = co->getObject("allreduce") != nullptr;
    llvm::outs() << "planning from the measurements in " << calPath
                 << llvm::format(" (links: %.0f us + %.2f Gbit/s%s; all-reduce "
                                 "%.2f Gbit/s%s)\n",
                                 in.link.latencySeconds * 1e6,
                                 in.link.bytesPerSecond * 8 / 1e9,
                                 sendMeasured ? "" : ", assumed",
                                 in.allreduceBytesPerSecond * 8 / 1e9,
                                 allreduceMeasured ? "" : ", assumed");
    if (!sendMeasured || !allreduceMeasured)
      llvm::outs() << "messages not measured (a --no-comm calibration): the "
                      "links are --latency-us and --link-gbps\n";
    if (flopRate.getNumOccurrences())
      llvm::errs() << "varuna-plan: warning: --flops-per-second does nothing "
                      "with a calibration: the sections' measured times are "
                      "used\n";
    if (in.remoteLink)
      llvm::outs() << llvm::format("across hosts (--devices-per-host %d): "
                                   "links %.0f us + %.2f Gbit/s%s\n",
                                   in.devicesPerHost,
                                   in.remoteLink->latencySeconds * 1e6,
                                   in.remoteLink->bytesPerSecond * 8 / 1e9,
                                   linkGiven ? " (--latency-us / --link-gbps)"
                                             : "");
    else if ((simulateOne ? stages * replicas : int(devices)) >
             devicesPerHost) // some ranks on other hosts
      llvm::outs() << "links between hosts not measured (no across_hosts in "
                      "the calibration; varuna-calibrate --across-hosts "
                      "measures them): taken as this host's\n";
  } else
    llvm::outs() << "planning from the compiler's static cost estimates (no "
                    "calibration file): "
                 << llvm::format("%.3g FLOP/s per device, links of %g Gbit/s "
                                 "and %g us\n",
                                 flopRate.getValue(), linkGbps.getValue(),
                                 latencyUs.getValue());

  if (jitterUs > 0)
    llvm::outs() << "messages jitter by +/- " << numberText(jitterUs)
                 << " us: each time is the mean of " << in.jitterSamples
                 << " seeded draws\n";

  // The micro-batch size: given, or chosen from the measured time per
  // example; smaller measured sizes follow in case no P fits the memory.
  std::vector<int64_t> sizes;
  if (microBatch > 0) {
    sizes = {microBatch};
    if (microBatchFromConfig)
      llvm::outs() << "micro-batch " << microBatch
                   << ": the training configuration's micro_batch_size\n";
    if (cal && (microBatch > ms.back() || microBatch < ms.front()))
      llvm::outs() << "micro-batch " << microBatch
                   << ": outside the measured sizes (" << int64_t(ms.front())
                   << " to " << int64_t(ms.back())
                   << "), its costs extrapolated from the nearest two "
                      "(varuna-calibrate --micro-batches measures it)\n";
  } else if (cal) {
    std::vector<MicroBatchTime> times;
    llvm::outs() << "seconds per example by micro-batch size:";
    for (double m : ms) {
      costsAt(int64_t(m));
      double t = 0;
      for (const PlanSection &p : in.sections)
        t += p.forwardSeconds + p.backwardSeconds;
      times.push_back({int64_t(m), t});
      llvm::outs() << llvm::format(" %g: %.3g", m, t);
    }
    int64_t chosen = chooseMicroBatch(times);
    if (chosen == int64_t(ms.back()) &&
        (ms.size() < 2 || times.back().secondsPerExample <
                              0.95 * times[times.size() - 2].secondsPerExample))
      llvm::outs() << "\nmicro-batch " << chosen
                   << ": the largest measured, and still improving (measure "
                      "larger sizes: varuna-calibrate --micro-batches)\n";
    else
      llvm::outs() << "\nmicro-batch " << chosen
                   << ": the smallest size after which the time per example "
                      "improves by less than 5%\n";
    sizes.push_back(chosen);
    for (auto it = ms.rbegin(); it != ms.rend(); ++it)
      if (int64_t(*it) < chosen)
        sizes.push_back(int64_t(*it));
  } else {
    llvm::outs() << "micro-batch 1: no calibration to choose it from "
                    "(--micro-batch sets it)\n";
    sizes = {1};
  }
  auto useSize = [&](int64_t m) {
    in.microBatch = m;
    costsAt(m);
  };
  useSize(sizes.front());

  // Options that do nothing in this mode: said, not silently ignored.
  auto unused = [](const char *what) {
    llvm::errs() << "varuna-plan: warning: " << what << "\n";
  };
  if (!simulateOne && !timeline.empty())
    unused("--timeline is written only with --simulate");
  if (simulateOne && !output.empty())
    unused("-o writes the chosen plan of a sweep, not with --simulate");
  if (!simulateOne && (stages.getNumOccurrences() ||
                       replicas.getNumOccurrences()))
    unused("--stages and --replicas choose what --simulate simulates; a "
           "sweep tries every P (and its D)");
  if (simulateOne && devices.getNumOccurrences() &&
      int64_t(devices) != int64_t(stages) * int64_t(replicas)) {
    std::string what = "--devices " + std::to_string(devices) +
                       " does nothing with --simulate, which simulates "
                       "--stages x --replicas = " +
                       std::to_string(int64_t(stages) * int64_t(replicas)) +
                       " devices";
    unused(what.c_str());
  }

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
        "P=%d x D=%d, %d micro-batches of %lld: %.4g s per mini-batch, "
        "%.1f examples/s; busy:",
        stages.getValue(), replicas.getValue(), c.numMicroBatches,
        static_cast<long long>(in.microBatch), r.minibatchSeconds,
        double(batch) / r.minibatchSeconds);
    for (double b : r.busyFraction)
      llvm::outs() << llvm::format(" %.2f", b);
    if (c.scheduleTiming.latency > 0)
      llvm::outs() << "; static order planned for messages of "
                   << c.scheduleTiming.latency << " forward times";
    llvm::outs() << "\n";
    // The memory a sweep would check against --memory, said (it was
    // ignored with --simulate: a stage of 270 MB "fit" 1 MB).
    std::vector<double> mem = stageMemory(in, stages, r.inFlight);
    double peak = mem.empty() ? 0 : *std::max_element(mem.begin(), mem.end());
    llvm::outs() << "largest stage memory: " << bytesText(peak)
                 << (cal ? "" : " (without a calibration the working memory "
                                "of a micro-batch is not counted)")
                 << "\n";
    if (memory > 0 && peak + in.rankBaselineBytes > memory)
      llvm::errs() << "varuna-plan: warning: this configuration does not fit "
                      "--memory "
                   << bytesText(memory) << ": a stage needs "
                   << bytesText(peak) << ", and a rank "
                   << bytesText(in.rankBaselineBytes)
                   << " more for the runtime\n";
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
  PlanResult plan;
  size_t used = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    useSize(sizes[i]);
    used = i;
    plan = planSchedules(in, kinds);
    for (const std::string &s : plan.skipped)
      llvm::outs() << "  skipped " << s << "\n";
    if (plan.ok() || i + 1 == sizes.size())
      break;
    llvm::outs() << "nothing fits with micro-batch " << sizes[i]
                 << "; trying " << sizes[i + 1] << "\n";
  }
  if (!plan.ok())
    return fail(plan.error);
  // A chosen size that leaves fewer micro-batches than devices caps the
  // replicas (D <= batch / m): the smaller measured sizes, which allow
  // more, are planned too and ranked with it (a faster plan at a smaller m
  // was never considered: 2 x 4 at m = 16 chosen, 1 x 8 at m = 4 predicted
  // 37% faster).
  if (used + 1 < sizes.size() && batch / sizes[used] < int64_t(devices)) {
    llvm::outs() << "micro-batch " << sizes[used] << " leaves "
                 << batch / sizes[used] << " micro-batches for "
                 << int64_t(devices)
                 << " devices: planning the smaller measured sizes too\n";
    for (size_t i = used + 1; i < sizes.size(); ++i) {
      useSize(sizes[i]);
      PlanResult more = planSchedules(in, kinds);
      if (!more.ok())
        continue;
      plan.rows.insert(plan.rows.end(), more.rows.begin(), more.rows.end());
    }
    std::stable_sort(plan.rows.begin(), plan.rows.end(),
                     [](const PlanRow &a, const PlanRow &b) {
                       return a.seconds < b.seconds;
                     });
  }
  llvm::outs() << "P      D      m      micro    seconds      examples/s   "
                  "idle   memory     schedule\n";
  for (const PlanRow &r : plan.rows)
    llvm::outs() << llvm::format(
        "%-6d %-6d %-6lld %-8lld %-12.4g %-12.1f %-6d %-10s %s\n", r.stages,
        r.replicas, static_cast<long long>(r.microBatch),
        static_cast<long long>(r.microBatches), r.seconds,
        r.examplesPerSecond, r.idleDevices,
        bytesText(r.peakStageBytes).c_str(), scheduleKindName(r.schedule));
  if (!cal)
    llvm::outs() << "memory: parameters, gradients, optimizer state and "
                    "stashed inputs; without a calibration the working "
                    "memory of a micro-batch is not counted\n";
  const PlanRow &best = plan.rows.front();
  llvm::outs() << "chosen: --stages " << best.stages << " --replicas "
               << best.replicas << " --micro-batch " << best.microBatch
               << " --schedule " << scheduleKindName(best.schedule);
  if (best.scheduleLatency > 0)
    llvm::outs() << " --schedule-latency " << best.scheduleLatency;
  if (bucketMB.getNumOccurrences())
    llvm::outs() << " --bucket-mb " << llvm::format("%g", double(bucketMB));
  if (messagePrecision != "fp32")
    llvm::outs() << " --message-precision " << messagePrecision;
  llvm::outs() << "\n";
  if (!output.empty()) {
    std::error_code ec;
    llvm::raw_fd_ostream os(output, ec);
    if (ec)
      return fail("cannot write '" + output + "': " + ec.message());
    // What it was planned for: varuna-run warns when it runs otherwise.
    llvm::SmallString<256> job(jobDir);
    llvm::sys::fs::make_absolute(job);
    llvm::json::Object o{{"job", job.str()},
                         {"batch", int64_t(batch)},
                         {"devices", int64_t(devices)},
                         {"stages", best.stages},
                         {"replicas", best.replicas},
                         {"micro_batch", best.microBatch},
                         {"schedule", scheduleKindName(best.schedule)},
                         {"schedule_latency", best.scheduleLatency},
                         {"split_cost_percent", best.splitCostPercent},
                         {"bucket_mb", double(bucketMB)},
                         {"message_precision", messagePrecision},
                         {"estimated_seconds", best.seconds},
                         {"source", cal ? "calibration" : "static estimates"}};
    // The compute threads per rank the calibration measured with: the
    // estimate holds for runs with as many (varuna-run warns otherwise).
    if (cal)
      if (std::optional<int64_t> t = cal->getAsObject()->getInteger("threads"))
        o["threads"] = *t;
    os << llvm::json::Value(std::move(o)) << "\n";
  }
  return 0;
}
