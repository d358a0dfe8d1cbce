//===- VarunaOps.h - varuna dialect operations ------------------*- C++ -*-===//

#ifndef VARUNA_DIALECT_VARUNA_IR_VARUNAOPS_H
#define VARUNA_DIALECT_VARUNA_IR_VARUNAOPS_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "varuna/Dialect/Varuna/IR/VarunaAttrs.h"
#include "varuna/Dialect/Varuna/IR/VarunaDialect.h"
#include "varuna/Dialect/Varuna/IR/VarunaTypes.h"

#include "varuna/Dialect/Varuna/IR/VarunaEnums.h.inc"

#define GET_OP_CLASSES
#include "varuna/Dialect/Varuna/IR/VarunaOps.h.inc"

#endif // VARUNA_DIALECT_VARUNA_IR_VARUNAOPS_H
