//===- ReferenceTrainer.h - Single-process training of a job ----*- C++ -*-===//
//
// Trains a compiled job in one process (P = 1, D = 1) by evaluating the
// training graph with the ATen evaluator and ATen's autograd: the reference
// the code-generated, distributed runtime will be checked against, and what
// `varuna-run JOBDIR --stages 1 --replicas 1` runs until then.
//
// One step s with global batch M and micro-batch m (M % m == 0):
//   for each micro-batch j: inputs = data.batch(s, M, j*m, m);
//     loss_j = graph(inputs); n_j = the count the loss averages over (labels
//     not equal to ignore_index for a cross-entropy `mean`, else m);
//     backward(loss_j * n_j)
//   gradients /= sum_j n_j      (the loss is the mean over the global batch)
//   global-norm clipping (config), optimizer step (runtime/Optimizer.h).
// The reported loss is sum_j loss_j * n_j / sum_j n_j. When the losses of
// micro-batches add up (LossNormalization.h: sums, and mean cross-entropies
// divided by the step's label counts) n_j = 1 and nothing is divided. With `sections`, each
// micro-batch runs section by section as a pipeline would (see TrainOptions).
//
// Errors (bad data, shapes, a graph without loss) are diagnostics or
// exceptions with a message; the tool turns them into exit status 1.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_TARGET_ATEN_REFERENCETRAINER_H
#define VARUNA_TARGET_ATEN_REFERENCETRAINER_H

#include "varuna/Compiler/TrainingConfig.h"
#include "varuna/Target/ATen/LossNormalization.h"
#include "varuna/runtime/Dataset.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/raw_ostream.h"
#include "varuna/runtime/Optimizer.h"
#include <algorithm>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace varuna {

struct TrainOptions {
  /// The training configuration's precision: bf16 / fp16 run every section
  /// under ATen's CPU autocast (ATenEvalOptions::autocast).
  Precision precision = Precision::FP32;
  int64_t globalBatch = 0; // M
  int64_t microBatch = 0;  // m
  int64_t steps = 0;
  uint64_t seed = 0;
  std::string metricsPath; // JSON lines: step, loss, examples_per_s, ...
  std::string dumpParamsDir; // final parameters as <name>.npy
  /// Run the outlined sections one by one with every boundary activated, as
  /// pipeline stages would: forward without autograd keeping only each
  /// section's received activations (and the RNG state), then backward from
  /// the last section to the first, recomputing each section's forward from
  /// its stash and handing the gradients of its inputs to the previous one.
  bool sections = false;
  /// Checkpoints (docs/checkpoints.md): every `checkpointEvery` steps, after
  /// the last step and when the run stops on request, into `checkpointDir`
  /// (one safetensors file per section: its parameters and
  /// their optimizer state; a parameter read by several sections is stored
  /// with the first). `resume` continues from the newest complete checkpoint
  /// (torn or corrupt ones are reported and skipped), including the
  /// optimizer state and the random generator, so the run continues exactly.
  std::string checkpointDir;
  int64_t checkpointEvery = 0;
  /// After each checkpoint, keep only the newest this many (0: all).
  int64_t checkpointKeep = 0;
  bool resume = false;
  /// Whether the state after `done` steps is checkpointed (above; `stopped`:
  /// the run stops on request after them).
  bool checkpointDue(int64_t done, bool stopped) const {
    return !checkpointDir.empty() &&
           ((checkpointEvery > 0 && done % checkpointEvery == 0) ||
            done == steps || stopped);
  }
  /// Validation (docs/varuna-run.md): after every `evalEvery` steps and after
  /// the last, the mean loss of `evalBatches` batches of the global batch
  /// (0: as many as `evalData` holds, at least one) of `evalData`, forward
  /// only in evaluation mode (rt::Evaluating: dropout off, batch norms on
  /// their running statistics); batch b holds its samples [b M, (b+1) M).
  /// Null: none.
  const rt::DataSource *evalData = nullptr;
  int64_t evalEvery = 0;
  int64_t evalBatches = 0;
  bool evalDue(int64_t done) const {
    return evalData &&
           ((evalEvery > 0 && done % evalEvery == 0) || done == steps);
  }
  int64_t evalBatchCount() const {
    if (evalBatches > 0)
      return evalBatches;
    return std::max<int64_t>(1, evalData->numSamples() / globalBatch);
  }
  /// The job's generated stage library (JOBDIR/libstages.so): run every
  /// section through its generated code; empty: interpret the graph with
  /// the ATen evaluator (the reference engine).
  std::string stageLibrary;
  /// Chrome-trace / Perfetto timeline of the run (runtime/Trace.h): the
  /// spans of every rank merged into this file.
  std::string tracePath;
  /// The training steps the trace records (rt::Trace::keepSteps).
  int64_t traceFirstStep = 0, traceLastStep = INT64_MAX;
};

