//===- LossNormalization.h - How micro-batch losses add up -*- C++ -*-===//
//
// A step of global batch M runs as micro-batches of m; the step must train
// as one forward of the whole batch would (plain PyTorch: loss(batch M),
// backward, optimizer step). How the micro-batches' losses and gradients
// combine depends on how the model's loss reduces the batch dimension away,
// which this file reads from the training graph:
//
//   Sum         the loss is linear in sums over the examples (cross_entropy
//               or reduce with reduction sum; added, subtracted, scaled by
//               values that do not depend on the examples): the
//               micro-batches' losses add up.
//   Normalized  the same, where some terms are means over the examples:
//               mean cross_entropies whose labels are computed from the
//               graph inputs alone (labels, their shifts and reshapes:
//               never parameters or random numbers; class weights from
//               frozen parameters or constants), and reduce means
//               marked step_mean (varuna-mark-step-means: a mean over the
//               examples only the loss reads), and divisions marked
//               step_divisor (kStepDivisorAttr: means over the rows an
//               x[mask] selects) whose count is computed from the inputs
//               alone. Each such mean is a sum
//               divided by a count (the labels not ignored, or the sum of
//               their class weights; the elements reduced; the selected
//               rows); over the whole
//               step that count is known before the first forward, from
//               the step's inputs (and the weights) or its shape
//               (LabelCounter). Each micro-batch divides its sum by the
//               step's count (rt::LossDenominators), so the micro-batches'
//               losses add up: exact for any number of mean terms, any
//               ignore_index (BERT's masked-LM + next-sentence losses; a
//               cross_entropy plus an MoE auxiliary mean; a sum plus a
//               mean) and micro-batches without a counted label.
//   Ratio       a sum over the examples divided by a count computed from
//               the graph inputs alone (LossDivisor), or several such
//               ratios by the same count value added together (`n =
//               mask.sum()` dividing two sums): each micro-batch's loss
//               weighs its own count -- exact.
//   Mean        anything else (a reduce mean, means of different things
//               added together):
//               each micro-batch's loss weighs what it averages over (its
//               examples, or the labels its last mean cross_entropy counts)
//               and the weighted sum is divided by the total -- exact for
//               one mean, approximate for several counting different things.
//
// Torch-facing (the counting runs ATen); used by both trainers.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_TARGET_ATEN_LOSSNORMALIZATION_H
#define VARUNA_TARGET_ATEN_LOSSNORMALIZATION_H

#include "varuna/Dialect/Varuna/IR/VarunaOps.h"
#include "varuna/runtime/Dataset.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"

#include <ATen/core/Tensor.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace varuna {

enum class LossAggregation { Mean, Sum, Normalized, Ratio };

/// How the losses of `job`'s micro-batches add up (see the file comment);
/// Mean when the job has no training graph or loss.
LossAggregation lossAggregation(mlir::ModuleOp job);

/// The loss of `job` when micro-batches cannot reproduce it: a function of
/// reductions over the examples that is none of the four above (a sum over
/// the examples added to a mean, a product or log of means, ...), which
/// the Mean aggregation weighs as if it were a mean. Null otherwise.
mlir::Value lossSplitsInexactly(mlir::ModuleOp job);

/// Whether the micro-batches' losses simply add up to the step's (Sum,
/// Normalized); otherwise each is weighted by a count (Mean, Ratio).
inline bool lossesAddUp(LossAggregation a) {
  return a == LossAggregation::Sum || a == LossAggregation::Normalized;
}

/// The ops of a training graph that compute some of its values from the
/// graph inputs and constants alone (no parameter, no random numbers), so
/// that they can be computed for any rows of the data before (or without)
/// running the model.
class InputSlice {
public:
  /// Loads a frozen parameter (ATenEvaluator::loadParam).
  using ParamLoader = std::function<at::Tensor(ParamOp)>;
  /// nullopt when some root depends on something else. With `params`, the
  /// slice may also read frozen parameters that no batch_norm updates (a
  /// loss's class weights), loaded by it.
  static std::optional<InputSlice> create(mlir::func::FuncOp graph,
                                          llvm::ArrayRef<mlir::Value> roots,
                                          ParamLoader params = nullptr);
  /// The roots' values for `inputs` (graph input name -> rows; `batch`
  /// rows each). Throws std::runtime_error (naming the op or the missing
  /// input) when evaluation fails.
  std::vector<at::Tensor> evaluate(const llvm::StringMap<at::Tensor> &inputs,
                                   int64_t batch) const;
  /// The same for the rows of each graph input in the graph's order; only
  /// those of inputsRead() are used (DataSource::batch may leave the others
  /// empty).
  std::vector<at::Tensor> evaluate(const std::vector<rt::BatchTensor> &rows,
                                   int64_t batch) const;
  /// Which graph inputs the slice reads.
  const std::vector<bool> &inputsRead() const { return reads; }

private:
  InputSlice() = default;
  mlir::func::FuncOp graph;
  std::vector<mlir::Value> roots;
  std::vector<mlir::Operation *> ops; ///< in program order
  std::vector<std::string> inputs;   ///< name of each graph input
  std::vector<bool> reads;           ///< per graph input: read by `ops`
  ParamLoader params;
};

