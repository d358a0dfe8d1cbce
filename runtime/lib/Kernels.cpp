//===- Kernels.cpp - The ATen implementation of every varuna op -----------===//
//
// docs/eval.md has the op -> ATen table. Keep each kernel a faithful reading
// of the op's description in VarunaOps.td: the evaluator and generated code
// both call these.
//
//===----------------------------------------------------------------------===//

#include "varuna/runtime/Kernels.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <string>

namespace varuna::rt {

namespace {
[[noreturn]] void unsupported(const std::string &what) {
  throw KernelError(what);
}
bool isFloating(const at::Tensor &t) { return at::isFloatingType(t.scalar_type()); }

/// ONNX order (all begins, then all ends) -> F.pad order (last dim first).
std::vector<int64_t> torchPadOrder(c10::IntArrayRef pads) {
  size_t n = pads.size() / 2;
  std::vector<int64_t> out;
  for (size_t i = n; i-- > 0;) {
    out.push_back(pads[i]);
    out.push_back(pads[n + i]);
  }
  return out;
}

/// Splits `pads` (begins then ends of each spatial dim) into symmetric
/// padding for ATen, pre-padding `x` with `value` where begin != end.
std::vector<int64_t> prepareSpatialPads(at::Tensor &x, c10::IntArrayRef pads,
                                        double value, bool forcePrePad) {
  size_t n = pads.size() / 2;
  bool symmetric = true;
  for (size_t i = 0; i < n; ++i)
    symmetric &= pads[i] == pads[n + i];
  if (symmetric && !forcePrePad)
    return std::vector<int64_t>(pads.begin(), pads.begin() + n);
  bool any = std::any_of(pads.begin(), pads.end(),
                         [](int64_t p) { return p != 0; });
  if (any) {
    // Pad only the spatial dims (leading N, C get zeros).
    std::vector<int64_t> onnx(2 * (n + 2), 0);
    for (size_t i = 0; i < n; ++i) {
      onnx[2 + i] = pads[i];
      onnx[(n + 2) + 2 + i] = pads[n + i];
    }
    x = at::constant_pad_nd(x, torchPadOrder(onnx), value);
  }
  return std::vector<int64_t>(n, 0);
}
} // namespace

at::ScalarType toATen(ElemType t) {
  switch (t) {
  case ElemType::f16: return at::kHalf;
  case ElemType::bf16: return at::kBFloat16;
  case ElemType::f32: return at::kFloat;
  case ElemType::f64: return at::kDouble;
  case ElemType::i1: return at::kBool;
  case ElemType::i8: return at::kChar;
  case ElemType::u8: return at::kByte;
  case ElemType::i32: return at::kInt;
  case ElemType::i64: return at::kLong;
  }
  unsupported("unknown element type");
}

static at::Tensor fromValues(at::ScalarType valueType, ElemType type,
                             c10::IntArrayRef shape, const void *values,
                             int64_t n) {
  at::TensorOptions opts = at::TensorOptions().dtype(toATen(type));
  int64_t numel = 1;
  for (int64_t d : shape)
    numel *= d;
  if (n == 1 && numel != 1) {
    at::Scalar v = valueType == at::kDouble
                       ? at::Scalar(*static_cast<const double *>(values))
                       : at::Scalar(*static_cast<const int64_t *>(values));
    // As the element-wise conversion below: value -> double/long -> type.
    at::Tensor one = at::scalar_tensor(v, at::TensorOptions().dtype(valueType))
                         .to(toATen(type));
    return one.expand(shape).clone();
  }
  if (n != numel)
    unsupported("constant with " + std::to_string(n) + " values for " +
                std::to_string(numel) + " elements");
  return at::from_blob(const_cast<void *>(values), shape,
                       at::TensorOptions().dtype(valueType))
      .to(opts.dtype())
      .clone();
}

at::Tensor constantTensor(ElemType type, c10::IntArrayRef shape,
                          const double *values, int64_t n) {
  return fromValues(at::kDouble, type, shape, values, n);
}
at::Tensor constantTensor(ElemType type, c10::IntArrayRef shape,
                          const int64_t *values, int64_t n) {
  return fromValues(at::kLong, type, shape, values, n);
}

at::Tensor arangeTensor(ElemType type, int64_t n, double start, double step) {
  at::ScalarType dtype = toATen(type);
  if (at::isIntegralType(dtype, /*includeBool=*/false))
    return at::arange(n, at::TensorOptions().dtype(at::kLong))
        .mul(static_cast<int64_t>(step))
        .add(static_cast<int64_t>(start))
        .to(dtype);
  return at::arange(n, at::TensorOptions().dtype(at::kDouble))
      .mul(step)
      .add(start)
      .to(dtype);
}

at::Tensor linalgKernel(Linalg kind, const at::Tensor &a, const at::Tensor &b) {
  switch (kind) {
  case Linalg::inv: return at::linalg_inv(a);
  case Linalg::det: return at::linalg_det(a);
  case Linalg::logabsdet: return std::get<1>(at::linalg_slogdet(a));
  case Linalg::cholesky: return at::linalg_cholesky(a);
  case Linalg::solve:
    if (b.dim() == a.dim() - 1) // one right-hand side per matrix
      return at::linalg_solve(a, b.unsqueeze(-1)).squeeze(-1);
    return at::linalg_solve(a, b);
  }
  throw std::runtime_error("unknown linalg kind");
}

at::Tensor randomTensor(at::Generator &gen, ElemType type,
                        c10::IntArrayRef shape, Distribution dist, double a,
                        double b) {
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(toATen(type)));
  if (dist == Distribution::uniform)
    return t.uniform_(a, b, gen);
  return t.normal_(a, b, gen);
}

