//===- GraphUtils.h - Finding the graph and its sections --------*- C++ -*-===//

#ifndef VARUNA_TRANSFORMS_GRAPHUTILS_H
#define VARUNA_TRANSFORMS_GRAPHUTILS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace varuna {

/// The training graph (the func.func marked varuna.graph). Emits "no training
/// graph" on the module and fails if there is none.
mlir::FailureOr<mlir::func::FuncOp> getTrainingGraph(mlir::ModuleOp module);

/// The outlined sections (func.func with varuna.section), by index. Fails
/// (with a diagnostic) if indices are not 0..K-1, or if there are none and
/// `required` is set ("run varuna-outline-sections first").
mlir::FailureOr<llvm::SmallVector<mlir::func::FuncOp>>
getSections(mlir::ModuleOp module, bool required = false);

/// Names of the trainable parameters a function reads, in first-use order.
llvm::SmallVector<llvm::StringRef> getReadParams(mlir::func::FuncOp func);

} // namespace varuna

#endif // VARUNA_TRANSFORMS_GRAPHUTILS_H
