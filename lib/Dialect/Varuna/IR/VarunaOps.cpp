//===- VarunaOps.cpp - varuna dialect operations --------------------------===//
//
// Verifiers and result-type inference. Every message names the op (the
// diagnostic's location carries the source node) and the offending sizes.
//
//===----------------------------------------------------------------------===//

#include "varuna/Dialect/Varuna/IR/VarunaOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace varuna;

#include "varuna/Dialect/Varuna/IR/VarunaEnums.cpp.inc"
#define GET_OP_CLASSES
#include "varuna/Dialect/Varuna/IR/VarunaOps.cpp.inc"

namespace {
/// Emits `msg` at `loc` (when inference runs with a location) and fails.
LogicalResult fail(std::optional<Location> loc, const Twine &msg) {
  if (loc)
    mlir::emitError(*loc) << msg;
  return failure();
}

VTensorType tensorOf(Value v) { return v.getType().cast<VTensorType>(); }

std::string typeStr(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return os.str();
}

bool isFloat(Type t) { return t.isa<FloatType>(); }
bool isInteger(Type t) { return t.isa<IntegerType>(); }

LogicalResult checkAxis(std::optional<Location> loc, StringRef op,
                        int64_t axis, int64_t rank) {
  if (axis < 0 || axis >= rank)
    return fail(loc, Twine(op) + ": axis " + Twine(axis) +
                         " out of range for rank " + Twine(rank));
  return success();
}

LogicalResult inferBroadcast(std::optional<Location> loc, StringRef op,
                             VTensorType a, VTensorType b, Type elementType,
                             SmallVectorImpl<Type> &results) {
  std::string error;
  FailureOr<VTensorType> t = broadcastTypes(a, b, elementType, error);
  if (failed(t))
    return fail(loc, Twine(op) + ": " + error + " in " + typeStr(a) + " and " +
                         typeStr(b));
  results.push_back(*t);
  return success();
}

LogicalResult inferBinary(std::optional<Location> loc, StringRef op,
                          ValueRange operands,
                          SmallVectorImpl<Type> &results,
                          bool requireBool = false) {
  VTensorType a = tensorOf(operands[0]), b = tensorOf(operands[1]);
  if (a.getElementType() != b.getElementType())
    return fail(loc, Twine(op) + ": operand element types differ (" +
                         typeStr(a.getElementType()) + " vs " +
                         typeStr(b.getElementType()) + ")");
  if (requireBool && !a.getElementType().isInteger(1))
    return fail(loc, Twine(op) + ": operands must be i1");
  return inferBroadcast(loc, op, a, b, a.getElementType(), results);
}
} // namespace

#define VARUNA_BINARY_INFER(OP, NAME, BOOL)                                    \
  LogicalResult OP::inferReturnTypes(                                          \
      MLIRContext *, std::optional<Location> loc, ValueRange operands,         \
      DictionaryAttr, RegionRange, SmallVectorImpl<Type> &results) {           \
    return inferBinary(loc, NAME, operands, results, BOOL);                    \
  }
VARUNA_BINARY_INFER(AddOp, "varuna.add", false)
VARUNA_BINARY_INFER(SubOp, "varuna.sub", false)
VARUNA_BINARY_INFER(MulOp, "varuna.mul", false)
VARUNA_BINARY_INFER(DivOp, "varuna.div", false)
VARUNA_BINARY_INFER(PowOp, "varuna.pow", false)
VARUNA_BINARY_INFER(MaximumOp, "varuna.maximum", false)
VARUNA_BINARY_INFER(MinimumOp, "varuna.minimum", false)
VARUNA_BINARY_INFER(AndOp, "varuna.and", true)
VARUNA_BINARY_INFER(OrOp, "varuna.or", true)
#undef VARUNA_BINARY_INFER

//===----------------------------------------------------------------------===//
// Parameters and constants
//===----------------------------------------------------------------------===//

LogicalResult ParamOp::verify() {
  VTensorType t = getTensorType();
  if (t.isBatched())
    return emitOpError("parameter '")
           << getSymName() << "' has a batch-dependent type " << t;
  if (getInitAttr() && !getInitData())
    return emitOpError("init must be a #varuna.data attribute, got ")
           << getInitAttr();
  if (auto init = getInitData()) {
    SymInt bytes = t.getSizeInBytes();
    if (init.getSize() != bytes.constant)
      return emitOpError("parameter '")
             << getSymName() << "' of " << bytes.constant
             << " bytes has initial data of " << init.getSize() << " bytes";
  }
  return success();
}

LogicalResult GetParamOp::verifySymbolUses(SymbolTableCollection &tables) {
  auto param = tables.lookupNearestSymbolFrom<ParamOp>(*this, getNameAttr());
  if (!param)
    return emitOpError("refers to unknown parameter @") << getName();
  if (param.getType() != getType())
    return emitOpError("result type ")
           << getType() << " differs from the type " << param.getType()
           << " of parameter @" << getName();
  return success();
}

