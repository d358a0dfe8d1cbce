//===- CheckpointIO.h - Parameters <-> per-section checkpoints --*- C++ -*-===//
//
// The layer between trainers and runtime/Checkpoint.h: which section file a
// parameter lives in (its "home": the first section that reads it, so a
// tied parameter is stored once), the tensors of one section file
// (parameters and their optimizer state), the training state, and restoring
// any subset of the parameters -- which is what lets a checkpoint written
// by one P x D be resumed under another (each rank reads the files of the
// parameters it holds). Torch-facing; throws std::runtime_error with a
// message on a malformed or incomplete checkpoint.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_TARGET_ATEN_CHECKPOINTIO_H
#define VARUNA_TARGET_ATEN_CHECKPOINTIO_H

#include "varuna/Target/ATen/ATenEvaluator.h"
#include "varuna/runtime/Checkpoint.h"
#include "varuna/runtime/LossScaler.h"
#include "varuna/runtime/Optimizer.h"
#include "varuna/runtime/Transport.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/raw_ostream.h"

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace varuna {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

/// Parameter name -> the index of the first section (of `sections`, in
/// order) that reads it (its `varuna.params`; a frozen parameter, such as a
/// batch_norm's running statistics: the first whose body reads it).
std::map<std::string, int>
checkpointHomes(llvm::ArrayRef<mlir::func::FuncOp> sections);

/// Section `k`'s file contents: the tensors of `params` (parameters and
/// buffers) whose home is `k` (one without a home goes to section 0), their
/// optimizer state from `state`, and the `frozen` parameters (constants)
/// whose home is `k`, under rt::frozenTensorName.
std::vector<rt::TensorBytes>
sectionTensors(int k, const std::map<std::string, int> &home,
               const NamedTensors &params, const rt::OptimizerState &state,
               const NamedTensors &frozen = {});

/// What a resumed run should share with the one that wrote the checkpoint
/// for the losses to continue as if never interrupted.
struct RunSettings {
  int64_t globalBatch = 0; ///< M: step s reads examples [s M, (s+1) M)
  uint64_t seed = 0;       ///< dropout and other random ops
  int64_t microBatch = 0;  ///< m
  /// Whether the model's results depend on m (batch norms over the
  /// examples, other statistics over them): only then is another m warned.
  bool microBatchMatters = false;
  /// The training configuration, normalized (TrainingConfig::toJSON):
  /// another one (lr, schedule, clipping, precision, ...) is warned.
  std::string trainingConfig;
  /// "P x D": each rank draws its random ops from (seed, step, stage,
  /// replica), so with `randomOps` (dropout, random noise) another shape,
  /// or another micro-batch, draws otherwise: warned.
  std::string shape = "1 x 1";
  bool randomOps = false;
};

/// step, optimizer_step and the generator's state, for the manifest; with
/// dynamic loss scaling also loss_scale and loss_scale_good_steps; and what
/// a resume checks: the optimizer (its type and the state it keeps per
/// parameter), global_batch, seed, micro_batch and training_config.
rt::TrainingState trainingState(int64_t step, const rt::Optimizer &optimizer,
                                at::Generator &generator,
                                const rt::LossScaler *scaler,
                                const RunSettings &run);

/// Warnings for a resume under other settings than the checkpoint's run
/// (another global batch, seed, or an optimizer of another type that keeps
/// the same state -- LAMB's moments for AdamW; another training
/// configuration, each field that differs named with both values; another
/// micro-batch where it matters: training goes on, but not as the
/// interrupted run would have). Empty for checkpoints that do not record
/// them.
std::vector<std::string> resumeWarnings(const rt::CheckpointInfo &ckpt,
                                        const RunSettings &run,
                                        const rt::Optimizer &optimizer);

/// After a checkpoint of `bytes` begun at `start` that took long enough to
/// be noticed (2 s or more: a big stage, a slow disk), says so to `log`:
/// "varuna-run: checkpoint 'DIR/step-N' written: 3.2 GB in 14.1 s".
void reportCheckpointWritten(llvm::raw_ostream &log, const std::string &dir,
                             int64_t step, double bytes,
                             std::chrono::steady_clock::time_point start);

/// The file --dump-params writes parameter `name` to, in `dir`:
/// `<name>.npy`, with '%' and '/' written as %25 and %2F (a ModuleDict key
/// may hold a slash: the dump failed after the run, "cannot create").
std::string dumpedParamPath(const std::string &dir, const std::string &name);

/// After a checkpoint was committed, with `keep` > 0 (--keep-checkpoints):
/// removes the step directories older than the newest `keep` committed
/// checkpoints whose files have their recorded sizes (rt::keepLast without
/// reading the files; never one newer than the newest good one). A failure to remove is a warning to `log`, naming the
/// directory: the run goes on, its new checkpoint is committed.
void pruneCheckpoints(llvm::raw_ostream &log, const std::string &dir,
                      int64_t keep);

/// After resuming from `step` of `dir` (every rank has read it): removes
/// the torn step directories newer than it, which the run rewrites (a full
/// disk stayed full of them, and failed again), saying so, then keeps the
/// newest `keep` (> 0; --keep-checkpoints) as after a commit. Failures are
/// warnings.
void tidyAfterResume(llvm::raw_ostream &log, const std::string &dir,
                     int64_t step, int64_t keep);

/// The newest complete checkpoint of `dir` (skipped torn or corrupt ones
/// are reported to `log` as warnings), or nullopt (reported too).
std::optional<rt::CheckpointInfo> latestCheckpoint(const std::string &dir,
                                                   llvm::raw_ostream &log);

/// latestCheckpoint for the ranks of `world`, which share `dir` (the
/// checkpoint directory check makes sure): rank 0 verifies the checkpoints
/// (reads every file) and chooses; the others open its choice by marker,
/// manifest and sizes (rt::openCheckpoint; the files a rank loads are
/// checked as it reads them). Every rank reading every file read P x D
/// times the checkpoint (8 GB for a 1.34 GB one at P = 4). A collective on
/// `world`. Throws std::runtime_error when this rank cannot open rank 0's
/// choice.
std::optional<rt::CheckpointInfo>
agreedLatestCheckpoint(rt::Group &world, const std::string &dir,
                       llvm::raw_ostream &log);

/// Copies the checkpointed values into `params` (read from their homes'
/// files; every one must be there) and `buffers` (state that is not
/// trained, such as batch_norm running statistics; one the checkpoint does
/// not hold keeps its value: checkpoints written before they were kept),
/// loads the optimizer state of those parameters, the generator state and
/// (when both have one) the loss scale, and returns the steps completed.
/// `strict`: a tensor of the files read that is not in `params` or
/// `buffers` is an error too (single-process resume). An optimizer that
/// cannot continue the checkpoint's state (it keeps other state per
/// parameter: AdamW's moments for an SGD, none for an SGD with momentum
/// after steps without) is an error naming both. `restored`, when given,
/// receives the names of the tensors copied.
int64_t restoreFrom(const rt::CheckpointInfo &ckpt,
                    const std::map<std::string, int> &home,
                    NamedTensors &params, NamedTensors &buffers,
                    rt::Optimizer &optimizer, at::Generator &generator,
                    bool strict, rt::LossScaler *scaler = nullptr,
                    std::set<std::string> *restored = nullptr);

/// What a resume from a checkpoint at step `at` says when --steps `steps`
/// leaves nothing to train (at >= steps): the run ends at once, having
/// trained nothing -- probably not what was meant (not said with validation
/// data: then the run validates the checkpoint, validateUntrained).
std::string nothingToTrain(int64_t at, int64_t steps);

/// The end of a resume that loaded its parameters with
/// ATenEvaluator::deferUnreadableParams on (the model file the job was
/// compiled from may be gone or changed: what the checkpoint holds need not
/// be read from it): turns deferral off and returns an error when a
/// deferred parameter was not restored (its own loading error, and why the
/// checkpoint did not replace it: none found in the directory, or it does
/// not keep that parameter), else in `note` what came from the checkpoint
/// alone (empty when nothing was deferred).
std::optional<std::string>
finishDeferredParams(ATenEvaluator &evaluator,
                     const std::set<std::string> &restored,
                     const rt::CheckpointInfo *checkpoint, std::string &note);

} // namespace varuna

#endif // VARUNA_TARGET_ATEN_CHECKPOINTIO_H
