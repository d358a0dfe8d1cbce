//===- StageCpp.cpp - varuna sections -> C++ stage code -------------------===//
//
// Each op becomes one call of StageAPI.h with its attributes as literals;
// the kernels behind those calls are the evaluator's (runtime/Kernels.h).
// A local dies (is reset) right after its last use, so a forward run without
// autograd holds no more activations than the op being computed needs.
//
//===----------------------------------------------------------------------===//

#include "varuna/Target/Cpp/StageCpp.h"
#include "varuna/Dialect/Varuna/IR/VarunaOps.h"
#include "varuna/Transforms/GraphUtils.h"
#include "varuna/runtime/OpCodes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cinttypes>
#include <cmath>
#include <map>
#include <optional>

using namespace mlir;

namespace varuna {

std::string hashJobText(StringRef bytes) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return llvm::formatv("{0:x16}", h).str();
}

namespace {

/// The first op the emitter could not generate (MLIR libraries build without
/// exceptions): set by fail(), checked after every op, turned into a
/// diagnostic on that op.
struct EmitError {
  Operation *op;
  std::string message;
};
std::optional<EmitError> pendingError;

std::string fail(Operation *op, std::string message) {
  if (!pendingError)
    pendingError = EmitError{op, std::move(message)};
  return "/*error*/";
}

std::string lit(int64_t v) {
  if (v == INT64_MIN)
    return "(-9223372036854775807LL - 1)";
  return std::to_string(v) + (v > INT32_MAX || v < INT32_MIN ? "LL" : "");
}

std::string lit(double v) {
  if (std::isnan(v))
    return "__builtin_nan(\"\")";
  if (std::isinf(v))
    return v > 0 ? "__builtin_inf()" : "-__builtin_inf()";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".eE") == std::string::npos)
    s += ".0";
  return s;
}

std::string lit(bool v) { return v ? "true" : "false"; }

std::string symInt(SymInt d) {
  if (d.isStatic())
    return lit(d.constant);
  std::string s = d.perBatch == 1 ? "B" : lit(d.perBatch) + " * B";
  if (d.constant > 0)
    s += " + " + lit(d.constant);
  else if (d.constant < 0)
    s += " - " + lit(-d.constant);
  return s;
}

std::string intList(ArrayRef<int64_t> values) {
  std::string s = "{";
  for (auto [i, v] : llvm::enumerate(values))
    s += (i ? ", " : "") + lit(v);
  return s + "}";
}

std::string elemType(Operation *op, Type t) {
  const char *name = nullptr;
  if (t.isF16()) name = "f16";
  else if (t.isBF16()) name = "bf16";
  else if (t.isF32()) name = "f32";
  else if (t.isF64()) name = "f64";
  else if (t.isInteger(1)) name = "i1";
  else if (t.isSignlessInteger(8)) name = "i8";
  else if (t.isUnsignedInteger(8)) name = "u8";
  else if (t.isSignlessInteger(32)) name = "i32";
  else if (t.isSignlessInteger(64)) name = "i64";
  if (!name) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << "element type " << t << " has no runtime equivalent";
    return fail(op, os.str());
  }
  return std::string("stage::ElemType::") + name;
}

VTensorType resultType(Operation *op) {
  auto t = op->getResult(0).getType().dyn_cast<VTensorType>();
  if (!t)
    fail(op, "result is not a !varuna.tensor");
  return t;
}

std::string resultShape(Operation *op) {
  VTensorType t = resultType(op);
  if (!t)
    return "{}";
  std::string s = "{";
  for (int64_t i = 0, e = t.getRank(); i < e; ++i)
    s += (i ? ", " : "") + symInt(t.getDim(i));
  return s + "}";
}

std::string resultElem(Operation *op) {
  VTensorType t = resultType(op);
  return t ? elemType(op, t.getElementType()) : "/*error*/";
}

template <size_t N>
std::string code(const char *type, const char *const (&names)[N], int64_t v) {
  return std::string("stage::") + type + "::" + names[v];
}

