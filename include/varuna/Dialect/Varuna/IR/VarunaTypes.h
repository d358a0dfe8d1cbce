//===- VarunaTypes.h - varuna dialect types ---------------------*- C++ -*-===//

#ifndef VARUNA_DIALECT_VARUNA_IR_VARUNATYPES_H
#define VARUNA_DIALECT_VARUNA_IR_VARUNATYPES_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Types.h"
#include "varuna/Support/SymInt.h"

#define GET_TYPEDEF_CLASSES
#include "varuna/Dialect/Varuna/IR/VarunaTypes.h.inc"

namespace varuna {
/// True for the element types a varuna tensor may hold.
bool isValidElementType(mlir::Type type);
/// Numpy broadcast of two shapes; a diagnostic message on failure.
mlir::FailureOr<VTensorType> broadcastTypes(VTensorType a, VTensorType b,
                                           mlir::Type elementType,
                                           std::string &error);
} // namespace varuna

#endif // VARUNA_DIALECT_VARUNA_IR_VARUNATYPES_H