at::Tensor binaryKernel(Binary kind, const at::Tensor &a, const at::Tensor &b) {
  switch (kind) {
  case Binary::add: return at::add(a, b);
  case Binary::sub: return at::sub(a, b);
  case Binary::mul: return at::mul(a, b);
  case Binary::div:
    return isFloating(a) ? at::div(a, b) : at::div(a, b, "trunc");
  case Binary::pow: return at::pow(a, b);
  case Binary::maximum: return at::maximum(a, b);
  case Binary::minimum: return at::minimum(a, b);
  case Binary::logical_and: return at::logical_and(a, b);
  case Binary::logical_or: return at::logical_or(a, b);
  }
  unsupported("unknown binary op");
}

at::Tensor unaryKernel(Unary kind, const at::Tensor &x) {
  switch (kind) {
  case Unary::neg: return at::neg(x);
  case Unary::exp: return at::exp(x);
  case Unary::log: return at::log(x);
  case Unary::sqrt: return at::sqrt(x);
  case Unary::rsqrt: return at::rsqrt(x);
  case Unary::reciprocal: return at::reciprocal(x);
  case Unary::tanh: return at::tanh(x);
  case Unary::erf: return at::erf(x);
  case Unary::sigmoid: return at::sigmoid(x);
  case Unary::relu: return at::relu(x);
  case Unary::gelu: return at::gelu(x, "none");
  case Unary::gelu_tanh: return at::gelu(x, "tanh");
  case Unary::abs: return at::abs(x);
  case Unary::logical_not: return at::logical_not(x);
  case Unary::sin: return at::sin(x);
  case Unary::cos: return at::cos(x);
  case Unary::silu: return at::silu(x);
  case Unary::softplus: return at::softplus(x, /*beta=*/1, /*threshold=*/20);
  case Unary::floor: return at::floor(x);
  case Unary::ceil: return at::ceil(x);
  case Unary::tan: return at::tan(x);
  case Unary::atan: return at::atan(x);
  case Unary::asin: return at::asin(x);
  case Unary::acos: return at::acos(x);
  case Unary::sinh: return at::sinh(x);
  case Unary::cosh: return at::cosh(x);
  case Unary::sign: return at::sign(x);
  case Unary::round: return at::round(x);
  case Unary::trunc: return at::trunc(x);
  case Unary::expm1: return at::expm1(x);
  case Unary::log1p: return at::log1p(x);
  case Unary::lgamma: return at::lgamma(x);
  case Unary::digamma: return at::digamma(x);
  case Unary::erfinv: return at::erfinv(x);
  case Unary::erfc: return at::erfc(x);
  case Unary::stop_gradient: return x.detach();
  }
  unsupported("unknown unary kind");
}