LogicalResult ConstantOp::verify() {
  auto vt = getValue().getType().dyn_cast<ShapedType>();
  VTensorType rt = getType().cast<VTensorType>();
  if (!vt || !vt.hasStaticShape())
    return emitOpError("value must have a static shaped type");
  if (rt.isBatched())
    return emitOpError("constant cannot have a batch-dependent type ") << rt;
  if (vt.getShape() != rt.getShape() ||
      vt.getElementType() != rt.getElementType())
    return emitOpError("value type ")
           << vt << " does not match result type " << rt;
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult FullOp::verify() {
  Type elt = getType().cast<VTensorType>().getElementType();
  auto typed = getValue().dyn_cast<TypedAttr>();
  if (!typed || !(typed.isa<FloatAttr>() || typed.isa<IntegerAttr>()))
    return emitOpError("fill value must be a float or integer attribute");
  if (typed.getType() != elt)
    return emitOpError("fill value of type ")
           << typed.getType() << " does not match element type " << elt;
  return success();
}

LogicalResult ArangeOp::verify() {
  VTensorType t = getType().cast<VTensorType>();
  if (t.getRank() != 1)
    return emitOpError("result must be 1-D, got ") << t;
  if (t.getElementType().isInteger(1))
    return emitOpError("result cannot be i1");
  return success();
}

LogicalResult CutPointOp::inferReturnTypes(MLIRContext *,
                                           std::optional<Location>,
                                           ValueRange operands, DictionaryAttr,
                                           RegionRange,
                                           SmallVectorImpl<Type> &results) {
  for (Value v : operands)
    results.push_back(v.getType());
  return success();
}

LogicalResult CutPointOp::verify() {
  if (getValues().getTypes() != getResults().getTypes())
    return emitOpError("results must have the types of the values");
  if (getIndex() < 1)
    return emitOpError("index must be at least 1, got ") << getIndex();
  return success();
}

LogicalResult SharedParamOp::verifySymbolUses(SymbolTableCollection &tables) {
  if (!tables.lookupNearestSymbolFrom<ParamOp>(*this, getParamAttr()))
    return emitOpError("refers to unknown parameter @") << getParam();
  return success();
}

LogicalResult SharedParamOp::verify() {
  ArrayRef<int64_t> s = getSections();
  if (s.size() < 2)
    return emitOpError("a tie needs at least two sections");
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] < 0 || (i && s[i - 1] >= s[i]))
      return emitOpError("sections must be sorted, unique and non-negative");
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult CompareOp::inferReturnTypes(MLIRContext *ctx,
                                          std::optional<Location> loc,
                                          ValueRange operands, DictionaryAttr,
                                          RegionRange,
                                          SmallVectorImpl<Type> &results) {
  VTensorType a = tensorOf(operands[0]), b = tensorOf(operands[1]);
  if (a.getElementType() != b.getElementType())
    return fail(loc, "varuna.compare: operand element types differ (" +
                         typeStr(a.getElementType()) + " vs " +
                         typeStr(b.getElementType()) + ")");
  return inferBroadcast(loc, "varuna.compare", a, b,
                        IntegerType::get(ctx, 1), results);
}

LogicalResult WhereOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        ValueRange operands, DictionaryAttr,
                                        RegionRange,
                                        SmallVectorImpl<Type> &results) {
  VTensorType c = tensorOf(operands[0]), a = tensorOf(operands[1]),
             b = tensorOf(operands[2]);
  if (!c.getElementType().isInteger(1))
    return fail(loc, "varuna.where: condition must be i1, got " +
                         typeStr(c.getElementType()));
  if (a.getElementType() != b.getElementType())
    return fail(loc, "varuna.where: value element types differ (" +
                         typeStr(a.getElementType()) + " vs " +
                         typeStr(b.getElementType()) + ")");
  SmallVector<Type, 1> ab;
  if (failed(inferBroadcast(loc, "varuna.where", a, b, a.getElementType(),
                            ab)))
    return failure();
  return inferBroadcast(loc, "varuna.where", c, ab[0].cast<VTensorType>(),
                        a.getElementType(), results);
}

LogicalResult UnaryOp::verify() {
  Type elt = getType().cast<VTensorType>().getElementType();
  switch (getKind()) {
  case UnaryKind::neg:
  case UnaryKind::abs:
    if (elt.isInteger(1))
      return emitOpError("'") << stringifyUnaryKind(getKind())
                              << "' does not take i1";
    return success();
  case UnaryKind::logical_not:
    if (!elt.isInteger(1))
      return emitOpError("'not' takes i1, got ") << elt;
    return success();
  case UnaryKind::stop_gradient:
    return success();
  default:
    if (!isFloat(elt))
      return emitOpError("'") << stringifyUnaryKind(getKind())
                              << "' takes a floating-point tensor, got "
                              << elt;
    return success();
  }
}

LogicalResult CastOp::verify() {
  VTensorType in = tensorOf(getInput()), out = getType().cast<VTensorType>();
  if (in.getShape() != out.getShape() || in.getBatchDim() != out.getBatchDim())
    return emitOpError("changes the shape: ") << in << " -> " << out;
  return success();
}

LogicalResult DropoutOp::verify() {
  double r = getRatio().convertToDouble();
  if (!(r >= 0.0 && r < 1.0))
    return emitOpError("ratio must be in [0, 1), got ") << r;
  if (!isFloat(tensorOf(getInput()).getElementType()))
    return emitOpError("takes a floating-point tensor");
  return success();
}

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  VTensorType in = tensorOf(getInput()), out = getType().cast<VTensorType>();
  if (in.getElementType() != out.getElementType())
    return emitOpError("changes the element type: ") << in << " -> " << out;
  SymInt a = in.getNumElements(), b = out.getNumElements();
  if (a != b) {
    auto diag = emitOpError("element count ")
                << a.str() << " of " << in << " differs from " << b.str()
                << " of " << out;
    if (a.perBatch && b.isStatic())
      diag << " (a fixed target shape for a batch-dependent tensor: the "
              "model was exported with its batch size baked into a shape)";
    return diag;
  }
  return success();
}

