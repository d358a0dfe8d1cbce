//===- VarunaAttrs.h - varuna dialect attributes ----------------*- C++ -*-===//

#ifndef VARUNA_DIALECT_VARUNA_IR_VARUNAATTRS_H
#define VARUNA_DIALECT_VARUNA_IR_VARUNAATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "varuna/Support/SymInt.h"

#define GET_ATTRDEF_CLASSES
#include "varuna/Dialect/Varuna/IR/VarunaAttrs.h.inc"

#endif // VARUNA_DIALECT_VARUNA_IR_VARUNAATTRS_H
