//===- varuna-run.cpp - Trains a compiled job -----------------------------===//
//
//   varuna-run JOBDIR --stages P --replicas D --batch M --micro-batch m
//              --steps N (--data DIR | --synthetic) [--config train.json]
//              [--metrics FILE] [--dump-params DIR] [--schedule S]
//
// P = D = 1 trains in this process (Target/ATen/ReferenceTrainer.h). Else
// this process launches P x D ranks on this machine (runtime/Launch.h), each
// of which is this program again with RANK etc. set and runs its stage
// (Target/ATen/PipelineTrainer.h); a rank started by torchrun or srun (RANK
// already set) runs its stage directly. Sections run through the job's
// generated code (--engine generated, the default) or the ATen evaluator
// (--engine reference).
//
//===----------------------------------------------------------------------===//

#include "varuna/Support/JSON.h"
#include "varuna/Support/JobDigest.h"
#include "varuna/Support/ToolInit.h"
#include "varuna/Compiler/TrainingConfig.h"
#include "varuna/Dialect/Varuna/IR/VarunaDialect.h"
#include "varuna/Target/ATen/InputRanges.h"
#include "varuna/Target/ATen/PipelineTrainer.h"
#include "varuna/Target/ATen/ReferenceTrainer.h"
#include "varuna/runtime/Agreement.h"
#include "varuna/runtime/Checkpoint.h"
#include "varuna/runtime/Launch.h"
#include "varuna/runtime/Stop.h"
#include "varuna/runtime/Trace.h"
#include "varuna/runtime/Transport.h"
#include <ATen/Parallel.h>
#include <thread>
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SourceMgr.h"
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sys/ioctl.h>
#include <unistd.h>

namespace cl = llvm::cl;

static cl::OptionCategory toolOptions("varuna-run options");

static cl::opt<std::string> jobDir(cl::Positional, cl::Required,
                                   cl::desc("<JOBDIR from varuna-compile>"),
                                   cl::cat(toolOptions));
static cl::opt<int64_t> stages("stages", cl::init(1),
                               cl::desc("Pipeline depth P (default 1)"),
                               cl::cat(toolOptions));
static cl::opt<int64_t> replicas("replicas", cl::init(1),
                                 cl::desc("Data-parallel width D (default 1)"),
                                 cl::cat(toolOptions));
static cl::opt<int64_t>
    batch("batch", cl::init(0),
          cl::desc("Global batch size M (examples per step; required unless "
                   "--plan or the training configuration's "
                   "global_batch_size gives it)"),
          cl::cat(toolOptions));
static cl::opt<int64_t> microBatch("micro-batch", cl::init(0),
                                   cl::desc("Micro-batch size m (divides M; "
                                            "required unless --plan or the "
                                            "training configuration's "
                                            "micro_batch_size gives it)"),
                                   cl::cat(toolOptions));
static cl::opt<int64_t> steps("steps", cl::Required, cl::desc("Training steps"),
                              cl::cat(toolOptions));
static cl::opt<std::string> dataDir("data",
                                    cl::desc("Directory with <input>.npy"),
                                    cl::cat(toolOptions));
static cl::opt<bool> synthetic("synthetic", cl::init(false),
                               cl::desc("Deterministic synthetic data"),
                               cl::cat(toolOptions));
static cl::opt<int64_t> vocab(
    "synthetic-vocab", cl::init(64),
    cl::desc("Integer inputs' range for --synthetic (default: 64, or less "
             "for an input that indexes fewer embedding rows or classes)"),
    cl::cat(toolOptions));
static cl::opt<int64_t> syntheticSamples(
    "synthetic-samples", cl::init(0),
    cl::desc("Distinct synthetic samples before they repeat (0: no repeat)"),
    cl::cat(toolOptions));
static cl::opt<std::string>
    configPath("config",
               cl::desc("Training configuration (default: the job's)"),
               cl::cat(toolOptions));
static cl::opt<std::string> metrics("metrics",
                                    cl::desc("JSON lines of per-step metrics"),
                                    cl::cat(toolOptions));
static cl::opt<std::string>
    dumpParams("dump-params",
               cl::desc("Write the final parameters as <name>.npy here"),
               cl::cat(toolOptions));
static cl::opt<bool> sectionsMode(
    "sections", cl::init(false),
    cl::desc("Run section by section with every boundary activated "
             "(stashed inputs, recompute, backward stitched across sections)"),
    cl::cat(toolOptions));
static cl::opt<std::string>
    checkpointDir("checkpoint-dir",
                  cl::desc("Directory of per-section checkpoints (written "
                           "every --checkpoint-every steps, after the last "
                           "step, and when stopped on request)"),
                  cl::cat(toolOptions));
static cl::opt<std::string> evalDataDir(
    "eval-data",
    cl::desc("Validation data (a directory like --data's): its mean loss, "
             "forward only in evaluation mode, after every --eval-every steps "
             "and after the last"),
    cl::cat(toolOptions));
static cl::opt<int64_t> evalEvery("eval-every", cl::init(0),
                                  cl::desc("Validate every K steps (0: after "
                                           "the last step only)"),
                                  cl::cat(toolOptions));
static cl::opt<int64_t> evalBatches(
    "eval-batches", cl::init(0),
    cl::desc("Validation batches of --batch examples (0: as many as "
             "--eval-data holds, at least one)"),
    cl::cat(toolOptions));
static cl::opt<int64_t> checkpointEvery("checkpoint-every", cl::init(0),
                                        cl::desc("Checkpoint every K steps (default 0: after "
                                                 "the last step only)"),
                                        cl::cat(toolOptions));
static cl::opt<int64_t> keepCheckpoints(
    "keep-checkpoints", cl::init(0),
    cl::desc("After each checkpoint, remove all but the newest N good ones "
             "(default 0: keep every one)"),
    cl::cat(toolOptions));
static cl::opt<bool>
    resume("resume", cl::init(false),
           cl::desc("Continue from the newest complete checkpoint"),
           cl::cat(toolOptions));
static cl::opt<uint64_t> seed("seed", cl::init(0),
                              cl::desc("Seed of dropout / random ops and of --synthetic "
                                       "data (default 0)"),
                              cl::cat(toolOptions));

static cl::opt<std::string> engine(
    "engine", cl::init("generated"),
    cl::desc("How sections run: 'generated' (JOBDIR/libstages.so, built by "
             "varuna-compile) or 'reference' (the ATen evaluator interprets "
             "the IR)"),
    cl::cat(toolOptions));

static cl::opt<std::string> scheduleName(
    "schedule", cl::init("varuna"),
    cl::desc("Pipeline schedule: varuna (the default), gpipe, 1f1b or zb "
             "(zero-bubble)"),
    cl::cat(toolOptions));
static cl::opt<double> timeoutSeconds(
    "timeout", cl::init(300),
    cl::desc("Seconds any rendezvous, send, receive or all-reduce may wait "
             "before the rank gives up (default 300)"),
    cl::cat(toolOptions));
static cl::opt<double> checkpointTimeoutSeconds(
    "checkpoint-timeout", cl::init(3600),
    cl::desc("Seconds the ranks wait for those writing a checkpoint "
             "(default 3600; at least --timeout)"),
    cl::cat(toolOptions));

static cl::opt<std::string>
    tracePath("trace",
              cl::desc("Write the run's timeline (Chrome trace / Perfetto "
                       "JSON, every rank's spans) to this file"),
              cl::cat(toolOptions));

