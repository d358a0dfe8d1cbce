//===- TorchScriptOps.cpp - Structural, scalar, shape, elementwise ops ----===//
//
// Scalar arithmetic on sizes is evaluated symbolically (SymInt), so a size
// read from the batch dimension (`aten::size(x, 0)` = B) can flow through
// prim::NumToTensor / aten::Int / arithmetic into a view's shape list.
//
//===----------------------------------------------------------------------===//

#include "TorchScriptImporterImpl.h"
#include "varuna/Import/Decompose.h"
#include "llvm/ADT/StringSwitch.h"

#include <torch/csrc/jit/ir/constants.h>

#include <cmath>
#include <limits>

using namespace mlir;
using namespace varuna;
using namespace varuna::ts;

std::string varuna::ts::opName(torch::jit::Node *n) {
  std::string s = n->kind().toUnqualString();
  if (s.size() > 1 && s.back() == '_' && s[s.size() - 2] != '_')
    s.pop_back();
  return s;
}

Type varuna::ts::promoteTypes(Type a, Type b) {
  if (a == b)
    return a;
  bool fa = isFloatType(a), fb = isFloatType(b);
  if (fa && fb)
    return a.getIntOrFloatBitWidth() >= b.getIntOrFloatBitWidth() ? a : b;
  if (fa)
    return a;
  if (fb)
    return b;
  if (a.isInteger(1))
    return b;
  if (b.isInteger(1))
    return a;
  return a.getIntOrFloatBitWidth() >= b.getIntOrFloatBitWidth() ? a : b;
}

Type varuna::ts::promoteScalarType(MLIRContext *ctx, Type t,
                                  const TSValue &s) {
  Builder b(ctx);
  if (s.kind == K::Float && !isFloatType(t))
    return b.getF32Type();
  if (s.kind == K::Int && t.isInteger(1))
    return b.getI64Type();
  return t;
}

//===----------------------------------------------------------------------===//
// Graph structure
//===----------------------------------------------------------------------===//

/// Tensors up to this many elements keep their contents for folding.
static constexpr int64_t kFoldLimit = 4096;

LogicalResult TSImporter::hConstant(Node *n, Location loc) {
  if (n->outputs().size() != 1)
    return error(n, loc) << "constant with several outputs";
  std::optional<c10::IValue> iv = torch::jit::toIValue(n->output());
  if (!iv)
    return error(n, loc) << "cannot read the constant";
  auto out = fromConstant(*iv, n, loc);
  if (failed(out))
    return failure();
  bind(n->output(), *out);
  return success();
}

FailureOr<TSValue> TSImporter::fromConstant(const c10::IValue &v, Node *n,
                                            Location loc) {
  TSValue out;
  if (v.isNone()) {
    out = TSValue::none();
  } else if (v.isInt()) {
    out = TSValue::ofInt(v.toInt());
  } else if (v.isDouble()) {
    out = TSValue::ofFloat(v.toDouble());
  } else if (v.isBool()) {
    out = TSValue::ofBool(v.toBool());
  } else if (v.isString()) {
    out = TSValue::make(K::Str);
    out.s = v.toStringRef();
  } else if (v.isIntList()) {
    out = TSValue::make(K::List);
    for (int64_t x : v.toIntVector())
      out.list.push_back(TSValue::ofInt(x));
  } else if (v.isDoubleList()) {
    out = TSValue::make(K::List);
    for (double x : v.toDoubleVector())
      out.list.push_back(TSValue::ofFloat(x));
  } else if (v.isBoolList()) {
    out = TSValue::make(K::List);
    for (bool x : v.toBoolList())
      out.list.push_back(TSValue::ofBool(x));
  } else if (v.isTensor() && v.toTensor().dim() == 0 &&
             (v.toTensor().is_floating_point() ||
              v.toTensor().scalar_type() == c10::ScalarType::Long ||
              v.toTensor().scalar_type() == c10::ScalarType::Int)) {
    // A 0-d constant (usually a wrapped Python number): a scalar that takes
    // the type of the tensor it meets, as in torch's promotion.
    at::Tensor t = v.toTensor();
    out = t.is_floating_point() ? TSValue::ofFloat(t.item<double>())
                                : TSValue::ofInt(t.item<int64_t>());
    out.scalarTensor = true;
  } else if (v.isTensor()) {
    // A complex constant: view_as_real's layout (TSValue::complex).
    bool complex = v.toTensor().is_complex();
    at::Tensor t = (complex ? at::view_as_real(v.toTensor()) : v.toTensor())
                       .contiguous();
    auto elt = elementTypeOf(ctx, t.scalar_type());
    if (failed(elt))
      return error(n, loc) << "tensor constant of unsupported dtype "
                           << c10::toString(t.scalar_type()),
             failure();
    if (t.numel() > (1 << 20))
      return error(n, loc) << "tensor constant of " << t.numel()
                           << " elements is too large to inline; register it "
                              "as a buffer or parameter",
             failure();
    SmallVector<int64_t> shape(t.sizes().begin(), t.sizes().end());
    auto shaped = RankedTensorType::get(shape, *elt);
    DenseElementsAttr dense;
    int64_t count = t.numel();
    // The tensor's own data, for the types DenseElementsAttr takes as is.
    auto raw = [&](auto *data) {
      using T = std::remove_pointer_t<decltype(data)>;
      return DenseElementsAttr::get(shaped, ArrayRef<T>(data, count));
    };
    switch (t.scalar_type()) {
    case c10::ScalarType::Float:
      dense = raw(t.data_ptr<float>());
      break;
    case c10::ScalarType::Double:
      dense = raw(t.data_ptr<double>());
      break;
    case c10::ScalarType::Long:
      dense = raw(t.data_ptr<int64_t>());
      break;
    case c10::ScalarType::Int:
      dense = raw(t.data_ptr<int32_t>());
      break;
    case c10::ScalarType::Bool: {
      SmallVector<bool> bits(t.data_ptr<bool>(), t.data_ptr<bool>() + count);
      dense = DenseElementsAttr::get(shaped, ArrayRef<bool>(bits));
      break;
    }
    default: {
      // f16 / bf16 / 8-bit: go through float attributes.
      at::Tensor d = t.to(at::kDouble);
      SmallVector<Attribute> attrs;
      for (int64_t i = 0; i < count; ++i) {
        double x = d.data_ptr<double>()[i];
        if (isFloatType(*elt))
          attrs.push_back(FloatAttr::get(*elt, x));
        else
          attrs.push_back(IntegerAttr::get(*elt, static_cast<int64_t>(x)));
      }
      dense = DenseElementsAttr::get(shaped, attrs);
    }
    }
    Value c = b().create<ConstantOp>(loc, VTensorType::get(ctx, shape, -1, *elt),
                                     dense);
    out = TSValue::ofTensor(c);
    out.complex = complex;
    if (count <= kFoldLimit)
      out.known = v.toTensor().clone();
  } else {
    // Devices, layouts...: only ever consumed as arguments we ignore.
    out = TSValue();
  }
  return out;
}