at::Tensor compareKernel(Compare p, const at::Tensor &a, const at::Tensor &b) {
  switch (p) {
  case Compare::eq: return at::eq(a, b);
  case Compare::ne: return at::ne(a, b);
  case Compare::lt: return at::lt(a, b);
  case Compare::le: return at::le(a, b);
  case Compare::gt: return at::gt(a, b);
  case Compare::ge: return at::ge(a, b);
  }
  unsupported("unknown comparison predicate");
}

namespace {
thread_local bool evaluating = false;
} // namespace

Evaluating::Evaluating() : previous(evaluating) { evaluating = true; }
Evaluating::~Evaluating() { evaluating = previous; }

at::Tensor dropoutKernel(at::Generator &gen, const at::Tensor &x, double ratio) {
  if (ratio == 0.0 || evaluating)
    return x;
  if (!isFloating(x))
    unsupported("varuna.dropout of a non-float tensor");
  at::Tensor noise = at::empty_like(x, at::MemoryFormat::Contiguous)
                         .bernoulli_(1.0 - ratio, gen);
  noise.div_(1.0 - ratio);
  return x * noise;
}

at::Tensor sliceKernel(const at::Tensor &x, int64_t axis, int64_t start,
                       int64_t end, int64_t step) {
  int64_t size = x.size(axis);
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, 0, size);
  return at::slice(x, axis, start, std::max(start, end), step);
}

namespace {
/// Indices as i64 with negative ones counted from the end of `size`.
at::Tensor wrappedIndices(at::Tensor idx, int64_t size) {
  if (idx.scalar_type() != at::kLong)
    idx = idx.to(at::kLong);
  return at::where(idx < 0, idx + size, idx);
}
} // namespace

at::Tensor gatherKernel(const at::Tensor &x, at::Tensor idx, int64_t axis) {
  idx = wrappedIndices(std::move(idx), x.size(axis));
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().begin() + axis);
  shape.insert(shape.end(), idx.sizes().begin(), idx.sizes().end());
  shape.insert(shape.end(), x.sizes().begin() + axis + 1, x.sizes().end());
  return at::index_select(x, axis, idx.reshape({-1})).reshape(shape);
}

at::Tensor embeddingKernel(const at::Tensor &table, at::Tensor idx,
                           int64_t paddingIdx) {
  int64_t rows = table.size(0);
  idx = wrappedIndices(std::move(idx), rows);
  std::vector<int64_t> shape(idx.sizes().begin(), idx.sizes().end());
  shape.insert(shape.end(), table.sizes().begin() + 1, table.sizes().end());
  return at::embedding(table.reshape({rows, -1}), idx, paddingIdx)
      .reshape(shape);
}

at::Tensor gatherElementsKernel(const at::Tensor &x, at::Tensor idx,
                                int64_t axis) {
  return at::gather(x, axis, wrappedIndices(std::move(idx), x.size(axis)));
}

at::Tensor scatterNDKernel(const at::Tensor &data, const at::Tensor &idx,
                           const at::Tensor &updates) {
  int64_t k = idx.size(-1);
  c10::List<std::optional<at::Tensor>> list;
  for (int64_t j = 0; j < k; ++j) {
    at::Tensor ij = idx.select(-1, j).to(at::kLong);
    list.push_back(at::where(ij < 0, ij + data.size(j), ij));
  }
  return at::index_put(data, list, updates);
}

