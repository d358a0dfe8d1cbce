//===- Decompose.h - Framework functions as compositions of ops -*- C++ -*-===//
//
// Functions PyTorch and ONNX have that the varuna dialect has no op for
// (mish, hardswish, elu, leaky_relu, logsumexp, variance, vector norms, RMS
// normalization, GLU, einsum, linear / cubic interpolation, LSTM / GRU /
// RNN layers, a sum divided by the batch size), built from varuna ops. Shared by the ONNX and the
// TorchScript importers, so both import a function to the same ops; the
// runtime differentiates the composition with ATen's autograd like any other
// graph.
//
// Contract:
//  * Inputs are floating-point tensors (callers cast integers first); the
//    results have the input's element type.
//  * Ops are created at the builder's insertion point with location `loc`.
//  * Failure is a diagnostic at `loc` naming what does not fit (e.g. a
//    variance over the batch-dependent dimension, whose element count is
//    not known at import time); nothing aborts.
//  * Compositions avoid NaN gradients where a naive form would make them:
//    elu/celu take exp of min(x, 0) (exp of a large x would be inf, and
//    where's zero gradient times inf is NaN).
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_IMPORT_DECOMPOSE_H
#define VARUNA_IMPORT_DECOMPOSE_H

#include "varuna/Dialect/Varuna/IR/VarunaOps.h"
#include "mlir/IR/Builders.h"

namespace varuna {

/// Elementwise functions without a varuna.unary kind. Parameters:
/// hardsigmoid max(0, min(1, alpha * x + beta)) (torch: alpha 1/6, beta
/// 0.5); elu alpha * (exp(x) - 1) below 0; celu alpha * (exp(x / alpha) - 1)
/// below 0; leaky_relu alpha * x below 0; selu with torch's constants.
enum class Activation {
  mish,
  hardswish,
  hardsigmoid,
  elu,
  selu,
  celu,
  leaky_relu,
  softsign,
  logsigmoid,
};

/// Interpolation of a resize: linear (torch's linear / bilinear /
/// trilinear, ONNX Resize "linear") or cubic convolution (bicubic, ONNX
/// "cubic").
enum class ResizeMode { linear, cubic };

/// Where output index d of a resized axis (input size n, output size m,
/// scale s = m / n unless given) samples the input:
///  halfPixel         (d + 0.5) / s - 0.5   (torch, align_corners=False)
///  pytorchHalfPixel  as halfPixel, but 0 when m == 1 (ONNX)
///  alignCorners      d * (n - 1) / (m - 1), 0 when m == 1
///  asymmetric        d / s
enum class ResizeCoordinates {
  halfPixel,
  pytorchHalfPixel,
  alignCorners,
  asymmetric
};

/// One resized axis: its new size, and the scale that maps coordinates
/// (0: size / input size; torch and ONNX use a given scale factor as is,
/// which differs when the size was rounded down).
struct ResizeAxis {
  int64_t axis;
  int64_t size;
  double scale = 0;
};

/// The cell of a recurrent layer, with torch's gate order: LSTM (i, f, g,
/// o), GRU (r, z, n), Elman RNN with tanh or relu.
enum class RecurrentCell { lstm, gru, rnnTanh, rnnRelu };

/// One direction of one recurrent layer, torch's layout: wIh [G*H, I], wHh
/// [G*H, S], biases [G*H] (null when the layer has none); G = 4, 3, 1. S is
/// the state size: H, or P for an LSTM with projections (proj_size P),
/// whose wHr [P, H] projects each output o * tanh(c) (null otherwise).
struct RecurrentWeights {
  mlir::Value wIh, wHh, bIh, bHh, wHr;
};

/// What one direction of a layer computes: outputs [T, B, S] (time-major,
/// in time order also when run in reverse) and the last state h [B, S] (and
/// c [B, H] for an LSTM).
struct RecurrentResult {
  mlir::Value outputs, h, c;
};

/// How a non-constant pad fills: mirrored without the edge (torch
/// "reflect", ONNX "reflect"), the edge repeated ("replicate" / "edge"), or
/// wrapped around ("circular" / "wrap").
enum class PadMode { reflect, edge, wrap };

class Decomposer {
public:
  Decomposer(mlir::OpBuilder &b, mlir::Location loc) : b(b), loc(loc) {}

