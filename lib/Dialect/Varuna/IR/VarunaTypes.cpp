//===- VarunaTypes.cpp - varuna dialect types -----------------------------===//

#include "varuna/Dialect/Varuna/IR/VarunaTypes.h"
#include "varuna/Dialect/Varuna/IR/VarunaDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace varuna;

#define GET_TYPEDEF_CLASSES
#include "varuna/Dialect/Varuna/IR/VarunaTypes.cpp.inc"

void VarunaDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "varuna/Dialect/Varuna/IR/VarunaTypes.cpp.inc"
      >();
}

bool varuna::isValidElementType(Type type) {
  if (type.isF16() || type.isBF16() || type.isF32() || type.isF64())
    return true;
  if (auto it = type.dyn_cast<IntegerType>()) {
    unsigned w = it.getWidth();
    if (it.isSignless())
      return w == 1 || w == 8 || w == 32 || w == 64;
    return it.isUnsigned() && w == 8;
  }
  return false;
}

//===----------------------------------------------------------------------===//
// Syntax: !varuna.tensor<[B*4, 16], f32>
//===----------------------------------------------------------------------===//

Type VTensorType::parse(AsmParser &parser) {
  SmallVector<int64_t> shape;
  int64_t batchDim = -1;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseLess() || parser.parseLSquare())
    return {};
  if (failed(parser.parseOptionalRSquare())) {
    do {
      SMLoc dimLoc = parser.getCurrentLocation();
      if (succeeded(parser.parseOptionalKeyword("B"))) {
        if (batchDim != -1) {
          parser.emitError(dimLoc,
                           "at most one dimension may depend on the batch B");
          return {};
        }
        int64_t k = 1;
        if (succeeded(parser.parseOptionalStar()) && parser.parseInteger(k))
          return {};
        batchDim = shape.size();
        shape.push_back(k);
        continue;
      }
      int64_t d;
      if (parser.parseInteger(d))
        return {};
      shape.push_back(d);
    } while (succeeded(parser.parseOptionalComma()));
    if (parser.parseRSquare())
      return {};
  }
  Type elementType;
  if (parser.parseComma() || parser.parseType(elementType) ||
      parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(loc); },
                    parser.getContext(), shape, batchDim, elementType);
}

void VTensorType::print(AsmPrinter &printer) const {
  printer << "<[";
  for (int64_t i = 0, e = getRank(); i < e; ++i) {
    if (i)
      printer << ", ";
    if (i == getBatchDim()) {
      printer << "B";
      if (getShape()[i] != 1)
        printer << "*" << getShape()[i];
    } else {
      printer << getShape()[i];
    }
  }
  printer << "], " << getElementType() << ">";
}

LogicalResult
VTensorType::verify(function_ref<InFlightDiagnostic()> emitError,
                   ArrayRef<int64_t> shape, int64_t batchDim,
                   Type elementType) {
  if (!isValidElementType(elementType))
    return emitError() << "unsupported element type " << elementType
                       << " (expected f16, bf16, f32, f64, i1, i8, ui8, i32 "
                          "or i64)";
  if (batchDim < -1 || batchDim >= static_cast<int64_t>(shape.size()))
    return emitError() << "batch dimension " << batchDim
                       << " out of range for rank " << shape.size();
  for (auto [i, d] : llvm::enumerate(shape)) {
    if (static_cast<int64_t>(i) == batchDim && d < 1)
      return emitError() << "batch multiple must be at least 1, got " << d;
    if (d < 0)
      return emitError() << "dimension " << i << " has negative size " << d;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Queries
//===----------------------------------------------------------------------===//

SymInt VTensorType::getDim(int64_t i) const {
  if (i == getBatchDim())
    return SymInt::batch(getShape()[i]);
  return SymInt(getShape()[i]);
}

SmallVector<SymInt> VTensorType::getDims() const {
  SmallVector<SymInt> dims;
  for (int64_t i = 0, e = getRank(); i < e; ++i)
    dims.push_back(getDim(i));
  return dims;
}

SymInt VTensorType::getNumElements() const {
  int64_t product = 1;
  for (int64_t i = 0, e = getRank(); i < e; ++i)
    product *= getShape()[i];
  return isBatched() ? SymInt::batch(product) : SymInt(product);
}

int64_t VTensorType::getElementBytes() const {
  return (getElementType().getIntOrFloatBitWidth() + 7) / 8;
}

SymInt VTensorType::getSizeInBytes() const {
  return getNumElements().scaled(getElementBytes());
}

VTensorType VTensorType::withElementType(Type type) const {
  return VTensorType::get(getContext(), getShape(), getBatchDim(), type);
}

VTensorType VTensorType::getFromDims(MLIRContext *ctx, ArrayRef<SymInt> dims,
                                   Type elementType) {
  SmallVector<int64_t> shape;
  int64_t batchDim = -1;
  for (auto [i, d] : llvm::enumerate(dims)) {
    if (d.isStatic()) {
      if (d.constant < 0)
        return {};
      shape.push_back(d.constant);
      continue;
    }
    if (!d.isBatchMultiple() || batchDim != -1)
      return {};
    batchDim = i;
    shape.push_back(d.perBatch);
  }
  if (!isValidElementType(elementType))
    return {};
  return VTensorType::get(ctx, shape, batchDim, elementType);
}

FailureOr<VTensorType> varuna::broadcastTypes(VTensorType a, VTensorType b,
                                             Type elementType,
                                             std::string &error) {
  int64_t rank = std::max(a.getRank(), b.getRank());
  SmallVector<SymInt> dims(rank);
  for (int64_t i = 0; i < rank; ++i) {
    int64_t ia = a.getRank() - rank + i, ib = b.getRank() - rank + i;
    SymInt da = ia >= 0 ? a.getDim(ia) : SymInt(1);
    SymInt db = ib >= 0 ? b.getDim(ib) : SymInt(1);
    if (da == db || db == SymInt(1)) {
      dims[i] = da;
    } else if (da == SymInt(1)) {
      dims[i] = db;
    } else {
      error = "cannot broadcast dimension " + da.str() + " against " +
              db.str() + " (operand dimensions " + std::to_string(ia) +
              " and " + std::to_string(ib) + ")";
      return failure();
    }
  }
  VTensorType t = VTensorType::getFromDims(a.getContext(), dims, elementType);
  if (!t) {
    error = "broadcast result has more than one batch-dependent dimension";
    return failure();
  }
  return t;
}