LogicalResult ExpandOp::verify() {
  VTensorType in = tensorOf(getInput()), out = getType().cast<VTensorType>();
  if (in.getElementType() != out.getElementType())
    return emitOpError("changes the element type: ") << in << " -> " << out;
  std::string error;
  FailureOr<VTensorType> b =
      broadcastTypes(in, out, in.getElementType(), error);
  if (failed(b) || *b != out)
    return emitOpError("cannot broadcast ")
           << in << " to " << out << (error.empty() ? "" : ": ") << error;
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *ctx,
                                            std::optional<Location> loc,
                                            ValueRange operands,
                                            DictionaryAttr attrs,
                                            RegionRange regions,
                                            SmallVectorImpl<Type> &results) {
  Adaptor adaptor(operands, attrs, regions);
  VTensorType in = tensorOf(adaptor.getInput());
  ArrayRef<int64_t> perm = adaptor.getPerm();
  if (static_cast<int64_t>(perm.size()) != in.getRank())
    return fail(loc, "varuna.transpose: permutation of " +
                         Twine(perm.size()) + " entries for rank " +
                         Twine(in.getRank()));
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<SymInt> dims;
  for (int64_t p : perm) {
    if (p < 0 || p >= in.getRank() || seen[p])
      return fail(loc, "varuna.transpose: not a permutation");
    seen[p] = true;
    dims.push_back(in.getDim(p));
  }
  results.push_back(VTensorType::getFromDims(ctx, dims, in.getElementType()));
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *ctx,
                                        std::optional<Location> loc,
                                        ValueRange operands,
                                        DictionaryAttr attrs,
                                        RegionRange regions,
                                        SmallVectorImpl<Type> &results) {
  Adaptor adaptor(operands, attrs, regions);
  VTensorType in = tensorOf(adaptor.getInput());
  int64_t axis = adaptor.getAxis(), step = adaptor.getStep();
  if (failed(checkAxis(loc, "varuna.slice", axis, in.getRank())))
    return failure();
  if (axis == in.getBatchDim())
    return fail(loc, "varuna.slice: cannot slice the batch-dependent "
                     "dimension " + Twine(axis));
  if (step < 1)
    return fail(loc, "varuna.slice: step must be positive, got " + Twine(step));
  int64_t size = in.getShape()[axis];
  auto clampIndex = [&](int64_t i) {
    if (i < 0)
      i += size;
    return std::min(std::max<int64_t>(i, 0), size);
  };
  int64_t start = clampIndex(adaptor.getStart()),
          end = clampIndex(adaptor.getEnd());
  int64_t n = end > start ? (end - start + step - 1) / step : 0;
  SmallVector<SymInt> dims = in.getDims();
  dims[axis] = n;
  results.push_back(VTensorType::getFromDims(ctx, dims, in.getElementType()));
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *ctx,
                                         std::optional<Location> loc,
                                         ValueRange operands,
                                         DictionaryAttr attrs,
                                         RegionRange regions,
                                         SmallVectorImpl<Type> &results) {
  Adaptor adaptor(operands, attrs, regions);
  if (adaptor.getInputs().empty())
    return fail(loc, "varuna.concat: needs at least one input");
  VTensorType first = tensorOf(adaptor.getInputs()[0]);
  int64_t axis = adaptor.getAxis();
  if (failed(checkAxis(loc, "varuna.concat", axis, first.getRank())))
    return failure();
  SmallVector<SymInt> dims = first.getDims();
  dims[axis] = 0;
  for (Value v : adaptor.getInputs()) {
    VTensorType t = tensorOf(v);
    if (t.getRank() != first.getRank() ||
        t.getElementType() != first.getElementType())
      return fail(loc, "varuna.concat: inputs " + typeStr(first) + " and " +
                           typeStr(t) + " differ in rank or element type");
    for (int64_t i = 0; i < t.getRank(); ++i) {
      if (i == axis)
        continue;
      if (t.getDim(i) != first.getDim(i))
        return fail(loc, "varuna.concat: dimension " + Twine(i) + " differs (" +
                             first.getDim(i).str() + " vs " +
                             t.getDim(i).str() + ")");
    }
    dims[axis] = dims[axis] + t.getDim(axis);
  }
  VTensorType r = VTensorType::getFromDims(ctx, dims, first.getElementType());
  if (!r)
    return fail(loc, "varuna.concat: concatenated dimension " +
                         dims[axis].str() + " is not a valid size");
  results.push_back(r);
  return success();
}

static LogicalResult checkIndexType(std::optional<Location> loc, StringRef op,
                                    VTensorType indices) {
  Type e = indices.getElementType();
  if (!e.isSignlessInteger(64) && !e.isSignlessInteger(32))
    return fail(loc, Twine(op) + ": indices must be i64 or i32, got " +
                         typeStr(e));
  return success();
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *ctx,
                                         std::optional<Location> loc,
                                         ValueRange operands,
                                         DictionaryAttr attrs,
                                         RegionRange regions,
                                         SmallVectorImpl<Type> &results) {
  Adaptor adaptor(operands, attrs, regions);
  VTensorType in = tensorOf(adaptor.getInput()),
             idx = tensorOf(adaptor.getIndices());
  int64_t axis = adaptor.getAxis();
  if (failed(checkAxis(loc, "varuna.gather", axis, in.getRank())) ||
      failed(checkIndexType(loc, "varuna.gather", idx)))
    return failure();
  SmallVector<SymInt> dims;
  for (int64_t i = 0; i < axis; ++i)
    dims.push_back(in.getDim(i));
  for (SymInt d : idx.getDims())
    dims.push_back(d);
  for (int64_t i = axis + 1; i < in.getRank(); ++i)
    dims.push_back(in.getDim(i));
  VTensorType r = VTensorType::getFromDims(ctx, dims, in.getElementType());
  if (!r)
    return fail(loc, "varuna.gather: result would have two batch-dependent "
                     "dimensions");
  results.push_back(r);
  return success();
}

