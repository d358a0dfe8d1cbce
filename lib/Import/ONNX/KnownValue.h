//===- KnownValue.h - Import-time evaluation of small tensors ---*- C++ -*-===//
//
// Evaluates ONNX elementwise ops on known tensors (numpy broadcasting).
// Integer elements are SymInts (affine in the batch size B); an operation whose
// result is not affine in B (B*B, a comparison of B with a number) fails with
// a message in `error`.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_LIB_IMPORT_ONNX_KNOWNVALUE_H
#define VARUNA_LIB_IMPORT_ONNX_KNOWNVALUE_H

#include "ONNXImporterImpl.h"

namespace varuna {
namespace onnx_import {

/// Binary ops: Add Sub Mul Div Mod Pow Max Min Equal Less Greater
/// LessOrEqual GreaterOrEqual And Or Xor.
mlir::FailureOr<KnownTensor> evalBinary(llvm::StringRef op,
                                        const KnownTensor &a,
                                        const KnownTensor &b,
                                        std::string &error);
/// Unary ops: Neg Abs Sqrt Reciprocal Exp Log Floor Ceil Not Identity.
mlir::FailureOr<KnownTensor> evalUnary(llvm::StringRef op,
                                       const KnownTensor &a,
                                       std::string &error);
/// Converts to another element type.
mlir::FailureOr<KnownTensor> evalCast(const KnownTensor &a, mlir::Type to,
                                      std::string &error);
/// Elements at the given flat indices, as a tensor of shape `shape`.
KnownTensor gatherFlat(const KnownTensor &a, llvm::ArrayRef<int64_t> indices,
                       std::vector<int64_t> shape);
/// True if the op type can be evaluated by evalBinary / evalUnary.
bool isKnownBinary(llvm::StringRef op);
bool isKnownUnary(llvm::StringRef op);

} // namespace onnx_import
} // namespace varuna

#endif // VARUNA_LIB_IMPORT_ONNX_KNOWNVALUE_H