static cl::opt<std::string> traceSteps(
    "trace-steps",
    cl::desc("Record only these training steps in --trace: N, or A-B "
             "(0-based, inclusive; a trace holds some KB per step and rank, "
             "in memory until the run ends)"),
    cl::value_desc("N|A-B"), cl::cat(toolOptions));

static cl::opt<int> threads(
    "compute-threads", cl::init(0),
    cl::desc("Compute threads per rank (default: the machine's cores shared "
             "evenly among this machine's ranks)"),
    cl::cat(toolOptions));

static cl::opt<double> emuLatency(
    "emulate-latency-ms", cl::init(0),
    cl::desc("Network emulation: delay every activation/gradient message by "
             "this many milliseconds"),
    cl::cat(toolOptions));
static cl::opt<double> emuJitter(
    "emulate-jitter-ms", cl::init(0),
    cl::desc("Network emulation: plus a uniform random +/- this many ms"),
    cl::cat(toolOptions));
static cl::opt<double> emuBandwidth(
    "emulate-bandwidth-mbps", cl::init(0),
    cl::desc("Network emulation: plus size / this bandwidth (megabits/s)"),
    cl::cat(toolOptions));
static cl::opt<uint64_t> emuSeed("emulate-seed", cl::init(0),
                                 cl::desc("Network emulation: seed"),
                                 cl::cat(toolOptions));
static cl::opt<bool> emuCollectives(
    "emulate-collectives", cl::init(false),
    cl::desc("Network emulation: all-reduces also take latency + a ring's "
             "traffic over the bandwidth, one after another per group"),
    cl::cat(toolOptions));

static cl::opt<std::string> transportName(
    "transport", cl::init("gloo"),
    cl::desc("gloo (CPU, TCP) or nccl (GPU; needs a CUDA build and devices)"),
    cl::cat(toolOptions));

static cl::opt<bool> strictSchedule(
    "strict-schedule", cl::init(false),
    cl::desc("Follow the static task order exactly (no run-time deviation "
             "when a message is late)"),
    cl::cat(toolOptions));

static cl::opt<double> bucketMB(
    "bucket-mb", cl::init(25),
    cl::desc("Data-parallel gradient buckets of at most this many MiB, each "
             "all-reduced during the last backward once its gradients are "
             "final (default 25)"),
    cl::cat(toolOptions));

static cl::opt<std::string> messagePrecision(
    "message-precision", cl::init("fp32"),
    cl::desc("fp32 | bf16: the precision fp32 activations and gradients "
             "travel in between stages (bf16: half the bytes, rounded at "
             "each stage boundary)"),
    cl::cat(toolOptions));

namespace {
/// Prints each diagnostic (with its notes) in one write: a pipeline's ranks
/// share the terminal, and a message written in pieces interleaves with the
/// same message from another rank.
class WholeDiagnostics : public mlir::SourceMgrDiagnosticHandler {
public:
  WholeDiagnostics(llvm::SourceMgr &mgr, mlir::MLIRContext *ctx,
                   llvm::raw_ostream &os)
      : SourceMgrDiagnosticHandler(mgr, ctx, os) {
    setHandler([this, &os](mlir::Diagnostic &d) {
      // On a terminal, from the start of a line: rank 0's progress bar
      // leaves the cursor at the end of its own.
      if (llvm::sys::Process::StandardErrIsDisplayed())
        os << "\r\033[K";
      // Errors of the run as a whole (jobError: the module's location,
      // job.mlir:0:0) read as the tool's own; those that point into the
      // job's IR (an op, a parameter) keep their location and source line.
      auto at = mlir::dyn_cast<mlir::FileLineColLoc>(d.getLocation());
      if (!at || at.getLine() == 0) {
        auto kind = [](mlir::DiagnosticSeverity s) {
          return s == mlir::DiagnosticSeverity::Error     ? "error"
                 : s == mlir::DiagnosticSeverity::Warning ? "warning"
                 : s == mlir::DiagnosticSeverity::Remark  ? "remark"
                                                           : "note";
        };
        os << "varuna-run: " << kind(d.getSeverity()) << ": " << d.str()
           << "\n";
        for (mlir::Diagnostic &n : d.getNotes())
          os << "varuna-run: note: " << n.str() << "\n";
      } else {
        emitDiagnostic(d);
      }
      os.flush();
      return mlir::success();
    });
  }
};
} // namespace

static cl::opt<int64_t> scheduleLatency(
    "schedule-latency", cl::init(0),
    cl::desc("Message latency the static schedule plans for, in forward "
             "times of one micro-batch (0: none)"),
    cl::cat(toolOptions));

static cl::opt<std::string>
    planPath("plan",
             cl::desc("Take --stages, --replicas, --micro-batch, --schedule, "
                      "--schedule-latency, --bucket-mb and --message-precision "
                      "(and --batch, unless given) from this varuna-plan "
                      "output (JSON)"),
             cl::cat(toolOptions));

/// Whether this process says what concerns the whole run (once): the
/// launcher or a single process, or rank 0 of ranks started by another
/// launcher (torchrun, srun) -- not the ranks varuna-run starts itself.
/// The first `n` of `names`, quoted and comma-separated ("'a', 'b', ...").
static std::string describeNames(const std::vector<std::string> &names,
                                 size_t n) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < n; ++i)
    out += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > n)
    out += ", ...";
  return out.empty() ? "none" : out;
}

static bool speaksForTheRun() {
  const char *rank = std::getenv("RANK");
  return !rank || (std::string(rank) == "0" &&
                   !std::getenv("VARUNA_LAUNCHER_PID"));
}

static int fail(const llvm::Twine &msg) {
  // One write: lines of ranks sharing the terminal do not interleave.
  llvm::errs() << ("varuna-run: error: " + msg + "\n").str();
  return 1;
}

/// After a failed run: the ranks that could wrote their spans so far as
/// TRACE.rank<r> (trainPipeline); they are merged into TRACE, a timeline up
/// to the failure, and said so. With none, an older TRACE is said to be
/// another run's (it looked like this run's timeline).
static void reportFailedTrace(const std::string &trace, int worldSize,
                              std::chrono::system_clock::time_point launched) {
  std::vector<std::string> parts;
  for (int r = 0; r < worldSize; ++r)
    if (std::string part = trace + ".rank" + std::to_string(r);
        llvm::sys::fs::exists(part))
      parts.push_back(part);
  if (parts.empty()) {
    llvm::sys::fs::file_status st;
    if (!llvm::sys::fs::status(trace, st) &&
        st.getLastModificationTime() < launched)
      llvm::errs() << "varuna-run: no timeline written: the run failed "
                      "before its ranks could write one; '"
                   << trace << "' is an earlier run's\n";
    return;
  }
  try {
    varuna::rt::mergeTraces(parts, trace);
    for (const std::string &p : parts)
      std::remove(p.c_str());
    llvm::errs() << "varuna-run: the run failed; the timeline up to the "
                    "failure, of "
                 << parts.size() << " of its " << worldSize
                 << " ranks, is in '" << trace << "'\n";
  } catch (const std::exception &e) {
    llvm::errs() << "varuna-run: the run failed, and its ranks' timelines "
                    "could not be merged: "
                 << e.what() << "\n";
  }
}