LogicalResult CrossEntropyOp::verify() {
  if (Value w = getWeight()) {
    auto wt = llvm::cast<VTensorType>(w.getType());
    auto lt = llvm::cast<VTensorType>(getLogits().getType());
    if (wt.getRank() != 1 || wt.isBatched() || wt.getDim(0) != lt.getDim(1) ||
        wt.getElementType() != lt.getElementType())
      return emitOpError("class weights must be [C] = ")
             << typeStr(VTensorType::getFromDims(getContext(), {lt.getDim(1)},
                                                 lt.getElementType()))
             << " (one per class, the logits' element type), got "
             << typeStr(wt);
  }
  std::optional<llvm::APFloat> smoothing = getLabelSmoothing();
  if (!smoothing)
    return success();
  double s = smoothing->convertToDouble();
  if (!(s >= 0.0 && s <= 1.0))
    return emitOpError("label_smoothing must be in [0, 1], got ") << s;
  if (getLogInput() && s != 0.0)
    return emitOpError("label_smoothing needs logits, not log-probabilities "
                       "(log_input)");
  return success();
}

LogicalResult GatherOp::verify() {
  std::optional<int64_t> pad = getPaddingIdx();
  if (!pad)
    return success();
  if (getAxis() != 0)
    return emitOpError("padding_idx needs axis 0 (an embedding lookup), not ")
           << getAxis();
  auto in = llvm::cast<VTensorType>(getInput().getType());
  if (in.getRank() < 1 || in.isBatched())
    return emitOpError("padding_idx needs a table without a batch dimension");
  SymInt rows = in.getDim(0);
  if (*pad < 0 || (rows.isStatic() && *pad >= rows.constant))
    return emitOpError("padding_idx ")
           << *pad << " is outside the table's " << typeStr(in) << " rows";
  return success();
}

LogicalResult GatherElementsOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attrs, RegionRange regions,
    SmallVectorImpl<Type> &results) {
  Adaptor adaptor(operands, attrs, regions);
  VTensorType in = tensorOf(adaptor.getInput()),
             idx = tensorOf(adaptor.getIndices());
  if (failed(checkAxis(loc, "varuna.gather_elements", adaptor.getAxis(),
                       in.getRank())) ||
      failed(checkIndexType(loc, "varuna.gather_elements", idx)))
    return failure();
  if (idx.getRank() != in.getRank())
    return fail(loc, "varuna.gather_elements: indices rank " +
                         Twine(idx.getRank()) + " differs from input rank " +
                         Twine(in.getRank()));
  results.push_back(idx.withElementType(in.getElementType()));
  return success();
}

LogicalResult LinalgOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         ValueRange operands,
                                         DictionaryAttr attrs,
                                         RegionRange regions,
                                         SmallVectorImpl<Type> &results) {
  Adaptor adaptor(operands, attrs, regions);
  LinalgKind kind = adaptor.getKind();
  size_t want = kind == LinalgKind::solve ? 2 : 1;
  if (adaptor.getOperands().size() != want)
    return fail(loc, "varuna.linalg " + stringifyLinalgKind(kind) + " takes " +
                         Twine(want) + " operand(s)");
  VTensorType a = tensorOf(adaptor.getOperands()[0]);
  int64_t r = a.getRank();
  // (A static n also keeps the batch out of the matrix dimensions.)
  if (r < 2 || !a.getDim(r - 1).isStatic() || a.getDim(r - 1) != a.getDim(r - 2))
    return fail(loc, "varuna.linalg: the matrix must be [.., n, n] with a "
                     "static n");
  if (!a.getElementType().isa<FloatType>())
    return fail(loc, "varuna.linalg: floating-point matrices only");
  if (kind == LinalgKind::inv || kind == LinalgKind::cholesky) {
    results.push_back(a);
    return success();
  }
  if (kind == LinalgKind::det || kind == LinalgKind::logabsdet) {
    SmallVector<SymInt> dims = a.getDims();
    dims.resize(r - 2);
    auto t = VTensorType::getFromDims(a.getContext(), dims, a.getElementType());
    if (!t)
      return fail(loc, "varuna.linalg: cannot represent the result");
    results.push_back(t);
    return success();
  }
  VTensorType bt = tensorOf(adaptor.getOperands()[1]);
  int64_t rb = bt.getRank();
  int64_t n = a.getDim(r - 1).constant;
  bool vector = rb == r - 1; // one right-hand side per matrix
  SmallVector<SymInt> ad = a.getDims(), bd = bt.getDims();
  ArrayRef<SymInt> lead = ArrayRef<SymInt>(ad).take_front(r - 2);
  if (rb < 1 || bd[vector ? rb - 1 : std::max<int64_t>(rb - 2, 0)] != SymInt(n) ||
      (!vector && rb < 2) || bt.getElementType() != a.getElementType() ||
      (r > 2 && ArrayRef<SymInt>(bd).take_front(r - 2) != lead))
    return fail(loc, "varuna.linalg solve: the right-hand side must be "
                     "[.., n, k] or [.., n] of the matrix's type, with the "
                     "matrix's leading dimensions (or the matrix unbatched)");
  results.push_back(bt);
  return success();
}

LogicalResult CumsumOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         ValueRange operands,
                                         DictionaryAttr attrs,
                                         RegionRange regions,
                                         SmallVectorImpl<Type> &results) {
  Adaptor adaptor(operands, attrs, regions);
  VTensorType in = tensorOf(adaptor.getInput());
  if (failed(checkAxis(loc, "varuna.cumsum", adaptor.getAxis(), in.getRank())))
    return failure();
  if (static_cast<int64_t>(adaptor.getAxis()) == in.getBatchDim())
    return fail(loc, "varuna.cumsum: cannot sum along the batch-dependent "
                     "dimension (it would mix micro-batches)");
  results.push_back(in);
  return success();
}

