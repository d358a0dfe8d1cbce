//===- ONNXOpImporters.cpp - Elementwise and shape ONNX ops ---------------===//
//
// One function per ONNX op (or family). Ops whose inputs are all known are
// evaluated (shape arithmetic); otherwise they become varuna ops. The
// neural-network ops (MatMul, Conv, normalization, losses, ...) are in
// ONNXNNImporters.cpp.
//
//===----------------------------------------------------------------------===//

#include "ONNXOpImporters.h"
#include "KnownValue.h"
#include "varuna/Import/Decompose.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace varuna;
using namespace varuna::onnx_import;

VTensorType onnx_import::typeOf(Value v) { return v.getType().cast<VTensorType>(); }

std::string onnx_import::dimsStr(ArrayRef<SymInt> dims) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(dims))
    s += (i ? ", " : "") + d.str();
  return s + "]";
}

FailureOr<std::vector<int64_t>>
onnx_import::staticInts(NodeContext &nc, const KnownTensor &t, StringRef what) {
  std::vector<int64_t> out;
  for (int64_t i = 0, n = t.numel(); i < n; ++i) {
    SymInt v = t.intAt(i);
    if (!v.isStatic())
      return nc.error(Twine(what) + " depends on the batch size (" + v.str() +
                      "); it must be a fixed number");
    out.push_back(v.constant);
  }
  return out;
}

FailureOr<std::vector<int64_t>>
onnx_import::staticIntsInput(NodeContext &nc, size_t i, StringRef what) {
  auto k = nc.knownInput(i, what);
  if (failed(k))
    return failure();
  return staticInts(nc, *k, what);
}

FailureOr<Value> onnx_import::reshapeTo(NodeContext &nc, Value v,
                                        ArrayRef<SymInt> dims) {
  VTensorType in = typeOf(v);
  VTensorType out =
      VTensorType::getFromDims(nc.ctx(), dims, in.getElementType());
  if (!out)
    return nc.error("target shape " + dimsStr(dims) +
                    " is not a valid shape (negative sizes, or more than one "
                    "dimension depending on the batch size)");
  if (in.getNumElements() != out.getNumElements()) {
    if (in.isBatched() && !out.isBatched())
      return nc.error("reshapes " + dimsStr(in.getDims()) +
                      " (whose size depends on the batch size B) to the "
                      "fixed shape " + dimsStr(dims) +
                      ": the exported model baked its example batch size "
                      "into this shape. Re-export with a dynamic batch axis "
                      "and shapes computed from x.shape (varuna.export)");
    return nc.error("cannot reshape " + dimsStr(in.getDims()) + " to " +
                    dimsStr(dims) + ": element counts differ");
  }
  if (out == in)
    return v;
  return nc.b().create<ReshapeOp>(nc.loc, out, v).getResult();
}

//===----------------------------------------------------------------------===//
// Constants and shapes
//===----------------------------------------------------------------------===//

static LogicalResult importConstant(NodeContext &nc) {
  if (auto *a = nc.attr("value")) {
    Type et = convertElementType(nc.ctx(), a->t().data_type());
    if (!et)
      return nc.error(Twine("constant of unsupported type ") +
                      onnxTypeName(a->t().data_type()));
    InitializerData d;
    d.proto = &a->t();
    auto known = nc.importer.file().readKnown(d, et, nc.loc);
    if (failed(known))
      return failure();
    nc.setOutput(0, std::move(*known));
    return success();
  }
  Builder b(nc.ctx());
  if (auto f = nc.floatAttr("value_float")) {
    nc.setOutput(0, KnownTensor::ofFloats(b.getF32Type(), {}, {*f}));
    return success();
  }
  if (auto i = nc.intAttr("value_int")) {
    nc.setOutput(0, KnownTensor::ofInts(b.getI64Type(), {}, {SymInt(*i)}));
    return success();
  }
  if (auto *a = nc.attr("value_floats")) {
    std::vector<double> v(a->floats().begin(), a->floats().end());
    nc.setOutput(0, KnownTensor::ofFloats(b.getF32Type(),
                                          {int64_t(v.size())}, v));
    return success();
  }
  if (auto is = nc.intsAttr("value_ints")) {
    std::vector<SymInt> v(is->begin(), is->end());
    nc.setOutput(0, KnownTensor::ofInts(b.getI64Type(),
                                        {int64_t(v.size())}, v));
    return success();
  }
  return nc.error("only tensor, float(s) and int(s) constants are supported");
}