/// Emits one section body. Parameters are numbered in the order the body
/// first reads them; `paramNames` receives the names in that order.
class BodyEmitter {
public:
  BodyEmitter(func::FuncOp f) : func(f) {}

  /// The body's statements (no signature); on error sets pendingError.
  std::string emit(std::vector<std::string> &paramNames);

private:
  std::string name(Value v) {
    auto it = names.find(v);
    if (it == names.end())
      return fail(v.getDefiningOp() ? v.getDefiningOp() : func,
                  "value used before its definition");
    return it->second;
  }
  std::string operand(Operation *op, unsigned i) {
    return name(op->getOperand(i));
  }
  std::string optional(Value v) {
    return v ? name(v) : std::string("stage::Tensor()");
  }
  /// The call computing `op`'s single result.
  std::string call(Operation *op);
  std::string constant(ConstantOp op);
  /// Groups the body's slices that tile their operand (splits below).
  void findSplits(Block &body);

  /// A value's slices along one axis, step 1, that tile it exactly (two or
  /// more, the axis static): generated as one stage::split into an array of
  /// pieces, made at the first of the slices; each slice then takes its
  /// piece. The values are the ones the slices would give (views of the
  /// operand); the backward concatenates instead of adding zero-padded
  /// gradients -- a fused qkv projection split into q, k and v, say.
  struct Split {
    std::vector<int64_t> sizes;
    std::string array; // empty until emitted
  };
  std::vector<Split> splits;
  llvm::DenseMap<Operation *, std::pair<unsigned, unsigned>> pieceOf;

  func::FuncOp func;
  llvm::DenseMap<Value, std::string> names;
  llvm::StringMap<unsigned> paramIndex;
  std::string statics; // cached constants, emitted before the statements
  unsigned nextConst = 0;
};

std::string BodyEmitter::constant(ConstantOp op) {
  auto dense = op.getValue().dyn_cast<DenseElementsAttr>();
  if (!dense)
    return fail(op, "only dense constants can be generated");
  auto type = dense.getType();
  std::string shape = intList(type.getShape());
  std::string k = "k" + std::to_string(nextConst++);
  int64_t n = dense.isSplat() ? 1 : type.getNumElements();
  std::string values, fn;
  Type et = type.getElementType();
  if (et.isa<FloatType>()) {
    fn = "constant_f";
    values = "static const double " + k + "_v[] = {";
    unsigned i = 0;
    for (APFloat v : dense.getValues<APFloat>()) {
      if (i == n)
        break;
      bool lost = false;
      v.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
      values += (i++ ? ", " : "") + lit(v.convertToDouble());
    }
  } else if (auto it = et.dyn_cast<IntegerType>()) {
    fn = "constant_i";
    bool zext = it.isUnsigned() || it.getWidth() == 1;
    values = "static const int64_t " + k + "_v[] = {";
    unsigned i = 0;
    for (APInt v : dense.getValues<APInt>()) {
      if (i == n)
        break;
      values += (i++ ? ", " : "") +
                lit(zext ? static_cast<int64_t>(v.getZExtValue())
                         : v.getSExtValue());
    }
  } else {
    return fail(op, "unsupported constant element type");
  }
  statics += "  " + values + "};\n";
  statics += "  static const stage::Tensor &" + k + " = *new stage::Tensor(stage::" +
             fn + "(" + resultElem(op) + ", " + shape + ", " + k + "_v, " +
             lit(n) + "));\n";
  return k;
}

