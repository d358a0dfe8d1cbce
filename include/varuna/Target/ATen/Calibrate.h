//===- Calibrate.h - Measured section times ---------------------*- C++ -*-===//
//
// What varuna-calibrate measures once, independent of the device count
// (the paper's scale-invariant calibration): for each micro-batch size m,
// every section's forward time (with autograd, as a recompute or the last
// stage runs it), backward time and the part of the backward zero-bubble's
// W takes (the weight gradients), in one process on synthetic inputs
// (integer inputs drawn from [0, vocab)), through the generated code when a
// stage library is given, timed as a stage runs them: each repeat runs every
// section's forward in order, then every backward in reverse (a section timed
// alone in a loop finds its weights and activations in the cache, which a
// training step does not). Robust statistics: `warmup` runs dropped, the
// median of `repeats`. Memory: one more forward and backward of each section
// alone runs with every CPU allocation counted (a counting wrapper
// around ATen's CPU allocator): the bytes the forward leaves alive for the
// backward and the peak above the section's inputs and parameters (the
// working memory of one micro-batch; gradient buffers of the parameters
// already exist then, so they are not in it). Optimizer: with `optimizer`
// set, each section's parameters take warmup + repeats steps of it (with
// the gradients of the last backward), median time. Communication (send time by size, all-reduce time by
// size) is measured by the tool with real ranks (runtime/Transport.h).
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_TARGET_ATEN_CALIBRATE_H
#define VARUNA_TARGET_ATEN_CALIBRATE_H

#include "varuna/Compiler/TrainingConfig.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <optional>
#include <string>
#include <vector>

namespace varuna {

struct CalibrationOptions {
  /// The job's precision: sections are timed as training runs them.
  Precision precision = Precision::FP32;
  /// The job's optimizer (and clip_grad_norm), to time its step per
  /// section; none: not timed.
  std::optional<OptimizerConfig> optimizer;
  std::optional<double> clipGradNorm;
  std::vector<int64_t> microBatches{1, 2, 4};
  int warmup = 2;
  int repeats = 5;
  int64_t vocab = 2;
  std::string stageLibrary; ///< empty: the ATen evaluator
  uint64_t seed = 0;
};

struct SectionTiming {
  std::vector<double> forwardSeconds;  ///< per micro-batch size
  std::vector<double> backwardSeconds; ///< per micro-batch size
  /// Per size: the two halves of a split backward (rt::SplitBackward,
  /// zero-bubble's B and W), every weight half timed after every input half.
  std::vector<double> inputSeconds;
  std::vector<double> weightSeconds;
  std::vector<int64_t> heldBytes;      ///< per size: alive after forward
  std::vector<int64_t> peakBytes;      ///< per size: peak of fwd + bwd
  double optimizerSeconds = 0;         ///< one step over its parameters
};

/// One entry per section; fails after a diagnostic.
mlir::FailureOr<std::vector<SectionTiming>>
calibrateSections(mlir::ModuleOp job, const CalibrationOptions &options);

} // namespace varuna

#endif // VARUNA_TARGET_ATEN_CALIBRATE_H