/// The operand as a libtorch value, when known at import time.
static std::optional<c10::IValue> knownIValue(TSImporter::JitValue *v,
                                              const TSValue &t) {
  if (t.known)
    return c10::IValue(*t.known);
  if (auto iv = torch::jit::toIValue(v))
    return iv;
  auto number = [](const TSValue &x) -> std::optional<c10::IValue> {
    if (x.kind == K::Int && x.i.isStatic())
      return c10::IValue(x.i.constant);
    if (x.kind == K::Float)
      return c10::IValue(x.f);
    if (x.kind == K::Bool)
      return c10::IValue(x.b);
    return std::nullopt;
  };
  if (t.kind == K::None)
    return c10::IValue();
  if (auto x = number(t)) {
    if (!v->type()->cast<c10::TensorType>())
      return x;
    return c10::IValue(t.kind == K::Float ? at::scalar_tensor(t.f)
                                          : at::scalar_tensor(x->toScalar(),
                                                              at::kLong));
  }
  if (t.kind == K::List) {
    std::vector<int64_t> ints;
    for (const TSValue &e : t.list) {
      if (e.kind != K::Int || !e.i.isStatic())
        return std::nullopt;
      ints.push_back(e.i.constant);
    }
    return c10::IValue(ints);
  }
  return std::nullopt;
}

bool TSImporter::foldConstant(Node *n, Location loc) {
  if (!n->kind().is_aten() || n->outputs().size() != 1 ||
      llvm::StringRef(n->kind().toUnqualString()).ends_with("_") ||
      n->isNondeterministic() || n->hasSideEffects() || !n->maybeSchema())
    return false;
  bool anyKnown = false;
  torch::jit::Stack stack;
  for (JitValue *v : n->inputs()) {
    const TSValue &t = lookup(v);
    anyKnown |= t.known.has_value();
    auto iv = knownIValue(v, t);
    if (!iv)
      return false;
    stack.push_back(std::move(*iv));
  }
  if (!anyKnown)
    return false;
  // A value written in place later keeps its op: a slice or select records
  // the tensor it views (writeBack), a folded copy would not.
  for (const torch::jit::Use &u : n->output()->uses())
    if (StringRef(u.user->kind().toUnqualString()).ends_with("_"))
      return false;
  try {
    n->getOperation()(stack);
  } catch (const std::exception &) {
    return false; // the handler will report what is wrong
  }
  if (stack.size() != 1)
    return false;
  // Only results fromConstant takes without a diagnostic.
  if (stack[0].isTensor() &&
      (stack[0].toTensor().numel() > kFoldLimit ||
       failed(elementTypeOf(ctx, c10::toRealValueType(
                                     stack[0].toTensor().scalar_type())))))
    return false;
  auto out = fromConstant(stack[0], n, loc);
  if (failed(out) || out->kind == K::Other)
    return false;
  bind(n->output(), *out);
  return true;
}

LogicalResult TSImporter::hListConstruct(Node *n, Location loc) {
  TSValue out = TSValue::make(K::List);
  for (JitValue *v : n->inputs())
    out.list.push_back(lookup(v));
  bind(n->output(), out);
  return success();
}

LogicalResult TSImporter::hListUnpack(Node *n, Location loc) {
  TSValue in = lookup(n->input(0));
  if (in.kind != K::List || in.list.size() != n->outputs().size())
    return error(n, loc) << "expected a list of " << n->outputs().size()
                         << " elements";
  for (auto [i, out] : llvm::enumerate(n->outputs()))
    bind(out, in.list[i]);
  return success();
}

LogicalResult TSImporter::hGetItem(Node *n, Location loc) {
  TSValue in = lookup(n->input(0));
  auto idx = intArg(n, 1, loc);
  if (failed(idx))
    return failure();
  if (in.kind != K::List)
    return error(n, loc) << "indexing a value that is not a list";
  auto i = normIndex(n, *idx, in.list.size(), loc, "index");
  if (failed(i))
    return failure();
  bind(n->output(), in.list[*i]);
  return success();
}

//===----------------------------------------------------------------------===//
// Scalars and sizes
//===----------------------------------------------------------------------===//

