//===- ONNXNNImporters.cpp - Neural-network ONNX ops ----------------------===//
//
// MatMul, Gemm, softmax, reductions, normalization, convolution, pooling,
// dropout and losses. All operate on runtime tensors.
//
//===----------------------------------------------------------------------===//

#include "KnownValue.h"
#include "ONNXOpImporters.h"
#include "varuna/Import/Decompose.h"
#include "llvm/ADT/StringExtras.h"

#include <limits>
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace varuna;
using namespace varuna::onnx_import;

namespace {

/// Fails if optional output `i` (`what`) is consumed: the importer computes
/// only the main result.
LogicalResult rejectUsedOutput(NodeContext &nc, size_t i, StringRef what) {
  if (nc.outputUsed(i))
    return nc.error("its output " + Twine(i) + " (" + what +
                    ") is used, which is not supported");
  return success();
}

FailureOr<Value> scalarConstant(NodeContext &nc, Type et, double v) {
  KnownTensor t = et.isa<FloatType>()
                      ? KnownTensor::ofFloats(et, {}, {v})
                      : KnownTensor::ofInts(et, {}, {SymInt(int64_t(v))});
  return nc.importer.materialize(t, nc.loc);
}

LogicalResult importMatMul(NodeContext &nc) {
  auto a = nc.runtime(0), b = nc.runtime(1);
  if (failed(a) || failed(b))
    return failure();
  return setResult(nc, nc.create<MatmulOp>(*a, *b));
}

/// Y = alpha * A' B' + beta * C (A' = A^T if transA, B' = B^T if transB).
LogicalResult importGemm(NodeContext &nc) {
  auto a = nc.runtime(0), b = nc.runtime(1);
  if (failed(a) || failed(b))
    return failure();
  Value x = *a, w = *b;
  if (typeOf(x).getRank() != 2 || typeOf(w).getRank() != 2)
    return nc.error("Gemm operands must be 2-D");
  if (nc.intAttr("transA").value_or(0)) {
    auto t = nc.create<TransposeOp>(x, ArrayRef<int64_t>{1, 0});
    if (failed(t))
      return failure();
    x = *t;
  }
  if (nc.intAttr("transB").value_or(0)) {
    auto t = nc.create<TransposeOp>(w, ArrayRef<int64_t>{1, 0});
    if (failed(t))
      return failure();
    w = *t;
  }
  auto y = nc.create<MatmulOp>(x, w);
  if (failed(y))
    return failure();
  Type et = typeOf(*y).getElementType();
  float alpha = nc.floatAttr("alpha").value_or(1.0f);
  float beta = nc.floatAttr("beta").value_or(1.0f);
  if (alpha != 1.0f) {
    auto s = scalarConstant(nc, et, alpha);
    if (failed(s) || failed(y = nc.create<MulOp>(*y, *s)))
      return failure();
  }
  if (nc.hasInput(2) && beta != 0.0f) {
    auto c = nc.runtime(2);
    if (failed(c))
      return failure();
    Value cv = *c;
    if (beta != 1.0f) {
      auto s = scalarConstant(nc, et, beta);
      if (failed(s))
        return failure();
      auto m = nc.create<MulOp>(cv, *s);
      if (failed(m))
        return failure();
      cv = *m;
    }
    y = nc.create<AddOp>(*y, cv);
  }
  return setResult(nc, y);
}

LogicalResult importSoftmax(NodeContext &nc) {
  auto v = nc.runtime(0);
  if (failed(v))
    return failure();
  int64_t axis = nc.normalizeAxis(nc.intAttr("axis").value_or(-1),
                                  typeOf(*v).getRank());
  bool log = nc.node.op_type() == "LogSoftmax";
  return setResult(nc, nc.create<SoftmaxOp>(*v, axis, log));
}

LogicalResult importReduce(NodeContext &nc) {
  StringRef op = nc.node.op_type();
  ReduceKind kind = llvm::StringSwitch<ReduceKind>(op)
                        .Case("ReduceSum", ReduceKind::sum)
                        .Case("ReduceMean", ReduceKind::mean)
                        .Case("ReduceMax", ReduceKind::max)
                        .Case("ReduceMin", ReduceKind::min)
                        .Default(ReduceKind::prod);
  auto v = nc.runtime(0);
  if (failed(v))
    return failure();
  int64_t rank = typeOf(*v).getRank();
  std::vector<int64_t> axes;
  if (nc.hasInput(1)) {
    auto s = staticIntsInput(nc, 1, "axes");
    if (failed(s))
      return failure();
    axes = *s;
  } else if (auto a = nc.intsAttr("axes")) {
    axes = *a;
  }
  if (axes.empty()) {
    if (nc.intAttr("noop_with_empty_axes").value_or(0)) {
      nc.setOutput(0, *v);
      return success();
    }
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  }
  for (int64_t &a : axes) {
    a = nc.normalizeAxis(a, rank);
    if (a < 0 || a >= rank)
      return nc.error("axis out of range for rank " + Twine(rank));
  }
  llvm::sort(axes);
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  bool keep = nc.intAttr("keepdims").value_or(1) != 0;
  if (op == "ReduceLogSumExp" || op == "ReduceL1" || op == "ReduceL2") {
    if (!typeOf(*v).getElementType().isa<FloatType>())
      return nc.error("expected a floating-point input");
    Decomposer d(nc.b(), nc.loc);
    return setResult(nc, op == "ReduceLogSumExp"
                             ? d.logSumExp(*v, axes, keep)
                             : d.vectorNorm(*v, op == "ReduceL1" ? 1.0 : 2.0,
                                            axes, keep));
  }
  return setResult(nc, nc.create<ReduceOp>(kind, *v, axes, keep));
}

/// Einsum: Decomposer::einsum (shared with the TorchScript importer).
LogicalResult importEinsum(NodeContext &nc) {
  std::optional<std::string> eq = nc.stringAttr("equation");
  if (!eq)
    return nc.error("missing attribute 'equation'");
  SmallVector<Value> operands;
  for (int i = 0; i < nc.node.input_size(); ++i) {
    auto v = nc.runtime(i);
    if (failed(v))
      return failure();
    operands.push_back(*v);
  }
  return setResult(nc, Decomposer(nc.b(), nc.loc).einsum(*eq, operands));
}

/// Activations without a varuna.unary kind, built by the Decomposer shared
/// with the TorchScript importer; ONNX's attribute defaults.
LogicalResult importActivation(NodeContext &nc) {
  StringRef op = nc.node.op_type();
  auto v = nc.runtime(0);
  if (failed(v))
    return failure();
  if (!typeOf(*v).getElementType().isa<FloatType>())
    return nc.error("expected a floating-point input");
  Decomposer d(nc.b(), nc.loc);
  auto alpha = [&](double dflt) { return nc.floatAttr("alpha").value_or(dflt); };
  if (op == "Selu") {
    // torch's constants are the defaults; others are not supported.
    double a = alpha(1.67326319217681884765625),
           g = nc.floatAttr("gamma").value_or(1.05070102214813232421875);
    if (std::abs(a - 1.6732632423543772) > 1e-6 ||
        std::abs(g - 1.0507009873554805) > 1e-6)
      return nc.error("Selu with alpha " + std::to_string(a) + " and gamma " +
                      std::to_string(g) +
                      " is not supported (only the standard constants)");
    return setResult(nc, d.activation(Activation::selu, *v));
  }
  std::optional<Activation> kind =
      llvm::StringSwitch<std::optional<Activation>>(op)
          .Case("Mish", Activation::mish)
          .Case("HardSwish", Activation::hardswish)
          .Case("HardSigmoid", Activation::hardsigmoid)
          .Case("Elu", Activation::elu)
          .Case("Celu", Activation::celu)
          .Case("LeakyRelu", Activation::leaky_relu)
          .Case("Softsign", Activation::softsign)
          .Default(std::nullopt);
  if (!kind)
    return nc.error("unsupported activation");
  double a = *kind == Activation::hardsigmoid ? alpha(0.2)
             : *kind == Activation::leaky_relu ? alpha(0.01)
                                               : alpha(1.0);
  double beta = nc.floatAttr("beta").value_or(0.5);
  return setResult(nc, d.activation(*kind, *v, a, beta));
}

LogicalResult importLayerNorm(NodeContext &nc) {
  if (failed(rejectUsedOutput(nc, 1, "mean")) ||
      failed(rejectUsedOutput(nc, 2, "inverse standard deviation")))
    return failure();
  auto x = nc.runtime(0);
  if (failed(x))
    return failure();
  Value w, b;
  if (nc.hasInput(1)) {
    auto r = nc.runtime(1);
    if (failed(r))
      return failure();
    w = *r;
  }
  if (nc.hasInput(2)) {
    auto r = nc.runtime(2);
    if (failed(r))
      return failure();
    b = *r;
  }
  int64_t axis = nc.normalizeAxis(nc.intAttr("axis").value_or(-1),
                                  typeOf(*x).getRank());
  double eps = nc.floatAttr("epsilon").value_or(1e-5f);
  return setResult(nc, nc.create<LayerNormOp>(*x, w, b, nc.b().getI64IntegerAttr(axis),
                                              nc.b().getF64FloatAttr(eps)));
}

/// BatchNormalization in inference mode (training_mode = 0: a batch norm
/// the user put in eval mode inside a training model, a frozen batch norm
/// of fine-tuning): (x - mean) * rsqrt(var + eps) * scale + B with the
/// running statistics as they are (never updated), scale and B trained.
LogicalResult importFrozenBatchNorm(NodeContext &nc) {
  if (!nc.hasInput(3) || !nc.hasInput(4))
    return nc.error("batch normalization in inference mode without its "
                    "mean and variance inputs");
  SmallVector<Value> in;
  for (size_t i = 0; i < 5; ++i) {
    auto v = nc.runtime(i);
    if (failed(v))
      return failure();
    in.push_back(*v);
  }
  VTensorType t = typeOf(in[0]);
  int64_t rank = t.getRank();
  if (rank < 2 || !t.getDim(1).isStatic())
    return nc.error("input must be [N, C, ...] with a static C");
  SmallVector<SymInt> cdims{t.getDim(1)};
  for (int64_t i = 2; i < rank; ++i)
    cdims.push_back(1);
  SmallVector<Value> c; // scale, B, mean, var as [C, 1, ...]
  for (size_t i = 1; i < 5; ++i) {
    auto v = reshapeTo(nc, in[i], cdims);
    if (failed(v))
      return failure();
    c.push_back(*v);
  }
  auto epsC = scalarConstant(nc, typeOf(c[3]).getElementType(),
                             nc.floatAttr("epsilon").value_or(1e-5f));
  if (failed(epsC))
    return failure();
  auto shifted = nc.create<AddOp>(c[3], *epsC);
  if (failed(shifted))
    return failure();
  Value inv = nc.b().create<UnaryOp>(nc.loc, typeOf(*shifted),
                                     UnaryKind::rsqrt, *shifted);
  auto factor = nc.create<MulOp>(inv, c[0]);
  auto centered = nc.create<SubOp>(in[0], c[2]);
  if (failed(factor) || failed(centered))
    return failure();
  auto scaled = nc.create<MulOp>(*centered, *factor);
  if (failed(scaled))
    return failure();
  return setResult(nc, nc.create<AddOp>(*scaled, c[1]));
}

LogicalResult importBatchNorm(NodeContext &nc) {
  if (!nc.intAttr("training_mode").value_or(0))
    return importFrozenBatchNorm(nc);
  // Running statistics are the model's buffers (initializers) when it has
  // them. Computed or constant ones (torch exports F.batch_norm(w, None,
  // None, training=True) -- BiT's weight standardization -- with means of
  // the input as input_mean / input_var and momentum 1) only feed running
  // outputs nothing keeps: the op normalizes without them.
  bool stats = nc.hasInput(3) && nc.hasInput(4) && nc.input(3).isParam() &&
               nc.input(4).isParam();
  SmallVector<Value> in;
  for (size_t i = 0; i < (stats ? 5u : 3u); ++i) {
    auto v = nc.runtime(i);
    if (failed(v))
      return failure();
    in.push_back(*v);
  }
  double eps = nc.floatAttr("epsilon").value_or(1e-5f);
  // ONNX: running = running * momentum + batch * (1 - momentum); the op
  // stores the weight of the new statistics (PyTorch's convention).
  double momentum = 1.0 - nc.floatAttr("momentum").value_or(0.9f);
  Value none;
  return setResult(nc, nc.create<BatchNormOp>(
                           in[0], in[1], in[2], stats ? in[3] : none,
                           stats ? in[4] : none, nc.b().getF64FloatAttr(eps),
                           nc.b().getF64FloatAttr(momentum)));
}

/// InstanceNormalization (also what GroupNorm with one group exports to):
/// per (N, C), normalize over the spatial dims; decomposed into reductions
/// and elementwise ops.
LogicalResult importInstanceNorm(NodeContext &nc) {
  auto x = nc.runtime(0), scale = nc.runtime(1), bias = nc.runtime(2);
  if (failed(x) || failed(scale) || failed(bias))
    return failure();
  VTensorType t = typeOf(*x);
  int64_t rank = t.getRank();
  if (rank < 3 || !t.getDim(1).isStatic())
    return nc.error("input must be [N, C, spatial...] with a static C");
  std::vector<int64_t> axes;
  for (int64_t i = 2; i < rank; ++i)
    axes.push_back(i);
  Type et = t.getElementType();
  double eps = nc.floatAttr("epsilon").value_or(1e-5f);
  auto mean = nc.create<ReduceOp>(ReduceKind::mean, *x, axes, true);
  if (failed(mean))
    return failure();
  auto d = nc.create<SubOp>(*x, *mean);
  if (failed(d))
    return failure();
  auto sq = nc.create<MulOp>(*d, *d);
  if (failed(sq))
    return failure();
  auto var = nc.create<ReduceOp>(ReduceKind::mean, *sq, axes, true);
  auto epsC = scalarConstant(nc, et, eps);
  if (failed(var) || failed(epsC))
    return failure();
  auto shifted = nc.create<AddOp>(*var, *epsC);
  if (failed(shifted))
    return failure();
  Value inv = nc.b().create<UnaryOp>(nc.loc, typeOf(*shifted),
                                     UnaryKind::rsqrt, *shifted);
  auto y = nc.create<MulOp>(*d, inv);
  if (failed(y))
    return failure();
  // scale and bias [C] -> [C, 1, ...] to broadcast over the spatial dims.
  SmallVector<SymInt> cdims{t.getDim(1)};
  for (int64_t i = 2; i < rank; ++i)
    cdims.push_back(1);
  auto s4 = reshapeTo(nc, *scale, cdims), b4 = reshapeTo(nc, *bias, cdims);
  if (failed(s4) || failed(b4))
    return failure();
  auto scaled = nc.create<MulOp>(*y, *s4);
  if (failed(scaled))
    return failure();
  return setResult(nc, nc.create<AddOp>(*scaled, *b4));
}

/// Pads for auto_pad (SAME_UPPER / SAME_LOWER / VALID) or the `pads` attr.
FailureOr<std::vector<int64_t>>
windowPads(NodeContext &nc, VTensorType in, ArrayRef<int64_t> kernel,
           ArrayRef<int64_t> strides, ArrayRef<int64_t> dilations) {
  size_t n = kernel.size();
  std::string autoPad = nc.stringAttr("auto_pad").value_or("NOTSET");
  std::vector<int64_t> pads(2 * n, 0);
  if (autoPad == "NOTSET") {
    if (auto p = nc.intsAttr("pads")) {
      if (p->size() != 2 * n)
        return nc.error("expected " + Twine(2 * n) + " pads");
      pads = *p;
    }
    return pads;
  }
  if (autoPad == "VALID")
    return pads;
  if (autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER")
    return nc.error("unknown auto_pad '" + autoPad + "'");
  for (size_t i = 0; i < n; ++i) {
    int64_t size = in.getShape()[i + 2];
    int64_t out = (size + strides[i] - 1) / strides[i];
    int64_t total = std::max<int64_t>(
        0, (out - 1) * strides[i] + dilations[i] * (kernel[i] - 1) + 1 - size);
    int64_t small = total / 2, big = total - small;
    pads[i] = autoPad == "SAME_UPPER" ? small : big;
    pads[i + n] = autoPad == "SAME_UPPER" ? big : small;
  }
  return pads;
}

/// The input, weight and optional bias of Conv / ConvTranspose, with the
/// number of spatial dimensions.
struct ConvOperands {
  Value x, w, b;
  VTensorType in, wt;
  size_t spatial;
};

FailureOr<ConvOperands> convOperands(NodeContext &nc) {
  auto x = nc.runtime(0), w = nc.runtime(1);
  if (failed(x) || failed(w))
    return failure();
  ConvOperands c{*x, *w, Value(), typeOf(*x), typeOf(*w), 0};
  if (c.in.getRank() < 3 || c.wt.getRank() != c.in.getRank())
    return nc.error("input and weight must have the same rank >= 3");
  c.spatial = c.in.getRank() - 2;
  if (nc.hasInput(2)) {
    auto r = nc.runtime(2);
    if (failed(r))
      return failure();
    c.b = *r;
  }
  return c;
}

LogicalResult importConv(NodeContext &nc) {
  auto c = convOperands(nc);
  if (failed(c))
    return failure();
  size_t n = c->spatial;
  std::vector<int64_t> kernel(c->wt.getShape().begin() + 2,
                              c->wt.getShape().end());
  std::vector<int64_t> strides =
      nc.intsAttr("strides").value_or(std::vector<int64_t>(n, 1));
  std::vector<int64_t> dil =
      nc.intsAttr("dilations").value_or(std::vector<int64_t>(n, 1));
  if (strides.size() != n || dil.size() != n)
    return nc.error("strides/dilations do not match the spatial rank");
  auto pads = windowPads(nc, c->in, kernel, strides, dil);
  if (failed(pads))
    return failure();
  int64_t groups = nc.intAttr("group").value_or(1);
  return setResult(nc, nc.create<ConvOp>(c->x, c->w, c->b, strides, *pads,
                                         dil, groups));
}

/// ConvTranspose with explicit, symmetric pads (what torch exports);
/// auto_pad and output_shape are refused.
LogicalResult importConvTranspose(NodeContext &nc) {
  auto c = convOperands(nc);
  if (failed(c))
    return failure();
  size_t n = c->spatial;
  if (nc.stringAttr("auto_pad").value_or("NOTSET") != "NOTSET" ||
      nc.intsAttr("output_shape"))
    return nc.error("auto_pad and output_shape are not supported (give pads "
                    "and output_padding)");
  auto attr = [&](StringRef name, int64_t dflt, size_t count) {
    return nc.intsAttr(name).value_or(std::vector<int64_t>(count, dflt));
  };
  std::vector<int64_t> strides = attr("strides", 1, n),
                       dil = attr("dilations", 1, n),
                       outPad = attr("output_padding", 0, n),
                       pads = attr("pads", 0, 2 * n);
  if (strides.size() != n || dil.size() != n || outPad.size() != n ||
      pads.size() != 2 * n)
    return nc.error("strides/dilations/output_padding/pads do not match the "
                    "spatial rank");
  std::vector<int64_t> symmetric;
  for (size_t i = 0; i < n; ++i) {
    if (pads[i] != pads[i + n])
      return nc.error("asymmetric pads are not supported");
    symmetric.push_back(pads[i]);
  }
  int64_t groups = nc.intAttr("group").value_or(1);
  return setResult(nc, nc.create<ConvTransposeOp>(c->x, c->w, c->b, strides,
                                                  symmetric, outPad, dil,
                                                  groups));
}

LogicalResult importPool(NodeContext &nc) {
  StringRef op = nc.node.op_type();
  if (failed(rejectUsedOutput(nc, 1, "indices")))
    return failure();
  auto x = nc.runtime(0);
  if (failed(x))
    return failure();
  VTensorType in = typeOf(*x);
  if (in.getRank() < 3)
    return nc.error("input must be [N, C, spatial...]");
  size_t n = in.getRank() - 2;
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") {
    std::vector<int64_t> axes;
    for (size_t i = 0; i < n; ++i)
      axes.push_back(i + 2);
    ReduceKind kind =
        op == "GlobalAveragePool" ? ReduceKind::mean : ReduceKind::max;
    return setResult(nc, nc.create<ReduceOp>(kind, *x, axes, true));
  }
  auto kernel = nc.intsAttr("kernel_shape");
  if (!kernel || kernel->size() != n)
    return nc.error("missing or wrong kernel_shape");
  std::vector<int64_t> strides =
      nc.intsAttr("strides").value_or(std::vector<int64_t>(n, 1));
  std::vector<int64_t> dil =
      nc.intsAttr("dilations").value_or(std::vector<int64_t>(n, 1));
  if (strides.size() != n || dil.size() != n)
    return nc.error("strides/dilations do not match the spatial rank");
  auto pads = windowPads(nc, in, *kernel, strides, dil);
  if (failed(pads))
    return failure();
  bool ceil = nc.intAttr("ceil_mode").value_or(0) != 0;
  bool countPad = nc.intAttr("count_include_pad").value_or(0) != 0;
  PoolKind kind = op == "MaxPool" ? PoolKind::max : PoolKind::avg;
  return setResult(nc, nc.create<PoolOp>(kind, *x, *kernel, strides, *pads,
                                         dil, ceil, countPad));
}

LogicalResult importDropout(NodeContext &nc) {
  if (failed(rejectUsedOutput(nc, 1, "mask")))
    return failure();
  auto x = nc.runtime(0);
  if (failed(x))
    return failure();
  double ratio = 0.5;
  if (nc.hasInput(1)) {
    auto r = nc.knownInput(1, "ratio");
    if (failed(r))
      return failure();
    ratio = r->floatAt(0);
  }
  bool training = false;
  if (nc.hasInput(2)) {
    auto t = nc.knownInput(2, "training_mode");
    if (failed(t))
      return failure();
    training = t->intAt(0).constant != 0;
  }
  if (!training || ratio == 0.0) {
    nc.setOutput(0, *x);
    return success();
  }
  if (!(ratio > 0.0 && ratio < 1.0))
    return nc.error("dropout ratio " + std::to_string(ratio) + " is not in [0, 1)");
  nc.setOutput(0, nc.b()
                      .create<DropoutOp>(nc.loc, typeOf(*x), *x,
                                         nc.b().getF64FloatAttr(ratio))
                      .getResult());
  return success();
}

LogicalResult importLoss(NodeContext &nc) {
  bool nll = nc.node.op_type() == "NegativeLogLikelihoodLoss";
  if (!nll && failed(rejectUsedOutput(nc, 1, "log_prob")))
    return failure();
  auto x = nc.runtime(0), y = nc.runtime(1);
  if (failed(x) || failed(y))
    return failure();
  std::string red = nc.stringAttr("reduction").value_or("mean");
  auto reduction = llvm::StringSwitch<std::optional<LossReduction>>(red)
                       .Case("mean", LossReduction::mean)
                       .Case("sum", LossReduction::sum)
                       .Case("none", LossReduction::none)
                       .Default(std::nullopt);
  if (!reduction)
    return nc.error("unknown reduction '" + red + "'");
  IntegerAttr ignore;
  if (auto i = nc.intAttr("ignore_index"))
    ignore = nc.b().getI64IntegerAttr(*i);
  // Floating-point labels: class probabilities. Outside the ONNX spec, which
  // wants integer labels, but what torch exports for
  // F.cross_entropy(logits, probabilities).
  if (!nll && typeOf(*y).getElementType().isa<FloatType>()) {
    Value w;
    if (nc.hasInput(2)) {
      auto wv = nc.runtime(2);
      if (failed(wv))
        return failure();
      w = *wv;
    }
    return setResult(nc, Decomposer(nc.b(), nc.loc)
                             .softTargetCrossEntropy(*x, *y, w, *reduction,
                                                     /*smoothing=*/0.0));
  }
  Value weight; // class weights
  if (nc.hasInput(2)) {
    auto w = nc.runtime(2);
    if (failed(w))
      return failure();
    weight = *w;
  }
  return setResult(nc, nc.create<CrossEntropyOp>(
                           *x, *y, weight,
                           LossReductionAttr::get(nc.ctx(), *reduction), ignore,
                           nll ? nc.b().getUnitAttr() : UnitAttr(),
                           FloatAttr()));
}

} // namespace