std::string BodyEmitter::call(Operation *op) {
  auto o = [&](unsigned i) { return operand(op, i); };
  auto bin = [&](rt::Binary k) {
    return "stage::binary(" + code("Binary", rt::kBinaryNames, int(k)) +
           ", " + o(0) + ", " + o(1) + ")";
  };
  return llvm::TypeSwitch<Operation *, std::string>(op)
      .Case([&](FullOp f) {
        Attribute v = f.getValue();
        if (auto fa = v.dyn_cast<FloatAttr>())
          return "stage::full_f(" + resultElem(op) + ", " + resultShape(op) +
                 ", " + lit(fa.getValueAsDouble()) + ")";
        int64_t iv = 0;
        if (auto b = v.dyn_cast<BoolAttr>())
          iv = b.getValue();
        else if (auto ia = v.dyn_cast<IntegerAttr>())
          iv = ia.getType().isInteger(1) || ia.getType().isUnsignedInteger()
                   ? static_cast<int64_t>(ia.getValue().getZExtValue())
                   : ia.getValue().getSExtValue();
        else
          return fail(op, "unsupported varuna.full value");
        return "stage::full_i(" + resultElem(op) + ", " + resultShape(op) +
               ", " + lit(iv) + ")";
      })
      .Case([&](ArangeOp a) {
        VTensorType t = resultType(op);
        if (!t || t.getRank() != 1)
          return fail(op, "varuna.arange must have a 1-d result");
        return "stage::arange(" + resultElem(op) + ", " +
               symInt(t.getDim(0)) + ", " +
               lit(a.getStart().convertToDouble()) + ", " +
               lit(a.getStep().convertToDouble()) + ")";
      })
      .Case([&](AddOp) { return bin(rt::Binary::add); })
      .Case([&](SubOp) { return bin(rt::Binary::sub); })
      .Case([&](MulOp) { return bin(rt::Binary::mul); })
      .Case([&](DivOp d) {
        return d->hasAttr(kStepDivisorAttr)
                   ? "stage::step_divide(" + o(0) + ", " + o(1) + ")"
                   : bin(rt::Binary::div);
      })
      .Case([&](PowOp) { return bin(rt::Binary::pow); })
      .Case([&](MaximumOp) { return bin(rt::Binary::maximum); })
      .Case([&](MinimumOp) { return bin(rt::Binary::minimum); })
      .Case([&](AndOp) { return bin(rt::Binary::logical_and); })
      .Case([&](OrOp) { return bin(rt::Binary::logical_or); })
      .Case([&](CompareOp c) {
        return "stage::compare(" +
               code("Compare", rt::kCompareNames, int(c.getPredicate())) +
               ", " + o(0) + ", " + o(1) + ")";
      })
      .Case([&](WhereOp) {
        return "stage::where(" + o(0) + ", " + o(1) + ", " + o(2) + ")";
      })
      .Case([&](UnaryOp u) {
        return "stage::unary(" +
               code("Unary", rt::kUnaryNames, int(u.getKind())) + ", " + o(0) +
               ")";
      })
      .Case([&](CastOp) {
        return "stage::cast(" + o(0) + ", " + resultElem(op) + ")";
      })
      .Case([&](DropoutOp d) {
        return "stage::dropout(ctx, " + o(0) + ", " +
               lit(d.getRatio().convertToDouble()) + ")";
      })
      .Case([&](RandomOp r) {
        return "stage::random(ctx, " + resultElem(op) + ", " +
               resultShape(op) + ", " +
               code("Distribution", rt::kDistributionNames,
                    int(r.getDistribution())) +
               ", " + lit(r.getA().convertToDouble()) + ", " +
               lit(r.getB().convertToDouble()) + ")";
      })
      .Case([&](ReshapeOp) {
        return "stage::reshape(" + o(0) + ", " + resultShape(op) + ")";
      })
      .Case([&](ExpandOp) {
        return "stage::expand(" + o(0) + ", " + resultShape(op) + ")";
      })
      .Case([&](TransposeOp t) {
        return "stage::transpose(" + o(0) + ", " + intList(t.getPerm()) + ")";
      })
      .Case([&](SliceOp s) {
        return "stage::slice(" + o(0) + ", " +
               lit(static_cast<int64_t>(s.getAxis())) + ", " +
               lit(static_cast<int64_t>(s.getStart())) + ", " +
               lit(static_cast<int64_t>(s.getEnd())) + ", " +
               lit(static_cast<int64_t>(s.getStep())) + ")";
      })
      .Case([&](ConcatOp c) {
        std::string s = "stage::concat({";
        for (unsigned i = 0, e = op->getNumOperands(); i < e; ++i)
          s += (i ? ", " : "") + o(i);
        return s + "}, " + lit(static_cast<int64_t>(c.getAxis())) + ")";
      })
      .Case([&](GatherOp g) {
        if (std::optional<int64_t> pad = g.getPaddingIdx())
          return "stage::embedding(" + o(0) + ", " + o(1) + ", " + lit(*pad) +
                 ")";
        return "stage::gather(" + o(0) + ", " + o(1) + ", " +
               lit(static_cast<int64_t>(g.getAxis())) + ")";
      })
      .Case([&](GatherElementsOp g) {
        return "stage::gather_elements(" + o(0) + ", " + o(1) + ", " +
               lit(static_cast<int64_t>(g.getAxis())) + ")";
      })
      .Case([&](ScatterNDOp) {
        return "stage::scatter_nd(" + o(0) + ", " + o(1) + ", " + o(2) + ")";
      })
      .Case([&](LinalgOp l) {
        std::string s = "stage::linalg(" +
                        code("Linalg", rt::kLinalgNames, int(l.getKind()));
        for (unsigned i = 0; i < l->getNumOperands(); ++i)
          s += ", " + o(i);
        return s + ")";
      })
      .Case([&](CumsumOp c) {
        return "stage::cumsum(" + o(0) + ", " +
               lit(static_cast<int64_t>(c.getAxis())) + ", " +
               lit(c.getExclusive()) + ", " + lit(c.getReverse()) + ")";
      })
      .Case([&](PadOp p) {
        Attribute v = p.getValue();
        double value = 0;
        if (auto fa = v.dyn_cast<FloatAttr>())
          value = fa.getValueAsDouble();
        else if (auto ia = v.dyn_cast<IntegerAttr>())
          value = static_cast<double>(ia.getValue().getSExtValue());
        else if (auto b = v.dyn_cast<BoolAttr>())
          value = b.getValue();
        return "stage::pad(" + o(0) + ", " + intList(p.getPads()) + ", " +
               lit(value) + ")";
      })
      .Case([&](TriluOp t) {
        return "stage::trilu(" + o(0) + ", " +
               lit(static_cast<int64_t>(t.getK())) + ", " +
               lit(t.getUpper()) + ")";
      })
      .Case([&](ReduceOp r) {
        return "stage::reduce(" +
               code("Reduce", rt::kReduceNames, int(r.getKind())) + ", " +
               o(0) + ", " + intList(r.getAxes()) + ", " +
               lit(r.getKeepdim()) +
               (r.getStepMean() ? ", /*step_mean=*/true)" : ")");
      })
      .Case([&](SoftmaxOp s) {
        if (s.getSafe() && !s.getLog())
          return "stage::safe_softmax(" + o(0) + ", " +
                 lit(static_cast<int64_t>(s.getAxis())) + ")";
        return "stage::softmax(" + o(0) + ", " +
               lit(static_cast<int64_t>(s.getAxis())) + ", " +
               lit(static_cast<bool>(s.getLog())) + ")";
      })
      .Case([&](LayerNormOp l) {
        return "stage::layer_norm(" + o(0) + ", " +
               lit(static_cast<int64_t>(l.getAxis())) + ", " +
               optional(l.getWeight()) + ", " + optional(l.getBias()) + ", " +
               lit(l.getEpsilon().convertToDouble()) + ")";
      })
      .Case([&](BatchNormOp b) {
        return "stage::batch_norm(" + o(0) + ", " + o(1) + ", " + o(2) +
               ", " + optional(b.getRunningMean()) + ", " +
               optional(b.getRunningVar()) + ", " +
               lit(b.getMomentum().convertToDouble()) + ", " +
               lit(b.getEpsilon().convertToDouble()) + ")";
      })
      .Case([&](MatmulOp) {
        return "stage::matmul(" + o(0) + ", " + o(1) + ")";
      })
      .Case([&](AttentionOp a) {
        return "stage::attention(" + o(0) + ", " + o(1) + ", " + o(2) + ", " +
               optional(a.getMask()) + ", " +
               lit(a.getScale().convertToDouble()) + ")";
      })
      .Case([&](ConvOp c) {
        return "stage::conv(" + o(0) + ", " + o(1) + ", " +
               optional(c.getBias()) + ", " + intList(c.getStrides()) + ", " +
               intList(c.getPads()) + ", " + intList(c.getDilations()) + ", " +
               lit(static_cast<int64_t>(c.getGroups())) + ")";
      })
      .Case([&](ConvTransposeOp c) {
        return "stage::conv_transpose(" + o(0) + ", " + o(1) + ", " +
               optional(c.getBias()) + ", " + intList(c.getStrides()) + ", " +
               intList(c.getPads()) + ", " + intList(c.getOutputPadding()) +
               ", " + intList(c.getDilations()) + ", " +
               lit(static_cast<int64_t>(c.getGroups())) + ")";
      })
      .Case([&](PoolOp p) {
        return "stage::pool(" + code("Pool", rt::kPoolNames, int(p.getKind())) +
               ", " + o(0) + ", " + intList(p.getKernel()) + ", " +
               intList(p.getStrides()) + ", " + intList(p.getPads()) + ", " +
               intList(p.getDilations()) + ", " + lit(p.getCeilMode()) + ", " +
               lit(p.getCountIncludePad()) + ")";
      })
      .Case([&](CrossEntropyOp c) {
        auto ignore = c.getIgnoreIndex();
        if (c.getWeight()) {
          auto smoothing = c.getLabelSmoothing();
          return "stage::cross_entropy_weighted(ctx, " + o(0) + ", " + o(1) +
                 ", " + o(2) + ", " +
                 code("LossReduction", rt::kLossReductionNames,
                      int(c.getReduction())) +
                 ", " + lit(ignore.has_value()) + ", " +
                 lit(ignore ? static_cast<int64_t>(*ignore) : int64_t(0)) +
                 ", " + lit(static_cast<bool>(c.getLogInput())) + ", " +
                 lit(smoothing ? smoothing->convertToDouble() : 0.0) + ")";
        }
        if (auto smoothing = c.getLabelSmoothing();
            smoothing && !smoothing->isZero())
          return "stage::cross_entropy_smoothed(ctx, " + o(0) + ", " + o(1) +
                 ", " +
                 code("LossReduction", rt::kLossReductionNames,
                      int(c.getReduction())) +
                 ", " + lit(ignore.has_value()) + ", " +
                 lit(ignore ? static_cast<int64_t>(*ignore) : int64_t(0)) +
                 ", " + lit(smoothing->convertToDouble()) + ")";
        return "stage::cross_entropy(ctx, " + o(0) + ", " + o(1) + ", " +
               code("LossReduction", rt::kLossReductionNames,
                    int(c.getReduction())) +
               ", " + lit(ignore.has_value()) + ", " +
               lit(ignore ? static_cast<int64_t>(*ignore) : int64_t(0)) +
               ", " + lit(static_cast<bool>(c.getLogInput())) + ")";
      })
      .Default([&](Operation *) -> std::string {
        return fail(op, "'" + op->getName().getStringRef().str() +
                            "' has no C++ code generator");
      });
}