/// One training step's numbers.
struct StepMetrics {
  int64_t step = 0;
  double loss = 0, seconds = 0, examplesPerSecond = 0, gradNorm = 0;
  /// With dynamic loss scaling: the scale the step used, and whether its
  /// gradients overflowed (then no parameter changed).
  std::optional<double> lossScale;
  bool skipped = false;
  /// Some rank was asked to stop during the step (runtime/Stop.h): the run
  /// ends after it -- after a checkpoint of it when the run checkpoints --
  /// unless it was the last step anyway.
  bool stopRequested = false;
  /// Who was asked, when one rank (or the one process) was: "SIGTERM to
  /// rank 2", "SIGINT"; empty when every rank was (their launcher passed
  /// its signal on) or none.
  std::string stopCause;
  /// Pipelines: the tasks every rank together ran ahead of its static order
  /// in the step (the run-time deviation; -1: not a pipeline run).
  int64_t deviations = -1;
  /// With an lr_schedule: the learning rate the step's update used.
  std::optional<double> lr;
  /// Validation after this step (TrainOptions::evalData): the mean loss of
  /// `evalBatches` batches.
  std::optional<double> evalLoss;
  int64_t evalBatches = 0;
  /// A stop request abandoned the validation after this step, after this
  /// many of its batches (-1: none was abandoned).
  int64_t evalAbandonedAfter = -1;
  /// The validation of a run that trained no step (validateUntrained): only
  /// `step` (the last step done, -1 before the first), the validation
  /// fields and the stop fields mean anything.
  bool evalOnly = false;
};

/// An error about running `job` (not about a line of its IR): reported at
/// "<job.mlir>:0:0" so that no IR is quoted.
mlir::InFlightDiagnostic jobError(mlir::ModuleOp job, const llvm::Twine &msg);

class ATenEvaluator;

/// The evaluator a trainer runs `job` with: seeded from `options`, through
/// the generated stage library when `options.stageLibrary` is set, reporting
/// each micro-batch's loss count into `count`. Fails (after a diagnostic)
/// when the library does not match or the graph has no loss.
mlir::FailureOr<std::unique_ptr<ATenEvaluator>>
createTrainingEvaluator(mlir::ModuleOp job, const TrainOptions &options,
                        double &count);

/// When the micro-batch is smaller than the global batch, warns where
/// training then differs from a full-batch step of plain PyTorch: batch
/// norms (once, at the first one's location: each micro-batch is normalized
/// with its own statistics, as in every micro-batched pipeline; how the
/// running statistics follow) and a loss that adds several mean
/// cross_entropies counting labels with an ignore_index but cannot divide
/// them by the step's counts (at the second: micro-batches are weighted by
/// one count; see LossNormalization.h). With `data`, that second warning
/// is given only when some step to be trained has micro-batches whose mean
/// cross_entropies count different numbers of labels (the weighting is
/// exact otherwise); the steps are read ahead when they are few enough
/// (kLabelScanRows rows of labels), else the warning stands.
void warnMicroBatchSemantics(mlir::ModuleOp job, const TrainOptions &options,
                             const rt::DataSource *data = nullptr);