int main(int argc, char **argv) {
  // A crashing rank prints its stack dump unsymbolized (addresses, which
  // llvm-symbolizer can resolve later): symbolizing libtorch's frames took
  // 2 s alone and over 10 s on a busy machine, while its peers waited.
  ::setenv("LLVM_DISABLE_SYMBOLIZATION", "1", /*overwrite=*/0);
  varuna::ToolInit init(argc, argv);
  // A task of srun: its SLURM_* variables as torchrun's (Launch.h).
  if (std::string why = varuna::rt::adoptSlurmRank(); !why.empty())
    return fail("srun: " + why);
  // Output closed early (`varuna-run ... | head`): a write fails with EPIPE
  // and the run stops as if asked (print, below), with its checkpoint --
  // not killed by SIGPIPE with nothing saved.
  ::signal(SIGPIPE, SIG_IGN);
  // Only our options in --help, not the ones LLVM registers.
  cl::HideUnrelatedOptions(toolOptions);
  cl::ParseCommandLineOptions(argc, argv, "Varuna training launcher\n");

  // zb's cost of a split backward (plan/Schedule.h TimingModel): the
  // plan's, measured by the calibration it was made with, else the default.
  int64_t splitCostPercent = varuna::plan::TimingModel().splitCostPercent;
  // Where --batch and --micro-batch came from (the command line, a plan, the
  // training configuration), as the messages about them name them.
  std::string batchSource, microSource;
  if (!planPath.empty()) {
    auto buf = llvm::MemoryBuffer::getFile(planPath);
    if (!buf)
      return fail("cannot read the plan '" + planPath + "': " +
                  (llvm::sys::fs::is_directory(planPath)
                       ? std::string("it is a directory")
                       : buf.getError().message()));
    auto plan = varuna::parseUserJSON((*buf)->getBuffer());
    if (!plan)
      return fail("the plan '" + planPath +
                  "' is not JSON: " + llvm::toString(plan.takeError()));
    const llvm::json::Object *o = plan->getAsObject();
    if (!o)
      return fail("the plan '" + planPath + "' is not a JSON object");
    auto field = [&](const char *key) -> std::optional<int64_t> {
      return o->getInteger(key);
    };
    // Each field a plan needs, of its type and range, named when it is not.
    for (const char *key : {"stages", "replicas", "micro_batch"})
      if (!field(key) || *field(key) < 1)
        return fail("the plan '" + planPath + "': '" + key +
                    "' must be a positive integer" +
                    (o->get(key) ? "" : " (it is missing)") +
                    ": write plans with varuna-plan -o");
    auto schedule = o->getString("schedule");
    if (!schedule)
      return fail("the plan '" + planPath +
                  "': 'schedule' must be a schedule's name: write plans "
                  "with varuna-plan -o");
    for (const char *key : {"schedule_latency", "split_cost_percent"})
      if (o->get(key) && (!field(key) || *field(key) < 0))
        return fail("the plan '" + planPath + "': '" + key +
                    "' must be a non-negative integer");
    for (const char *key : {"batch", "devices", "threads"})
      if (o->get(key) && (!field(key) || *field(key) < 1))
        return fail("the plan '" + planPath + "': '" + key +
                    "' must be a positive integer");
    // Of their types: a wrong one was replaced by the default silently.
    if (const llvm::json::Value *v = o->get("bucket_mb");
        v && !(v->getAsNumber() && *v->getAsNumber() > 0))
      return fail("the plan '" + planPath +
                  "': 'bucket_mb' must be a positive number of MiB");
    if (const llvm::json::Value *v = o->get("message_precision");
        v && !(v->getAsString() && (*v->getAsString() == "fp32" ||
                                    *v->getAsString() == "bf16")))
      return fail("the plan '" + planPath +
                  "': 'message_precision' must be \"fp32\" or \"bf16\"");
    if (!varuna::plan::scheduleKindNamed(schedule->str()))
      return fail("the plan '" + planPath + "': 'schedule' must be " +
                  varuna::plan::kScheduleKindNames + ", not '" + *schedule +
                  "'");
    // The command line may repeat a plan's value, not contradict it.
    std::string clash;
    auto take = [&](auto &opt, auto value, const char *key) {
      if (opt.getNumOccurrences() && opt != value) {
        if (clash.empty()) {
          auto text = [](const auto &v) {
            std::string t;
            if constexpr (std::is_floating_point_v<std::decay_t<decltype(v)>>)
              llvm::raw_string_ostream(t) << llvm::format("%g", v);
            else
              llvm::raw_string_ostream(t) << v;
            return t;
          };
          std::string given = text(opt.getValue()), planned = text(value);
          clash = "--" + opt.ArgStr.str() + " " + given +
                  " contradicts the plan '" + planPath + "', whose " + key +
                  " is " + planned + " (leave the option out, or plan again)";
        }
        return false;
      }
      opt = value;
      return true;
    };
    take(stages, *field("stages"), "stages");
    take(replicas, *field("replicas"), "replicas");
    if (take(microBatch, *field("micro_batch"), "micro_batch") &&
        !microBatch.getNumOccurrences())
      microSource = "--micro-batch " + std::to_string(microBatch) +
                    " (the micro_batch of the plan '" + planPath + "')";
    take(scheduleName, schedule->str(), "schedule");
    take(scheduleLatency, field("schedule_latency").value_or(0),
         "schedule_latency");
    take(bucketMB, o->getNumber("bucket_mb").value_or(bucketMB), "bucket_mb");
    take(messagePrecision,
         o->getString("message_precision")
             .value_or(llvm::StringRef(messagePrecision))
             .str(),
         "message_precision");
    if (!clash.empty())
      return fail(clash);
    // What it was planned for (plans written since these were recorded):
    // another batch or job still runs, but not as planned.
    if (auto planned = field("batch")) {
      if (!batch.getNumOccurrences()) {
        batch = *planned;
        batchSource = "--batch " + std::to_string(batch) +
                      " (the batch of the plan '" + planPath + "')";
      }
      else if (batch != *planned && speaksForTheRun())
        llvm::errs() << "varuna-run: warning: the plan '" << planPath
                     << "' was made for --batch " << *planned
                     << " (its P x D and micro-batch were chosen for that); "
                        "this run has --batch "
                     << batch << ": run varuna-plan again for it\n";
    }
    if (auto planned = o->getString("job")) {
      llvm::SmallString<256> mine(jobDir), theirs(*planned);
      llvm::sys::fs::real_path(jobDir, mine);
      llvm::sys::fs::real_path(*planned, theirs);
      if (mine != theirs && speaksForTheRun())
        llvm::errs() << "varuna-run: warning: the plan '" << planPath
                     << "' was made for the job '" << *planned
                     << "', not this one: its partition and timings are "
                        "that job's\n";
    }
    // A plan edited by hand: keys varuna-plan never writes (a typo is a
    // setting silently not applied) and more ranks than its devices.
    static const char *const known[] = {
        "job", "batch", "devices", "stages", "replicas", "micro_batch",
        "schedule", "schedule_latency", "split_cost_percent", "bucket_mb",
        "message_precision", "estimated_seconds", "source", "threads"};
    for (const auto &kv : *o)
      if (llvm::none_of(known, [&](const char *k) { return kv.first == k; }) &&
          speaksForTheRun())
        llvm::errs() << "varuna-run: warning: the plan '" << planPath
                     << "' has a key varuna-plan does not write, '"
                     << kv.first << "': ignored\n";
    if (auto planned = field("devices"))
      if (*field("stages") * *field("replicas") > *planned &&
          speaksForTheRun())
        llvm::errs() << "varuna-run: warning: the plan '" << planPath
                     << "' has " << *field("stages") << " x "
                     << *field("replicas") << " ranks but was made for "
                     << *planned << " devices\n";
    if (auto planned = field("threads")) {
      // This run's threads per rank: given, else the cores shared among
      // this machine's ranks (all of them, when this is the launcher). It
      // was compared only when --compute-threads was given.
      int mine = threads;
      if (mine <= 0) {
        const char *local = std::getenv("LOCAL_WORLD_SIZE");
        int64_t here = local ? std::max(1, std::atoi(local))
                       : std::getenv("RANK") ? 0
                                             : *field("stages") *
                                                   *field("replicas");
        if (here > 0)
          mine = int(std::max<int64_t>(
              1, std::max(1u, std::thread::hardware_concurrency()) / here));
      }
      if (mine > 0 && mine != *planned && speaksForTheRun())
        llvm::errs() << "varuna-run: warning: the plan '" << planPath
                     << "' was made from timings with " << *planned
                     << " compute thread(s) per rank (varuna-calibrate "
                        "--compute-threads); this run gives each rank "
                     << mine
                     << (threads > 0 ? " (--compute-threads)"
                                     : " (this machine's cores shared among "
                                       "its ranks; --compute-threads sets "
                                       "it)")
                     << ", so its step times will differ from the plan's "
                        "estimate\n";
    }
    splitCostPercent =
        field("split_cost_percent").value_or(splitCostPercent);
    if (splitCostPercent < 0 || splitCostPercent > 100)
      return fail("the plan '" + planPath +
                  "' has split_cost_percent " +
                  llvm::Twine(splitCostPercent) + ", outside [0, 100]");
  }
  if (stages < 1 || replicas < 1)
    return fail("--stages and --replicas must be at least 1");
  if (batch.getNumOccurrences() && batch < 1)
    return fail("--batch must be a positive number of examples, not " +
                llvm::Twine(batch));
  if (microBatch.getNumOccurrences() && microBatch < 1)
    return fail("--micro-batch must be a positive number of examples, not " +
                llvm::Twine(microBatch));
  llvm::SmallString<256> irPath(jobDir);
  llvm::sys::path::append(irPath, "job.mlir");
  if (!llvm::sys::fs::exists(irPath))
    return fail("'" + jobDir + "' is not a compiled job (no " + irPath +
                "): run varuna-compile first");
  // The job's training configuration, unless --config overrides it.
  varuna::TrainingConfig config;
  if (!configPath.empty()) {
    auto c = varuna::loadTrainingConfig(configPath);
    if (!c)
      return fail(llvm::toString(c.takeError()));
    config = *c;
  } else {
    auto c = varuna::loadJobTrainingConfig(jobDir);
    if (!c)
      return fail(llvm::toString(c.takeError()));
    config = *c;
  }
  // A no_weight_decay string that no parameter name contains is a typo or
  // another model's naming (HF's "LayerNorm.weight" for GPT-2's "ln_1"):
  // training would decay what the user meant to exclude.
  if (!config.optimizer.noWeightDecay.empty() && speaksForTheRun()) {
    auto names = varuna::loadJobParameterNames(jobDir);
    if (!names)
      return fail(llvm::toString(names.takeError()));
    for (const std::string &s :
         varuna::unmatchedNoWeightDecay(config.optimizer, *names))
      llvm::errs() << "varuna-run: warning: optimizer.no_weight_decay: no "
                      "parameter name contains '"
                   << s << "' (the first are "
                   << describeNames(*names, 3) << ")\n";
  }
  // Its global_batch_size and micro_batch_size are the defaults of --batch
  // and --micro-batch; the command line (or a plan) wins, with a warning.
  std::string configName = configPath.empty()
                               ? "the job's configuration"
                               : "the configuration '" + configPath + "'";
  auto fromConfig = [&](auto &opt, std::optional<int64_t> value,
                        const char *key, const char *flag,
                        std::string &source) {
    if (!value)
      return;
    if (opt == 0) {
      opt = *value;
      source = std::string(key) + " " + std::to_string(*value) + " (of " +
               configName + ")";
    } else if (opt != *value && speaksForTheRun()) {
      llvm::errs() << "varuna-run: warning: " << configName << " has " << key
                   << " " << *value << "; this run has "
                   << (source.empty() ? flag + (" " + std::to_string(opt))
                                      : source)
                   << "\n";
    }
  };
  fromConfig(batch, config.globalBatchSize, "global_batch_size", "--batch",
             batchSource);
  fromConfig(microBatch, config.microBatchSize, "micro_batch_size",
             "--micro-batch", microSource);
  if (batchSource.empty())
    batchSource = "--batch " + std::to_string(batch);
  if (microSource.empty())
    microSource = "--micro-batch " + std::to_string(microBatch);
  if (batch == 0)
    return fail("give --batch (or --plan, or global_batch_size in the "
                "training configuration)");
  if (microBatch == 0)
    return fail("give --micro-batch (or --plan, or micro_batch_size in the "
                "training configuration)");
  if (batch < 1 || microBatch < 1 || batch % microBatch)
    return fail(batchSource + " is not a positive multiple of " +
                microSource);
  // A step keeps a few schedule entries per micro-batch: a --batch of 2^62
  // in micro-batches of 2 died of an allocation failure ("LLVM ERROR: out
  // of memory") before the first step.
  constexpr int64_t kMaxMicroBatches = int64_t(1) << 20;
  if (batch / microBatch > kMaxMicroBatches)
    return fail(batchSource + " has " + llvm::Twine(batch / microBatch) +
                " micro-batches of " + llvm::Twine(microBatch) +
                ", more than 2^20 in one step (make the micro-batch larger)");
  if (batch / microBatch < replicas)
    return fail(batchSource + " has " +
                llvm::Twine(batch / microBatch) + " micro-batches of " +
                llvm::Twine(microBatch) + ", fewer than the " +
                llvm::Twine(replicas) + " replicas");
  std::optional<varuna::plan::ScheduleKind> scheduleKind =
      varuna::plan::scheduleKindNamed(scheduleName);
  if (!scheduleKind)
    return fail(llvm::Twine("--schedule must be ") +
                varuna::plan::kScheduleKindNames + ", not '" + scheduleName +
                "'");
  if (timeoutSeconds <= 0)
    return fail("--timeout must be positive");
  if (!(checkpointTimeoutSeconds > 0) ||
      !std::isfinite(checkpointTimeoutSeconds))
    return fail("--checkpoint-timeout must be a positive number of seconds");
  // Checked whatever P x D, so that a value that is wrong is said even
  // where it would do nothing.
  if (scheduleLatency < 0 ||
      scheduleLatency > varuna::plan::kMaxPlannedLatency)
    return fail("--schedule-latency must be in [0, " +
                llvm::Twine(varuna::plan::kMaxPlannedLatency) +
                "] forward times, not " + llvm::Twine(scheduleLatency) +
                (planPath.empty() ? ""
                                  : " (from the plan '" + planPath + "'?)"));
  if (!(bucketMB > 0))
    return fail("--bucket-mb must be positive");
  if (messagePrecision != "fp32" && messagePrecision != "bf16")
    return fail("--message-precision must be fp32 or bf16, not '" +
                messagePrecision + "'");
  bool distributed = stages * replicas > 1;
  // Options given on the command line that this P x D has no use for: said,
  // so that a user does not take a run for what they asked.
  if (speaksForTheRun()) {
    auto unused = [&](const cl::Option &opt, const char *why) {
      if (opt.getNumOccurrences())
        llvm::errs() << "varuna-run: warning: --" << opt.ArgStr
                     << " does nothing here: " << why << "\n";
    };
    const char *oneStage = "one stage sends no activations and has no "
                           "pipeline schedule (give --stages 2 or more)";
    if (stages == 1) {
      unused(scheduleName, oneStage);
      unused(scheduleLatency, oneStage);
      unused(messagePrecision, oneStage);
      unused(strictSchedule, oneStage);
    }
    if (replicas == 1)
      unused(bucketMB, "one replica all-reduces no gradients (give "
                       "--replicas 2 or more)");
    if (!synthetic && !dataDir.empty()) {
      unused(vocab, "it shapes --synthetic data, and --data is given");
      unused(syntheticSamples, "it shapes --synthetic data, and --data is "
                               "given");
    }
    const char *oneRank = "one process talks to no other (give --stages or "
                          "--replicas above 1)";
    if (!distributed)
      for (const cl::Option *o : std::initializer_list<const cl::Option *>{
               &emuLatency, &emuJitter, &emuBandwidth, &emuSeed,
               &emuCollectives, &timeoutSeconds, &checkpointTimeoutSeconds})
        unused(*o, oneRank);
    else if (stages == 1 && !emuCollectives)
      for (const cl::Option *o : std::initializer_list<const cl::Option *>{
               &emuLatency, &emuJitter, &emuBandwidth})
        unused(*o, "it delays messages between stages, and one stage sends "
                   "none (add --emulate-collectives to delay the "
                   "all-reduces)");
  }
  // Checked whatever P x D (a value one process does not use is still
  // wrong).
  for (const cl::opt<double> *o : {&emuLatency, &emuJitter, &emuBandwidth})
    if (!(o->getValue() >= 0) || !std::isfinite(o->getValue()))
      return fail("--" + o->ArgStr + " must be a non-negative number of " +
                  (o == &emuBandwidth ? "Mbit/s" : "milliseconds") + ", not " +
                  llvm::formatv("{0}", o->getValue()).str());
  // A rank (or the one process of P = D = 1) stops after a step when asked
  // (runtime/Stop.h); the launcher forwards its signals (runtime/Launch.h).
  // Before any thread exists, so that all of them leave the signals alone.
  // Armed from here on: a request during the set-up (the rendezvous, loading
  // the stage library) stops the run after its first step, on every rank
  // alike, rather than killing some ranks while others wait for them.
  std::optional<varuna::rt::StopOnRequest> armed;
  if (!distributed || std::getenv("RANK")) {
    varuna::rt::watchStopSignals();
    armed.emplace();
    if (!varuna::rt::followLauncher())
      return fail(llvm::Twine("rank ") +
                  (std::getenv("RANK") ? std::getenv("RANK") : "?") +
                  ": the launcher (VARUNA_LAUNCHER_PID) is gone");
  }
  if (transportName != "gloo" && transportName != "nccl")
    return fail("--transport must be gloo or nccl, not '" + transportName +
                "'");
  if (transportName == "nccl")
    return fail("--transport nccl: the NCCL transport is built, but the "
                "trainer does not place parameters and activations on GPUs "
                "yet; train with --transport gloo");
  if (steps < 0)
    return fail("--steps must be non-negative");
  if (synthetic == !dataDir.empty())
    return fail("give exactly one of --data DIR and --synthetic");
  if (engine != "generated" && engine != "reference")
    return fail("--engine must be 'generated' or 'reference', not '" + engine +
                "'");

  mlir::MLIRContext ctx;
  ctx.loadDialect<varuna::VarunaDialect, mlir::func::FuncDialect>();
  ctx.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  llvm::raw_fd_ostream diagOut(2, /*shouldClose=*/false, /*unbuffered=*/false);
  diagOut.SetBufferSize(1 << 16);
  WholeDiagnostics handler(sourceMgr, &ctx, diagOut);

  auto job = mlir::parseSourceFile<mlir::ModuleOp>(irPath, sourceMgr, &ctx);
  if (!job)
    return fail("cannot parse '" + irPath + "'");

  if (checkpointEvery < 0)
    return fail("--checkpoint-every must not be negative, not " +
                llvm::Twine(checkpointEvery));
  if (keepCheckpoints < 0)
    return fail("--keep-checkpoints must not be negative, not " +
                llvm::Twine(keepCheckpoints));
  if (vocab < 1)
    return fail("--synthetic-vocab must be at least 1, not " +
                llvm::Twine(vocab));
  auto specs = varuna::graphInputSpecs(*job);
  if (mlir::failed(specs))
    return 1;
  // A micro-batch's inputs alone must fit in this machine's memory (its
  // activations take far more): a --micro-batch of 10^12 died of an
  // allocation failure before the first step.
  {
    double exampleBytes = 0;
    for (const varuna::rt::InputSpec &s : *specs) {
      double n = double(varuna::rt::dtypeSize(s.dtype));
      for (int64_t d : s.sampleShape)
        n *= double(std::max<int64_t>(d, 1));
      exampleBytes += n;
    }
    double memory = double(::sysconf(_SC_PHYS_PAGES)) *
                    double(::sysconf(_SC_PAGESIZE));
    auto gb = [](double bytes) {
      std::string t;
      llvm::raw_string_ostream(t) << llvm::format("%.3g GB", bytes / 1e9);
      return t;
    };
    if (memory > 0 && double(microBatch) * exampleBytes > memory)
      return fail(microSource + ": its examples' inputs alone take " +
                  gb(double(microBatch) * exampleBytes) +
                  ", more than this machine's " + gb(memory) + " of memory");
  }
  std::unique_ptr<varuna::rt::DataSource> data, evalData;
  try {
    if (synthetic) {
      // Integer inputs the model indexes by (token ids, labels) stay within
      // what they index unless --synthetic-vocab is given (then it is
      // checked like any data).
      std::vector<varuna::IndexRange> ranges = varuna::findIndexRanges(*job);
      for (auto &s : *specs) {
        s.vocab = vocab;
        if (vocab.getNumOccurrences())
          continue;
        // The default within what the type holds: a bool input was refused
        // ("vocab 64 does not fit bool") unless --synthetic-vocab 2, which
        // then limited every other integer input too.
        s.vocab = std::min<int64_t>(s.vocab, varuna::rt::typeRange(s.dtype));
        for (const varuna::IndexRange &r : ranges)
          if (r.input == s.name && r.lo <= 0 && r.hi > 0)
            s.vocab = std::min<int64_t>(s.vocab, r.hi);
      }
      data = std::make_unique<varuna::rt::SyntheticDataset>(seed, *specs,
                                                            syntheticSamples);
    } else {
      data = varuna::rt::NpyDataset::open(dataDir, *specs);
    }
    if (!evalDataDir.empty())
      evalData = varuna::rt::NpyDataset::open(evalDataDir, *specs);
  } catch (const std::exception &e) {
    return fail(e.what());
  }
  if (evalEvery < 0 || evalBatches < 0)
    return fail("--eval-every and --eval-batches must not be negative");
  if ((evalEvery > 0 || evalBatches > 0) && evalDataDir.empty())
    return fail("--eval-every and --eval-batches need --eval-data");

  // Output directories: create_directories takes an existing file of the
  // name for done, and the run would fail only when it first writes there.
  auto makeDirectory = [](const std::string &dir,
                          const char *what) -> std::optional<std::string> {
    if (std::error_code ec = llvm::sys::fs::create_directories(dir))
      return "cannot create " + std::string(what) + " '" + dir +
             "': " + ec.message();
    if (!llvm::sys::fs::is_directory(dir))
      return std::string(what) + " '" + dir +
             "' exists and is not a directory";
    if (llvm::sys::fs::access(dir, llvm::sys::fs::AccessMode::Write))
      return std::string(what) + " '" + dir + "' is not writable";
    return std::nullopt;
  };
  if (!dumpParams.empty())
    if (auto problem = makeDirectory(dumpParams, "the --dump-params directory"))
      return fail(*problem);

  varuna::TrainOptions options;
  options.globalBatch = batch;
  options.microBatch = microBatch;
  options.steps = steps;
  options.seed = seed;
  options.precision = config.precision;
  options.metricsPath = metrics;
  options.dumpParamsDir = dumpParams;
  options.sections = sectionsMode;
  options.checkpointDir = checkpointDir;
  options.checkpointEvery = checkpointEvery;
  options.checkpointKeep = keepCheckpoints;
  options.resume = resume;
  options.evalData = evalData.get();
  options.evalEvery = evalEvery;
  options.evalBatches = evalBatches;
  options.tracePath = tracePath;
  // The batches a validation takes (by default as many whole ones as the
  // data holds, at least one): more examples than the data holds repeat.
  if (evalData && options.evalBatchCount() * batch > evalData->numSamples() &&
      speaksForTheRun())
    llvm::errs() << "varuna-run: warning: "
                 << (evalBatches > 0 ? "--eval-batches " +
                                           std::to_string(evalBatches) + " of "
                                     : std::string("one "))
                 << "--batch " << batch << " needs "
                 << options.evalBatchCount() * batch
                 << " examples, the validation data '" << evalDataDir
                 << "' holds " << evalData->numSamples()
                 << ": some are counted more than once\n";
  // Whether `a` and `b` name one file: the same existing file (a link to
  // it too), or the same path once absolute.
  auto sameFile = [](llvm::StringRef a, llvm::StringRef b) {
    bool same = false;
    if (!llvm::sys::fs::equivalent(a, b, same) && same)
      return true;
    llvm::SmallString<256> x(a), y(b);
    llvm::sys::fs::make_absolute(x);
    llvm::sys::fs::make_absolute(y);
    llvm::sys::path::remove_dots(x, true);
    llvm::sys::path::remove_dots(y, true);
    return x == y;
  };
  // What a run reads and must not write over: the job's files, the
  // configuration, the plan (--trace jobdir/manifest.json destroyed the job).
  std::vector<std::string> inputs = {configPath, planPath};
  for (const char *name : {"job.mlir", "manifest.json", "libstages.so",
                           "report.md", "calibration.json"}) {
    llvm::SmallString<256> p(jobDir);
    llvm::sys::path::append(p, name);
    inputs.push_back(p.str().str());
  }
  // Output files are written by one rank, the trace after the last step:
  // a path that cannot take them is said now, by every process alike, not
  // after the whole run (or by one rank, its peers then blaming the
  // transport).
  auto outputFileProblem =
      [&](const std::string &path, const char *what,
          const char *example) -> std::optional<std::string> {
    if (path == "-")
      return "cannot write " + std::string(what) + " to '-': give a file " +
             "(standard output carries the step lines)";
    for (const std::string &in : inputs)
      if (!in.empty() && sameFile(path, in))
        return "cannot write " + std::string(what) + " '" + path +
               "': it is '" + in + "', which this run reads; give another " +
               "file (e.g. '" + example + "')";
    llvm::StringRef dir = llvm::sys::path::parent_path(path);
    if (dir.empty())
      dir = ".";
    if (!llvm::sys::fs::is_directory(dir) ||
        llvm::sys::fs::access(dir, llvm::sys::fs::AccessMode::Write))
      return "cannot write " + std::string(what) + " '" + path + "': '" +
             dir.str() + "' is not a writable directory";
    if (llvm::sys::fs::is_directory(path))
      return "cannot write " + std::string(what) + " '" + path +
             "': it is a directory (give a file name, e.g. '" + path + "/" +
             example + "')";
    return std::nullopt;
  };
  if (!tracePath.empty())
    if (auto problem =
            outputFileProblem(tracePath, "the trace", "timeline.json"))
      return fail(*problem);
  // The trace is written whole at the end, into a temporary file renamed
  // over it: renamed over /dev/stdout, it replaced that.
  if (!tracePath.empty() && llvm::sys::fs::exists(tracePath) &&
      !llvm::sys::fs::is_regular_file(tracePath))
    return fail("cannot write the trace '" + tracePath +
                "': it exists and is not a regular file (the timeline is "
                "written whole at the end of the run: give a file)");
  if (!traceSteps.empty()) {
    if (tracePath.empty())
      return fail("--trace-steps needs --trace FILE");
    llvm::StringRef text(traceSteps);
    auto [a, b] = text.split('-');
    int64_t first = -1, last = -1;
    bool range = text.contains('-');
    if (a.getAsInteger(10, first) || (range && b.getAsInteger(10, last)))
      first = -1;
    if (!range)
      last = first;
    if (first < 0 || last < first)
      return fail("--trace-steps '" + traceSteps +
                  "': expected N or A-B with 0 <= A <= B (training steps, "
                  "0-based)");
    if (first >= steps)
      return fail("--trace-steps '" + traceSteps + "': the run's last step "
                  "is " + llvm::Twine(steps - 1) + " (--steps " +
                  llvm::Twine(steps) + "), so the trace would hold no step");
    options.traceFirstStep = first;
    options.traceLastStep = last;
  }
  if (!tracePath.empty() && !metrics.empty() && sameFile(tracePath, metrics))
    return fail("--trace and --metrics name one file, '" + tracePath +
                "': the trace would replace the metrics");
  if (!metrics.empty())
    if (auto problem =
            outputFileProblem(metrics, "the metrics", "metrics.jsonl"))
      return fail(*problem);
  if (engine == "generated") {
    llvm::SmallString<256> lib(jobDir);
    llvm::sys::path::append(lib, "libstages.so");
    if (!llvm::sys::fs::exists(lib))
      return fail("'" + lib + "' does not exist: compile the job with "
                  "varuna-compile (without --no-build), or run with "
                  "--engine reference");
    llvm::SmallString<256> abs(lib);
    llvm::sys::fs::make_absolute(abs);
    options.stageLibrary = abs.str().str();
  }
  if (checkpointEvery > 0 && checkpointDir.empty())
    return fail("--checkpoint-every needs --checkpoint-dir");
  if (keepCheckpoints > 0 && checkpointDir.empty())
    return fail("--keep-checkpoints needs --checkpoint-dir");
  if (!checkpointDir.empty())
    if (auto problem = makeDirectory(checkpointDir, "the checkpoint directory"))
      return fail(*problem);
  // A new run into a directory that holds a run's checkpoints would write
  // its own over theirs, step by step, and a later --resume would continue
  // whichever is newest: the two runs mixed, one of them lost unsaid.
  if (!checkpointDir.empty() && !resume)
    if (std::optional<int64_t> newest =
            varuna::rt::newestCommittedStep(checkpointDir))
      return fail("the checkpoint directory '" + checkpointDir +
                  "' holds another run's checkpoints (the newest: step " +
                  llvm::Twine(*newest) +
                  "): give --resume to continue that run, or another "
                  "--checkpoint-dir for a new one");
  // One run per directory while it runs, --resume or not: this process
  // (one process, or the launcher of the ranks it starts), or rank 0 of
  // ranks started by torchrun, srun or hand.
  if (const char *rank = std::getenv("RANK");
      !checkpointDir.empty() &&
      (!rank || (llvm::StringRef(rank) == "0" &&
                 !std::getenv("VARUNA_LAUNCHER_PID"))))
    if (std::string why = varuna::rt::lockCheckpointDirectory(checkpointDir);
        !why.empty())
      return fail(why);
  bool tty = llvm::sys::Process::StandardOutIsDisplayed();
  // One line per step; on a terminal also a progress bar below it, which
  // the next line overwrites.
  double elapsed = 0;
  int64_t firstStep = -1; // the first step this run trained
  bool outputClosed = false;
  // Asked to stop (runtime/Stop.h): the last step's number, else -1.
  int64_t stoppedAfter = -1;
  std::string stopCause; // "SIGTERM to rank 2", for the last message
  auto stopped = [&](const varuna::StepMetrics &m) {
    if (m.stopRequested && m.step + 1 < steps) {
      stoppedAfter = m.step;
      stopCause = m.stopCause;
    }
  };
  // What a stopped run says last (on one process) and its exit status.
  auto sayStopped = [&](bool speak) {
    if (speak) {
      if (tty) { // the progress bar's line
        std::printf("\r\033[K");
        std::fflush(stdout);
      }
      std::string ckpt =
          checkpointDir.empty()
              ? std::string("no checkpoint: give --checkpoint-dir to keep "
                            "the state of a stopped run")
              : "checkpoint '" + checkpointDir + "/step-" +
                    std::to_string(stoppedAfter + 1) +
                    "' written: continue with --resume";
      std::string how = outputClosed ? "(the output was closed)"
                        : stopCause.empty()
                            ? "on request"
                            : "on request (" + stopCause + ")";
      std::fprintf(stderr, "varuna-run: stopped %s after step %lld "
                   "of %lld (%s)\n",
                   how.c_str(),
                   static_cast<long long>(stoppedAfter),
                   static_cast<long long>(steps.getValue()), ckpt.c_str());
    }
    return varuna::rt::kStoppedExitStatus;
  };
  // One process ends as a shell reports the signal that stopped it (130
  // for Ctrl-C, 141 for a closed pipe); a rank always exits
  // kStoppedExitStatus, which its launcher recognizes.
  auto oneProcessStopStatus = [&](int status) {
    if (outputClosed)
      return 128 + SIGPIPE;
    int sig = varuna::rt::stopSignal();
    return sig > 0 ? 128 + sig : status;
  };
  auto print = [&](const varuna::StepMetrics &m) {
    if (tty)
      std::printf("\r\033[K");
    // One spelling of a non-finite loss ("nan", "inf", "-inf"), whatever
    // the sign bit of a NaN.
    auto lossText = [](double v) {
      if (std::isnan(v))
        return std::string("nan");
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.6f", v);
      return std::string(buf);
    };
    // A step loss scaling skipped is said on its line too (it read as a
    // step that trained; only --metrics had "skipped").
    std::string skippedText;
    if (m.skipped && m.lossScale) {
      char buf[96];
      std::snprintf(buf, sizeof buf,
                    "  skipped: gradients overflowed at loss scale %g",
                    *m.lossScale);
      skippedText = buf;
    }
    if (m.evalOnly) {
      // A run that trained no step: its validation alone.
      if (m.evalLoss)
        std::printf("validation %s  loss %s  (%lld batch%s)\n",
                    m.step < 0
                        ? "of the initial parameters (no step trained)"
                        : ("after step " + std::to_string(m.step) +
                           " (no step trained in this run)")
                              .c_str(),
                    lossText(*m.evalLoss).c_str(),
                    static_cast<long long>(m.evalBatches),
                    m.evalBatches == 1 ? "" : "es");
    } else {
      std::printf("step %lld  loss %s  %.1f examples/s  %.3f s%s\n",
                  static_cast<long long>(m.step), lossText(m.loss).c_str(),
                  m.examplesPerSecond, m.seconds, skippedText.c_str());
    }
    if (m.evalLoss && !m.evalOnly)
      std::printf("validation after step %lld  loss %s  (%lld batch%s)\n",
                  static_cast<long long>(m.step),
                  lossText(*m.evalLoss).c_str(),
                  static_cast<long long>(m.evalBatches),
                  m.evalBatches == 1 ? "" : "es");
    if (m.evalAbandonedAfter >= 0) {
      std::fflush(stdout);
      std::fprintf(stderr,
                   "%svaruna-run: validation after step %lld abandoned after "
                   "%lld batch(es): stop requested%s\n",
                   tty ? "\r\033[K" : "", static_cast<long long>(m.step),
                   static_cast<long long>(m.evalAbandonedAfter),
                   m.stopCause.empty() ? ""
                                       : (" (" + m.stopCause + ")").c_str());
    }
    if (tty && steps > 0 && !m.evalOnly) {
      elapsed += m.seconds;
      if (firstStep < 0)
        firstStep = m.step; // a resumed run timed only its own steps
      int64_t done = m.step + 1;
      double eta = elapsed / double(std::max<int64_t>(1, done - firstStep)) *
                   double(steps - done);
      char text[96];
      std::snprintf(text, sizeof text, " %lld/%lld steps, about %.0f s left",
                    static_cast<long long>(done),
                    static_cast<long long>(steps.getValue()), eta);
      // One line of the terminal, whatever its width (a wrapped line would
      // not be cleared by the next \r): the bar shrinks, then goes.
      int cols = 80;
      if (winsize ws{}; ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 &&
                        ws.ws_col > 0)
        cols = ws.ws_col;
      std::string line = text;
      int width = std::min<int>(30, cols - 1 - int(line.size()) - 2);
      if (width >= 5) {
        int filled = static_cast<int>(width * done / steps);
        line = "[" + std::string(filled, '#') +
               std::string(width - filled, '.') + "]" + line;
      } else {
        line.erase(0, 1);
      }
      if (int(line.size()) > cols - 1)
        line.resize(std::max(0, cols - 1));
      std::printf("%s", line.c_str());
      if (done == steps)
        std::printf("\r\033[K");
    }
    if (std::fflush(stdout) != 0 && errno == EPIPE && !outputClosed) {
      outputClosed = true; // a stop request, through the usual path
      ::kill(::getpid(), SIGTERM);
    }
  };
  if (threads < 0)
    return fail("--compute-threads must be positive");
  auto worldMismatch = [&](long long worldSize) {
    return fail("WORLD_SIZE is " + llvm::Twine(worldSize) + ", but --stages " +
                llvm::Twine(stages) + " x --replicas " + llvm::Twine(replicas) +
                " needs " + llvm::Twine(stages * replicas) +
                (stages * replicas == 1 ? " rank" : " ranks"));
  };
  if (!distributed) {
    // A rank started by torchrun or srun for a job of one rank: each of
    // them trained the whole model alone, racing on its checkpoints.
    if (const char *ws = std::getenv("WORLD_SIZE");
        std::getenv("RANK") && ws && std::atoll(ws) > 1)
      return worldMismatch(std::atoll(ws));
    if (threads > 0)
      at::set_num_threads(threads);
    auto result = varuna::trainReference(
        *job, config, *data, options, [&](const varuna::StepMetrics &m) {
          print(m);
          stopped(m);
        });
    if (mlir::failed(result))
      return 1;
    return stoppedAfter >= 0 ? oneProcessStopStatus(sayStopped(true)) : 0;
  }

  varuna::PipelineOptions pipeline;
  pipeline.stages = stages;
  pipeline.replicas = replicas;
  pipeline.schedule = *scheduleKind;
  pipeline.deviate = !strictSchedule;
  pipeline.timing.latency = scheduleLatency;
  pipeline.timing.splitCostPercent = splitCostPercent;
  pipeline.bucketBytes = static_cast<size_t>(bucketMB * 1048576.0);
  pipeline.bf16Messages = messagePrecision == "bf16";
  pipeline.checkpointTimeoutSeconds = checkpointTimeoutSeconds;
  if (mlir::failed(varuna::checkPipeline(*job, options, pipeline)))
    return 1;
  varuna::rt::NetworkEmulation emu;
  emu.latencyMs = emuLatency;
  emu.jitterMs = emuJitter;
  emu.bandwidthBytesPerS = emuBandwidth * 1e6 / 8;
  emu.seed = emuSeed;
  emu.collectives = emuCollectives;
  if (emu.collectives && !emu.enabled())
    return fail("--emulate-collectives needs --emulate-latency-ms or "
                "--emulate-bandwidth-mbps");

  // P x D ranks. Without RANK in the environment this process is the
  // launcher: it starts the ranks on this machine (each is this program
  // again, with the rendezvous variables set) and waits for them.
  if (!std::getenv("RANK")) {
    // Each rank reads the files again after this launcher: a pipe
    // (--config <(...), /dev/stdin) is empty by then, and every rank said
    // its JSON was invalid.
    for (auto [option, path] : {std::pair{"--config", &configPath.getValue()},
                                std::pair{"--plan", &planPath.getValue()}})
      if (!path->empty() && !llvm::sys::fs::is_regular_file(*path))
        return fail(llvm::Twine(option) + " '" + *path +
                    "' is not a regular file (a pipe?): each of the " +
                    llvm::Twine(stages * replicas) +
                    " ranks reads it again after the launcher; write it "
                    "to a file");
    varuna::rt::LaunchOptions launch;
    launch.argv.assign(argv, argv + argc);
    launch.argv[0] = llvm::sys::fs::getMainExecutable(argv[0],
                                                      (void *)&fail);
    launch.worldSize = static_cast<int>(stages * replicas);
    launch.frozenLimit = std::chrono::milliseconds(
        static_cast<int64_t>(timeoutSeconds * 1000));
    if (const char *addr = std::getenv("MASTER_ADDR"))
      launch.masterAddr = addr;
    if (const char *port = std::getenv("MASTER_PORT"))
      launch.masterPort = std::atoi(port);
    auto launched = std::chrono::system_clock::now();
    int status = varuna::rt::launchLocalRanks(launch);
    if (status != 0 && !tracePath.empty())
      reportFailedTrace(tracePath, launch.worldSize, launched);
    return status;
  }
  std::unique_ptr<varuna::rt::Transport> transport;
  try {
    varuna::rt::TransportOptions topts = varuna::rt::transportOptionsFromEnv();
    topts.timeout = std::chrono::milliseconds(
        static_cast<int64_t>(timeoutSeconds * 1000));
    topts.describeTag = varuna::describePipelineTag;
    if (topts.worldSize != stages * replicas)
      return worldMismatch(topts.worldSize);
    // A rank 0 started by hand serves the rendezvous (unless torchrun's
    // agent does): at an address not this host's it timed out in c10d's
    // words, or named a nonsense address; a port in use likewise. The
    // address only warns: NAT or a service address may reach this host.
    const char *agentStore = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
    if (topts.rank == 0 && !std::getenv("VARUNA_LAUNCHER_PID") &&
        !(agentStore && llvm::StringRef(agentStore) == "True"))
      if (varuna::rt::RendezvousProblem why = varuna::rt::checkLocalRendezvous(
              topts.masterAddr, topts.masterPort, /*launcher=*/false);
          !why.message.empty()) {
        if (!why.address)
          return fail(why.message);
        llvm::errs() << "varuna-run: warning: rank 0: " << why.message << "\n";
      }
    // Share the cores among the ranks of this machine: LOCAL_WORLD_SIZE of
    // them (torchrun, srun and varuna-run's launcher set it), else counted
    // once connected -- ranks started by hand without it each took every
    // core (10-90x slower steps on a shared machine).
    const char *localEnv = std::getenv("LOCAL_WORLD_SIZE");
    unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    auto shareCores = [&](int local) {
      at::set_num_threads(threads > 0 ? unsigned(threads)
                                      : std::max(1u, cores / unsigned(local)));
    };
    shareCores(localEnv ? std::max(1, std::atoi(localEnv)) : 1);
    transport = varuna::rt::emulateNetwork(varuna::rt::connectGloo(topts), emu);
    // (A collective: every rank takes part, whatever its own environment
    // and --compute-threads say.)
    std::vector<int64_t> hosts = varuna::rt::gatherHashes(
        transport->world(), varuna::rt::hostIdentity());
    if (!localEnv)
      shareCores(static_cast<int>(
          std::count(hosts.begin(), hosts.end(), hosts[transport->rank()])));
    // Ranks started by hand each parse their own command line and files:
    // before, ranks given other learning rates trained apart silently, and
    // other step counts failed later as a lost peer (runtime/Agreement.h).
    // Paths may differ between hosts; what they hold may not.
    std::string jobDigest = varuna::jobFileDigest(irPath);
    std::string configText;
    llvm::raw_string_ostream(configText) << config.toJSON();
    auto number = [](auto v) {
      std::string text;
      llvm::raw_string_ostream(text) << v;
      return text;
    };
    std::vector<varuna::rt::Setting> settings = {
        {"the job", "job.mlir with digest " + jobDigest},
        {"--stages", number(stages.getValue())},
        {"--replicas", number(replicas.getValue())},
        {"--batch", number(batch.getValue())},
        {"--micro-batch", number(microBatch.getValue())},
        {"--steps", number(steps.getValue())},
        {"--seed", number(seed.getValue())},
        {"--schedule", scheduleName},
        {"--strict-schedule", number(strictSchedule.getValue())},
        {"--schedule-latency", number(scheduleLatency.getValue())},
        {"--bucket-mb", number(bucketMB.getValue())},
        {"--message-precision", messagePrecision},
        {"--engine", engine},
        {"the training configuration", configText},
        {"the training data",
         synthetic ? "--synthetic (vocab " + number(vocab.getValue()) + ", " +
                         (syntheticSamples > 0
                              ? number(data->numSamples()) + " samples)"
                              : std::string("every sample new)"))
                   : number(data->numSamples()) + " samples"},
        // A rank with validation data runs passes the others do not join;
        // one tracing waits for the others' parts at the end.
        {"the validation data (--eval-data)",
         evalData ? number(evalData->numSamples()) + " samples" : "none"},
        {"--trace", tracePath.empty() ? "none" : "given"},
        {"--resume", number(resume.getValue())},
        // Whether the ranks checkpoint decides the groups they connect.
        {"--checkpoint-dir", checkpointDir.empty() ? "none" : "given"},
        {"--checkpoint-every", number(checkpointEvery.getValue())},
        {"--keep-checkpoints", number(keepCheckpoints.getValue())},
        {"--checkpoint-timeout", number(checkpointTimeoutSeconds.getValue())},
        {"--eval-every", number(evalEvery.getValue())},
        {"--eval-batches", number(evalBatches.getValue())},
    };
    varuna::rt::checkSameSettings(transport->world(), settings);
  } catch (const std::exception &e) {
    return fail(e.what());
  }
  bool rank0 = transport->rank() == 0;
  auto result = varuna::trainPipeline(
      *job, config, *data, options, pipeline, *transport,
      [&](const varuna::StepMetrics &m) {
        if (rank0)
          print(m);
        stopped(m);
      });
  if (mlir::failed(result))
    return 1;
  if (stoppedAfter < 0)
    return 0;
  // A rank started by hand (torchrun, srun) ends as a shell reports its
  // signal (130 for Ctrl-C), as it does when stopped before training; one
  // started by varuna-run exits kStoppedExitStatus for its launcher.
  int status = sayStopped(rank0);
  return std::getenv("VARUNA_LAUNCHER_PID") ? status
                                            : oneProcessStopStatus(status);
}
