//===- GraphUtils.h - Finding the graph and its sections --------*- C++ -*-===//

#ifndef VARUNA_TRANSFORMS_GRAPHUTILS_H
#define VARUNA_TRANSFORMS_GRAPHUTILS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include <optional>
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringSet.h"

namespace varuna {

/// The training graph (the func.func marked varuna.graph). Emits "no training
/// graph" on the module and fails if there is none.
mlir::FailureOr<mlir::func::FuncOp> getTrainingGraph(mlir::ModuleOp module);
/// The same without a diagnostic: null if there is none.
mlir::func::FuncOp findTrainingGraph(mlir::ModuleOp module);

/// The outlined sections (func.func with varuna.section), by index. Fails
/// (with a diagnostic) if indices are not 0..K-1, or if there are none and
/// `required` is set ("run varuna-outline-sections first").
mlir::FailureOr<llvm::SmallVector<mlir::func::FuncOp>>
getSections(mlir::ModuleOp module, bool required = false);

/// Names of the trainable parameters a function reads, in first-use order.
llvm::SmallVector<llvm::StringRef> getReadParams(mlir::func::FuncOp func);

/// Names of the parameters (trainable or frozen) some function of `module`
/// reads; a parameter not among them is never read (ATenEvaluator's
/// unreadParams, the compile report's unread parameters).
llvm::StringSet<> getReadParamNames(mlir::ModuleOp module);

/// Whether `v` is a varuna tensor with the batch dimension.
bool isBatched(mlir::Value v);

/// The value of a scalar (or splat) floating-point varuna.constant.
std::optional<double> splatFloatConstant(mlir::Value v);

/// Erases the varuna ops under `root` that have results, no uses and no
/// memory effects (what a fusion left dead), until none is left.
void eraseDeadPureOps(mlir::Operation *root);

} // namespace varuna

#endif // VARUNA_TRANSFORMS_GRAPHUTILS_H