/// ArgMax / ArgMin along `axis` (keepdims): the first extreme
/// (Decomposer::argExtreme); select_last_index is refused.
static LogicalResult importArgExtreme(NodeContext &nc) {
  auto x = nc.runtime(0);
  if (failed(x))
    return failure();
  if (nc.intAttr("select_last_index").value_or(0) != 0)
    return nc.error("select_last_index = 1 is not supported");
  int64_t rank = typeOf(*x).getRank();
  int64_t axis = nc.normalizeAxis(nc.intAttr("axis").value_or(0), rank);
  if (axis < 0 || axis >= rank)
    return nc.error("axis out of range");
  return setResult(nc, Decomposer(nc.b(), nc.loc)
                           .argExtreme(*x, axis, nc.node.op_type() == "ArgMax",
                                       nc.intAttr("keepdims").value_or(1) != 0));
}

/// IsNaN (x != x) and IsInf (x == +inf / -inf, per detect_positive /
/// detect_negative).
static LogicalResult importIsSpecial(NodeContext &nc) {
  auto x = nc.runtime(0);
  if (failed(x))
    return failure();
  Type et = typeOf(*x).getElementType();
  auto cmp = [&](ComparePredicate p, Value a, Value b) {
    return nc.create<CompareOp>(p, a, b);
  };
  if (nc.node.op_type() == "IsNaN")
    return setResult(nc, cmp(ComparePredicate::ne, *x, *x));
  Decomposer d(nc.b(), nc.loc);
  double inf = std::numeric_limits<double>::infinity();
  bool pos = nc.intAttr("detect_positive").value_or(1) != 0;
  bool neg = nc.intAttr("detect_negative").value_or(1) != 0;
  auto p = cmp(ComparePredicate::eq, *x, d.scalar(inf, et));
  auto q = cmp(ComparePredicate::eq, *x, d.scalar(-inf, et));
  if (failed(p) || failed(q))
    return failure();
  if (pos && neg)
    return setResult(nc, nc.create<OrOp>(*p, *q));
  if (pos || neg)
    return setResult(nc, pos ? *p : *q);
  return setResult(nc, nc.create<AndOp>(*p, *q)); // never both: all false
}

