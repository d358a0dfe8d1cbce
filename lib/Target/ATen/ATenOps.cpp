//===- ATenOps.cpp - The varuna op -> ATen mapping ------------------------===//
//
// One case per varuna op, following the op descriptions in VarunaOps.td
// (training mode; computation in the graph's own dtype, as PyTorch would).
// docs/eval.md has the table; the code generator emits the same calls.
//
//===----------------------------------------------------------------------===//

#include "varuna/Target/ATen/ATenEvaluator.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/TypeSwitch.h"

#include <ATen/ATen.h>

#include <limits>

using namespace mlir;

namespace varuna {

namespace {

using Tensors = llvm::ArrayRef<at::Tensor>;

[[noreturn]] void unsupported(const std::string &what) {
  throw ATenEvalError(what);
}

VTensorType resultType(Operation *op) {
  return op->getResult(0).getType().cast<VTensorType>();
}

at::ScalarType resultDType(Operation *op) {
  Type et = resultType(op).getElementType();
  auto st = toScalarType(et);
  if (!st) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << "unsupported element type " << et;
    unsupported(os.str());
  }
  return *st;
}

std::vector<int64_t> resultShape(Operation *op, const ATenOpContext &ctx) {
  return concreteShape(resultType(op), ctx.batch);
}

at::TensorOptions resultOptions(Operation *op) {
  return at::TensorOptions().dtype(resultDType(op)).device(at::kCPU);
}

/// A scalar from a float/integer/bool attribute (full, pad values).
at::Scalar scalarFromAttr(Attribute attr) {
  if (auto f = attr.dyn_cast<FloatAttr>())
    return at::Scalar(f.getValueAsDouble());
  if (auto b = attr.dyn_cast<BoolAttr>())
    return at::Scalar(b.getValue());
  if (auto i = attr.dyn_cast<IntegerAttr>()) {
    if (i.getType().isInteger(1))
      return at::Scalar(static_cast<bool>(i.getValue().getBoolValue()));
    if (i.getType().isUnsignedInteger())
      return at::Scalar(static_cast<int64_t>(i.getValue().getZExtValue()));
    return at::Scalar(i.getValue().getSExtValue());
  }
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "unsupported value attribute " << attr;
  unsupported(os.str());
}

/// llvm::ArrayRef -> c10::IntArrayRef (same layout, different class).
c10::IntArrayRef ia(llvm::ArrayRef<int64_t> a) {
  return c10::IntArrayRef(a.data(), a.size());
}

bool isFloating(const at::Tensor &t) { return at::isFloatingType(t.scalar_type()); }

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

at::Tensor unary(UnaryKind kind, const at::Tensor &x) {
  switch (kind) {
  case UnaryKind::neg:
    return at::neg(x);
  case UnaryKind::exp:
    return at::exp(x);
  case UnaryKind::log:
    return at::log(x);
  case UnaryKind::sqrt:
    return at::sqrt(x);
  case UnaryKind::rsqrt:
    return at::rsqrt(x);
  case UnaryKind::reciprocal:
    return at::reciprocal(x);
  case UnaryKind::tanh:
    return at::tanh(x);
  case UnaryKind::erf:
    return at::erf(x);
  case UnaryKind::sigmoid:
    return at::sigmoid(x);
  case UnaryKind::relu:
    return at::relu(x);
  case UnaryKind::gelu:
    return at::gelu(x, "none");
  case UnaryKind::gelu_tanh:
    return at::gelu(x, "tanh");
  case UnaryKind::abs:
    return at::abs(x);
  case UnaryKind::logical_not:
    return at::logical_not(x);
  case UnaryKind::sin:
    return at::sin(x);
  case UnaryKind::cos:
    return at::cos(x);
  case UnaryKind::silu:
    return at::silu(x);
  case UnaryKind::softplus:
    return at::softplus(x, /*beta=*/1, /*threshold=*/20);
  case UnaryKind::floor:
    return at::floor(x);
  case UnaryKind::ceil:
    return at::ceil(x);
  }
  unsupported("unknown unary kind");
}

at::Tensor compare(ComparePredicate p, const at::Tensor &a, const at::Tensor &b) {
  switch (p) {
  case ComparePredicate::eq:
    return at::eq(a, b);
  case ComparePredicate::ne:
    return at::ne(a, b);
  case ComparePredicate::lt:
    return at::lt(a, b);
  case ComparePredicate::le:
    return at::le(a, b);
  case ComparePredicate::gt:
    return at::gt(a, b);
  case ComparePredicate::ge:
    return at::ge(a, b);
  }
  unsupported("unknown comparison predicate");
}

/// PyTorch's CPU dropout (`_dropout_impl`): input * bernoulli(1-p) / (1-p),
/// drawn from the evaluator's seeded generator.
at::Tensor dropout(const at::Tensor &x, double ratio, ATenOpContext &ctx) {
  if (ratio == 0.0)
    return x;
  if (!isFloating(x))
    unsupported("varuna.dropout of a non-float tensor");
  at::Tensor noise = at::empty_like(x, at::MemoryFormat::Contiguous)
                         .bernoulli_(1.0 - ratio, ctx.generator);
  noise.div_(1.0 - ratio);
  return x * noise;
}

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

/// ONNX Gather: index_select generalised to N-d indices; negative indices
/// count from the end of `axis`.
at::Tensor gather(const at::Tensor &x, at::Tensor idx, int64_t axis) {
  int64_t size = x.size(axis);
  if (idx.scalar_type() != at::kLong)
    idx = idx.to(at::kLong);
  idx = at::where(idx < 0, idx + size, idx);
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().begin() + axis);
  shape.insert(shape.end(), idx.sizes().begin(), idx.sizes().end());
  shape.insert(shape.end(), x.sizes().begin() + axis + 1, x.sizes().end());
  return at::index_select(x, axis, idx.reshape({-1})).reshape(shape);
}