void BodyEmitter::findSplits(Block &body) {
  // Per (operand, axis): its step-1 slices in program order.
  llvm::MapVector<std::pair<Value, int64_t>, SmallVector<SliceOp>> users;
  for (Operation &op : body)
    if (auto s = dyn_cast<SliceOp>(op))
      if (s.getStep() == 1)
        users[{s.getOperand(), static_cast<int64_t>(s.getAxis())}].push_back(
            s);
  for (auto &[key, slices] : users) {
    auto t = key.first.getType().dyn_cast<VTensorType>();
    if (slices.size() < 2 || !t || key.second < 0 ||
        key.second >= t.getRank() || !t.getDim(key.second).isStatic())
      continue;
    int64_t size = t.getDim(key.second).constant;
    SmallVector<SliceOp> byStart(slices.begin(), slices.end());
    llvm::sort(byStart, [](SliceOp a, SliceOp b) {
      return a.getStart() < b.getStart();
    });
    int64_t at = 0;
    bool tiles = true;
    for (SliceOp sl : byStart) {
      tiles &= static_cast<int64_t>(sl.getStart()) == at &&
               static_cast<int64_t>(sl.getEnd()) > at;
      at = static_cast<int64_t>(sl.getEnd());
    }
    if (!tiles || at != size)
      continue;
    Split sp;
    for (auto [i, sl] : llvm::enumerate(byStart)) {
      sp.sizes.push_back(static_cast<int64_t>(sl.getEnd() - sl.getStart()));
      pieceOf[sl] = {static_cast<unsigned>(splits.size()),
                     static_cast<unsigned>(i)};
    }
    splits.push_back(std::move(sp));
  }
}