at::Tensor cumsumKernel(const at::Tensor &x, int64_t axis, bool exclusive,
                        bool reverse) {
  at::Tensor in = reverse ? at::flip(x, {axis}) : x;
  at::Tensor out = at::cumsum(in, axis, x.scalar_type());
  if (exclusive) {
    // Shift by one: [0, s0, s0+s1, ...] (exact, unlike out - in).
    int64_t n = out.size(axis);
    at::Tensor head = at::zeros_like(at::narrow(out, axis, 0, n > 0 ? 1 : 0));
    out = at::cat({head, at::narrow(out, axis, 0, std::max<int64_t>(n - 1, 0))},
                  axis);
  }
  return reverse ? at::flip(out, {axis}) : out;
}

at::Tensor padKernel(const at::Tensor &x, c10::IntArrayRef pads,
                     const at::Scalar &value) {
  return at::constant_pad_nd(x, torchPadOrder(pads), value);
}

at::Tensor triluKernel(const at::Tensor &x, int64_t k, bool upper) {
  return upper ? at::triu(x, k) : at::tril(x, k);
}

at::Tensor reduceKernel(Reduce kind, const at::Tensor &x,
                        c10::IntArrayRef axes, bool keepdim, bool stepMean) {
  if (axes.empty())
    return x; // nothing to reduce (the verifier's reading of empty axes)
  std::vector<int64_t> dims(axes.begin(), axes.end());
  switch (kind) {
  case Reduce::sum: return at::sum(x, dims, keepdim, x.scalar_type());
  case Reduce::mean:
    if (LossDenominators *scope = stepMean ? LossDenominators::current()
                                           : nullptr)
      return at::sum(x, dims, keepdim) / scope->take();
    return at::mean(x, dims, keepdim);
  case Reduce::max: return at::amax(x, dims, keepdim);
  case Reduce::min: return at::amin(x, dims, keepdim);
  case Reduce::prod: {
    at::Tensor r = x;
    for (auto it = dims.rbegin(); it != dims.rend(); ++it)
      r = at::prod(r, *it, keepdim, x.scalar_type());
    return r;
  }
  }
  unsupported("unknown reduction kind");
}

at::Tensor stepDivideKernel(const at::Tensor &sum, const at::Tensor &count) {
  if (LossDenominators *scope = LossDenominators::current())
    return sum / scope->take();
  return at::div(sum, count);
}

at::Tensor softmaxKernel(const at::Tensor &x, int64_t axis, bool log,
                         bool safe) {
  if (log)
    return at::log_softmax(x, axis);
  return safe ? at::_safe_softmax(x, axis) : at::softmax(x, axis);
}

at::Tensor layerNormKernel(const at::Tensor &x, int64_t axis,
                           const at::Tensor &weight, const at::Tensor &bias,
                           double epsilon) {
  std::vector<int64_t> normalized(x.sizes().begin() + axis, x.sizes().end());
  return at::layer_norm(x, normalized, weight, bias, epsilon);
}

namespace {
thread_local bool keepRunningStats = false;
} // namespace

KeepRunningStats::KeepRunningStats() : previous(keepRunningStats) {
  keepRunningStats = true;
}
KeepRunningStats::~KeepRunningStats() { keepRunningStats = previous; }