  mlir::FailureOr<mlir::Value> activation(Activation kind, mlir::Value x,
                                          double alpha = 0, double beta = 0);
  /// GLU along `axis` (even size): first half * sigmoid(second half).
  mlir::FailureOr<mlir::Value> glu(mlir::Value x, int64_t axis);
  /// log(sum(exp(x))) over sorted unique `axes`, shifted by the maximum.
  mlir::FailureOr<mlir::Value> logSumExp(mlir::Value x,
                                         llvm::ArrayRef<int64_t> axes,
                                         bool keepdim);
  /// sum((x - mean)^2) / (N - correction) over sorted unique `axes`; with
  /// `sqrtOf` the standard deviation. The axes' sizes must be static.
  mlir::FailureOr<mlir::Value> variance(mlir::Value x,
                                        llvm::ArrayRef<int64_t> axes,
                                        bool keepdim, double correction,
                                        bool sqrtOf);
  /// The p-norm over `axes`: 1, 2, inf and -inf (the largest / smallest
  /// |x|), any other nonzero p as (sum |x|^p)^(1/p).
  mlir::FailureOr<mlir::Value> vectorNorm(mlir::Value x, double p,
                                          llvm::ArrayRef<int64_t> axes,
                                          bool keepdim);
  /// x * rsqrt(mean(x^2 over [axis, rank)) + eps) (* weight when non-null).
  mlir::FailureOr<mlir::Value> rmsNorm(mlir::Value x, int64_t axis,
                                       mlir::Value weight, double eps);

  /// torch.einsum / ONNX Einsum: "ij,jk->ik" (or without "->": the
  /// letters used once, sorted) over one or more operands, folded left to
  /// right; each pair becomes transposes, reshapes and one batched matmul,
  /// letters no later operand or the output uses are summed first. "..."
  /// stands for unused letters, aligned from the right (implicit outputs put
  /// them first, as numpy). Not supported (diagnosed): a letter repeated
  /// within an operand (a diagonal), sizes that disagree (no broadcasting of
  /// a size-1 dimension under "...").
  mlir::FailureOr<mlir::Value> einsum(llvm::StringRef equation,
                                      llvm::ArrayRef<mlir::Value> operands);

  /// A per-element loss reduced as `reduction` says: mean or sum over
  /// every axis, or as it is.
  mlir::FailureOr<mlir::Value> reduceLoss(mlir::Value per,
                                          LossReduction reduction);

