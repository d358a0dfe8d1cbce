//===- GraphBuilder.h - Builds a varuna training-graph module ---*- C++ -*-===//
//
// Shared by the importers: creates the module, the `varuna.param`
// declarations, the graph function with its named inputs, and marks the loss.
//
// Contract:
//  * addInput / addParam may be interleaved with op creation; inputs become the
//    graph function's arguments in the order added.
//  * getParam(name) returns one `varuna.get_param` value per parameter, created
//    at the builder's insertion point on first use and reused afterwards (a
//    parameter read by several ops is one value with several users).
//  * finish() sets the results; the loss (a scalar float result) gets the
//    `varuna.loss` attribute. A graph without one is still built (later
//    stages reject it), unless `requireLoss` is set.
//  * Errors are MLIR diagnostics at the given location; nothing aborts.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_IMPORT_GRAPHBUILDER_H
#define VARUNA_IMPORT_GRAPHBUILDER_H

#include "varuna/Dialect/Varuna/IR/VarunaOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringMap.h"

namespace varuna {

/// Options common to every importer.
struct ImportOptions {
  /// Name of the graph function.
  std::string graphName = "forward";
  /// Fail when no output is a scalar floating-point loss.
  bool requireLoss = false;
  /// The model is imported to be trained (varuna-compile): an export whose
  /// parameters cannot be told from constants, or from each other, is an
  /// error rather than a warning.
  bool forTraining = false;
};

/// Whether `v` is a 0-d floating-point tensor: what a loss must be.
bool isScalarFloat(mlir::Value v);

class GraphBuilder {
public:
  GraphBuilder(mlir::MLIRContext *ctx, llvm::StringRef sourcePath,
               const ImportOptions &options);

  mlir::OpBuilder &builder() { return b; }
  mlir::MLIRContext *getContext() { return b.getContext(); }
  mlir::ModuleOp getModule() { return *module; }

  /// Adds a graph input named `name`.
  mlir::Value addInput(llvm::StringRef name, VTensorType type,
                       mlir::Location loc);

  /// Declares a parameter; fails with a diagnostic on a duplicate name. An
  /// `init` without a digest gets one, read from its file (relative to the
  /// source model's directory); a file that cannot be read is an error.
  mlir::FailureOr<ParamOp> addParam(llvm::StringRef name, VTensorType type,
                                    DataAttr init, bool frozen,
                                    mlir::Location loc);
  bool hasParam(llvm::StringRef name) const { return params.count(name); }

  /// The value of parameter `name` (see the contract above); null if unknown.
  mlir::Value getParam(llvm::StringRef name, mlir::Location loc);

  /// Sets the graph results. `lossIndex` < 0 picks the loss automatically:
  /// the result named "loss" if it is a scalar float, else the only scalar
  /// float result.
  mlir::LogicalResult
  finish(llvm::ArrayRef<std::pair<std::string, mlir::Value>> results,
         mlir::Location loc, int lossIndex = -1);

  mlir::OwningOpRef<mlir::ModuleOp> takeModule() { return std::move(module); }

private:
  mlir::OpBuilder b;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp graph;
  ImportOptions options;
  llvm::SmallVector<std::string> inputNames;
  llvm::StringMap<ParamOp> params;
  llvm::StringMap<mlir::Value> paramValues;
  mlir::OpBuilder::InsertPoint paramInsertPoint;
  std::string sourceDir; ///< what #varuna.data files are relative to
};

/// Location of a framework node: `name("file":index:0)`.
mlir::Location nodeLocation(mlir::MLIRContext *ctx, llvm::StringRef file,
                            llvm::StringRef nodeName, int64_t index);

} // namespace varuna

#endif // VARUNA_IMPORT_GRAPHBUILDER_H