/// TopK(X, K) along `axis`, largest or smallest, always sorted
/// (Decomposer::topK: ties to the lower index).
static LogicalResult importTopK(NodeContext &nc) {
  auto x = nc.runtime(0);
  auto kk = staticIntsInput(nc, 1, "K");
  if (failed(x) || failed(kk))
    return failure();
  if (kk->size() != 1)
    return nc.error("K must be one number");
  int64_t rank = typeOf(*x).getRank();
  int64_t axis = nc.normalizeAxis(nc.intAttr("axis").value_or(-1), rank);
  if (axis < 0 || axis >= rank)
    return nc.error("axis out of range");
  auto r = Decomposer(nc.b(), nc.loc)
               .topK(*x, axis, (*kk)[0], nc.intAttr("largest").value_or(1) != 0);
  if (failed(r))
    return failure();
  nc.setOutput(0, r->first);
  nc.setOutput(1, r->second);
  return success();
}

/// ScatterElements(data, indices, updates) along `axis`, reduction none or
/// add (Decomposer::scatterAlong).
static LogicalResult importScatterElements(NodeContext &nc) {
  auto data = nc.runtime(0), idx = nc.runtime(1), upd = nc.runtime(2);
  if (failed(data) || failed(idx) || failed(upd))
    return failure();
  std::string reduction = nc.stringAttr("reduction").value_or("none");
  if (reduction != "none" && reduction != "add")
    return nc.error("reduction '" + reduction +
                    "' is not supported (none and add are)");
  int64_t rank = typeOf(*data).getRank();
  int64_t axis = nc.normalizeAxis(nc.intAttr("axis").value_or(0), rank);
  return setResult(nc, Decomposer(nc.b(), nc.loc)
                           .scatterAlong(*data, axis, *idx, *upd,
                                         reduction == "add"));
}

