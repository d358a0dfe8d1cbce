//===- PipelineTrainer.h - One rank of a P x D pipeline ---------*- C++ -*-===//
//
// What each rank of `varuna-run --stages P --replicas D` runs. Rank =
// replica * P + stage (one pipeline replica on consecutive ranks). The
// stage runs the sections [b_s, b_{s+1}) of the job's partition for P
// (varuna.partitions), through the generated code when given.
//
// One step, global batch M, micro-batch m, Nm = M / (D m) micro-batches per
// replica; replica r's micro-batch k holds samples
// [s*M + r*M/D + k*m, ... + m) of the dataset (so every P x D sees the same
// samples in the same step, and 1 x 1 with M/m micro-batches is the oracle):
//  * the stage's task order comes from plan::schedule (varuna | gpipe |
//    1f1b | zb). F(k): receive the activations (stage 0: none), run the stage's
//    sections -- without autograd, stashing only the received tensors and
//    the RNG state, when an R(k) follows; with autograd otherwise (the last
//    stage, 1F1B) -- and send the results to the next stage. R(k): restore
//    the RNG state and recompute with autograd. B(k): receive the gradients
//    of the results (last stage: the loss, weighted by the labels it
//    counts), back-propagate, send the gradients of the received tensors.
//    Zero-bubble (zb) on stages after the first: B(k) computes only the
//    gradients of the received tensors and sends them; W(k) computes the
//    parameters' gradients later (rt::SplitBackward: each op's gradient
//    once over the two).
//    When the next task waits for a message that has not arrived, a later
//    recompute or backward that is ready runs first (the run-time
//    deviation; PipelineOptions::deviate).
//    Every message is preceded by a header (step, micro-batch, kind, index,
//    element count) that the receiver checks: a mismatch is an error.
//  * then: the loss sum and label count summed over all ranks; gradients
//    divided by the global count; summed over replicas (one group per
//    stage); a parameter read by several stages (a tie) summed over those
//    stages (one group per tie and replica), so the copies stay identical;
//    the global gradient norm (ties counted once) summed over the pipeline;
//    clipping and the optimizer step on the stage's own parameters.
//
// Errors (a peer gone, a timeout, a mismatched message, bad data) are
// diagnostics or exceptions with a message; the rank exits non-zero and the
// launcher stops the others.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_TARGET_ATEN_PIPELINETRAINER_H
#define VARUNA_TARGET_ATEN_PIPELINETRAINER_H

#include "varuna/Plan/Schedule.h"
#include "varuna/Target/ATen/ReferenceTrainer.h"
#include "varuna/runtime/Transport.h"

namespace varuna {

struct PipelineOptions {
  int64_t stages = 1;   // P
  int64_t replicas = 1; // D
  plan::ScheduleKind schedule = plan::ScheduleKind::Varuna;
  /// The run-time deviation from the static order (a ready recompute or
  /// backward runs while the scheduled task waits for a message); Varuna's
  /// schedule only -- GPipe and 1F1B are their static orders.
  bool deviate = true;
  /// The timing the static schedule is generated for (in units of one
  /// micro-batch forward): a message latency makes the Varuna order start
  /// more forwards before the first backward.
  plan::TimingModel timing;
  /// Data-parallel gradients (D > 1) are summed in buckets of at most this
  /// many bytes, each started during the last backward as soon as its
  /// gradients are final (rt::GradientBuckets). 25 MiB: DDP's default.
  size_t bucketBytes = size_t(25) << 20;
  /// fp32 activations and gradients travel between stages as bf16 (half
  /// the bytes; each is rounded to bf16 at the stage boundary, so training
  /// is no longer equal to one process within 1e-5). Off by default.
  bool bf16Messages = false;
  /// How long the ranks wait for those that write a checkpoint (replica 0
  /// writes every section: a big stage on a slow shared disk takes
  /// minutes), at least the transport's timeout.
  double checkpointTimeoutSeconds = 3600;
};

/// What can be checked before any rank starts: P x D, the batch, a partition
/// of the job into P stages, options the pipeline does not support yet.
mlir::LogicalResult checkPipeline(mlir::ModuleOp job,
                                  const TrainOptions &options,
                                  const PipelineOptions &pipeline);

/// The section boundaries of the job's partition into `stages` (P + 1
/// numbers), or an empty vector.
std::vector<int64_t> partitionBoundaries(mlir::ModuleOp job, int64_t stages);

/// What a tag of the pipeline's point-to-point messages carries, for
/// transport errors (rt::TransportOptions::describeTag): "activation 0 of
/// micro-batch 3", "the header of gradient 1 of micro-batch 0".
std::string describePipelineTag(int tag);

/// Trains this rank's part (transport.rank()); `onStep` gets every step's
/// global numbers on every rank. Metrics and dumped parameters: rank 0
/// writes the metrics, each replica-0 rank dumps its stage's parameters.
mlir::LogicalResult
trainPipeline(mlir::ModuleOp job, const TrainingConfig &config,
              const rt::DataSource &data, const TrainOptions &options,
              const PipelineOptions &pipeline, rt::Transport &transport,
              const std::function<void(const StepMetrics &)> &onStep);

} // namespace varuna

#endif // VARUNA_TARGET_ATEN_PIPELINETRAINER_H
