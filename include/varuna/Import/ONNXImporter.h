//===- ONNXImporter.h - ONNX -> varuna --------------------------*- C++ -*-===//
//
// Imports an ONNX model (opsets 13 to 21, external data allowed) holding a
// training graph -- forward computation and loss -- into the varuna dialect.
//
// Inputs: the model path. Every graph input must have a symbolic (dim_param)
// leading dimension: that is the micro-batch dimension B. All other
// dimensions must be static.
// Output: a module as described in docs/dialect.md. Shape arithmetic
// (Shape/Gather/Concat/Reshape chains, Range, ConstantOfShape, Expand, ...)
// is evaluated at import time against the symbolic B, so the graph holds for
// any micro-batch size. Initializers become parameters named by their ONNX
// names (or the names listed in the model's `varuna.parameters` metadata);
// an Identity of an initializer (the exporter's de-duplication of equal
// values) becomes its own parameter sharing the same initial bytes. Weights
// are referenced (`#varuna.data`), never copied.
// Errors: diagnostics on the context naming the node (name, op type, index)
// and the cause: unsupported op or attribute, unsupported opset, a batch size
// baked into a shape, a malformed or truncated file. Returns null then.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_IMPORT_ONNXIMPORTER_H
#define VARUNA_IMPORT_ONNXIMPORTER_H

#include "varuna/Import/GraphBuilder.h"

namespace varuna {

struct ONNXImportOptions : ImportOptions {};

mlir::OwningOpRef<mlir::ModuleOp>
importONNX(mlir::MLIRContext *ctx, llvm::StringRef path,
           const ONNXImportOptions &options);

/// Imports from bytes already in memory (the fuzzer's entry point); external
/// data files are resolved against `baseDir`.
mlir::OwningOpRef<mlir::ModuleOp>
importONNXFromBuffer(mlir::MLIRContext *ctx, llvm::StringRef bytes,
                     llvm::StringRef displayName, llvm::StringRef baseDir,
                     const ONNXImportOptions &options);

} // namespace varuna

#endif // VARUNA_IMPORT_ONNXIMPORTER_H