  /// `x / size` where `size` is k*B, the batch size (times a static k) as a
  /// number: `loss.sum() / x.shape[0]`, kl_div's "batchmean". Only a sum
  /// over the batch dimension can be divided by it, and that is a mean over
  /// the batch of the sum over the other reduced axes (then / k), which is
  /// what each micro-batch computes as its share. Sums added or subtracted
  /// (from zeros: counts accumulated layer by layer) are divided each, and
  /// constant multiples of them (c * s, s / c, -s: a VAE's -0.5 * kl.sum())
  /// inside.
  /// Anything else is diagnosed: a graph cannot hold the batch size as data.
  mlir::FailureOr<mlir::Value> divideByBatch(mlir::Value x, SymInt size);
  /// Linear or cubic resampling along each axis in turn (the separable
  /// form torch and onnxruntime compute), each a matmul by a constant
  /// [input size, output size] weight matrix. Linear samples are clamped to
  /// [0, n - 1]; cubic (coefficient `cubicA`, torch's -0.75) reads indices
  /// clamped to the edge. Axes must be static (not the batch dimension).
  mlir::FailureOr<mlir::Value> resize(mlir::Value x,
                                      llvm::ArrayRef<ResizeAxis> axes,
                                      ResizeMode mode,
                                      ResizeCoordinates coordinates,
                                      double cubicA = -0.75);
  /// One direction of one recurrent layer over time-major x [T, B, I]
  /// (T static) from h0 (and c0 for an LSTM) [B, H], unrolled: the input
  /// projection x wIh^T + bIh as one matmul over all steps, then per step
  /// the hidden projection and the cell's gates, as torch computes them
  /// (GRU: n = tanh(x_n + r * (h wHh_n^T + bHh_n))). `reverse` runs from
  /// the last step to the first. `valid` (i1 [T, B], may be null: every
  /// step) marks the steps of each row that exist (a packed sequence's
  /// lengths): elsewhere the state passes through unchanged and the output
  /// is zero, so a row's last state is its own last step's (in reverse, the
  /// run starts at its last step), as torch's packed recurrences compute.
  mlir::FailureOr<RecurrentResult> recurrentLayer(RecurrentCell cell,
                                                  mlir::Value x,
                                                  mlir::Value h0,
                                                  mlir::Value c0,
                                                  const RecurrentWeights &w,
                                                  bool reverse,
                                                  mlir::Value valid = {});
  /// Pads `x` by pads[i] before and pads[rank + i] after dimension i
  /// (ONNX order; all >= 0) with `mode`: per padded dimension a `gather` of
  /// constant indices into the input. Padded dimensions must be static;
  /// reflect needs pads smaller than the size, wrap pads at most the size.
  mlir::FailureOr<mlir::Value> padIndexed(mlir::Value x,
                                          llvm::ArrayRef<int64_t> pads,
                                          PadMode mode);
  /// indices[..., None] == arange(depth): a boolean [..., depth] with the
  /// one-hot rows; with `negatives`, index -k also selects depth - k
  /// (ONNX OneHot). Out-of-range indices give all-false rows.
  mlir::FailureOr<mlir::Value> oneHot(mlir::Value indices, int64_t depth,
                                      bool negatives);
  /// a mod b (same element type, broadcasting): with `floorMod` the sign
  /// of b (Python's %, torch.remainder, ONNX Mod fmod=0), else the sign of a
  /// (C fmod, torch.fmod, ONNX Mod fmod=1). Integers through truncating
  /// division, floats through floor.
  mlir::FailureOr<mlir::Value> remainder(mlir::Value a, mlir::Value b,
                                         bool floorMod);
  /// A cross-entropy against class probabilities (torch's floating-point
  /// targets: mixup, distillation): per element -sum_c w_c t_c
  /// log_softmax(x)_c over the class axis 1, t smoothed to t (1 - s) + s / C
  /// first; `mean` averages over the examples and positions (weights or
  /// not, as PyTorch does), `sum` sums. `weight` may be null.
  mlir::FailureOr<mlir::Value>
  softTargetCrossEntropy(mlir::Value x, mlir::Value target, mlir::Value weight,
                         LossReduction reduction, double smoothing);
  /// torch's multi_margin_loss on scores x [N, C] (static C) and class
  /// labels [N]: per example the sum over the classes i != y of
  /// max(0, margin - x_y + x_i)^p (p = 1 or 2), times weight[y] when
  /// `weight` (1-D, C) is non-null, divided by C; `mean` averages over the
  /// examples (weights or not, as PyTorch does). Labels outside [0, C)
  /// are not checked (torch stops the run; here they read no class).
  mlir::FailureOr<mlir::Value> multiMarginLoss(mlir::Value x,
                                               mlir::Value labels, int64_t p,
                                               double margin,
                                               mlir::Value weight,
                                               LossReduction reduction);
  /// torch's multilabel_margin_loss on scores x [N, C] (static C) and
  /// targets [N, C] of class indices, each row's list ending at its first
  /// negative entry: per example the sum, over the listed classes j and
  /// the classes i not listed, of max(0, 1 - (x_j - x_i)), divided by C.
  mlir::FailureOr<mlir::Value> multilabelMarginLoss(mlir::Value x,
                                                    mlir::Value target,
                                                    LossReduction reduction);
  /// torch's ctc_loss: log-probabilities [T, N, C] (static T and C),
  /// padded targets [N, S] (static S), input and target lengths [N]; the
  /// forward (alpha) recursion over the extended labels (blank, target 0,
  /// blank, ...) unrolled over the T steps in log space, each row's
  /// recursion stopping at its input length; -log of the paths ending on
  /// the last label or the blank after it. `mean` divides each row by its
  /// target length (at least 1) and averages over the examples, as torch.
  /// A row with no path: inf, or 0 with `zeroInfinity`.
  mlir::FailureOr<mlir::Value> ctcLoss(mlir::Value logProbs,
                                       mlir::Value targets,
                                       mlir::Value inputLengths,
                                       mlir::Value targetLengths,
                                       int64_t blank, LossReduction reduction,
                                       bool zeroInfinity);
  /// nn.EmbeddingBag over bags of one size: `bags` [N, L] (integer rows
  /// of `weight` [V, D]) -> [N, D], each bag's rows summed, averaged or
  /// maxed. `perSample` ([N, L] floating point, sum only; may be null)
  /// scales each row first. Entries equal to `paddingIdx` are left out (a
  /// mean divides by the entries kept; a bag with none gives zeros, as
  /// torch) and send no gradient to that row.
  enum class BagMode { sum, mean, max };
  mlir::FailureOr<mlir::Value> embeddingBag(mlir::Value weight,
                                            mlir::Value bags, BagMode mode,
                                            mlir::Value perSample,
                                            std::optional<int64_t> paddingIdx);
  /// F.affine_grid for 2-D: theta [N, 2, 3] -> the sampling grid
  /// [N, H, W, 2] of (x, y) in [-1, 1] (pixel centers with
  /// `alignCorners` false, corner pixels' centers at +-1 with it true):
  /// a constant [H*W, 3] of (x, y, 1) times theta transposed.
  mlir::FailureOr<mlir::Value> affineGrid(mlir::Value theta, int64_t height,
                                          int64_t width, bool alignCorners);
  /// F.grid_sample for 4-D: x [N, C, H, W] (static C, H, W) sampled at
  /// grid [N, Ho, Wo, 2] (static Ho, Wo; (x, y) in [-1, 1]) -> [N, C, Ho,
  /// Wo]. Bilinear: the four neighbours gathered (gather_elements over the
  /// flattened H*W) and weighted, so gradients reach x and the grid;
  /// nearest: the rounded position (half to even, as torch). Outside the
  /// image: zeros, or with `border` the coordinates clamped to the edge.
  enum class SampleMode { bilinear, nearest };
  mlir::FailureOr<mlir::Value> gridSample(mlir::Value x, mlir::Value grid,
                                          SampleMode mode, bool border,
                                          bool alignCorners);
  /// x where x > 0, else slope * x (PReLU; slope broadcasts against x).
  mlir::FailureOr<mlir::Value> prelu(mlir::Value x, mlir::Value slope);
  /// The k largest (or smallest) values of floating-point `x` along static
  /// `axis`, sorted, and their indices (i64): each element's rank is the
  /// count of elements that beat it (greater, or equal at a lower index),
  /// and output r is the one-hot selection of rank r times x (a matmul, so
  /// the gradient reaches the picked elements). Quadratic in the axis size,
  /// which is limited to kMaxSortSize. Ties go to the lower index. Integer
  /// and bool values are ordered as f64 (exact below 2^53) and keep their
  /// type.
  static constexpr int64_t kMaxSortSize = 1024;
  mlir::FailureOr<std::pair<mlir::Value, mlir::Value>>
  topK(mlir::Value x, int64_t axis, int64_t k, bool largest);
  /// torch.scatter / scatter_add / ONNX ScatterElements along static
  /// `axis`: out = self with out[..., index[..., j], ...] = src[..., j, ...]
  /// (added to self with `add`). `index` and `src` have one shape, equal to
  /// self's except along `axis`. A one-hot [.., m, n] of the indices times
  /// src; without `add`, repeated indices add up (torch leaves which one
  /// wins undefined).
  mlir::FailureOr<mlir::Value> scatterAlong(mlir::Value self, int64_t axis,
                                            mlir::Value index, mlir::Value src,
                                            bool add);
  /// torch.scatter_reduce along static `axis`: each position of self that
  /// the index names becomes the reduction (`kind`: sum, mean, max or min)
  /// of the src elements sent to it, and of self's own value with
  /// `includeSelf`; positions no index names keep self's. (scatterAlong is
  /// sum: with self for `add`, without it otherwise.) max / min: a one-hot
  /// mask `where` src, `reduce max/min`; sum / mean: the one-hot `matmul`.
  mlir::FailureOr<mlir::Value> scatterReduce(mlir::Value self, int64_t axis,
                                             mlir::Value index, mlir::Value src,
                                             ReduceKind kind, bool includeSelf);
  /// The index (i64) of the first largest (smallest) element along static
  /// `axis`: the smallest position where x equals the reduction (argmax /
  /// argmin, max / min with indices, ONNX ArgMax / ArgMin).
  mlir::FailureOr<mlir::Value> argExtreme(mlir::Value x, int64_t axis,
                                          bool largest, bool keepdim);
  /// x[..., i_1, ..., i_k, ...]: integer index tensors at `axes` (sorted,
  /// unique; every other axis taken whole), numpy's advanced indexing
  /// (torch's aten::index with several index tensors, ONNX GatherND-like
  /// masks such as padding_mask[batch_idx, kv_idx]). The indices broadcast
  /// together to a shape S; adjacent indexed axes are replaced by S where
  /// they were, separated ones by S in front. Negative indices count from
  /// the end. The indexed axes are flattened into one and gathered at the
  /// linear index, so each indexed axis but the first must be static.
  mlir::FailureOr<mlir::Value> advancedIndex(mlir::Value x,
                                             llvm::ArrayRef<int64_t> axes,
                                             llvm::ArrayRef<mlir::Value> indices);
  /// A rank-0 constant of element type `et`.
  mlir::Value scalar(double v, mlir::Type et);
  /// A static constant of `shape` and element type `et` (floating-point,
  /// integer or i1: nonzero is true) holding `values` in row-major order.
  mlir::Value constant(llvm::ArrayRef<int64_t> shape, mlir::Type et,
                       llvm::ArrayRef<double> values);
  /// x gathered along static `axis` at the constant `indices` (flip,
  /// padding modes, negative-step slices).
  mlir::FailureOr<mlir::Value> gatherIndices(mlir::Value x, int64_t axis,
                                             llvm::ArrayRef<int64_t> indices);

private:
  template <typename OpTy>
  mlir::FailureOr<mlir::Value>
  make(mlir::ValueRange operands,
       llvm::ArrayRef<mlir::NamedAttribute> attrs = {});
  /// acc <OpTy> v, or v itself when acc is null (folding a list).
  template <typename OpTy>
  mlir::FailureOr<mlir::Value> accumulate(mlir::Value acc, mlir::Value v) {
    return acc ? make<OpTy>({acc, v}) : mlir::FailureOr<mlir::Value>(v);
  }
  mlir::FailureOr<mlir::Value> unary(UnaryKind kind, mlir::Value x);
  mlir::FailureOr<mlir::Value> reduce(ReduceKind kind, mlir::Value x,
                                      llvm::ArrayRef<int64_t> axes,
                                      bool keepdim);
  /// x reduced over all of its axes to a scalar.
  mlir::FailureOr<mlir::Value> reduceAll(ReduceKind kind, mlir::Value x);
  mlir::FailureOr<mlir::Value> times(mlir::Value x, double c);
  mlir::FailureOr<mlir::Value> plus(mlir::Value x, double c);
  mlir::FailureOr<mlir::Value> reshape(mlir::Value x,
                                       llvm::ArrayRef<SymInt> dims);
  mlir::FailureOr<mlir::Value> transpose(mlir::Value x,
                                         llvm::ArrayRef<int64_t> perm);
  /// x[start:end] along a static axis.
  mlir::FailureOr<mlir::Value> slice(mlir::Value x, int64_t axis,
                                     int64_t start, int64_t end);
  /// `x` with letters `have` summed over those not in `keep`, then
  /// transposed to `order` (letters of have that are kept).
  mlir::FailureOr<mlir::Value> arrange(mlir::Value x, std::string &have,
                                       llvm::StringRef keep);
  /// One einsum pair: a (letters la) and b (lb) -> letters `out`.
  mlir::FailureOr<mlir::Value> einsumPair(mlir::Value a, std::string la,
                                          mlir::Value b, std::string lb,
                                          llvm::StringRef out);

  mlir::OpBuilder &b;
  mlir::Location loc;
};

} // namespace varuna

#endif // VARUNA_IMPORT_DECOMPOSE_H
