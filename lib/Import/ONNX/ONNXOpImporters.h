//===- ONNXOpImporters.h - Per-op ONNX import helpers -----------*- C++ -*-===//

#ifndef VARUNA_LIB_IMPORT_ONNX_ONNXOPIMPORTERS_H
#define VARUNA_LIB_IMPORT_ONNX_ONNXOPIMPORTERS_H

#include "ONNXImporterImpl.h"

namespace varuna {
namespace onnx_import {

using OpImporter = mlir::LogicalResult (*)(NodeContext &);

/// Shape ops (ONNXShapeImporters.cpp) and neural-network ops
/// (ONNXNNImporters.cpp); null if the op type is not theirs.
OpImporter lookupShapeOpImporter(llvm::StringRef opType);
OpImporter lookupNNOpImporter(llvm::StringRef opType);

VTensorType typeOf(mlir::Value v);
std::string dimsStr(llvm::ArrayRef<SymInt> dims);
/// The elements of `t` as fixed integers; fails naming `what` if one
/// depends on the batch size.
mlir::FailureOr<std::vector<int64_t>>
staticInts(NodeContext &nc, const KnownTensor &t, llvm::StringRef what);
/// Input i, which must be known at import time, as fixed integers (axes,
/// split sizes, pads, repeats); fails naming `what` otherwise.
mlir::FailureOr<std::vector<int64_t>>
staticIntsInput(NodeContext &nc, size_t i, llvm::StringRef what);

/// Binds output 0 to `v` (failing if `v` does).
inline mlir::LogicalResult setResult(NodeContext &nc,
                                     mlir::FailureOr<mlir::Value> v) {
  if (mlir::failed(v))
    return mlir::failure();
  nc.setOutput(0, *v);
  return mlir::success();
}

/// A varuna.reshape of `v` to `dims` (or `v` itself if unchanged), with an
/// error that explains a baked-in batch size.
mlir::FailureOr<mlir::Value> reshapeTo(NodeContext &nc, mlir::Value v,
                                       llvm::ArrayRef<SymInt> dims);

} // namespace onnx_import
} // namespace varuna

#endif // VARUNA_LIB_IMPORT_ONNX_ONNXOPIMPORTERS_H