/// Dims of input i, which may be known or runtime.
static FailureOr<SmallVector<SymInt>> dimsOf(NodeContext &nc, size_t i) {
  ImportValue &v = nc.input(i);
  if (v.isKnown()) {
    SmallVector<SymInt> d;
    for (int64_t s : v.known->shape)
      d.push_back(s);
    return d;
  }
  auto r = nc.runtime(i);
  if (failed(r))
    return failure();
  return typeOf(*r).getDims();
}

static LogicalResult importShape(NodeContext &nc) {
  auto dims = dimsOf(nc, 0);
  if (failed(dims))
    return failure();
  int64_t rank = dims->size();
  int64_t start = nc.intAttr("start").value_or(0);
  int64_t end = nc.intAttr("end").value_or(rank);
  start = std::clamp<int64_t>(start < 0 ? start + rank : start, 0, rank);
  end = std::clamp<int64_t>(end < 0 ? end + rank : end, 0, rank);
  std::vector<SymInt> out;
  for (int64_t i = start; i < end; ++i)
    out.push_back((*dims)[i]);
  nc.setOutput(0, KnownTensor::ofInts(nc.b().getI64Type(),
                                      {int64_t(out.size())}, out));
  return success();
}

static LogicalResult importSize(NodeContext &nc) {
  auto dims = dimsOf(nc, 0);
  if (failed(dims))
    return failure();
  nc.setOutput(0, KnownTensor::ofInts(nc.b().getI64Type(), {},
                                      {*product(*dims)}));
  return success();
}

static LogicalResult importIdentity(NodeContext &nc) {
  ImportValue &in = nc.input(0);
  const std::string &out = nc.node.output(0);
  if (in.isParam() && out != in.param) {
    // The exporter de-duplicated two parameters with equal initial values
    // and re-created this one by name: it is a parameter of its own.
    // (A chain of Identity nodes: the first one's source.)
    const InitializerData *d = nc.importer.paramSource(in.param);
    if (!d)
      return nc.error("identity of unknown initializer '" + in.param + "'");
    if (nc.importer.graph().hasParam(out))
      return nc.error("output name '" + out + "' is already a parameter");
    Type et = convertElementType(nc.ctx(), d->proto->data_type());
    bool frozen = !nc.importer.isTrainable(out) || !et ||
                  !et.isa<FloatType>();
    return nc.importer.declareParam(out, *d, frozen, nc.loc);
  }
  nc.setOutput(0, ImportValue(in));
  return success();
}

