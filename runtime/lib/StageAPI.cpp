//===- StageAPI.cpp - The generated code's calls, on ATen -----------------===//
//
// Thin: unwraps handles, calls the shared kernel (Kernels.h), wraps the
// result. Exceptions of any kind become stage::Error with their message.
//
//===----------------------------------------------------------------------===//

#include "varuna/runtime/StageAPI.h"
#include "varuna/runtime/Kernels.h"
#include "varuna/runtime/StageBridge.h"

#include <ATen/ATen.h>

#include <new>

namespace varuna::stage {

static_assert(sizeof(at::Tensor) == sizeof(void *),
              "stage::Tensor stores one at::Tensor in place");

namespace {
at::Tensor &T(Tensor &h) { return *static_cast<at::Tensor *>(h.storage()); }
const at::Tensor &T(const Tensor &h) {
  return *static_cast<const at::Tensor *>(h.storage());
}
Tensor wrap(at::Tensor &&t) {
  Tensor h;
  T(h) = std::move(t);
  return h;
}
c10::IntArrayRef ia(IntList l) { return c10::IntArrayRef(l.data, l.size); }
at::Generator &gen(Context &ctx) {
  if (!ctx.generator)
    throw Error("a random op ran without a generator in its context");
  return *static_cast<at::Generator *>(ctx.generator);
}

/// Runs `f`, turning any exception into stage::Error.
template <typename F> Tensor guarded(const char *op, F &&f) {
  try {
    return wrap(f());
  } catch (const Error &) {
    throw;
  } catch (const c10::Error &e) {
    throw Error(std::string(op) + ": " + e.what_without_backtrace());
  } catch (const std::exception &e) {
    throw Error(std::string(op) + ": " + e.what());
  }
}
} // namespace

Tensor fromATen(const at::Tensor &t) {
  Tensor h;
  T(h) = t;
  return h;
}
at::Tensor toATen(const Tensor &t) { return T(t); }

Tensor::Tensor() noexcept { new (storage_) at::Tensor(); }
Tensor::Tensor(const Tensor &o) { new (storage_) at::Tensor(T(o)); }
Tensor::Tensor(Tensor &&o) noexcept { new (storage_) at::Tensor(std::move(T(o))); }
Tensor &Tensor::operator=(const Tensor &o) {
  T(*this) = T(o);
  return *this;
}
Tensor &Tensor::operator=(Tensor &&o) noexcept {
  T(*this) = std::move(T(o));
  return *this;
}
Tensor::~Tensor() { T(*this).~Tensor(); }
bool Tensor::defined() const noexcept { return T(*this).defined(); }

Tensor constant_f(ElemType type, IntList shape, const double *v, int64_t n) {
  return guarded("constant", [&] { return rt::constantTensor(type, ia(shape), v, n); });
}
Tensor constant_i(ElemType type, IntList shape, const int64_t *v, int64_t n) {
  return guarded("constant", [&] { return rt::constantTensor(type, ia(shape), v, n); });
}
Tensor full_f(ElemType type, IntList shape, double value) {
  return guarded("full", [&] {
    return at::full(ia(shape), value, at::TensorOptions().dtype(rt::toATen(type)));
  });
}
Tensor full_i(ElemType type, IntList shape, int64_t value) {
  return guarded("full", [&] {
    at::Scalar s = type == ElemType::i1 ? at::Scalar(value != 0) : at::Scalar(value);
    return at::full(ia(shape), s, at::TensorOptions().dtype(rt::toATen(type)));
  });
}
Tensor arange(ElemType type, int64_t n, double start, double step) {
  return guarded("arange", [&] { return rt::arangeTensor(type, n, start, step); });
}
Tensor random(Context &ctx, ElemType type, IntList shape, Distribution dist,
              double a, double b) {
  return guarded("random", [&] {
    return rt::randomTensor(gen(ctx), type, ia(shape), dist, a, b);
  });
}

Tensor binary(Binary kind, const Tensor &a, const Tensor &b) {
  return guarded(rt::kBinaryNames[int(kind)],
                 [&] { return rt::binaryKernel(kind, T(a), T(b)); });
}
Tensor step_divide(const Tensor &sum, const Tensor &count) {
  return guarded("div", [&] { return rt::stepDivideKernel(T(sum), T(count)); });
}
Tensor compare(Compare pred, const Tensor &a, const Tensor &b) {
  return guarded("compare", [&] { return rt::compareKernel(pred, T(a), T(b)); });
}
Tensor where(const Tensor &c, const Tensor &a, const Tensor &b) {
  return guarded("where", [&] { return at::where(T(c), T(a), T(b)); });
}
Tensor unary(Unary kind, const Tensor &x) {
  return guarded(rt::kUnaryNames[int(kind)],
                 [&] { return rt::unaryKernel(kind, T(x)); });
}
Tensor cast(const Tensor &x, ElemType type) {
  return guarded("cast", [&] { return T(x).to(rt::toATen(type)); });
}
Tensor dropout(Context &ctx, const Tensor &x, double ratio) {
  return guarded("dropout", [&] { return rt::dropoutKernel(gen(ctx), T(x), ratio); });
}

Tensor reshape(const Tensor &x, IntList shape) {
  return guarded("reshape", [&] { return T(x).reshape(ia(shape)); });
}
Tensor expand(const Tensor &x, IntList shape) {
  return guarded("expand", [&] { return T(x).expand(ia(shape)); });
}
Tensor transpose(const Tensor &x, IntList perm) {
  return guarded("transpose", [&] { return T(x).permute(ia(perm)); });
}
Tensor slice(const Tensor &x, int64_t axis, int64_t start, int64_t end,
             int64_t step) {
  return guarded("slice", [&] { return rt::sliceKernel(T(x), axis, start, end, step); });
}
void split(const Tensor &x, int64_t axis, IntList sizes, Tensor *out) {
  std::vector<at::Tensor> parts;
  guarded("split", [&] {
    parts = at::split_with_sizes(T(x), ia(sizes), axis);
    return at::Tensor();
  });
  for (size_t i = 0; i < parts.size(); ++i)
    out[i] = fromATen(parts[i]);
}
Tensor concat(std::initializer_list<Tensor> xs, int64_t axis) {
  return guarded("concat", [&] {
    std::vector<at::Tensor> ts;
    ts.reserve(xs.size());
    for (const Tensor &x : xs)
      ts.push_back(T(x));
    return at::cat(ts, axis);
  });
}
Tensor gather(const Tensor &x, const Tensor &idx, int64_t axis) {
  return guarded("gather", [&] { return rt::gatherKernel(T(x), T(idx), axis); });
}
Tensor embedding(const Tensor &table, const Tensor &idx, int64_t padding_idx) {
  return guarded("embedding", [&] {
    return rt::embeddingKernel(T(table), T(idx), padding_idx);
  });
}
Tensor gather_elements(const Tensor &x, const Tensor &idx, int64_t axis) {
  return guarded("gather_elements",
                 [&] { return rt::gatherElementsKernel(T(x), T(idx), axis); });
}
Tensor scatter_nd(const Tensor &data, const Tensor &idx, const Tensor &updates) {
  return guarded("scatter_nd",
                 [&] { return rt::scatterNDKernel(T(data), T(idx), T(updates)); });
}
Tensor cumsum(const Tensor &x, int64_t axis, bool exclusive, bool reverse) {
  return guarded("cumsum",
                 [&] { return rt::cumsumKernel(T(x), axis, exclusive, reverse); });
}
Tensor linalg(Linalg kind, const Tensor &a) {
  return guarded(rt::kLinalgNames[int(kind)],
                 [&] { return rt::linalgKernel(kind, T(a), at::Tensor()); });
}
Tensor linalg(Linalg kind, const Tensor &a, const Tensor &b) {
  return guarded(rt::kLinalgNames[int(kind)],
                 [&] { return rt::linalgKernel(kind, T(a), T(b)); });
}
Tensor pad(const Tensor &x, IntList pads, double value) {
  return guarded("pad", [&] {
    at::Scalar v = at::isFloatingType(T(x).scalar_type())
                       ? at::Scalar(value)
                       : at::Scalar(static_cast<int64_t>(value));
    return rt::padKernel(T(x), ia(pads), v);
  });
}
Tensor trilu(const Tensor &x, int64_t k, bool upper) {
  return guarded("trilu", [&] { return rt::triluKernel(T(x), k, upper); });
}

Tensor reduce(Reduce kind, const Tensor &x, IntList axes, bool keepdim,
              bool step_mean) {
  return guarded(rt::kReduceNames[int(kind)], [&] {
    return rt::reduceKernel(kind, T(x), ia(axes), keepdim, step_mean);
  });
}
Tensor softmax(const Tensor &x, int64_t axis, bool log) {
  return guarded("softmax", [&] { return rt::softmaxKernel(T(x), axis, log); });
}
Tensor safe_softmax(const Tensor &x, int64_t axis) {
  return guarded("softmax", [&] {
    return rt::softmaxKernel(T(x), axis, /*log=*/false, /*safe=*/true);
  });
}
Tensor layer_norm(const Tensor &x, int64_t axis, const Tensor &weight,
                  const Tensor &bias, double epsilon) {
  return guarded("layer_norm", [&] {
    return rt::layerNormKernel(T(x), axis, T(weight), T(bias), epsilon);
  });
}
Tensor batch_norm(const Tensor &x, const Tensor &weight, const Tensor &bias,
                  const Tensor &mean, const Tensor &var, double momentum,
                  double epsilon) {
  return guarded("batch_norm", [&] {
    return rt::batchNormKernel(T(x), T(weight), T(bias), T(mean), T(var),
                               momentum, epsilon);
  });
}

Tensor matmul(const Tensor &a, const Tensor &b) {
  return guarded("matmul", [&] { return at::matmul(T(a), T(b)); });
}
Tensor attention(const Tensor &q, const Tensor &keyT, const Tensor &v,
                 const Tensor &mask, double scale) {
  return guarded("attention", [&] {
    return rt::attentionKernel(T(q), T(keyT), T(v), T(mask), scale);
  });
}
Tensor conv(const Tensor &x, const Tensor &w, const Tensor &b, IntList strides,
            IntList pads, IntList dilations, int64_t groups) {
  return guarded("conv", [&] {
    return rt::convKernel(T(x), T(w), T(b), ia(strides), ia(pads),
                          ia(dilations), groups);
  });
}
Tensor conv_transpose(const Tensor &x, const Tensor &w, const Tensor &b,
                      IntList strides, IntList pads, IntList outputPadding,
                      IntList dilations, int64_t groups) {
  return guarded("conv_transpose", [&] {
    return rt::convTransposeKernel(T(x), T(w), T(b), ia(strides), ia(pads),
                                   ia(outputPadding), ia(dilations), groups);
  });
}
Tensor pool(Pool kind, const Tensor &x, IntList kernel, IntList strides,
            IntList pads, IntList dilations, bool ceilMode,
            bool countIncludePad) {
  return guarded("pool", [&] {
    return rt::poolKernel(kind, T(x), ia(kernel), ia(strides), ia(pads),
                          ia(dilations), ceilMode, countIncludePad);
  });
}

/// Where a mean cross_entropy counts: the context's lossCount when it
/// counts, else nowhere (rt::crossEntropyKernel's `lossCount`).
static double *lossCountSink(Context &ctx) {
  return ctx.countLoss ? &ctx.lossCount : nullptr;
}

Tensor cross_entropy(Context &ctx, const Tensor &logits, const Tensor &labels,
                     LossReduction reduction, bool hasIgnore,
                     int64_t ignoreIndex, bool logInput) {
  return guarded("cross_entropy", [&] {
    return rt::crossEntropyKernel(T(logits), T(labels), reduction, hasIgnore,
                                  ignoreIndex, logInput, lossCountSink(ctx));
  });
}

Tensor cross_entropy_weighted(Context &ctx, const Tensor &logits,
                              const Tensor &labels, const Tensor &weight,
                              LossReduction reduction, bool hasIgnore,
                              int64_t ignoreIndex, bool logInput,
                              double smoothing) {
  return guarded("cross_entropy", [&] {
    return rt::crossEntropyKernel(T(logits), T(labels), reduction, hasIgnore,
                                  ignoreIndex, logInput, lossCountSink(ctx),
                                  smoothing, T(weight));
  });
}

Tensor cross_entropy_smoothed(Context &ctx, const Tensor &logits,
                              const Tensor &labels, LossReduction reduction,
                              bool hasIgnore, int64_t ignoreIndex,
                              double smoothing) {
  return guarded("cross_entropy", [&] {
    return rt::crossEntropyKernel(T(logits), T(labels), reduction, hasIgnore,
                                  ignoreIndex, /*logInput=*/false,
                                  lossCountSink(ctx), smoothing);
  });
}

} // namespace varuna::stage