LogicalResult RandomOp::verify() {
  if (!getType().cast<VTensorType>().getElementType().isa<FloatType>())
    return emitOpError("result must be floating-point");
  if (getDistribution() == RandomDistribution::normal &&
      getB().convertToDouble() < 0)
    return emitOpError("standard deviation must be non-negative");
  return success();
}

LogicalResult PadOp::inferReturnTypes(MLIRContext *ctx,
                                      std::optional<Location> loc,
                                      ValueRange operands,
                                      DictionaryAttr attrs,
                                      RegionRange regions,
                                      SmallVectorImpl<Type> &results) {
  Adaptor adaptor(operands, attrs, regions);
  VTensorType in = tensorOf(adaptor.getInput());
  ArrayRef<int64_t> pads = adaptor.getPads();
  int64_t rank = in.getRank();
  if (static_cast<int64_t>(pads.size()) != 2 * rank)
    return fail(loc, "varuna.pad: expected " + Twine(2 * rank) +
                         " pads for rank " + Twine(rank));
  auto typed = adaptor.getValue().dyn_cast<TypedAttr>();
  if (!typed || typed.getType() != in.getElementType())
    return fail(loc, "varuna.pad: the pad value must have the element type " +
                         typeStr(in.getElementType()));
  SmallVector<SymInt> dims = in.getDims();
  for (int64_t i = 0; i < rank; ++i) {
    if (pads[i] < 0 || pads[i + rank] < 0)
      return fail(loc, "varuna.pad: pads must be non-negative");
    if (i == in.getBatchDim() && (pads[i] || pads[i + rank]))
      return fail(loc, "varuna.pad: cannot pad the batch-dependent dimension");
    dims[i] = dims[i] + SymInt(pads[i] + pads[i + rank]);
  }
  results.push_back(VTensorType::getFromDims(ctx, dims, in.getElementType()));
  return success();
}

static LogicalResult checkStaticShape(std::optional<Location> loc,
                                      StringRef op, StringRef what,
                                      VTensorType t,
                                      ArrayRef<SymInt> expected) {
  if (t.getDims() != SmallVector<SymInt>(expected.begin(), expected.end())) {
    std::string want = "[";
    for (auto [i, d] : llvm::enumerate(expected))
      want += (i ? ", " : "") + d.str();
    return fail(loc, Twine(op) + ": " + what + " has type " + typeStr(t) +
                         ", expected shape " + want + "]");
  }
  return success();
}

LogicalResult ScatterNDOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            ValueRange operands,
                                            DictionaryAttr, RegionRange,
                                            SmallVectorImpl<Type> &results) {
  VTensorType data = tensorOf(operands[0]), idx = tensorOf(operands[1]),
              upd = tensorOf(operands[2]);
  if (failed(checkIndexType(loc, "varuna.scatter_nd", idx)))
    return failure();
  if (idx.getRank() < 1 || !idx.getDim(idx.getRank() - 1).isStatic())
    return fail(loc, "varuna.scatter_nd: indices " + typeStr(idx) +
                         " need a static last dimension");
  int64_t k = idx.getShape()[idx.getRank() - 1];
  if (k < 1 || k > data.getRank())
    return fail(loc, "varuna.scatter_nd: index tuples of " + Twine(k) +
                         " entries for data of rank " + Twine(data.getRank()));
  SmallVector<SymInt> want = idx.getDims();
  want.pop_back();
  for (int64_t i = k; i < data.getRank(); ++i)
    want.push_back(data.getDim(i));
  if (upd.getElementType() != data.getElementType())
    return fail(loc, "varuna.scatter_nd: updates element type differs from "
                     "data");
  if (failed(checkStaticShape(loc, "varuna.scatter_nd", "updates", upd, want)))
    return failure();
  results.push_back(data);
  return success();
}

LogicalResult TriluOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        ValueRange operands, DictionaryAttr,
                                        RegionRange,
                                        SmallVectorImpl<Type> &results) {
  VTensorType in = tensorOf(operands[0]);
  if (in.getRank() < 2)
    return fail(loc, "varuna.trilu: needs rank >= 2, got " + typeStr(in));
  results.push_back(in);
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions and normalization
//===----------------------------------------------------------------------===//

LogicalResult ReduceOp::inferReturnTypes(MLIRContext *ctx,
                                         std::optional<Location> loc,
                                         ValueRange operands,
                                         DictionaryAttr attrs,
                                         RegionRange regions,
                                         SmallVectorImpl<Type> &results) {
  Adaptor adaptor(operands, attrs, regions);
  VTensorType in = tensorOf(adaptor.getInput());
  ArrayRef<int64_t> axes = adaptor.getAxes();
  for (auto [i, a] : llvm::enumerate(axes)) {
    if (failed(checkAxis(loc, "varuna.reduce", a, in.getRank())))
      return failure();
    if (i > 0 && axes[i - 1] >= a)
      return fail(loc, "varuna.reduce: axes must be sorted and unique");
  }
  SmallVector<SymInt> dims;
  for (int64_t i = 0; i < in.getRank(); ++i) {
    if (!llvm::is_contained(axes, i))
      dims.push_back(in.getDim(i));
    else if (adaptor.getKeepdim())
      dims.push_back(1);
  }
  results.push_back(VTensorType::getFromDims(ctx, dims, in.getElementType()));
  return success();
}

LogicalResult SoftmaxOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          ValueRange operands,
                                          DictionaryAttr attrs,
                                          RegionRange regions,
                                          SmallVectorImpl<Type> &results) {
  Adaptor adaptor(operands, attrs, regions);
  VTensorType in = tensorOf(adaptor.getInput());
  if (failed(checkAxis(loc, "varuna.softmax", adaptor.getAxis(),
                       in.getRank())))
    return failure();
  if (!isFloat(in.getElementType()))
    return fail(loc, "varuna.softmax: takes a floating-point tensor");
  results.push_back(in);
  return success();
}


LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            ValueRange operands,
                                            DictionaryAttr attrs,
                                            RegionRange regions,
                                            SmallVectorImpl<Type> &results) {
  Adaptor adaptor(operands, attrs, regions);
  VTensorType in = tensorOf(adaptor.getInput());
  int64_t axis = adaptor.getAxis();
  if (failed(checkAxis(loc, "varuna.layer_norm", axis, in.getRank())))
    return failure();
  if (!isFloat(in.getElementType()))
    return fail(loc, "varuna.layer_norm: takes a floating-point tensor");
  SmallVector<SymInt> normDims = in.getDims();
  normDims.erase(normDims.begin(), normDims.begin() + axis);
  for (SymInt d : normDims)
    if (!d.isStatic())
      return fail(loc, "varuna.layer_norm: normalizes over the batch-dependent "
                       "dimension");
  if (Value w = adaptor.getWeight())
    if (failed(checkStaticShape(loc, "varuna.layer_norm", "weight",
                                tensorOf(w), normDims)))
      return failure();
  if (Value b = adaptor.getBias())
    if (failed(checkStaticShape(loc, "varuna.layer_norm", "bias", tensorOf(b),
                                normDims)))
      return failure();
  results.push_back(in);
  return success();
}

LogicalResult BatchNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            ValueRange operands,
                                            DictionaryAttr attrs,
                                            RegionRange regions,
                                            SmallVectorImpl<Type> &results) {
  Adaptor adaptor(operands, attrs, regions);
  VTensorType in = tensorOf(adaptor.getInput());
  if (in.getRank() < 2 || !in.getDim(1).isStatic())
    return fail(loc, "varuna.batch_norm: input " + typeStr(in) +
                         " needs a static channel dimension 1");
  SymInt c = in.getDim(1);
  for (auto [what, v] :
       {std::pair<StringRef, Value>{"weight", adaptor.getWeight()},
        {"bias", adaptor.getBias()},
        {"running_mean", adaptor.getRunningMean()},
        {"running_var", adaptor.getRunningVar()}})
    if (v && failed(checkStaticShape(loc, "varuna.batch_norm", what,
                                     tensorOf(v), {c})))
      return failure();
  results.push_back(in);
  return success();
}

//===----------------------------------------------------------------------===//
// Linear algebra and convolution
//===----------------------------------------------------------------------===//

LogicalResult AttentionOp::verify() {
  VTensorType q = tensorOf(getQuery()), kt = tensorOf(getKeyT()),
              v = tensorOf(getValue()), r = tensorOf(getResult());
  for (VTensorType t : {q, kt, v, r})
    if (t.getRank() < 2)
      return emitOpError("operands and result must have rank >= 2, not ")
             << t;
  if (kt.getElementType() != q.getElementType() ||
      v.getElementType() != q.getElementType() ||
      r.getElementType() != q.getElementType() ||
      !q.getElementType().isa<FloatType>())
    return emitOpError("query, keys, values and result must have one "
                       "floating-point element type");
  auto dim = [](VTensorType t, int64_t fromEnd) {
    return t.getDim(t.getRank() - fromEnd);
  };
  if (dim(q, 1) != dim(kt, 2))
    return emitOpError("query's feature size ")
           << dim(q, 1).str() << " differs from key_t's " << dim(kt, 2).str();
  if (dim(kt, 1) != dim(v, 2))
    return emitOpError("key_t has ")
           << dim(kt, 1).str() << " keys, value has " << dim(v, 2).str();
  if (dim(r, 2) != dim(q, 2) || dim(r, 1) != dim(v, 1))
    return emitOpError("result must be [..., ")
           << dim(q, 2).str() << ", " << dim(v, 1).str() << "], not " << r;
  if (Value m = getMask())
    if (!tensorOf(m).getElementType().isInteger(1))
      return emitOpError("mask must be i1, not ") << m.getType();
  return success();
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *ctx,
                                         std::optional<Location> loc,
                                         ValueRange operands, DictionaryAttr,
                                         RegionRange,
                                         SmallVectorImpl<Type> &results) {
  VTensorType a = tensorOf(operands[0]), b = tensorOf(operands[1]);
  if (a.getElementType() != b.getElementType())
    return fail(loc, "varuna.matmul: operand element types differ (" +
                         typeStr(a.getElementType()) + " vs " +
                         typeStr(b.getElementType()) + ")");
  if (a.getRank() == 0 || b.getRank() == 0)
    return fail(loc, "varuna.matmul: operands must have rank >= 1");
  SmallVector<SymInt> da = a.getDims(), db = b.getDims();
  bool vecA = da.size() == 1, vecB = db.size() == 1;
  if (vecA)
    da.insert(da.begin(), SymInt(1));
  if (vecB)
    db.push_back(SymInt(1));
  SymInt ka = da.back(), kb = db[db.size() - 2];
  if (ka != kb)
    return fail(loc, "varuna.matmul: contraction sizes differ (" + ka.str() +
                         " in " + typeStr(a) + " vs " + kb.str() + " in " +
                         typeStr(b) + ")");
  // Broadcast the leading (batch) dims.
  SmallVector<SymInt> la(da.begin(), da.end() - 2), lb(db.begin(), db.end() - 2);
  size_t rank = std::max(la.size(), lb.size());
  SmallVector<SymInt> dims;
  for (size_t i = 0; i < rank; ++i) {
    int64_t ia = la.size() - rank + i, ib = lb.size() - rank + i;
    SymInt x = ia >= 0 ? la[ia] : SymInt(1), y = ib >= 0 ? lb[ib] : SymInt(1);
    if (x != y && x != SymInt(1) && y != SymInt(1))
      return fail(loc, "varuna.matmul: cannot broadcast batch dimensions " +
                           x.str() + " and " + y.str());
    dims.push_back(x == SymInt(1) ? y : x);
  }
  if (!vecA)
    dims.push_back(da[da.size() - 2]);
  if (!vecB)
    dims.push_back(db.back());
  VTensorType r = VTensorType::getFromDims(ctx, dims, a.getElementType());
  if (!r)
    return fail(loc, "varuna.matmul: result would have two batch-dependent "
                     "dimensions (" + typeStr(a) + " x " + typeStr(b) +
                         "): every example against every other (a "
                         "similarity over the batch, as a contrastive loss "
                         "computes) mixes the examples, which micro-batches "
                         "cannot split");
  results.push_back(r);
  return success();
}