static LogicalResult importCast(NodeContext &nc) {
  auto to = nc.intAttr("to");
  Type et = to ? convertElementType(nc.ctx(), *to) : Type();
  if (!et)
    return nc.error(Twine("cast to unsupported type ") +
                    (to ? onnxTypeName(*to) : "(none)"));
  ImportValue &in = nc.input(0);
  if (in.isKnown() && in.known->numel() == 1 && !in.known->isStatic() &&
      et.isa<FloatType>()) {
    // float(x.shape[0]): kept symbolic for a division (importBinary).
    ImportValue size;
    size.batchSize = in.known->intAt(0);
    nc.setOutput(0, size);
    return success();
  }
  if (in.isKnown()) {
    std::string err;
    auto r = evalCast(*in.known, et, err);
    if (failed(r))
      return nc.error(err);
    nc.setOutput(0, std::move(*r));
    return success();
  }
  auto v = nc.runtime(0);
  if (failed(v))
    return failure();
  VTensorType t = typeOf(*v);
  if (t.getElementType() == et) {
    nc.setOutput(0, *v);
    return success();
  }
  nc.setOutput(0, nc.b().create<CastOp>(nc.loc, t.withElementType(et), *v)
                      .getResult());
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

static bool allKnown(NodeContext &nc) {
  for (size_t i = 0; i < nc.numInputs(); ++i)
    if (nc.hasInput(i) && !nc.input(i).isKnown())
      return false;
  return true;
}

/// Runtime binary op `op` on two runtime values.
static FailureOr<Value> runtimeBinary(NodeContext &nc, StringRef op, Value a,
                                      Value c) {
  // ONNX Pow may raise to an exponent of another type: match the base.
  if (op == "Pow" && typeOf(a).getElementType() != typeOf(c).getElementType())
    c = nc.b().create<CastOp>(
        nc.loc, typeOf(c).withElementType(typeOf(a).getElementType()), c);
  auto cmp = llvm::StringSwitch<std::optional<ComparePredicate>>(op)
                 .Case("Equal", ComparePredicate::eq)
                 .Case("Less", ComparePredicate::lt)
                 .Case("LessOrEqual", ComparePredicate::le)
                 .Case("Greater", ComparePredicate::gt)
                 .Case("GreaterOrEqual", ComparePredicate::ge)
                 .Default(std::nullopt);
  if (cmp)
    return nc.create<CompareOp>(*cmp, a, c);
  if (op == "Add" || op == "Sum")
    return nc.create<AddOp>(a, c);
  if (op == "Sub")
    return nc.create<SubOp>(a, c);
  if (op == "Mul")
    return nc.create<MulOp>(a, c);
  if (op == "Div")
    return nc.create<DivOp>(a, c);
  if (op == "Mod") {
    if (typeOf(a).getElementType() != typeOf(c).getElementType())
      return nc.error("Mod of different element types");
    if (typeOf(a).getElementType().isa<FloatType>() &&
        nc.intAttr("fmod").value_or(0) == 0)
      return nc.error("Mod of floating-point tensors needs fmod=1");
    return Decomposer(nc.b(), nc.loc)
        .remainder(a, c, nc.intAttr("fmod").value_or(0) == 0);
  }
  if (op == "PRelu")
    return Decomposer(nc.b(), nc.loc).prelu(a, c);
  if (op == "Pow")
    return nc.create<PowOp>(a, c);
  if (op == "Max")
    return nc.create<MaximumOp>(a, c);
  if (op == "Min")
    return nc.create<MinimumOp>(a, c);
  if (op == "And")
    return nc.create<AndOp>(a, c);
  if (op == "Or")
    return nc.create<OrOp>(a, c);
  // Xor of booleans is their inequality (torch's floor division of
  // integers exports one, to correct the quotient's sign).
  if (op == "Xor")
    return nc.create<CompareOp>(ComparePredicate::ne, a, c);
  return nc.error("'" + op + "' on tensors computed at run time is not "
                  "supported");
}

static LogicalResult importBinary(NodeContext &nc) {
  StringRef op = nc.node.op_type();
  if (nc.numInputs() < 1)
    return nc.error("needs inputs");
  if (allKnown(nc)) {
    KnownTensor acc = *nc.input(0).known;
    StringRef kop = op == "Sum" ? "Add" : op;
    for (size_t i = 1; i < nc.numInputs(); ++i) {
      std::string err;
      auto r = evalBinary(kop, acc, *nc.input(i).known, err);
      if (failed(r))
        return nc.error(err);
      acc = std::move(*r);
    }
    nc.setOutput(0, std::move(acc));
    return success();
  }
  auto acc = nc.runtime(0);
  if (failed(acc))
    return failure();
  if (op == "Div" && nc.numInputs() == 2 && nc.input(1).batchSize) {
    // loss.sum() / x.shape[0], kl_div(reduction="batchmean").
    auto q = Decomposer(nc.b(), nc.loc)
                 .divideByBatch(*acc, *nc.input(1).batchSize);
    if (failed(q))
      return failure();
    nc.setOutput(0, *q);
    return success();
  }
  Value v = *acc;
  for (size_t i = 1; i < nc.numInputs(); ++i) {
    auto rhs = nc.runtime(i);
    if (failed(rhs))
      return failure();
    auto r = runtimeBinary(nc, op, v, *rhs);
    if (failed(r))
      return failure();
    v = *r;
  }
  nc.setOutput(0, v);
  return success();
}

static LogicalResult importUnary(NodeContext &nc) {
  StringRef op = nc.node.op_type();
  if (allKnown(nc) && isKnownUnary(op)) {
    std::string err;
    auto r = evalUnary(op, *nc.input(0).known, err);
    if (failed(r))
      return nc.error(err);
    nc.setOutput(0, std::move(*r));
    return success();
  }
  std::optional<UnaryKind> kind =
      llvm::StringSwitch<std::optional<UnaryKind>>(op)
          .Case("Neg", UnaryKind::neg)
          .Case("Exp", UnaryKind::exp)
          .Case("Log", UnaryKind::log)
          .Case("Sqrt", UnaryKind::sqrt)
          .Case("Reciprocal", UnaryKind::reciprocal)
          .Case("Tanh", UnaryKind::tanh)
          .Case("Erf", UnaryKind::erf)
          .Case("Sigmoid", UnaryKind::sigmoid)
          .Case("Relu", UnaryKind::relu)
          .Case("Abs", UnaryKind::abs)
          .Case("Not", UnaryKind::logical_not)
          .Case("Sin", UnaryKind::sin)
          .Case("Cos", UnaryKind::cos)
          .Case("Softplus", UnaryKind::softplus)
          .Case("Floor", UnaryKind::floor)
          .Case("Tan", UnaryKind::tan)
          .Case("Atan", UnaryKind::atan)
          .Case("Asin", UnaryKind::asin)
          .Case("Acos", UnaryKind::acos)
          .Case("Sinh", UnaryKind::sinh)
          .Case("Cosh", UnaryKind::cosh)
          .Case("Sign", UnaryKind::sign)
          .Case("Round", UnaryKind::round)
          .Case("Ceil", UnaryKind::ceil)
          .Default(std::nullopt);
  if (op == "Gelu") {
    std::string approx = nc.stringAttr("approximate").value_or("none");
    if (approx != "none" && approx != "tanh")
      return nc.error("unknown Gelu approximation '" + approx + "'");
    kind = approx == "tanh" ? UnaryKind::gelu_tanh : UnaryKind::gelu;
  }
  if (!kind)
    return nc.error("unsupported elementwise op");
  auto v = nc.runtime(0);
  if (failed(v))
    return failure();
  Operation *created = nc.b().create<UnaryOp>(nc.loc, typeOf(*v), *kind, *v);
  if (failed(mlir::verify(created))) {
    created->erase();
    return nc.error("its operand type does not suit this function");
  }
  nc.setOutput(0, created->getResult(0));
  return success();
}

static LogicalResult importWhere(NodeContext &nc) {
  if (allKnown(nc)) {
    const KnownTensor &c = *nc.input(0).known, &x = *nc.input(1).known,
                      &y = *nc.input(2).known;
    // select(c, x, y) = c*x + (1-c)*y evaluated element by element.
    size_t rank = std::max({c.shape.size(), x.shape.size(), y.shape.size()});
    std::vector<int64_t> shape(rank, 1);
    for (const KnownTensor *t : {&c, &x, &y})
      for (size_t i = 0; i < t->shape.size(); ++i) {
        int64_t &d = shape[rank - t->shape.size() + i];
        int64_t s = t->shape[i];
        if (s != 1 && d != 1 && s != d)
          return nc.error("shapes do not broadcast");
        if (s != 1)
          d = s;
      }
    KnownTensor out;
    out.shape = shape;
    out.elementType = x.elementType;
    int64_t n = out.numel();
    auto src = [&](const KnownTensor &t, int64_t flat) {
      int64_t idx = 0, stride = 1;
      for (int64_t i = rank - 1, j = t.shape.size() - 1; i >= 0; --i, --j) {
        int64_t coord = flat % shape[i];
        flat /= shape[i];
        if (j >= 0) {
          if (t.shape[j] != 1)
            idx += coord * stride;
          stride *= t.shape[j];
        }
      }
      return idx;
    };
    for (int64_t i = 0; i < n; ++i) {
      SymInt cond = c.intAt(src(c, i));
      if (!cond.isStatic())
        return nc.error("condition depends on the batch size");
      const KnownTensor &pick = cond.constant ? x : y;
      int64_t k = src(pick, i);
      if (out.isFloat())
        out.floats.push_back(pick.floatAt(k));
      else
        out.ints.push_back(pick.intAt(k));
    }
    nc.setOutput(0, std::move(out));
    return success();
  }
  auto c = nc.runtime(0), x = nc.runtime(1), y = nc.runtime(2);
  if (failed(c) || failed(x) || failed(y))
    return failure();
  return setResult(nc, nc.create<WhereOp>(*c, *x, *y));
}

static LogicalResult importClip(NodeContext &nc) {
  auto v = nc.runtime(0);
  if (failed(v))
    return failure();
  Value r = *v;
  if (nc.hasInput(1)) {
    auto lo = nc.runtime(1);
    if (failed(lo))
      return failure();
    auto m = nc.create<MaximumOp>(r, *lo);
    if (failed(m))
      return failure();
    r = *m;
  }
  if (nc.hasInput(2)) {
    auto hi = nc.runtime(2);
    if (failed(hi))
      return failure();
    auto m = nc.create<MinimumOp>(r, *hi);
    if (failed(m))
      return failure();
    r = *m;
  }
  nc.setOutput(0, r);
  return success();
}

/// If with a condition known at import time (torch exports x.squeeze(d) of
/// a dimension it cannot see as `If(shape[d] == 1, Squeeze, Identity)`):
/// the taken branch's nodes are imported in place and its outputs become
/// the If's. A condition computed at run time (data-dependent control flow)
/// is refused.
static LogicalResult importIf(NodeContext &nc) {
  if (!nc.hasInput(0) || !nc.input(0).isKnown())
    return nc.error("the condition is computed at run time; only an If "
                    "whose condition is known when the model is imported "
                    "(computed from shapes or constants) is supported");
  const KnownTensor &cond = *nc.input(0).known;
  if (cond.numel() != 1 || !cond.isStatic())
    return nc.error("the condition must be one value not depending on the "
                    "batch size");
  bool taken = cond.isFloat() ? cond.floatAt(0) != 0.0
                              : cond.intAt(0).constant != 0;
  const char *branch = taken ? "then_branch" : "else_branch";
  const onnx::GraphProto *g = nullptr;
  for (const auto &a : nc.node.attribute())
    if (a.name() == branch && a.has_g())
      g = &a.g();
  if (!g)
    return nc.error(Twine("missing ") + branch);
  if (g->output_size() != nc.node.output_size())
    return nc.error(Twine(branch) + " has " + Twine(g->output_size()) +
                    " outputs for " + Twine(nc.node.output_size()));
  std::string path = (nc.node.name().empty() ? std::string("If")
                                             : nc.node.name()) +
                     "/" + branch;
  if (failed(nc.importer.importGraphNodes(*g, path)))
    return failure();
  for (int k = 0; k < g->output_size(); ++k) {
    auto it = nc.importer.values().find(g->output(k).name());
    if (it == nc.importer.values().end())
      return nc.error(Twine(branch) + " output '" + g->output(k).name() +
                      "' is not produced");
    nc.setOutput(k, it->second);
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

LogicalResult onnx_import::importNode(NodeContext &nc) {
  StringRef op = nc.node.op_type();
  using Fn = LogicalResult (*)(NodeContext &);
  Fn fn = llvm::StringSwitch<Fn>(op)
              .Case("Constant", importConstant)
              .Case("If", importIf)
              .Case("Shape", importShape)
              .Case("Size", importSize)
              .Case("Identity", importIdentity)
              .Case("Cast", importCast)
              .Cases("Add", "Sub", "Mul", "Div", "Mod", importBinary)
              .Cases("Pow", "Max", "Min", "Sum", "Equal", importBinary)
              .Case("PRelu", importBinary)
              .Cases("Less", "Greater", "LessOrEqual", "GreaterOrEqual",
                     importBinary)
              .Cases("And", "Or", "Xor", importBinary)
              .Cases("Neg", "Exp", "Log", "Sqrt", "Reciprocal", importUnary)
              .Cases("Tanh", "Erf", "Sigmoid", "Relu", "Abs", importUnary)
              .Cases("Not", "Sin", "Cos", "Softplus", "Gelu", importUnary)
              .Cases("Floor", "Ceil", importUnary)
              .Cases("Tan", "Atan", "Asin", "Acos", "Sinh", importUnary)
              .Cases("Cosh", "Sign", "Round", importUnary)
              .Case("Where", importWhere)
              .Case("Clip", importClip)
              .Default(nullptr);
  if (!fn)
    fn = lookupShapeOpImporter(op);
  if (!fn)
    fn = lookupNNOpImporter(op);
  if (!fn && (op == "NonZero" || op == "Compress" || op == "Unique"))
    return nc.error("'" + op + "' returns as many elements as the data "
                    "decides (torch exports x[mask] and nonzero so): every "
                    "tensor of a stage needs a shape known before the data "
                    "arrives. The TorchScript importer follows x[mask] into "
                    "losses and row-wise ops: export to TorchScript "
                    "(varuna.export(model, batch, \"model.pt\")), or use "
                    "torch.where(mask, x, 0)");
  if (!fn)
    return nc.error("unsupported ONNX op '" + op + "' (opset " +
                    Twine(nc.importer.file().opsetVersion()) + ")");
  return fn(nc);
}