/// OneHot(indices, depth, values [off, on], axis): where(indices ==
/// arange(depth) (negative indices counted from the end), on, off), the new
/// axis moved to `axis`.
static LogicalResult importOneHot(NodeContext &nc) {
  auto ids = nc.runtime(0);
  auto depthK = nc.knownInput(1, "depth");
  auto values = nc.runtime(2);
  if (failed(ids) || failed(depthK) || failed(values))
    return failure();
  if (depthK->numel() != 1 || !depthK->intAt(0).isStatic() ||
      (depthK->isFloat() && depthK->floatAt(0) != std::floor(depthK->floatAt(0))))
    return nc.error("depth must be one fixed integer");
  int64_t depth = depthK->isFloat() ? static_cast<int64_t>(depthK->floatAt(0))
                                    : depthK->intAt(0).constant;
  Value idx = *ids;
  if (!typeOf(idx).getElementType().isa<IntegerType>())
    idx = nc.b().create<CastOp>(
        nc.loc, typeOf(idx).withElementType(nc.b().getI64Type()), idx);
  auto hit = Decomposer(nc.b(), nc.loc).oneHot(idx, depth, true);
  if (failed(hit))
    return failure();
  if (typeOf(*values).getNumElements() != SymInt(2))
    return nc.error("values must hold two elements [off, on]");
  auto off = nc.create<SliceOp>(*values, int64_t(0), int64_t(0), int64_t(1), int64_t(1));
  auto on = nc.create<SliceOp>(*values, int64_t(0), int64_t(1), int64_t(2), int64_t(1));
  if (failed(off) || failed(on))
    return failure();
  auto r = nc.create<WhereOp>(*hit, *on, *off);
  if (failed(r))
    return failure();
  int64_t rank = typeOf(*r).getRank();
  int64_t axis = nc.normalizeAxis(nc.intAttr("axis").value_or(-1), rank);
  if (axis < 0 || axis >= rank)
    return nc.error("axis out of range");
  if (axis == rank - 1)
    return setResult(nc, *r);
  SmallVector<int64_t> perm;
  for (int64_t i = 0; i < rank - 1; ++i) {
    if (i == axis)
      perm.push_back(rank - 1);
    perm.push_back(i);
  }
  return setResult(nc, nc.create<TransposeOp>(*r, ArrayRef<int64_t>(perm)));
}