/// A loss that is a sum over the examples divided by a count taken from the
/// data (LossAggregation::Ratio: `(per_token * mask).sum() / mask.sum()`,
/// `F.cross_entropy(..., reduction="sum") / (labels != pad).sum()`, what
/// Megatron and Hugging Face's num_items_in_batch do, CenterNet's focal
/// loss over `pos.sum().clamp(min=1)`): each micro-batch's loss is weighted
/// by its own divisor, computed from its inputs, and the weighted sum (the
/// sum of the micro-batches' sums) divided by the divisor of the whole
/// step's inputs -- exact also when the divisor is not a sum (a clamp, an
/// epsilon added): one micro-batch without positives counted 1 per
/// micro-batch where PyTorch's step counts 1 once.
class LossDivisor {
public:
  /// nullopt unless lossAggregation(job) is Ratio. A micro-batch whose
  /// divisor is 0 (every label ignored) cannot be weighted (its loss is
  /// 0/0): the trainers stop with zeroDivisorMessage.
  /// `params` loads the frozen parameters the count reads (class weights
  /// in a weighted mean written out by hand: sum(w[y] * loss) / w[y].sum()).
  static std::optional<LossDivisor> create(mlir::ModuleOp job,
                                           InputSlice::ParamLoader params);
  /// The divisor's value for one micro-batch's inputs.
  double evaluate(const llvm::StringMap<at::Tensor> &inputs,
                  int64_t batch) const;
  /// The same for the rows of each graph input in the graph's order (those
  /// of inputsRead(): DataSource::batch(..., inputsRead()) of a whole step).
  double evaluate(const std::vector<rt::BatchTensor> &rows,
                  int64_t batch) const;
  const std::vector<bool> &inputsRead() const { return slice.inputsRead(); }

private:
  explicit LossDivisor(InputSlice slice) : slice(std::move(slice)) {}
  InputSlice slice;
};

/// Why a Ratio loss cannot train a micro-batch of `microBatch` whose
/// divisor is 0, and what to do instead.
std::string zeroDivisorMessage(int64_t microBatch);

/// The means over the examples of a job's training graph that take a step
/// denominator (mean cross_entropies and step_mean reduces, in program
/// order: the order they run in, whether the graph runs whole or section
/// after section) and what computes the cross_entropies' labels from the
/// graph inputs.
class LabelCounter {
public:
  /// Analyses `job`. nullopt when the job has no training graph, no such
  /// mean, a mean cross_entropy whose labels (or class weights) depend on
  /// something other than the graph inputs and constants (a trainable
  /// parameter, a random op), or sections that do not hold the graph's
  /// means in the same order. `params` loads the frozen parameters class
  /// weights read; without it a weighted cross_entropy makes it nullopt.
  static std::optional<LabelCounter>
  create(mlir::ModuleOp job, InputSlice::ParamLoader params = nullptr);

  /// For the whole step's rows of each graph input, in the graph's order
  /// (DataSource::batch(step, M, 0, M)), each mean's count in program
  /// order: a cross_entropy's labels not equal to its ignore_index (all of
  /// them without one; with class weights, the sum of their weights), a
  /// reduce's elements reduced over `batch` examples. Throws
  /// std::runtime_error (naming the op) when an input is missing or an op
  /// fails.
  std::vector<double> count(const std::vector<rt::BatchTensor> &rows,
                            int64_t batch) const;
  /// The graph inputs count() reads (the rest of `rows` may be empty).
  const std::vector<bool> &inputsRead() const { return labels.inputsRead(); }

  /// The part of count()'s result that sections [first, end) run, in the
  /// order they run it (all of it for a job run without sections).
  std::vector<double> forSections(const std::vector<double> &counts,
                                  int first, int end) const;

  /// How many of the means sections [first, end) run.
  size_t meansIn(int first, int end) const;

private:
  explicit LabelCounter(InputSlice labels) : labels(std::move(labels)) {}
  InputSlice labels; ///< each mean's labels
  /// Mean cross_entropies and step_mean reduces, in program order.
  std::vector<mlir::Operation *> means;
  /// Index into `means` of each section's first mean, one past the end last.
  std::vector<size_t> sectionStart;
};

} // namespace varuna

#endif // VARUNA_TARGET_ATEN_LOSSNORMALIZATION_H