at::Tensor gatherElements(const at::Tensor &x, at::Tensor idx, int64_t axis) {
  if (idx.scalar_type() != at::kLong)
    idx = idx.to(at::kLong);
  idx = at::where(idx < 0, idx + x.size(axis), idx);
  return at::gather(x, axis, idx);
}

/// ONNX order (all begins, then all ends) -> F.pad order (last dim first).
std::vector<int64_t> torchPadOrder(llvm::ArrayRef<int64_t> pads) {
  size_t n = pads.size() / 2;
  std::vector<int64_t> out;
  for (size_t i = n; i-- > 0;) {
    out.push_back(pads[i]);
    out.push_back(pads[n + i]);
  }
  return out;
}

at::Tensor cumsum(const at::Tensor &x, int64_t axis, bool exclusive,
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

at::Tensor reduce(ReduceKind kind, const at::Tensor &x,
                  llvm::ArrayRef<int64_t> axes, bool keepdim) {
  if (axes.empty())
    return x; // nothing to reduce (the verifier's reading of empty axes)
  std::vector<int64_t> dims(axes.begin(), axes.end());
  switch (kind) {
  case ReduceKind::sum:
    return at::sum(x, dims, keepdim, x.scalar_type());
  case ReduceKind::mean:
    return at::mean(x, dims, keepdim);
  case ReduceKind::max:
    return at::amax(x, dims, keepdim);
  case ReduceKind::min:
    return at::amin(x, dims, keepdim);
  case ReduceKind::prod: {
    at::Tensor r = x;
    for (auto it = dims.rbegin(); it != dims.rend(); ++it)
      r = at::prod(r, *it, keepdim, x.scalar_type());
    return r;
  }
  }
  unsupported("unknown reduction kind");
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

/// Splits `pads` (begins then ends of each spatial dim) into symmetric
/// padding for ATen, pre-padding `x` with `value` where begin != end.
std::vector<int64_t> prepareSpatialPads(at::Tensor &x,
                                        llvm::ArrayRef<int64_t> pads,
                                        double value, bool forcePrePad) {
  size_t n = pads.size() / 2;
  bool symmetric = true;
  for (size_t i = 0; i < n; ++i)
    symmetric &= pads[i] == pads[n + i];
  if (symmetric && !forcePrePad)
    return std::vector<int64_t>(pads.begin(), pads.begin() + n);
  bool any = llvm::any_of(pads, [](int64_t p) { return p != 0; });
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

at::Tensor conv(ConvOp op, Tensors in) {
  at::Tensor x = in[0];
  at::Tensor bias = op.getBias() ? in[2] : at::Tensor();
  std::vector<int64_t> pads =
      prepareSpatialPads(x, op.getPads(), 0.0, /*forcePrePad=*/false);
  size_t n = pads.size();
  std::vector<int64_t> outputPadding(n, 0);
  return at::convolution(x, in[1], bias, ia(op.getStrides()), pads,
                         ia(op.getDilations()), /*transposed=*/false,
                         outputPadding, static_cast<int64_t>(op.getGroups()));
}

at::Tensor pool(PoolOp op, const at::Tensor &input) {
  at::Tensor x = input;
  c10::IntArrayRef kernel = ia(op.getKernel());
  c10::IntArrayRef strides = ia(op.getStrides());
  c10::IntArrayRef dilations = ia(op.getDilations());
  auto rawPads = op.getPads();
  size_t n = kernel.size();
  if (n < 1 || n > 3)
    unsupported("varuna.pool over " + std::to_string(n) +
                " spatial dims (1 to 3 are supported)");
  // ATen wants symmetric pads of at most half the kernel.
  bool padsFit = true;
  for (size_t i = 0; i < n; ++i)
    padsFit &= rawPads[i] <= kernel[i] / 2 && rawPads[n + i] <= kernel[i] / 2;

  if (op.getKind() == PoolKind::max) {
    std::vector<int64_t> pads = prepareSpatialPads(
        x, rawPads, -std::numeric_limits<double>::infinity(), !padsFit);
    if (n == 1)
      return at::max_pool1d(x, kernel, strides, pads, dilations,
                            op.getCeilMode());
    if (n == 2)
      return at::max_pool2d(x, kernel, strides, pads, dilations,
                            op.getCeilMode());
    return at::max_pool3d(x, kernel, strides, pads, dilations,
                          op.getCeilMode());
  }

  if (llvm::any_of(dilations, [](int64_t d) { return d != 1; }))
    unsupported("varuna.pool avg with dilations != 1 (ATen's avg_pool has "
                "no dilation)");
  auto avg = [&](const at::Tensor &t, c10::IntArrayRef pads,
                 bool includePad) {
    if (n == 1)
      return at::avg_pool1d(t, kernel, strides, pads, op.getCeilMode(),
                            includePad);
    if (n == 2)
      return at::avg_pool2d(t, kernel, strides, pads, op.getCeilMode(),
                            includePad);
    return at::avg_pool3d(t, kernel, strides, pads, op.getCeilMode(),
                          includePad);
  };
  std::vector<int64_t> pads = prepareSpatialPads(x, rawPads, 0.0, !padsFit);
  bool prePadded = x.sizes() != input.sizes();
  if (!prePadded || op.getCountIncludePad())
    return avg(x, pads, op.getCountIncludePad());
  // Pre-padded and padding must not count: divide the window sums by the
  // number of real elements in each window.
  at::Tensor ones = at::ones_like(input);
  prepareSpatialPads(ones, rawPads, 0.0, /*forcePrePad=*/true);
  return avg(x, pads, true) / avg(ones, pads, true);
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

at::Tensor crossEntropy(CrossEntropyOp op, const at::Tensor &logits,
                        at::Tensor labels) {
  int64_t reduction = at::Reduction::Mean;
  switch (op.getReduction()) {
  case LossReduction::none:
    reduction = at::Reduction::None;
    break;
  case LossReduction::sum:
    reduction = at::Reduction::Sum;
    break;
  case LossReduction::mean:
    reduction = at::Reduction::Mean;
    break;
  }
  // No ignore_index attribute: no label is ignored (labels are >= 0).
  int64_t ignore = op.getIgnoreIndex()
                       ? static_cast<int64_t>(*op.getIgnoreIndex())
                       : std::numeric_limits<int64_t>::min();
  if (labels.scalar_type() != at::kLong)
    labels = labels.to(at::kLong);
  if (op.getLogInput())
    return at::nll_loss_nd(logits, labels, /*weight=*/{}, reduction, ignore);
  return at::cross_entropy_loss(logits, labels, /*weight=*/{}, reduction,
                                ignore, /*label_smoothing=*/0.0);
}

} // namespace

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

at::Tensor evaluateOp(Operation *op, Tensors in, ATenOpContext &ctx) {
  return llvm::TypeSwitch<Operation *, at::Tensor>(op)
      // Parameters and constants.
      .Case([&](GetParamOp o) {
        auto param = SymbolTable::lookupNearestSymbolFrom<ParamOp>(
            o, o.getNameAttr());
        if (!param)
          unsupported("no varuna.param named @" + o.getName().str());
        return ctx.getParam(param);
      })
      .Case([&](ConstantOp o) {
        return tensorFromElements(o.getValue(), resultDType(op));
      })
      .Case([&](FullOp o) {
        return at::full(resultShape(op, ctx), scalarFromAttr(o.getValue()),
                        resultOptions(op));
      })
      .Case([&](ArangeOp o) {
        int64_t n = resultShape(op, ctx).at(0);
        double start = o.getStart().convertToDouble();
        double step = o.getStep().convertToDouble();
        at::ScalarType dtype = resultDType(op);
        if (at::isIntegralType(dtype, /*includeBool=*/false))
          return at::arange(n, at::TensorOptions().dtype(at::kLong))
              .mul(static_cast<int64_t>(step))
              .add(static_cast<int64_t>(start))
              .to(dtype);
        return at::arange(n, at::TensorOptions().dtype(at::kDouble))
            .mul(step)
            .add(start)
            .to(dtype);
      })
      // Elementwise.
      .Case([&](AddOp) { return at::add(in[0], in[1]); })
      .Case([&](SubOp) { return at::sub(in[0], in[1]); })
      .Case([&](MulOp) { return at::mul(in[0], in[1]); })
      .Case([&](DivOp) {
        return isFloating(in[0]) ? at::div(in[0], in[1])
                                 : at::div(in[0], in[1], "trunc");
      })
      .Case([&](PowOp) { return at::pow(in[0], in[1]); })
      .Case([&](MaximumOp) { return at::maximum(in[0], in[1]); })
      .Case([&](MinimumOp) { return at::minimum(in[0], in[1]); })
      .Case([&](AndOp) { return at::logical_and(in[0], in[1]); })
      .Case([&](OrOp) { return at::logical_or(in[0], in[1]); })
      .Case([&](CompareOp o) { return compare(o.getPredicate(), in[0], in[1]); })
      .Case([&](WhereOp) { return at::where(in[0], in[1], in[2]); })
      .Case([&](UnaryOp o) { return unary(o.getKind(), in[0]); })
      .Case([&](CastOp) { return in[0].to(resultDType(op)); })
      .Case([&](DropoutOp o) {
        return dropout(in[0], o.getRatio().convertToDouble(), ctx);
      })
      .Case([&](RandomOp o) {
        at::Tensor t = at::empty(resultShape(op, ctx), resultOptions(op));
        double a = o.getA().convertToDouble(), b = o.getB().convertToDouble();
        if (o.getDistribution() == RandomDistribution::uniform)
          return t.uniform_(a, b, ctx.generator);
        return t.normal_(a, b, ctx.generator);
      })
      // Shapes.
      .Case([&](ReshapeOp) { return in[0].reshape(resultShape(op, ctx)); })
      .Case([&](ExpandOp) { return in[0].expand(resultShape(op, ctx)); })
      .Case([&](TransposeOp o) { return in[0].permute(ia(o.getPerm())); })
      .Case([&](SliceOp o) {
        int64_t axis = static_cast<int64_t>(o.getAxis());
        int64_t size = in[0].size(axis);
        int64_t start = std::clamp<int64_t>(static_cast<int64_t>(o.getStart()), 0, size);
        int64_t end = std::clamp<int64_t>(static_cast<int64_t>(o.getEnd()), 0, size);
        return at::slice(in[0], axis, start, std::max(start, end),
                         static_cast<int64_t>(o.getStep()));
      })
      .Case([&](ConcatOp o) {
        return at::cat(std::vector<at::Tensor>(in.begin(), in.end()),
                       static_cast<int64_t>(o.getAxis()));
      })
      .Case([&](GatherOp o) {
        return gather(in[0], in[1], static_cast<int64_t>(o.getAxis()));
      })
      .Case([&](ScatterNDOp) {
        // out = data.clone(); out[tuple(indices.T)] = updates
        int64_t k = in[1].size(-1);
        std::vector<std::optional<at::Tensor>> index;
        for (int64_t j = 0; j < k; ++j) {
          at::Tensor ij = in[1].select(-1, j).to(at::kLong);
          index.push_back(at::where(ij < 0, ij + in[0].size(j), ij));
        }
        c10::List<std::optional<at::Tensor>> list;
        for (auto &t : index)
          list.push_back(t);
        return at::index_put(in[0], list, in[2]);
      })
      .Case([&](GatherElementsOp o) {
        return gatherElements(in[0], in[1], static_cast<int64_t>(o.getAxis()));
      })
      .Case([&](CumsumOp o) {
        return cumsum(in[0], static_cast<int64_t>(o.getAxis()),
                      o.getExclusive(), o.getReverse());
      })
      .Case([&](PadOp o) {
        return at::constant_pad_nd(in[0], torchPadOrder(o.getPads()),
                                   scalarFromAttr(o.getValue()));
      })
      .Case([&](TriluOp o) {
        int64_t k = static_cast<int64_t>(o.getK());
        return o.getUpper() ? at::triu(in[0], k) : at::tril(in[0], k);
      })
      // Reductions and normalization.
      .Case([&](ReduceOp o) {
        return reduce(o.getKind(), in[0], o.getAxes(), o.getKeepdim());
      })
      .Case([&](SoftmaxOp o) {
        int64_t axis = static_cast<int64_t>(o.getAxis());
        return o.getLog() ? at::log_softmax(in[0], axis)
                          : at::softmax(in[0], axis);
      })
      .Case([&](LayerNormOp o) {
        int64_t axis = static_cast<int64_t>(o.getAxis());
        std::vector<int64_t> normalized(in[0].sizes().begin() + axis,
                                        in[0].sizes().end());
        size_t next = 1;
        at::Tensor weight = o.getWeight() ? in[next++] : at::Tensor();
        at::Tensor bias = o.getBias() ? in[next++] : at::Tensor();
        return at::layer_norm(in[0], normalized, weight, bias,
                              o.getEpsilon().convertToDouble());
      })
      .Case([&](BatchNormOp o) {
        bool running = static_cast<bool>(o.getRunningMean());
        at::Tensor mean = running ? in[3] : at::Tensor();
        at::Tensor var = running ? in[4] : at::Tensor();
        // training=true: batch statistics; running stats updated in place.
        return at::batch_norm(in[0], in[1], in[2], mean, var,
                              /*training=*/true,
                              o.getMomentum().convertToDouble(),
                              o.getEpsilon().convertToDouble(),
                              /*cudnn_enabled=*/false);
      })
      // Linear algebra, convolution, losses.
      .Case([&](MatmulOp) { return at::matmul(in[0], in[1]); })
      .Case([&](ConvOp o) { return conv(o, in); })
      .Case([&](PoolOp o) { return pool(o, in[0]); })
      .Case([&](CrossEntropyOp o) { return crossEntropy(o, in[0], in[1]); })
      .Default([&](Operation *) -> at::Tensor {
        unsupported("op '" + op->getName().getStringRef().str() +
                    "' is not supported by the ATen evaluator");
      });
}

} // namespace varuna