std::string BodyEmitter::emit(std::vector<std::string> &paramNames) {
  Block &body = func.getBody().front();
  findSplits(body);
  for (BlockArgument a : body.getArguments())
    names[a] = "args[" + std::to_string(a.getArgNumber()) + "]";

  // Last use of each local (by op position) so it can be released there.
  llvm::DenseMap<Operation *, unsigned> position;
  for (auto [i, op] : llvm::enumerate(body))
    position[&op] = i;
  llvm::DenseMap<Value, unsigned> lastUse;
  for (Operation &op : body)
    for (Value v : op.getOperands())
      lastUse[v] = std::max(lastUse.lookup(v), position[&op]);

  std::string stmts;
  std::map<unsigned, std::vector<std::string>> releaseAfter;
  unsigned nextLocal = 0;
  for (Operation &op : body) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [i, v] : llvm::enumerate(ret.getOperands()))
        stmts += "  results[" + std::to_string(i) + "] = " + name(v) + ";\n";
      continue;
    }
    if (isa<CutPointOp>(op)) { // a boundary inside a section: pass-through
      for (auto [r, v] : llvm::zip(op.getResults(), op.getOperands()))
        names[r] = name(v);
      continue;
    }
    if (auto gp = dyn_cast<GetParamOp>(op)) {
      auto [it, inserted] =
          paramIndex.try_emplace(gp.getName(), paramNames.size());
      if (inserted)
        paramNames.push_back(gp.getName().str());
      names[gp.getResult()] = "params[" + std::to_string(it->second) + "]";
      continue;
    }
    if (auto c = dyn_cast<ConstantOp>(op)) {
      names[c.getResult()] = constant(c);
      continue;
    }
    if (op.getNumResults() != 1 || op.getNumRegions() != 0) {
      fail(&op, "only single-result ops without regions can be generated");
      break;
    }
    std::string local = "v" + std::to_string(nextLocal++);
    auto piece = pieceOf.find(&op);
    if (piece != pieceOf.end()) {
      Split &sp = splits[piece->second.first];
      if (sp.array.empty()) {
        sp.array = "split" + std::to_string(piece->second.first);
        stmts += "  stage::Tensor " + sp.array + "[" +
                 std::to_string(sp.sizes.size()) + "];\n  stage::split(" +
                 operand(&op, 0) + ", " +
                 lit(static_cast<int64_t>(cast<SliceOp>(op).getAxis())) +
                 ", " + intList(sp.sizes) + ", " + sp.array + ");\n";
      }
      stmts += "  stage::Tensor " + local + " = std::move(" + sp.array + "[" +
               std::to_string(piece->second.second) + "]);\n";
    } else {
      stmts += "  stage::Tensor " + local + " = " + call(&op) + ";\n";
    }
    if (pendingError)
      break;
    names[op.getResult(0)] = local;
    unsigned last = lastUse.count(op.getResult(0))
                        ? lastUse[op.getResult(0)]
                        : position[&op];
    releaseAfter[last].push_back(local);
    // Locals whose last use is this op (its operands, or its own result if
    // unused) die now.
    for (const std::string &dead : releaseAfter[position[&op]])
      stmts += "  " + dead + " = stage::Tensor();\n";
  }
  return statics + stmts;
}

} // namespace

