//===- VarunaDialect.h - The varuna dialect ---------------------*- C++ -*-===//

#ifndef VARUNA_DIALECT_VARUNA_IR_VARUNADIALECT_H
#define VARUNA_DIALECT_VARUNA_IR_VARUNADIALECT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Dialect.h"

#include "varuna/Dialect/Varuna/IR/VarunaDialect.h.inc"

namespace varuna {
/// Attribute names on the graph function and its arguments / results.
constexpr llvm::StringLiteral kGraphAttr = "varuna.graph";   // on func.func
constexpr llvm::StringLiteral kNameAttr = "varuna.name";     // arg / result
constexpr llvm::StringLiteral kLossAttr = "varuna.loss";     // result
constexpr llvm::StringLiteral kSourceAttr = "varuna.source"; // module: model file
/// On a varuna.div: a mean's sum divided by its count (the selected rows of
/// x[mask]), which micro-batches take as the whole step's count
/// (include/varuna/Target/ATen/LossNormalization.h).
constexpr llvm::StringLiteral kStepDivisorAttr = "varuna.step_divisor";
} // namespace varuna

#endif // VARUNA_DIALECT_VARUNA_IR_VARUNADIALECT_H