/// LSTM / GRU / RNN (what torch exports for nn.LSTM, nn.GRU, nn.RNN): per
/// direction, the weights reordered to torch's gate order (ONNX LSTM i o f
/// c -> i f c o, GRU z r h -> r z h) and the layer unrolled
/// (Decomposer::recurrentLayer). Y [T, D, B, H], Y_h and Y_c [D, B, H].
/// Refused with the reason: sequence_lens, peepholes, clip, input_forget,
/// activations other than the defaults (RNN: Tanh or Relu), GRU with
/// linear_before_reset = 0, the batch-major layout 1 (onnxruntime does not
/// run it either).
static LogicalResult importRecurrent(NodeContext &nc) {
  StringRef op = nc.node.op_type();
  RecurrentCell cell = op == "LSTM"  ? RecurrentCell::lstm
                       : op == "GRU" ? RecurrentCell::gru
                                     : RecurrentCell::rnnTanh;
  int64_t gates = op == "LSTM" ? 4 : op == "GRU" ? 3 : 1;
  SmallVector<int64_t> order = op == "LSTM"  ? SmallVector<int64_t>{0, 2, 3, 1}
                               : op == "GRU" ? SmallVector<int64_t>{1, 0, 2}
                                             : SmallVector<int64_t>{0};
  std::vector<std::string> acts;
  for (const auto &a : nc.node.attribute())
    if (a.name() == "activations")
      acts.assign(a.strings().begin(), a.strings().end());
  std::vector<std::string> defaults =
      op == "LSTM"  ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
      : op == "GRU" ? std::vector<std::string>{"Sigmoid", "Tanh"}
                    : std::vector<std::string>{"Tanh"};
  std::string direction = nc.stringAttr("direction").value_or("forward");
  int64_t dirs = direction == "bidirectional" ? 2 : 1;
  if (op == "RNN" && !acts.empty() &&
      llvm::all_of(acts, [](const std::string &a) { return a == "Relu"; }))
    cell = RecurrentCell::rnnRelu;
  else if (!acts.empty()) {
    std::vector<std::string> want;
    for (int64_t k = 0; k < dirs; ++k)
      want.insert(want.end(), defaults.begin(), defaults.end());
    if (acts != want && acts != defaults)
      return nc.error("activations other than the defaults (" +
                      llvm::join(defaults, ", ") + ") are not supported");
  }
  if (direction != "forward" && direction != "reverse" &&
      direction != "bidirectional")
    return nc.error("unknown direction '" + direction + "'");
  if (nc.floatAttr("clip"))
    return nc.error("clip is not supported");
  if (nc.intAttr("input_forget").value_or(0) != 0)
    return nc.error("input_forget is not supported");
  if (op == "GRU" && nc.intAttr("linear_before_reset").value_or(0) == 0)
    return nc.error("linear_before_reset = 0 is not supported (torch's "
                    "GRU, exported with 1, is)");
  if (nc.hasInput(4))
    return nc.error("sequence_lens is not supported; pass padded sequences");
  if (nc.hasInput(7))
    return nc.error("peepholes (input P) are not supported");
  auto x = nc.runtime(0), w = nc.runtime(1), r = nc.runtime(2);
  if (failed(x) || failed(w) || failed(r))
    return failure();
  Value seq = *x;
  if (nc.intAttr("layout").value_or(0) != 0)
    return nc.error("the batch-major layout 1 is not supported (torch "
                    "exports layout 0, transposing batch_first inputs)");
  SmallVector<SymInt> xd = typeOf(seq).getDims();
  auto hidden = nc.intAttr("hidden_size");
  if (!hidden || xd.size() != 3)
    return nc.error("expected hidden_size and an input of rank 3");
  SymInt batch = xd[1];
  // Row block k of a [D, G*H, n] (or [D, n]) input for direction d, the
  // gates put in torch's order.
  auto part = [&](Value all, int64_t d, int64_t offset) -> FailureOr<Value> {
    auto one = nc.create<SliceOp>(all, int64_t(0), d, d + 1, int64_t(1));
    if (failed(one))
      return failure();
    SmallVector<SymInt> dims = typeOf(*one).getDims();
    dims.erase(dims.begin());
    auto flat = reshapeTo(nc, *one, dims);
    if (failed(flat))
      return failure();
    SmallVector<Value> blocks;
    for (int64_t g : order) {
      int64_t start = offset + g * *hidden;
      auto blk = nc.create<SliceOp>(*flat, int64_t(0), start, start + *hidden,
                                    int64_t(1));
      if (failed(blk))
        return failure();
      blocks.push_back(*blk);
    }
    if (blocks.size() == 1)
      return blocks[0];
    return nc.create<ConcatOp>(ValueRange(blocks), int64_t(0));
  };
  // The initial state of direction d: [B, H] (zeros when not given).
  auto initial = [&](size_t input, int64_t d) -> FailureOr<Value> {
    if (!nc.hasInput(input)) {
      Type et = typeOf(seq).getElementType();
      VTensorType t = VTensorType::getFromDims(nc.ctx(), {batch, SymInt(*hidden)}, et);
      return nc.b().create<FullOp>(nc.loc, t, nc.b().getFloatAttr(et, 0.0))
          .getResult();
    }
    auto all = nc.runtime(input);
    if (failed(all))
      return failure();
    auto one = nc.create<SliceOp>(*all, int64_t(0), d, d + 1, int64_t(1));
    return failed(one) ? one : reshapeTo(nc, *one, {batch, SymInt(*hidden)});
  };
  FailureOr<Value> bias = nc.hasInput(3) ? nc.runtime(3) : FailureOr<Value>(Value());
  if (failed(bias))
    return failure();
  Decomposer dec(nc.b(), nc.loc);
  SmallVector<Value> ys, hs, cs;
  for (int64_t d = 0; d < dirs; ++d) {
    RecurrentWeights wts;
    auto wi = part(*w, d, 0), wh = part(*r, d, 0);
    if (failed(wi) || failed(wh))
      return failure();
    wts.wIh = *wi;
    wts.wHh = *wh;
    if (*bias) {
      auto bi = part(*bias, d, 0), bh = part(*bias, d, gates * *hidden);
      if (failed(bi) || failed(bh))
        return failure();
      wts.bIh = *bi;
      wts.bHh = *bh;
    }
    auto h0 = initial(5, d);
    FailureOr<Value> c0 = op == "LSTM" ? initial(6, d) : FailureOr<Value>(Value());
    if (failed(h0) || failed(c0))
      return failure();
    bool reverse = direction == "reverse" || d == 1;
    auto res = dec.recurrentLayer(cell, seq, *h0, *c0, wts, reverse);
    if (failed(res))
      return failure();
    SmallVector<SymInt> od = typeOf(res->outputs).getDims();
    auto y = reshapeTo(nc, res->outputs, {od[0], SymInt(1), od[1], od[2]});
    auto h = reshapeTo(nc, res->h, {SymInt(1), batch, SymInt(*hidden)});
    if (failed(y) || failed(h))
      return failure();
    ys.push_back(*y);
    hs.push_back(*h);
    if (op == "LSTM") {
      auto c = reshapeTo(nc, res->c, {SymInt(1), batch, SymInt(*hidden)});
      if (failed(c))
        return failure();
      cs.push_back(*c);
    }
  }
  auto join = [&](ArrayRef<Value> vs, int64_t axis) -> FailureOr<Value> {
    if (vs.size() == 1)
      return vs[0];
    return nc.create<ConcatOp>(ValueRange(vs), axis);
  };
  auto y = join(ys, 1), h = join(hs, 0);
  if (failed(y) || failed(h))
    return failure();
  nc.setOutput(0, *y);
  nc.setOutput(1, *h);
  if (op == "LSTM") {
    auto c = join(cs, 0);
    if (failed(c))
      return failure();
    nc.setOutput(2, *c);
  }
  return success();
}