LogicalResult TSImporter::hSize(Node *n, Location loc) {
  if (lookup(n->input(0)).kind == K::PackedSizes)
    return error(n, loc)
           << "the size of a packed sequence's batch_sizes is the batch's "
              "longest sequence, a value of the data (pad_packed_sequence "
              "without total_length pads to it, differently in each "
              "micro-batch): pass total_length=x.shape[1]";
  auto x = tensorArg(n, 0, loc);
  if (failed(x))
    return failure();
  SmallVector<SymInt> dims = dimsOf(*x);
  if (n->inputs().size() == 1) {
    TSValue out = TSValue::make(K::List);
    for (SymInt d : dims)
      out.list.push_back(TSValue::ofInt(d));
    bind(n->output(), out);
    return success();
  }
  auto d = intArg(n, 1, loc);
  if (failed(d))
    return failure();
  int64_t axis = normAxis(*d, dims.size());
  if (axis < 0)
    return error(n, loc) << "dimension " << *d << " out of range for rank "
                         << dims.size();
  bind(n->output(), TSValue::ofInt(dims[axis]));
  return success();
}

LogicalResult TSImporter::hDimNumel(Node *n, Location loc) {
  if (const TSValue &order = lookup(n->input(0)); order.kind == K::BatchOrder) {
    bind(n->output(), TSValue::ofInt(opName(n) == "dim" ? SymInt(1) : order.i));
    return success();
  }
  auto x = tensorArg(n, 0, loc);
  if (failed(x))
    return failure();
  VTensorType t = tensorType(*x);
  bind(n->output(), TSValue::ofInt(opName(n) == "dim" ? SymInt(t.getRank())
                                                      : t.getNumElements()));
  return success();
}

LogicalResult TSImporter::hNumToTensor(Node *n, Location loc) {
  TSValue v = lookup(n->input(0));
  if (!v.isScalar())
    return error(n, loc) << "operand is not a number";
  v.scalarTensor = true;
  bind(n->output(), v);
  return success();
}

LogicalResult TSImporter::hScalarCast(Node *n, Location loc) {
  TSValue v = lookup(n->input(0));
  // A one-element tensor known at import time (folded from constants and
  // sizes: transformers' int(math.ceil(height / patch) * patch)).
  if (v.kind == K::Tensor && v.known && v.known->numel() == 1) {
    at::Tensor k = *v.known;
    v = k.is_floating_point() ? TSValue::ofFloat(k.item<double>())
        : k.scalar_type() == at::kBool ? TSValue::ofBool(k.item<bool>())
                                       : TSValue::ofInt(k.item<int64_t>());
  }
  if (!v.isScalar())
    return error(n, loc)
           << "converting tensor data to a Python number is data-dependent "
              "and cannot be traced into a static graph";
  v.scalarTensor = false;
  std::string name = opName(n);
  if (name == "Int" && v.kind == K::Float)
    v = TSValue::ofInt(static_cast<int64_t>(v.f));
  else if (name == "Float" && v.kind == K::Int) {
    if (!v.i.isStatic())
      return error(n, loc) << "the batch size cannot become a float";
    v = TSValue::ofFloat(static_cast<double>(v.i.constant));
  }
  bind(n->output(), v);
  return success();
}

bool TSImporter::isScalarNode(Node *n) {
  bool any = false;
  for (JitValue *v : n->inputs()) {
    TSValue &t = lookup(v);
    if (t.kind == K::Tensor)
      return false;
    any |= t.isScalar();
  }
  return any;
}