at::Tensor batchNormKernel(const at::Tensor &x, const at::Tensor &weight,
                           const at::Tensor &bias, const at::Tensor &mean,
                           const at::Tensor &var, double momentum,
                           double epsilon) {
  // Evaluation mode: the running statistics (without any -- PyTorch's
  // track_running_stats=False -- the batch's, as in PyTorch).
  if (evaluating && mean.defined() && var.defined())
    return at::batch_norm(x, weight, bias, mean, var, /*training=*/false,
                          momentum, epsilon, /*cudnn_enabled=*/false);
  if (evaluating)
    return at::batch_norm(x, weight, bias, at::Tensor(), at::Tensor(),
                          /*training=*/true, momentum, epsilon,
                          /*cudnn_enabled=*/false);
  // training=true: batch statistics; running stats updated in place (the
  // output does not depend on them, so leaving them out changes nothing
  // else).
  if (keepRunningStats)
    return at::batch_norm(x, weight, bias, at::Tensor(), at::Tensor(),
                          /*training=*/true, momentum, epsilon,
                          /*cudnn_enabled=*/false);
  return at::batch_norm(x, weight, bias, mean, var, /*training=*/true,
                        momentum, epsilon, /*cudnn_enabled=*/false);
}

at::Tensor attentionKernel(const at::Tensor &q, const at::Tensor &keyT,
                           const at::Tensor &v, const at::Tensor &mask,
                           double scale) {
  std::optional<at::Tensor> m;
  if (mask.defined())
    m = mask;
  return at::scaled_dot_product_attention(q, keyT.transpose(-2, -1), v, m,
                                          /*dropout_p=*/0.0,
                                          /*is_causal=*/false, scale);
}

at::Tensor convKernel(const at::Tensor &input, const at::Tensor &w,
                      const at::Tensor &b, c10::IntArrayRef strides,
                      c10::IntArrayRef rawPads, c10::IntArrayRef dilations,
                      int64_t groups) {
  at::Tensor x = input;
  std::vector<int64_t> pads =
      prepareSpatialPads(x, rawPads, 0.0, /*forcePrePad=*/false);
  std::vector<int64_t> outputPadding(pads.size(), 0);
  return at::convolution(x, w, b, strides, pads, dilations,
                         /*transposed=*/false, outputPadding, groups);
}

at::Tensor convTransposeKernel(const at::Tensor &x, const at::Tensor &w,
                               const at::Tensor &b, c10::IntArrayRef strides,
                               c10::IntArrayRef pads,
                               c10::IntArrayRef outputPadding,
                               c10::IntArrayRef dilations, int64_t groups) {
  return at::convolution(x, w, b, strides, pads, dilations,
                         /*transposed=*/true, outputPadding, groups);
}

at::Tensor poolKernel(Pool kind, const at::Tensor &input,
                      c10::IntArrayRef kernel, c10::IntArrayRef strides,
                      c10::IntArrayRef rawPads, c10::IntArrayRef dilations,
                      bool ceilMode, bool countIncludePad) {
  at::Tensor x = input;
  size_t n = kernel.size();
  if (n < 1 || n > 3)
    unsupported("varuna.pool over " + std::to_string(n) +
                " spatial dims (1 to 3 are supported)");
  // ATen wants symmetric pads of at most half the kernel.
  bool padsFit = true;
  for (size_t i = 0; i < n; ++i)
    padsFit &= rawPads[i] <= kernel[i] / 2 && rawPads[n + i] <= kernel[i] / 2;

  if (kind == Pool::max) {
    std::vector<int64_t> pads = prepareSpatialPads(
        x, rawPads, -std::numeric_limits<double>::infinity(), !padsFit);
    if (n == 1)
      return at::max_pool1d(x, kernel, strides, pads, dilations, ceilMode);
    if (n == 2)
      return at::max_pool2d(x, kernel, strides, pads, dilations, ceilMode);
    return at::max_pool3d(x, kernel, strides, pads, dilations, ceilMode);
  }

  if (std::any_of(dilations.begin(), dilations.end(),
                  [](int64_t d) { return d != 1; }))
    unsupported("varuna.pool avg with dilations != 1 (ATen's avg_pool has "
                "no dilation)");
  auto avg = [&](const at::Tensor &t, c10::IntArrayRef pads, bool includePad) {
    if (n == 1)
      return at::avg_pool1d(t, kernel, strides, pads, ceilMode, includePad);
    if (n == 2)
      return at::avg_pool2d(t, kernel, strides, pads, ceilMode, includePad);
    return at::avg_pool3d(t, kernel, strides, pads, ceilMode, includePad);
  };
  std::vector<int64_t> pads = prepareSpatialPads(x, rawPads, 0.0, !padsFit);
  bool prePadded = x.sizes() != input.sizes();
  if (!prePadded || countIncludePad)
    return avg(x, pads, countIncludePad);
  // Pre-padded and padding must not count: divide the window sums by the
  // number of real elements in each window.
  at::Tensor ones = at::ones_like(input);
  prepareSpatialPads(ones, rawPads, 0.0, /*forcePrePad=*/true);
  return avg(x, pads, true) / avg(ones, pads, true);
}

