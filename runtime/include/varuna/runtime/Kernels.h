//===- Kernels.h - The ATen implementation of every varuna op ---*- C++ -*-===//
//
// One function per varuna op (training mode; computation in the graph's own
// dtype, as PyTorch does), shared by the ATen evaluator
// (lib/Target/ATen/ATenOps.cpp, which reads the op's attributes) and by the
// generated stage code (through StageAPI.h, which gets them as literals).
// Sharing them is what makes generated code and the evaluator agree bit for
// bit. Torch-facing: only targets built with varuna_link_torch include it.
//
// Errors: KernelError for a variant the kernel cannot compute (message says
// which); c10::Error from ATen passes through.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_RUNTIME_KERNELS_H
#define VARUNA_RUNTIME_KERNELS_H

#include "varuna/runtime/OpCodes.h"

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <stdexcept>
#include <vector>

namespace varuna::rt {

class KernelError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

at::ScalarType toATen(ElemType t);

at::Tensor constantTensor(ElemType type, c10::IntArrayRef shape,
                          const double *values, int64_t n);
at::Tensor constantTensor(ElemType type, c10::IntArrayRef shape,
                          const int64_t *values, int64_t n);
at::Tensor arangeTensor(ElemType type, int64_t n, double start, double step);
/// varuna.linalg: torch.linalg's inv, det, slogdet's log |det|, cholesky
/// (lower) of `a`; solve of a x = b (b [.., n] or [.., n, k]).
at::Tensor linalgKernel(Linalg kind, const at::Tensor &a, const at::Tensor &b);
at::Tensor randomTensor(at::Generator &gen, ElemType type,
                        c10::IntArrayRef shape, Distribution dist, double a,
                        double b);

at::Tensor binaryKernel(Binary kind, const at::Tensor &a, const at::Tensor &b);
at::Tensor compareKernel(Compare pred, const at::Tensor &a, const at::Tensor &b);
at::Tensor unaryKernel(Unary kind, const at::Tensor &x);
/// PyTorch's CPU dropout: x * bernoulli(1-p) / (1-p) from `gen`.
at::Tensor dropoutKernel(at::Generator &gen, const at::Tensor &x, double ratio);

at::Tensor sliceKernel(const at::Tensor &x, int64_t axis, int64_t start,
                       int64_t end, int64_t step);
/// ONNX Gather (N-d indices, negative indices count from the end).
at::Tensor gatherKernel(const at::Tensor &x, at::Tensor idx, int64_t axis);
/// An embedding lookup along axis 0 whose rows at `paddingIdx` pass no
/// gradient back (nn.Embedding(padding_idx)): ATen's embedding.
at::Tensor embeddingKernel(const at::Tensor &table, at::Tensor idx,
                           int64_t paddingIdx);
at::Tensor gatherElementsKernel(const at::Tensor &x, at::Tensor idx,
                                int64_t axis);
/// out = data.clone(); out[tuple(indices.T)] = updates
at::Tensor scatterNDKernel(const at::Tensor &data, const at::Tensor &idx,
                           const at::Tensor &updates);
at::Tensor cumsumKernel(const at::Tensor &x, int64_t axis, bool exclusive,
                        bool reverse);
/// `pads` in ONNX order (all begins, then all ends).
at::Tensor padKernel(const at::Tensor &x, c10::IntArrayRef pads,
                     const at::Scalar &value);
at::Tensor triluKernel(const at::Tensor &x, int64_t k, bool upper);

/// `stepMean` (a mean, varuna.reduce's step_mean): inside a
/// LossDenominators scope, the sum divided by the scope's next denominator.
at::Tensor reduceKernel(Reduce kind, const at::Tensor &x,
                        c10::IntArrayRef axes, bool keepdim,
                        bool stepMean = false);
/// `sum / count` for a varuna.div marked step_divisor (a mean over the rows
/// a mask selects): inside a LossDenominators scope, `sum` divided by the
/// scope's next denominator (the whole step's count) instead.
at::Tensor stepDivideKernel(const at::Tensor &sum, const at::Tensor &count);
/// `safe`: rows of all -inf give zeros (and a zero gradient), as PyTorch's
/// _safe_softmax; not with `log`.
at::Tensor softmaxKernel(const at::Tensor &x, int64_t axis, bool log,
                         bool safe = false);
at::Tensor layerNormKernel(const at::Tensor &x, int64_t axis,
                           const at::Tensor &weight, const at::Tensor &bias,
                           double epsilon);
/// Training-mode batch normalization (the batch's statistics); `mean` and
/// `var`, when defined, are the running statistics, updated in place with
/// `momentum` -- unless a KeepRunningStats is alive on this thread. While an
/// Evaluating is alive: evaluation mode (normalized with the running
/// statistics, which stay as they are), as PyTorch's model.eval().
at::Tensor batchNormKernel(const at::Tensor &x, const at::Tensor &weight,
                           const at::Tensor &bias, const at::Tensor &mean,
                           const at::Tensor &var, double momentum,
                           double epsilon);

/// While one is alive on the constructing thread, batchNormKernel
/// normalizes as always but leaves the running statistics alone: a
/// recomputed forward repeats one whose update has already happened, and
/// updating again would count that micro-batch twice. Nests.
class KeepRunningStats {
public:
  KeepRunningStats();
  ~KeepRunningStats();
  KeepRunningStats(const KeepRunningStats &) = delete;
  KeepRunningStats &operator=(const KeepRunningStats &) = delete;

private:
  bool previous;
};

/// While one is alive on the constructing thread, the kernels compute as a
/// PyTorch module in evaluation mode (model.eval()) does: dropout passes
/// its input through, batch normalization uses (and keeps) the running
/// statistics. The trainers' validation passes hold one. Nests.
class Evaluating {
public:
  Evaluating();
  ~Evaluating();
  Evaluating(const Evaluating &) = delete;
  Evaluating &operator=(const Evaluating &) = delete;

private:
  bool previous;
};

/// While one is alive on the constructing thread, each cross_entropy with
/// reduction mean and each step_mean reduce that runs takes the next of
/// `denominators`, in the order they run, and returns its sum divided by it
/// instead of by the count of its own micro-batch: the trainer passes what
/// each mean counts over the whole step (labels not ignored; elements
/// reduced), so the micro-batches' losses add up to the step's (exact for
/// any number of means with any ignore_index). A mean that finds none left
/// throws std::runtime_error (the trainer's analysis and the run disagree).
/// Nests; an inner scope hides the outer one.
class LossDenominators {
public:
  explicit LossDenominators(std::vector<double> denominators);
  ~LossDenominators();
  LossDenominators(const LossDenominators &) = delete;
  LossDenominators &operator=(const LossDenominators &) = delete;
  /// The innermost scope of this thread, or null.
  static LossDenominators *current();
  /// The next denominator; throws when every one has been taken.
  double take();

private:
  std::vector<double> values;
  size_t next = 0;
  LossDenominators *previous;
};

/// softmax(where(mask, q @ key_t * scale, -inf)) @ v with ATen's fused
/// scaled_dot_product_attention; `mask` (i1, true = attend) may be undefined.
at::Tensor attentionKernel(const at::Tensor &q, const at::Tensor &keyT,
                           const at::Tensor &v, const at::Tensor &mask,
                           double scale);
at::Tensor convKernel(const at::Tensor &x, const at::Tensor &w,
                      const at::Tensor &b, c10::IntArrayRef strides,
                      c10::IntArrayRef pads, c10::IntArrayRef dilations,
                      int64_t groups);
/// Transposed convolution (at::convolution with transposed = true); `pads`
/// one per spatial dim (symmetric), as torch's conv_transposeNd.
at::Tensor convTransposeKernel(const at::Tensor &x, const at::Tensor &w,
                               const at::Tensor &b, c10::IntArrayRef strides,
                               c10::IntArrayRef pads,
                               c10::IntArrayRef outputPadding,
                               c10::IntArrayRef dilations, int64_t groups);
at::Tensor poolKernel(Pool kind, const at::Tensor &x, c10::IntArrayRef kernel,
                      c10::IntArrayRef strides, c10::IntArrayRef pads,
                      c10::IntArrayRef dilations, bool ceilMode,
                      bool countIncludePad);
/// `lossCount` (if not null) receives, for reduction mean, the number of
/// labels the loss averages over; a mean over no label is then 0 (the sum),
/// not 0/0: the trainer weighs it by that count, 0. `labelSmoothing` (not
/// with `logInput`): as F.cross_entropy's. `weight` (class weights [C];
/// undefined: none): as F.cross_entropy's, a mean divides by the weights of
/// the labels not ignored, and that sum is the count. Inside a
/// LossDenominators scope a mean is the sum divided by the scope's next
/// denominator.
at::Tensor crossEntropyKernel(const at::Tensor &logits, at::Tensor labels,
                              LossReduction reduction, bool hasIgnore,
                              int64_t ignoreIndex, bool logInput,
                              double *lossCount, double labelSmoothing = 0.0,
                              const at::Tensor &weight = {});
/// What a mean cross_entropy over `labels` divides by: the labels not equal
/// to the ignore index, or with class weights the sum of their weights.
double crossEntropyCount(const at::Tensor &labels, bool hasIgnore,
                         int64_t ignoreIndex, const at::Tensor &weight);

} // namespace varuna::rt

#endif // VARUNA_RUNTIME_KERNELS_H