LogicalResult TSImporter::convertScalarArith(Node *n, Location loc,
                                             StringRef op) {
  TSValue a = lookup(n->input(0));
  TSValue c = n->inputs().size() > 1 ? lookup(n->input(1)) : TSValue();
  bool scalarTensor = a.scalarTensor || c.scalarTensor ||
                      n->output()->type()->cast<c10::TensorType>();
  if (op == "neg") {
    TSValue out = a.kind == K::Float ? TSValue::ofFloat(-a.f)
                                     : TSValue::ofInt(-a.i);
    out.scalarTensor = scalarTensor;
    bind(n->output(), out);
    return success();
  }
  if (!a.isScalar() || !c.isScalar())
    return error(n, loc) << "expected two numbers";
  if (op == "rsub")
    std::swap(a, c);
  TSValue out;
  bool floats = a.kind == K::Float || c.kind == K::Float ||
                (op == "div" && isNoneArg(n, 2));
  if (floats) {
    auto asDouble = [&](const TSValue &v) -> std::optional<double> {
      if (v.kind == K::Float)
        return v.f;
      if (v.kind == K::Bool)
        return v.b ? 1.0 : 0.0;
      if (v.i.isStatic())
        return static_cast<double>(v.i.constant);
      return std::nullopt;
    };
    auto x = asDouble(a), y = asDouble(c);
    // A whole float and the batch size added, subtracted or multiplied stay
    // a size (Mixtral's total_rows = 0.0 + rows.shape[0]).
    auto whole = [](const TSValue &v) -> std::optional<SymInt> {
      if (v.kind == K::Int)
        return v.i;
      if (v.kind == K::Float && v.f == std::floor(v.f) &&
          std::abs(v.f) < 9.0e15)
        return SymInt(static_cast<int64_t>(v.f));
      return std::nullopt;
    };
    if ((!x || !y) && (op == "add" || op == "sub" || op == "rsub" ||
                       op == "mul")) {
      auto p = whole(a), q = whole(c);
      std::optional<SymInt> r;
      if (p && q)
        r = op == "add" ? std::optional<SymInt>(*p + *q)
            : op == "mul" ? p->mul(*q)
                          : std::optional<SymInt>(*p - *q);
      if (r) {
        out = TSValue::ofInt(*r);
        out.scalarTensor = scalarTensor;
        bind(n->output(), out);
        return success();
      }
    }
    if (!x || !y) {
      // B / k with an exact result stays an integer size.
      if (op == "div" && a.kind == K::Int && c.kind == K::Int)
        if (auto q = a.i.divExact(c.i)) {
          out = TSValue::ofInt(*q);
          out.scalarTensor = scalarTensor;
          bind(n->output(), out);
          return success();
        }
      return error(n, loc) << "floating-point arithmetic on the batch size "
                              "is not supported";
    }
    double r;
    if (op == "add")
      r = *x + *y;
    else if (op == "sub" || op == "rsub")
      r = *x - *y;
    else if (op == "mul")
      r = *x * *y;
    else if (op == "div" || op == "true_divide")
      r = *x / *y;
    else if (op == "floordiv" || op == "floor_divide")
      r = std::floor(*x / *y);
    else if (op == "pow")
      r = std::pow(*x, *y);
    else
      return error(n, loc) << "unsupported scalar operation '" << op << "'";
    out = TSValue::ofFloat(r);
  } else {
    SymInt x = a.kind == K::Bool ? SymInt(a.b) : a.i;
    SymInt y = c.kind == K::Bool ? SymInt(c.b) : c.i;
    std::optional<SymInt> r;
    if (op == "add")
      r = x + y;
    else if (op == "sub" || op == "rsub")
      r = x - y;
    else if (op == "mul")
      r = x.mul(y);
    else if (op == "div" || op == "floordiv" || op == "floor_divide")
      r = x.floorDiv(y);
    else if (op == "remainder")
      r = x.mod(y);
    else if ((op == "maximum" || op == "minimum") && x.isStatic() &&
             y.isStatic())
      r = op == "maximum" ? std::max(x.constant, y.constant)
                          : std::min(x.constant, y.constant);
    else
      return error(n, loc) << "unsupported integer operation '" << op << "'";
    if (!r)
      return error(n, loc) << "the result of " << x.str() << " " << op << " "
                           << y.str() << " is not affine in the batch size B";
    out = TSValue::ofInt(*r);
  }
  out.scalarTensor = scalarTensor;
  bind(n->output(), out);
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

FailureOr<Value> TSImporter::binary(StringRef kind, const TSValue &a,
                                    const TSValue &c, Location loc, Node *n) {
  bool ta = a.kind == K::Tensor, tc = c.kind == K::Tensor;
  Type elt;
  FailureOr<Value> x = failure(), y = failure();
  if (ta && tc) {
    x = asTensor(a, Type(), loc, n);
    y = asTensor(c, Type(), loc, n);
    if (failed(x) || failed(y))
      return failure();
    VTensorType xt = tensorType(*x), yt = tensorType(*y);
    Type ex = xt.getElementType(), ey = yt.getElementType();
    // torch: a 0-d tensor does not promote a dimensioned tensor of the same
    // category (float / integer / bool), like a Python scalar.
    bool zx = xt.getRank() == 0, zy = yt.getRank() == 0;
    auto category = [](Type t) {
      return isFloatType(t) ? 2 : t.isInteger(1) ? 0 : 1;
    };
    if (zx && !zy && category(ex) <= category(ey))
      elt = ey;
    else if (zy && !zx && category(ey) <= category(ex))
      elt = ex;
    else
      elt = promoteTypes(ex, ey);
  } else if (ta || tc) {
    x = asTensor(ta ? a : c, Type(), loc, n);
    if (failed(x))
      return failure();
    elt = promoteScalarType(ctx, tensorType(*x).getElementType(), ta ? c : a);
    y = asTensor(ta ? c : a, elt, loc, n);
    if (failed(y))
      return failure();
    if (!ta)
      std::swap(x, y);
  } else {
    return error(n, loc) << "expected a tensor operand", failure();
  }
  if (kind == "div" && !isFloatType(elt))
    elt = b().getF32Type(); // true division
  if (kind == "and" || kind == "or")
    elt = b().getI1Type();
  Value lhs = cast(*x, elt, loc), rhs = cast(*y, elt, loc);
  if (kind == "add")
    return make<AddOp>(loc, {lhs, rhs});
  if (kind == "sub")
    return make<SubOp>(loc, {lhs, rhs});
  if (kind == "mul")
    return make<MulOp>(loc, {lhs, rhs});
  if (kind == "div" || kind == "idiv")
    return make<DivOp>(loc, {lhs, rhs});
  if (kind == "pow")
    return make<PowOp>(loc, {lhs, rhs});
  if (kind == "maximum")
    return make<MaximumOp>(loc, {lhs, rhs});
  if (kind == "minimum")
    return make<MinimumOp>(loc, {lhs, rhs});
  if (kind == "and")
    return make<AndOp>(loc, {lhs, rhs});
  if (kind == "or")
    return make<OrOp>(loc, {lhs, rhs});
  auto pred = symbolizeComparePredicate(kind);
  if (!pred)
    return error(n, loc) << "internal: unknown binary kind " << kind,
           failure();
  return make<CompareOp>(
      loc, {lhs, rhs},
      {attr("predicate", ComparePredicateAttr::get(ctx, *pred))});
}

FailureOr<Value> TSImporter::unary(UnaryKind kind, Value v, Location loc) {
  return make<UnaryOp>(loc, {v},
                       {attr("kind", UnaryKindAttr::get(ctx, kind))});
}

FailureOr<Value> TSImporter::reduce(ReduceKind kind, Value x,
                                    ArrayRef<int64_t> axes, bool keepdim,
                                    Location loc) {
  return make<ReduceOp>(loc, {x},
                        {attr("kind", ReduceKindAttr::get(ctx, kind)),
                         attr("axes", b().getDenseI64ArrayAttr(axes)),
                         attr("keepdim", b().getBoolAttr(keepdim))});
}

LogicalResult TSImporter::hArith(Node *n, Location loc) {
  std::string op = opName(n);
  if (isScalarNode(n))
    return convertScalarArith(n, loc, op);
  TSValue a = lookup(n->input(0));
  TSValue c = n->inputs().size() > 1 ? lookup(n->input(1)) : TSValue();
  if (op == "add" || op == "sub" || op == "rsub") {
    auto alpha = optArg(n, 2, loc, &TSImporter::floatArg, 1.0);
    if (failed(alpha))
      return failure();
    if (*alpha != 1.0) {
      TSValue &scaled = op == "rsub" ? a : c;
      if (scaled.kind == K::Tensor) {
        auto m = binary("mul", scaled, TSValue::ofFloat(*alpha), loc, n);
        if (failed(m))
          return failure();
        scaled = TSValue::ofTensor(*m);
      } else if (scaled.kind == K::Float) {
        scaled.f *= *alpha;
      } else if (scaled.kind == K::Int && scaled.i.isStatic()) {
        scaled = TSValue::ofFloat(*alpha * scaled.i.constant);
      }
    }
    if (op == "rsub") {
      std::swap(a, c);
      op = "sub";
    }
  }
  FailureOr<Value> r = failure();
  bool trueDiv = op == "true_divide" || (op == "div" && isNoneArg(n, 2));
  if (trueDiv && a.kind == K::Tensor && c.kind == K::Int && !c.i.isStatic()) {
    // loss.sum() / x.size(0), kl_div(reduction="batchmean").
    auto x = asTensor(a, Type(), loc, n);
    if (failed(x))
      return failure();
    r = Decomposer(b(), loc).divideByBatch(*x, c.i);
  } else if (op == "div" && !isNoneArg(n, 2)) {
    auto mode = strArg(n, 2, loc);
    if (failed(mode))
      return failure();
    Value x;
    {
      auto t = asTensor(a, Type(), loc, n);
      if (failed(t))
        return failure();
      x = *t;
    }
    if (*mode != "floor" && *mode != "trunc")
      return error(n, loc) << "unknown rounding_mode '" << *mode << "'";
    bool intDiv = !isFloatType(tensorType(x).getElementType());
    if (intDiv) {
      r = binary("idiv", a, c, loc, n); // truncates toward zero
      if (succeeded(r) && *mode == "floor") {
        // One less where the division was inexact and the operands' signs
        // differ (wav2vec2's conv output lengths: (L - k) // s + 1).
        auto y = asTensor(c, tensorType(x).getElementType(), loc, n);
        if (failed(y))
          return failure();
        Type et = tensorType(*r).getElementType();
        Value yv = cast(*y, et, loc), xv = cast(x, et, loc);
        MathBuilder m{*this, loc, et};
        auto rem = m.bin<SubOp>(xv, m.bin<MulOp>(*r, yv));
        auto inexact = m.cmp(ComparePredicate::ne, rem, m.c(0));
        auto signs = m.cmp(ComparePredicate::ne, m.cmp(ComparePredicate::lt, rem, m.c(0)),
                           m.cmp(ComparePredicate::lt, yv, m.c(0)));
        auto down = failed(inexact) || failed(signs)
                        ? FailureOr<Value>()
                        : make<AndOp>(loc, {*inexact, *signs});
        r = m.bin<SubOp>(*r, m.where(down, m.c(1), m.c(0)));
      }
    } else {
      r = binary("div", a, c, loc, n);
      if (succeeded(r))
        r = unary(*mode == "floor" ? UnaryKind::floor : UnaryKind::trunc, *r, loc);
    }
  } else if (op == "floor_divide") {
    r = binary("div", a, c, loc, n);
    if (succeeded(r))
      r = unary(UnaryKind::floor, *r, loc);
  } else if (op == "true_divide") {
    r = binary("div", a, c, loc, n);
  } else if (op == "add" || op == "sub" || op == "mul" || op == "div" ||
             op == "pow" || op == "maximum" || op == "minimum") {
    r = binary(op, a, c, loc, n);
  } else if (op == "remainder" || op == "fmod") {
    // torch.remainder (the sign of the divisor) / torch.fmod (of the
    // dividend), in the promoted type.
    auto x = asTensor(a, Type(), loc, n);
    if (failed(x))
      return failure();
    auto y = asTensor(c, c.kind == K::Tensor ? Type()
                         : c.kind == K::Float && !isFloatType(tensorType(*x).getElementType())
                             ? b().getF32Type()
                             : tensorType(*x).getElementType(),
                      loc, n);
    if (failed(y))
      return failure();
    Type ex = tensorType(*x).getElementType(), ey = tensorType(*y).getElementType();
    Type et = isFloatType(ex) ? ex : isFloatType(ey) ? ey : ex;
    r = Decomposer(b(), loc).remainder(cast(*x, et, loc), cast(*y, et, loc),
                                       op == "remainder");
  } else if ((op == "min" || op == "max") && n->inputs().size() == 2 &&
             c.kind == K::Tensor) {
    // torch.min(a, b) / torch.max(a, b): elementwise (T5's relative
    // positions); the reducing forms are not mapped.
    r = binary(op == "min" ? "minimum" : "maximum", a, c, loc, n);
  } else {
    return error(n, loc) << "unsupported arithmetic '" << op << "'";
  }
  return bindResult(n, r);
}

LogicalResult TSImporter::hCompare(Node *n, Location loc) {
  return bindResult(
      n, binary(opName(n), lookup(n->input(0)), lookup(n->input(1)), loc, n));
}

LogicalResult TSImporter::hLogical(Node *n, Location loc) {
  std::string op = opName(n);
  bool isAnd = op.find("and") != std::string::npos;
  if (op.find("bitwise") != std::string::npos || op.find("__") == 0) {
    for (JitValue *v : n->inputs()) {
      TSValue &t = lookup(v);
      if (t.kind == K::Tensor && t.tensor &&
          !tensorType(t.tensor).getElementType().isInteger(1))
        return error(n, loc) << "bitwise operations are supported on bool "
                                "tensors only";
    }
  }
  return bindResult(n, binary(isAnd ? "and" : "or", lookup(n->input(0)),
                              lookup(n->input(1)), loc, n));
}

LogicalResult TSImporter::hUnary(Node *n, Location loc) {
  std::string op = opName(n);
  // A number made a tensor (a size in arithmetic while tracing: funnel's
  // -seq_len, mobilevit's math.ceil(height / patch)) stays a number.
  TSValue s = lookup(n->input(0));
  if (s.isScalar() && s.kind != K::Bool &&
      (op == "neg" || op == "floor" || op == "ceil" || op == "round" ||
       op == "trunc" || op == "abs")) {
    TSValue out = s;
    auto apply = [&](double x) {
      if (op == "floor")
        return std::floor(x);
      if (op == "ceil")
        return std::ceil(x);
      if (op == "round") // half to even, as torch.round
        return std::nearbyint(x);
      if (op == "trunc")
        return std::trunc(x);
      return op == "abs" ? std::fabs(x) : -x;
    };
    if (s.kind == K::Float) {
      out.f = apply(s.f);
    } else if (op == "neg") {
      out.i = -s.i;
    } else if (op == "abs") {
      if (!s.i.isStatic())
        return error(n, loc) << "abs of the batch-dependent size " << s.i.str();
      out.i = SymInt(std::abs(s.i.constant));
    } // rounding an integer leaves it alone
    bind(n->output(), out);
    return success();
  }
  auto x = tensorArg(n, 0, loc);
  if (failed(x))
    return failure();
  Value v = *x;
  Type elt = tensorType(v).getElementType();
  if (op == "logical_not" || op == "bitwise_not") {
    if (!elt.isInteger(1)) {
      if (op == "bitwise_not")
        return error(n, loc) << "bitwise_not is supported on bool tensors only";
      auto zero = scalarConstant(0, elt, loc);
      return bindResult(
          n,
          make<CompareOp>(loc, {v, zero},
                          {attr("predicate", ComparePredicateAttr::get(
                                                 ctx, ComparePredicate::eq))}));
    }
    return bindResult(n, unary(UnaryKind::logical_not, v, loc));
  }
  if (op == "softplus") {
    auto beta = floatArg(n, 1, loc), threshold = floatArg(n, 2, loc);
    if (failed(beta) || failed(threshold))
      return failure();
    if (*beta <= 0.0)
      return error(n, loc) << "softplus with beta " << *beta
                           << " (must be positive)";
    if (*beta != 1.0 || *threshold != 20.0) {
      // where(beta x > threshold, x, softplus(beta x) / beta); the unary's
      // own switch to x at beta x > 20 differs from log1p(exp(beta x)) by
      // less than e^-20 where the threshold is above 20.
      if (!isFloatType(elt))
        v = cast(v, b().getF32Type(), loc);
      Type et = tensorType(v).getElementType();
      Decomposer d(b(), loc);
      auto bx = make<MulOp>(loc, {v, d.scalar(*beta, et)});
      auto sp = failed(bx) ? bx : unary(UnaryKind::softplus, *bx, loc);
      auto scaled = failed(sp) ? sp
                               : make<MulOp>(loc, {*sp, d.scalar(1.0 / *beta, et)});
      auto above = failed(bx) ? bx
                              : make<CompareOp>(
                                    loc, {*bx, d.scalar(*threshold, et)},
                                    {attr("predicate",
                                          ComparePredicateAttr::get(
                                              ctx, ComparePredicate::gt))});
      if (failed(scaled) || failed(above))
        return failure();
      return bindResult(n, make<WhereOp>(loc, {*above, v, *scaled}));
    }
  }
  // torch's aliases.
  op = llvm::StringSwitch<std::string>(op)
           .Case("fix", "trunc")
           .Case("arctan", "atan")
           .Case("arcsin", "asin")
           .Case("arccos", "acos")
           .Case("special_erfc", "erfc")
           .Case("special_erfinv", "erfinv")
           .Case("special_digamma", "digamma")
           .Case("special_psi", "digamma")
           .Case("special_gammaln", "lgamma")
           .Case("sgn", "sign") // real tensors (complex ones: not here)
           .Case("special_expit", "sigmoid")
           .Default(op);
  auto kind = symbolizeUnaryKind(op);
  if (!kind)
    return error(n, loc) << "internal: no unary kind " << op;
  bool intOk = *kind == UnaryKind::neg || *kind == UnaryKind::abs ||
               *kind == UnaryKind::relu;
  if (!isFloatType(elt) && !intOk)
    v = cast(v, b().getF32Type(), loc);
  return bindResult(n, unary(*kind, v, loc));
}

/// detach(x): `unary stop_gradient` for floating-point tensors (no gradient
/// flows back through it: distillation targets, straight-through
/// estimators, stop-gradient branches); other values pass through.
LogicalResult TSImporter::hDetach(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  if (failed(x))
    return failure();
  if (!isFloatType(tensorType(*x).getElementType()))
    return bindResult(n, *x);
  return bindResult(n, unary(UnaryKind::stop_gradient, *x, loc));
}

LogicalResult TSImporter::hGelu(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  if (failed(x))
    return failure();
  auto approx = optArg(n, 1, loc, &TSImporter::strArg, "none");
  if (failed(approx))
    return failure();
  if (*approx != "none" && *approx != "tanh")
    return error(n, loc) << "unknown gelu approximation '" << *approx << "'";
  return bindResult(
      n, unary(*approx == "tanh" ? UnaryKind::gelu_tanh : UnaryKind::gelu, *x,
               loc));
}

LogicalResult TSImporter::hPassThrough(Node *n, Location loc) {
  bind(n->output(), lookup(n->input(0)));
  return success();
}

/// dropout(x, p, train) and feature_dropout (Dropout1d/2d/3d: whole
/// channels zeroed -- a dropout mask [N, C, 1, ...] of ones times x).
/// Identity in eval or with p = 0; alpha_dropout and feature_alpha_dropout
/// are refused in training.
LogicalResult TSImporter::hDropout(Node *n, Location loc) {
  auto x = tensorArg(n, 0, loc);
  auto p = floatArg(n, 1, loc);
  auto train = boolArg(n, 2, loc);
  if (failed(x) || failed(p) || failed(train))
    return failure();
  if (!*train || *p == 0.0)
    return bindResult(n, *x);
  std::string op = opName(n);
  if (op != "dropout" && op != "feature_dropout")
    return error(n, loc) << op << " in training is not supported";
  if (*p < 0.0 || *p >= 1.0)
    return error(n, loc) << "dropout probability " << *p
                         << " is outside [0, 1)";
  if (op == "dropout")
    return bindResult(n, b().create<DropoutOp>(loc, x->getType(), *x,
                                               b().getF64FloatAttr(*p))
                             .getResult());
  SmallVector<SymInt> dims = dimsOf(*x);
  if (dims.size() < 2)
    return error(n, loc) << "channel dropout needs an input [N, C, ...], got "
                         << dimsStr(dims);
  for (size_t i = 2; i < dims.size(); ++i)
    dims[i] = SymInt(1);
  Type et = tensorType(*x).getElementType();
  auto maskType = typeFromDims(dims, et, loc);
  if (failed(maskType))
    return failure();
  Value ones = b().create<FullOp>(loc, *maskType, b().getFloatAttr(et, 1.0));
  Value mask = b().create<DropoutOp>(loc, *maskType, ones,
                                     b().getF64FloatAttr(*p));
  return bindResult(n, make<MulOp>(loc, {*x, mask}));
}

LogicalResult TSImporter::hTo(Node *n, Location loc) {
  if (lookup(n->input(0)).kind == K::BatchOrder) { // sorted_indices.to(device)
    bind(n->output(), lookup(n->input(0)));
    return success();
  }
  Type elt;
  bool hasArg = n->inputs().size() > 1;
  c10::TypePtr t1 = hasArg ? n->input(1)->type() : nullptr;
  // type_as(other), to(other, ...): the element type of another tensor.
  if (opName(n) == "type_as" || (hasArg && t1->cast<c10::TensorType>())) {
    auto other = tensorArg(n, 1, loc);
    if (failed(other))
      return failure();
    elt = tensorType(*other).getElementType();
  } else if (hasArg) {
    unsigned idx = t1->kind() == c10::TypeKind::DeviceObjType ? 2 : 1;
    if (t1->kind() == c10::TypeKind::OptionalType &&
        t1->castRaw<c10::OptionalType>()->getElementType()->kind() ==
            c10::TypeKind::DeviceObjType)
      idx = 2;
    auto d = dtypeArg(n, idx, loc);
    if (failed(d))
      return failure();
    elt = *d;
  }
  // A number made a tensor (prim::NumToTensor of a size and arithmetic on
  // it: transformers' torch_int(num_positions ** 0.5)) stays a number of
  // the new type, so that aten::Int can read it back.
  TSValue v = lookup(n->input(0));
  if (v.isScalar() && elt && !(v.kind == K::Int && !v.i.isStatic())) {
    double d = v.kind == K::Float  ? v.f
               : v.kind == K::Bool ? (v.b ? 1.0 : 0.0)
                                   : static_cast<double>(v.i.constant);
    TSValue out = isFloatType(elt)     ? TSValue::ofFloat(d)
                  : elt.isInteger(1) ? TSValue::ofBool(d != 0)
                                     : TSValue::ofInt(static_cast<int64_t>(d));
    out.scalarTensor = true;
    bind(n->output(), out);
    return success();
  }
  auto x = tensorArg(n, 0, loc);
  if (failed(x))
    return failure();
  return bindResult(n, elt ? cast(*x, elt, loc) : *x);
}

void TSImporter::registerBasicOps(llvm::StringMap<Handler> &t) {
  auto reg = [&](std::initializer_list<const char *> kinds, Handler h) {
    for (const char *k : kinds)
      t[k] = h;
  };
  reg({"prim::Constant"}, &TSImporter::hConstant);
  reg({"prim::GetAttr"}, &TSImporter::hGetAttr);
  reg({"prim::ListConstruct", "prim::TupleConstruct"},
      &TSImporter::hListConstruct);
  reg({"prim::ListUnpack", "prim::TupleUnpack"}, &TSImporter::hListUnpack);
  reg({"aten::__getitem__", "prim::TupleIndex"}, &TSImporter::hGetItem);
  reg({"aten::size"}, &TSImporter::hSize);
  reg({"aten::dim", "aten::numel"}, &TSImporter::hDimNumel);
  reg({"prim::NumToTensor"}, &TSImporter::hNumToTensor);
  reg({"aten::Int", "aten::Float", "aten::ScalarImplicit"},
      &TSImporter::hScalarCast);
  reg({"aten::add", "aten::sub", "aten::rsub", "aten::mul", "aten::div",
       "aten::true_divide", "aten::floor_divide", "aten::floordiv",
       "aten::remainder", "aten::fmod", "aten::pow", "aten::maximum",
       "aten::minimum"},
      &TSImporter::hArith);
  reg({"aten::eq", "aten::ne", "aten::lt", "aten::le", "aten::gt", "aten::ge"},
      &TSImporter::hCompare);
  reg({"aten::logical_and", "aten::logical_or", "aten::bitwise_and",
       "aten::bitwise_or", "aten::__and__", "aten::__or__"},
      &TSImporter::hLogical);
  reg({"aten::neg", "aten::exp", "aten::log", "aten::sqrt", "aten::rsqrt",
       "aten::reciprocal", "aten::tanh", "aten::erf", "aten::sigmoid",
       "aten::relu", "aten::abs", "aten::sin", "aten::cos", "aten::silu",
       "aten::softplus", "aten::floor", "aten::ceil", "aten::logical_not",
       "aten::bitwise_not", "aten::tan", "aten::atan", "aten::asin",
       "aten::acos", "aten::sinh", "aten::cosh", "aten::sign", "aten::round",
       "aten::trunc", "aten::fix", "aten::expm1", "aten::log1p",
       "aten::arctan", "aten::arcsin", "aten::arccos", "aten::lgamma",
       "aten::digamma", "aten::erfinv", "aten::erfc", "aten::special_erfc",
       "aten::special_digamma", "aten::special_psi", "aten::special_gammaln",
       "aten::special_erfinv", "aten::sgn", "aten::special_expit"},
      &TSImporter::hUnary);
  reg({"aten::gelu"}, &TSImporter::hGelu);
  reg({"aten::detach"}, &TSImporter::hDetach);
  reg({"aten::contiguous", "aten::clone", "aten::alias",
       "aten::lift_fresh", "aten::lift_fresh_copy"},
      &TSImporter::hPassThrough);
  reg({"aten::dropout", "aten::feature_dropout", "aten::alpha_dropout",
       "aten::feature_alpha_dropout"},
      &TSImporter::hDropout);
  reg({"aten::to", "aten::type_as"}, &TSImporter::hTo);
  reg({"aten::view", "aten::reshape", "aten::view_as", "aten::reshape_as"},
      &TSImporter::hView);
  reg({"aten::flatten"}, &TSImporter::hFlatten);
  reg({"aten::unflatten"}, &TSImporter::hUnflatten);
  reg({"aten::unsqueeze"}, &TSImporter::hUnsqueeze);
  reg({"aten::squeeze"}, &TSImporter::hSqueeze);
  reg({"aten::expand", "aten::expand_as", "aten::broadcast_to"},
      &TSImporter::hExpand);
  reg({"aten::transpose", "aten::t", "aten::swapaxes"},
      &TSImporter::hTranspose);
  reg({"aten::permute"}, &TSImporter::hPermute);
  reg({"aten::slice"}, &TSImporter::hSlice);
  reg({"aten::select"}, &TSImporter::hSelect);
  reg({"aten::narrow"}, &TSImporter::hNarrow);
  reg({"aten::split", "aten::split_with_sizes", "aten::unsafe_split"},
      &TSImporter::hSplit);
  reg({"aten::chunk", "aten::unsafe_chunk"}, &TSImporter::hChunk);
  reg({"aten::unbind"}, &TSImporter::hUnbind);
  reg({"aten::meshgrid"}, &TSImporter::hMeshgrid);
  reg({"aten::cat", "aten::concat", "aten::concatenate"}, &TSImporter::hCat);
  reg({"aten::stack"}, &TSImporter::hStack);
  reg({"aten::where"}, &TSImporter::hWhere);
  reg({"aten::masked_fill"}, &TSImporter::hMaskedFill);
  reg({"aten::triu", "aten::tril"}, &TSImporter::hTrilu);
  reg({"aten::pad", "aten::constant_pad_nd"}, &TSImporter::hPad);
  reg({"aten::cumsum"}, &TSImporter::hCumsum);
  reg({"aten::numpy_T"}, &TSImporter::hNumpyT);
  reg({"aten::full", "aten::zeros", "aten::ones", "aten::empty",
       "aten::new_zeros", "aten::new_ones", "aten::new_empty",
       "aten::new_full"},
      &TSImporter::hFull);
  reg({"aten::zeros_like", "aten::ones_like", "aten::full_like",
       "aten::empty_like"},
      &TSImporter::hFullLike);
  reg({"aten::nonzero_numpy"}, &TSImporter::hMaskIndices);
  reg({"aten::masked_select"}, &TSImporter::hMaskedSelect);
  reg({"aten::nonzero", "aten::argwhere",
       "aten::unique", "aten::_unique", "aten::_unique2", "aten::unique_dim",
       "aten::unique_consecutive", "aten::bincount", "aten::multinomial",
       "aten::poisson", "aten::randperm", "aten::binomial",
       "aten::_standard_gamma", "aten::_sample_dirichlet"},
      &TSImporter::hUnsupportedShape);
  reg({"aten::rand", "aten::randn", "aten::rand_like", "aten::randn_like",
       "aten::randint", "aten::randint_like", "aten::normal", "aten::uniform",
       "aten::exponential", "aten::bernoulli"},
      &TSImporter::hRandom);
  reg({"aten::arange"}, &TSImporter::hArange);
  reg({"aten::linspace"}, &TSImporter::hLinspace);
  reg({"aten::hann_window", "aten::hamming_window", "aten::blackman_window",
       "aten::bartlett_window"},
      &TSImporter::hWindow);
  reg({"aten::copy", "aten::fill", "aten::zero"}, &TSImporter::hCopy);
  reg({"aten::repeat"}, &TSImporter::hRepeat);
  reg({"aten::repeat_interleave"}, &TSImporter::hRepeatInterleave);
  reg({"aten::broadcast_tensors"}, &TSImporter::hBroadcastTensors);
  reg({"aten::pixel_shuffle", "aten::pixel_unshuffle", "aten::channel_shuffle",
       "aten::native_channel_shuffle"},
      &TSImporter::hPixelShuffle);
  reg({"aten::upsample_nearest1d", "aten::upsample_nearest2d",
       "aten::upsample_nearest3d"},
      &TSImporter::hUpsampleNearest);
  reg({"aten::upsample_linear1d", "aten::upsample_bilinear2d",
       "aten::upsample_trilinear3d", "aten::upsample_bicubic2d"},
      &TSImporter::hUpsampleInterpolate);
  reg({"aten::flip", "aten::fliplr", "aten::flipud"}, &TSImporter::hFlip);
  reg({"aten::hstack", "aten::vstack", "aten::row_stack", "aten::dstack",
       "aten::column_stack"},
      &TSImporter::hStackAlong);
  reg({"aten::roll"}, &TSImporter::hRoll);
  reg({"aten::clamp", "aten::clamp_min", "aten::clamp_max", "aten::clip",
       "aten::hardtanh", "aten::relu6"},
      &TSImporter::hClamp);
}