OpImporter onnx_import::lookupNNOpImporter(StringRef op) {
  return llvm::StringSwitch<OpImporter>(op)
      .Case("MatMul", importMatMul)
      .Case("Gemm", importGemm)
      .Cases("Softmax", "LogSoftmax", importSoftmax)
      .Cases("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", importReduce)
      .Cases("ReduceProd", "ReduceLogSumExp", "ReduceL1", "ReduceL2",
             importReduce)
      .Cases("Mish", "HardSwish", "HardSigmoid", "Elu", "Celu", "Selu",
             importActivation)
      .Cases("LeakyRelu", "Softsign", importActivation)
      .Case("Einsum", importEinsum)
      .Cases("LSTM", "GRU", "RNN", importRecurrent)
      .Case("OneHot", importOneHot)
      .Case("TopK", importTopK)
      .Cases("ArgMax", "ArgMin", importArgExtreme)
      .Cases("IsNaN", "IsInf", importIsSpecial)
      .Case("ScatterElements", importScatterElements)
      .Case("LayerNormalization", importLayerNorm)
      .Case("BatchNormalization", importBatchNorm)
      .Case("InstanceNormalization", importInstanceNorm)
      .Case("Conv", importConv)
      .Case("ConvTranspose", importConvTranspose)
      .Cases("MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool",
             importPool)
      .Case("Dropout", importDropout)
      .Cases("SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss",
             importLoss)
      .Default(nullptr);
}