FailureOr<StageCppResult> emitStageCpp(ModuleOp module, StringRef jobHash) {
  FailureOr<SmallVector<func::FuncOp>> found = getSections(module);
  if (failed(found))
    return failure();
  SmallVector<func::FuncOp> &sections = *found;
  if (sections.empty())
    return module.emitError("no sections to generate code for: compile the "
                            "job with varuna-compile (varuna-outline-sections)"),
           failure();

  StageCppResult result;
  result.numSections = sections.size();
  std::map<std::string, unsigned> bodyOf; // statements -> body index
  std::vector<std::string> bodies;
  struct Entry {
    std::string name;
    unsigned body, numArgs, numResults;
    std::vector<std::string> params;
  };
  std::vector<Entry> entries;
  for (func::FuncOp s : sections) {
    Entry e;
    e.name = s.getSymName().str();
    e.numArgs = s.getNumArguments();
    e.numResults = s.getNumResults();
    pendingError.reset();
    BodyEmitter emitter(s);
    std::string stmts = emitter.emit(e.params);
    if (pendingError) {
      EmitError err = *pendingError;
      pendingError.reset();
      return err.op->emitError("cannot generate code for section @")
                 << e.name << ": " << err.message,
             failure();
    }
    // The signature is part of the identity (argument/result counts).
    std::string key = std::to_string(e.numArgs) + "/" +
                      std::to_string(e.numResults) + "/" +
                      std::to_string(e.params.size()) + "\n" + stmts;
    auto [it, inserted] = bodyOf.try_emplace(key, bodies.size());
    if (inserted)
      bodies.push_back(stmts);
    e.body = it->second;
    entries.push_back(std::move(e));
  }
  result.numBodies = bodies.size();

  const char *header =
      "// Generated by varuna-translate --emit-stage-cpp. Do not edit.\n"
      "#include \"varuna/runtime/StageAPI.h\"\n"
      "namespace stage = varuna::stage;\n";
  for (auto [i, stmts] : llvm::enumerate(bodies)) {
    std::string users;
    for (const Entry &e : entries)
      if (e.body == i)
        users += (users.empty() ? "" : ", ") + e.name;
    GeneratedFile f;
    f.name = "body_" + std::to_string(i) + ".cpp";
    f.contents = std::string(header) + "\n// Used by: " + users + "\n" +
                 "extern \"C\" VARUNA_STAGE_API void varuna_body_" +
                 std::to_string(i) +
                 "(stage::Context &ctx, const stage::Tensor *args, "
                 "const stage::Tensor *params, stage::Tensor *results) {\n"
                 "  const int64_t B = ctx.batch;\n  (void)B;\n" +
                 stmts + "}\n";
    result.files.push_back(std::move(f));
  }

  std::string table = std::string(header) + "\n";
  for (unsigned i = 0; i < bodies.size(); ++i)
    table += "extern \"C\" void varuna_body_" + std::to_string(i) +
             "(stage::Context &, const stage::Tensor *, const stage::Tensor "
             "*, stage::Tensor *);\n";
  table += "\nnamespace {\n";
  for (auto [k, e] : llvm::enumerate(entries)) {
    table += "const char *const params_" + std::to_string(k) + "[] = {";
    for (auto [i, p] : llvm::enumerate(e.params)) {
      std::string escaped;
      llvm::raw_string_ostream os(escaped);
      os.write_escaped(p);
      table += std::string(i ? ", " : "") + "\"" + os.str() + "\"";
    }
    if (e.params.empty())
      table += "nullptr";
    table += "};\n";
  }
  table += "const stage::SectionEntry sections[] = {\n";
  for (auto [k, e] : llvm::enumerate(entries))
    table += llvm::formatv("  {{\"{0}\", {1}, varuna_body_{1}, {2}, {3}, {4}, "
                           "params_{5}},\n",
                           e.name, e.body, e.numArgs, e.params.size(),
                           e.numResults, k)
                 .str();
  table += "};\n";
  table += llvm::formatv("const stage::JobTable table = {{stage::kAbiVersion, "
                         "\"{0}\", {1}, sections, {2}};\n",
                         jobHash, entries.size(), bodies.size())
               .str();
  table += "} // namespace\n\n"
           "extern \"C\" VARUNA_STAGE_API const stage::JobTable *"
           "varuna_stage_job_table() {\n  return &table;\n}\n";
  result.files.push_back({"job_table.cpp", table});
  return result;
}

} // namespace varuna