/// Output size of a sliding window.
static int64_t windowOut(int64_t in, int64_t k, int64_t stride, int64_t pb,
                         int64_t pe, int64_t dil, bool ceilMode) {
  int64_t span = in + pb + pe - dil * (k - 1) - 1;
  // Rounded up, a window larger than the input still gives one output
  // when it starts inside it (EfficientNet's AvgPool2d(1280, ceil_mode=True)
  // on a 1x1 map), as in PyTorch.
  int64_t num = ceilMode ? span + stride - 1 : span;
  if (num < 0)
    return -1;
  int64_t out = num / stride + 1;
  // PyTorch: the last window must start inside the input or left padding.
  if (ceilMode && (out - 1) * stride >= in + pb)
    --out;
  return out;
}

static LogicalResult checkWindowAttrs(std::optional<Location> loc,
                                      StringRef op, int64_t n,
                                      ArrayRef<int64_t> strides,
                                      ArrayRef<int64_t> pads,
                                      ArrayRef<int64_t> dilations) {
  if (static_cast<int64_t>(strides.size()) != n ||
      static_cast<int64_t>(dilations.size()) != n ||
      static_cast<int64_t>(pads.size()) != 2 * n)
    return fail(loc, Twine(op) + ": expected " + Twine(n) +
                         " strides and dilations and " + Twine(2 * n) +
                         " pads for " + Twine(n) + " spatial dims");
  for (int64_t s : strides)
    if (s < 1)
      return fail(loc, Twine(op) + ": strides must be positive");
  for (int64_t d : dilations)
    if (d < 1)
      return fail(loc, Twine(op) + ": dilations must be positive");
  for (int64_t p : pads)
    if (p < 0)
      return fail(loc, Twine(op) + ": pads must be non-negative");
  return success();
}

LogicalResult ConvOp::inferReturnTypes(MLIRContext *ctx,
                                       std::optional<Location> loc,
                                       ValueRange operands,
                                       DictionaryAttr attrs,
                                       RegionRange regions,
                                       SmallVectorImpl<Type> &results) {
  Adaptor adaptor(operands, attrs, regions);
  VTensorType in = tensorOf(adaptor.getInput()),
             w = tensorOf(adaptor.getWeight());
  int64_t n = in.getRank() - 2;
  if (n < 1 || w.getRank() != in.getRank())
    return fail(loc, "varuna.conv: input " + typeStr(in) + " and weight " +
                         typeStr(w) + " must both have rank >= 3");
  if (in.getBatchDim() > 0 || w.isBatched())
    return fail(loc, "varuna.conv: only dimension 0 of the input may depend "
                     "on the batch");
  if (in.getElementType() != w.getElementType())
    return fail(loc, "varuna.conv: input and weight element types differ");
  if (failed(checkWindowAttrs(loc, "varuna.conv", n, adaptor.getStrides(),
                              adaptor.getPads(), adaptor.getDilations())))
    return failure();
  int64_t groups = adaptor.getGroups();
  int64_t c = in.getShape()[1], f = w.getShape()[0];
  if (groups < 1 || c % groups || f % groups || w.getShape()[1] * groups != c)
    return fail(loc, "varuna.conv: " + Twine(c) + " input channels, weight " +
                         typeStr(w) + " and " + Twine(groups) +
                         " groups do not fit");
  if (Value b = adaptor.getBias())
    if (failed(checkStaticShape(loc, "varuna.conv", "bias", tensorOf(b),
                                {SymInt(f)})))
      return failure();
  SmallVector<SymInt> dims{in.getDim(0), SymInt(f)};
  for (int64_t i = 0; i < n; ++i) {
    int64_t o = windowOut(in.getShape()[i + 2], w.getShape()[i + 2],
                          adaptor.getStrides()[i], adaptor.getPads()[i],
                          adaptor.getPads()[i + n], adaptor.getDilations()[i],
                          false);
    if (o < 1)
      return fail(loc, "varuna.conv: kernel larger than padded input in "
                       "spatial dimension " + Twine(i));
    dims.push_back(o);
  }
  results.push_back(VTensorType::getFromDims(ctx, dims, in.getElementType()));
  return success();
}