double crossEntropyCount(const at::Tensor &labels, bool hasIgnore,
                         int64_t ignoreIndex, const at::Tensor &weight) {
  at::Tensor kept = hasIgnore ? labels.ne(ignoreIndex)
                              : at::ones_like(labels, at::kBool);
  if (!weight.defined())
    return double(kept.sum().item<int64_t>());
  // weight[label] where kept (an ignored label may lie outside the classes)
  at::Tensor safe = at::where(kept, labels, at::zeros_like(labels));
  at::Tensor w = weight.detach().index_select(0, safe.reshape(-1).to(at::kLong));
  return (w * kept.reshape(-1).to(w.scalar_type())).sum().item<double>();
}

at::Tensor crossEntropyKernel(const at::Tensor &logits, at::Tensor labels,
                              LossReduction reduction, bool hasIgnore,
                              int64_t ignoreIndex, bool logInput,
                              double *lossCount, double labelSmoothing,
                              const at::Tensor &weight) {
  int64_t r = at::Reduction::Mean;
  switch (reduction) {
  case LossReduction::none: r = at::Reduction::None; break;
  case LossReduction::sum: r = at::Reduction::Sum; break;
  case LossReduction::mean: r = at::Reduction::Mean; break;
  }
  // No ignore_index: no label is ignored (labels are >= 0).
  int64_t ignore =
      hasIgnore ? ignoreIndex : std::numeric_limits<int64_t>::min();
  if (labels.scalar_type() != at::kLong)
    labels = labels.to(at::kLong);
  // A mean divided by a denominator other than its own count: the sum
  // (over the labels not ignored, smoothing included) divided by it.
  std::optional<double> denominator;
  if (reduction == LossReduction::mean) {
    if (LossDenominators *scope = LossDenominators::current()) {
      denominator = scope->take();
    } else if (lossCount) {
      *lossCount = crossEntropyCount(labels, hasIgnore, ignoreIndex, weight);
      if (*lossCount == 0) // weighed by 0: its sum, 0, not 0/0
        denominator = 1.0;
    }
    if (denominator)
      r = at::Reduction::Sum;
  }
  at::Tensor w = weight.defined() && weight.scalar_type() != logits.scalar_type()
                     ? weight.to(logits.scalar_type())
                     : weight;
  at::Tensor loss =
      logInput ? at::nll_loss_nd(logits, labels, w, r, ignore)
               : at::cross_entropy_loss(logits, labels, w, r, ignore,
                                        labelSmoothing);
  return denominator ? loss / *denominator : loss;
}

namespace {
thread_local LossDenominators *lossDenominators = nullptr;
} // namespace

LossDenominators::LossDenominators(std::vector<double> denominators)
    : values(std::move(denominators)), previous(lossDenominators) {
  lossDenominators = this;
}
LossDenominators::~LossDenominators() { lossDenominators = previous; }
LossDenominators *LossDenominators::current() { return lossDenominators; }
double LossDenominators::take() {
  if (next == values.size())
    throw std::runtime_error(
        "more means over the examples (mean cross_entropies, step_mean "
        "reduces, step divisors) ran than the step counted for (" +
        std::to_string(values.size()) + ")");
  return values[next++];
}

} // namespace varuna::rt