struct RunSettings;
/// What a checkpoint records of this run for a resume to compare
/// (CheckpointIO.h RunSettings): the batch, seed, micro-batch -- and whether
/// the model's results depend on it (batch norms over the examples,
/// statistics over the batch) -- and the training configuration.
RunSettings runSettingsFor(mlir::ModuleOp job, const TrainOptions &options,
                           const TrainingConfig &config);
inline constexpr int64_t kLabelScanRows = 1 << 16;

/// The `--metrics` file (JSON lines, metricsJsonLine). A fresh run starts
/// it empty. A resumed run continues it: at its first line (step k) the
/// file is rewritten with the earlier lines of steps before k -- those of a
/// run that went past the checkpoint are dropped, so that the file reads as
/// one uninterrupted run -- and it appends from there. Until then the file
/// is left as it was (a resumed run that fails before its first step loses
/// nothing).
class MetricsWriter {
public:
  /// Opens `path` for writing; nullptr with `error` set when it cannot be
  /// written.
  static std::unique_ptr<MetricsWriter> open(const std::string &path,
                                             bool resume, std::string &error);
  /// Appends m's line; a failed write is warned about once (the run goes
  /// on).
  void write(const StepMetrics &m);

private:
  std::string path;
  bool resume = false, started = false, failed = false;
  std::ofstream os;
};

/// What both trainers set up after the evaluator: the optimizer over the
/// parameters `names` (in the order step() gets them) and, when `metrics`
/// is true and the options name a file, the metrics file.
struct TrainerOutputs {
  std::unique_ptr<rt::Optimizer> optimizer;
  std::unique_ptr<MetricsWriter> metrics; // null: no metrics from here
};
mlir::FailureOr<TrainerOutputs>
createTrainerOutputs(mlir::ModuleOp job, const TrainingConfig &config,
                     const TrainOptions &options,
                     const std::vector<std::string> &names, bool metrics);

/// One `--metrics` JSON line (with its newline): step, loss, examples_per_s,
/// step_seconds.
std::string metricsJsonLine(const StepMetrics &m);

/// The validation after `done` steps, when options.evalDue(done): the mean
/// of `batchLoss(b, stop)` over options.evalBatchCount() batches, into
/// m.evalLoss and m.evalBatches. A batch that sets `stop` (a stop request,
/// runtime/Stop.h, agreed by every rank) ends the pass there: no loss,
/// m.stopRequested set, so that the run checkpoints and stops at once
/// instead of after the whole pass. Fails when a batch does (after its
/// diagnostic).
mlir::LogicalResult
validate(const TrainOptions &options, int64_t done, StepMetrics &m,
         llvm::function_ref<mlir::FailureOr<double>(int64_t, bool &stop)>
             batchLoss);

/// A run that trains no step -- --steps equal to the steps done: --steps 0,
/// or --resume of a run that finished -- with validation data validates the
/// parameters as they are (it printed nothing): the mean of `batchLoss`
/// over options.evalBatchCount() batches, written to `metrics` and passed
/// to `onStep` as an evalOnly StepMetrics. Nothing to do otherwise.
mlir::LogicalResult validateUntrained(
    const TrainOptions &options, int64_t done,
    llvm::function_ref<mlir::FailureOr<double>(int64_t, bool &stop)> batchLoss,
    class MetricsWriter *metrics,
    const std::function<void(const StepMetrics &)> &onStep);

/// The graph inputs as the dataset must provide them (from the graph's
/// argument types: element type and sample shape).
mlir::FailureOr<std::vector<rt::InputSpec>> graphInputSpecs(mlir::ModuleOp job);

/// Trains; calls `onStep` after every step. Returns failure after emitting
/// a diagnostic (or printing the exception) on error.
mlir::LogicalResult
trainReference(mlir::ModuleOp job, const TrainingConfig &config,
               const rt::DataSource &data, const TrainOptions &options,
               const std::function<void(const StepMetrics &)> &onStep);

} // namespace varuna

#endif // VARUNA_TARGET_ATEN_REFERENCETRAINER_H