LogicalResult ConvTransposeOp::inferReturnTypes(
    MLIRContext *ctx, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attrs, RegionRange regions,
    SmallVectorImpl<Type> &results) {
  Adaptor adaptor(operands, attrs, regions);
  VTensorType in = tensorOf(adaptor.getInput()),
             w = tensorOf(adaptor.getWeight());
  int64_t n = in.getRank() - 2;
  StringRef op = "varuna.conv_transpose";
  if (n < 1 || w.getRank() != in.getRank())
    return fail(loc, Twine(op) + ": input " + typeStr(in) + " and weight " +
                         typeStr(w) + " must both have rank >= 3");
  if (in.getBatchDim() > 0 || w.isBatched())
    return fail(loc, Twine(op) + ": only dimension 0 of the input may depend "
                                 "on the batch");
  if (in.getElementType() != w.getElementType())
    return fail(loc, Twine(op) + ": input and weight element types differ");
  ArrayRef<int64_t> strides = adaptor.getStrides(), pads = adaptor.getPads(),
                    outPad = adaptor.getOutputPadding(),
                    dils = adaptor.getDilations();
  if (static_cast<int64_t>(strides.size()) != n ||
      static_cast<int64_t>(pads.size()) != n ||
      static_cast<int64_t>(outPad.size()) != n ||
      static_cast<int64_t>(dils.size()) != n)
    return fail(loc, Twine(op) + ": expected " + Twine(n) +
                         " strides, pads, output paddings and dilations");
  for (int64_t i = 0; i < n; ++i)
    if (strides[i] < 1 || dils[i] < 1 || pads[i] < 0 || outPad[i] < 0 ||
        (outPad[i] >= strides[i] && outPad[i] >= dils[i]))
      return fail(loc, Twine(op) + ": window attributes of spatial "
                                   "dimension " +
                           Twine(i) + " are out of range");
  int64_t groups = adaptor.getGroups();
  int64_t c = in.getShape()[1];
  if (groups < 1 || c % groups || w.getShape()[0] != c)
    return fail(loc, Twine(op) + ": " + Twine(c) +
                         " input channels, weight " + typeStr(w) + " and " +
                         Twine(groups) + " groups do not fit");
  int64_t f = w.getShape()[1] * groups;
  if (Value b = adaptor.getBias())
    if (failed(checkStaticShape(loc, op, "bias", tensorOf(b), {SymInt(f)})))
      return failure();
  SmallVector<SymInt> dims{in.getDim(0), SymInt(f)};
  for (int64_t i = 0; i < n; ++i) {
    int64_t o = (in.getShape()[i + 2] - 1) * strides[i] - 2 * pads[i] +
                dils[i] * (w.getShape()[i + 2] - 1) + outPad[i] + 1;
    if (o < 1)
      return fail(loc, Twine(op) + ": empty output in spatial dimension " +
                           Twine(i));
    dims.push_back(o);
  }
  results.push_back(VTensorType::getFromDims(ctx, dims, in.getElementType()));
  return success();
}

LogicalResult PoolOp::inferReturnTypes(MLIRContext *ctx,
                                       std::optional<Location> loc,
                                       ValueRange operands,
                                       DictionaryAttr attrs,
                                       RegionRange regions,
                                       SmallVectorImpl<Type> &results) {
  Adaptor adaptor(operands, attrs, regions);
  VTensorType in = tensorOf(adaptor.getInput());
  int64_t n = in.getRank() - 2;
  if (n < 1 || in.getBatchDim() > 0)
    return fail(loc, "varuna.pool: input " + typeStr(in) +
                         " must be [N, C, spatial...] with only N batched");
  ArrayRef<int64_t> kernel = adaptor.getKernel();
  if (static_cast<int64_t>(kernel.size()) != n)
    return fail(loc, "varuna.pool: expected " + Twine(n) + " kernel sizes");
  if (failed(checkWindowAttrs(loc, "varuna.pool", n, adaptor.getStrides(),
                              adaptor.getPads(), adaptor.getDilations())))
    return failure();
  SmallVector<SymInt> dims{in.getDim(0), in.getDim(1)};
  for (int64_t i = 0; i < n; ++i) {
    int64_t o = windowOut(in.getShape()[i + 2], kernel[i],
                          adaptor.getStrides()[i], adaptor.getPads()[i],
                          adaptor.getPads()[i + n], adaptor.getDilations()[i],
                          adaptor.getCeilMode());
    if (o < 1)
      return fail(loc, "varuna.pool: window larger than padded input in "
                       "spatial dimension " + Twine(i));
    dims.push_back(o);
  }
  results.push_back(VTensorType::getFromDims(ctx, dims, in.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

LogicalResult CrossEntropyOp::inferReturnTypes(
    MLIRContext *ctx, std::optional<Location> loc, ValueRange operands,
    DictionaryAttr attrs, RegionRange regions,
    SmallVectorImpl<Type> &results) {
  Adaptor adaptor(operands, attrs, regions);
  VTensorType logits = tensorOf(adaptor.getLogits()),
             labels = tensorOf(adaptor.getLabels());
  if (!isFloat(logits.getElementType()))
    return fail(loc, "varuna.cross_entropy: logits must be floating-point");
  if (!isInteger(labels.getElementType()) ||
      labels.getElementType().isInteger(1))
    return fail(loc, "varuna.cross_entropy: labels must be integers, got " +
                         typeStr(labels.getElementType()));
  SmallVector<SymInt> expect = logits.getDims();
  if (expect.size() < 2)
    return fail(loc, "varuna.cross_entropy: logits " + typeStr(logits) +
                         " must be [N, C, ...]");
  if (!expect[1].isStatic())
    return fail(loc, "varuna.cross_entropy: the class dimension must be "
                     "static");
  expect.erase(expect.begin() + 1);
  if (failed(checkStaticShape(loc, "varuna.cross_entropy", "labels", labels,
                              expect)))
    return failure();
  if (adaptor.getReduction() == LossReduction::none)
    results.push_back(labels.withElementType(logits.getElementType()));
  else
    results.push_back(VTensorType::get(ctx, {}, -1, logits.getElementType()));
  return success();
}
