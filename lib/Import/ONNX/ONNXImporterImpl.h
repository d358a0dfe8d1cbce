//===- ONNXImporterImpl.h - ONNX importer internals -------------*- C++ -*-===//
//
// The importer walks the ONNX graph in order. Every ONNX value is either
//  * a runtime tensor (an mlir::Value of type !varuna.tensor),
//  * a *known* tensor: small, fully known at import time, with integer
//    elements that may be affine in the batch size B (shape arithmetic:
//    Shape -> Gather -> Concat -> Reshape) or floating-point elements
//    (scales, fill values). Known values are evaluated, not emitted, and are
//    materialized as `varuna.constant` only when a runtime op consumes them;
//  * a parameter reference (an initializer not yet read): materialized by
//    GraphBuilder::getParam at its first runtime use.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_LIB_IMPORT_ONNX_ONNXIMPORTERIMPL_H
#define VARUNA_LIB_IMPORT_ONNX_ONNXIMPORTERIMPL_H

#include "varuna/Import/ONNXImporter.h"
#include "varuna/Support/SymInt.h"
#include "llvm/ADT/StringMap.h"
#include <onnx/onnx_pb.h>
#include <optional>
#include <string>
#include <vector>

namespace varuna {
namespace onnx_import {

/// Largest tensor the importer evaluates at import time.
constexpr int64_t kMaxKnownElements = 1 << 16;

struct KnownTensor {
  std::vector<int64_t> shape;
  mlir::Type elementType;
  std::vector<SymInt> ints;   // integer and boolean elements
  std::vector<double> floats; // floating-point elements

  bool isFloat() const { return elementType.isa<mlir::FloatType>(); }
  int64_t numel() const;
  bool isStatic() const; // no element depends on B
  static KnownTensor ofInts(mlir::Type type, std::vector<int64_t> shape,
                            std::vector<SymInt> values);
  static KnownTensor ofFloats(mlir::Type type, std::vector<int64_t> shape,
                              std::vector<double> values);
  /// Element i converted to double / SymInt (casting between kinds).
  double floatAt(int64_t i) const;
  SymInt intAt(int64_t i) const;
};

struct ImportValue {
  mlir::Value value;                // runtime
  std::optional<KnownTensor> known; // known at import time
  std::string param;                // a parameter not yet read
  /// The batch size k*B cast to floating point: neither data nor known; only
  /// a sum over the batch may be divided by it (Decomposer::divideByBatch).
  std::optional<SymInt> batchSize;
  /// A sequence (SplitToSequence, SequenceConstruct): its tensors, read by
  /// SequenceAt / ConcatFromSequence at known positions.
  std::optional<std::vector<mlir::Value>> sequence;

  bool isKnown() const { return known.has_value(); }
  bool isParam() const { return !param.empty(); }
};

/// Where the bytes of an initializer are.
struct InitializerData {
  const onnx::TensorProto *proto = nullptr;
  std::string file;   // relative to the model's directory
  int64_t offset = -1; // -1: not in raw bytes on disk (typed fields)
  int64_t size = 0;
};

/// The loaded model file.
class ModelFile {
public:
  /// Parses `bytes`; fails with a diagnostic at `loc`.
  mlir::LogicalResult load(llvm::StringRef bytes, llvm::StringRef displayName,
                           llvm::StringRef baseDir, mlir::Location loc);

  const onnx::ModelProto &model() const { return proto; }
  const InitializerData *initializer(llvm::StringRef name) const;
  llvm::StringRef getBaseDir() const { return baseDir; }
  llvm::StringRef getFileName() const { return fileName; }
  int64_t opsetVersion() const { return opset; }

  /// Reads an initializer's elements (for known tensors).
  mlir::FailureOr<KnownTensor> readKnown(const InitializerData &data,
                                         mlir::Type elementType,
                                         mlir::Location loc) const;

private:
  mlir::LogicalResult scanRawDataOffsets(llvm::StringRef bytes,
                                         mlir::Location loc);
  onnx::ModelProto proto;
  std::string baseDir, fileName;
  llvm::StringRef bytes;
  int64_t opset = 0;
  llvm::StringMap<InitializerData> initializers;
};

/// ONNX element type -> MLIR type; null if unsupported.
mlir::Type convertElementType(mlir::MLIRContext *ctx, int32_t onnxType);
const char *onnxTypeName(int32_t onnxType);

class Importer;

/// One ONNX node being imported.
struct NodeContext {
  Importer &importer;
  const onnx::NodeProto &node;
  mlir::Location loc;

  mlir::OpBuilder &b();
  mlir::MLIRContext *ctx();
  size_t numInputs() const;
  /// Input i is present (ONNX marks absent optional inputs with "").
  bool hasInput(size_t i) const;
  ImportValue &input(size_t i);
  /// Input i as a runtime tensor (materializing known values / params).
  mlir::FailureOr<mlir::Value> runtime(size_t i);
  /// Input i as a known tensor; fails with a message naming `what`.
  mlir::FailureOr<KnownTensor> knownInput(size_t i, llvm::StringRef what);
  std::optional<int64_t> intAttr(llvm::StringRef name) const;
  std::optional<float> floatAttr(llvm::StringRef name) const;
  std::optional<std::vector<int64_t>> intsAttr(llvm::StringRef name) const;
  std::optional<std::string> stringAttr(llvm::StringRef name) const;
  const onnx::AttributeProto *attr(llvm::StringRef name) const;
  /// True if output i is consumed anywhere (graph output or node input).
  bool outputUsed(size_t i) const;

  void setOutput(size_t i, mlir::Value v);
  void setOutput(size_t i, KnownTensor t);
  void setOutput(size_t i, ImportValue v);

  /// Emits "<op> node '<name>' (#index): msg" at loc and fails.
  mlir::LogicalResult error(const llvm::Twine &msg);
  mlir::InFlightDiagnostic emitError();

  /// Creates an op whose result type is inferred, checking inference first so
  /// a shape error becomes a diagnostic at this node, not an assertion.
  template <typename OpTy, typename... Args>
  mlir::FailureOr<mlir::Value> create(Args &&...args);

  int64_t normalizeAxis(int64_t axis, int64_t rank) const {
    return axis < 0 ? axis + rank : axis;
  }
};

class Importer {
public:
  Importer(mlir::MLIRContext *ctx, llvm::StringRef displayName,
           const ONNXImportOptions &options);

  mlir::OwningOpRef<mlir::ModuleOp> run(llvm::StringRef bytes,
                                        llvm::StringRef baseDir);

  GraphBuilder &graph() { return builder; }
  const ModelFile &file() const { return modelFile; }
  llvm::StringMap<ImportValue> &values() { return env; }
  /// Materializes a known tensor as a varuna.constant.
  mlir::FailureOr<mlir::Value> materialize(const KnownTensor &t,
                                           mlir::Location loc);
  mlir::FailureOr<mlir::Value> toRuntime(ImportValue &v, mlir::Location loc);
  bool isUsed(const std::string &name) const { return used.count(name); }
  /// Declares a parameter backed by an initializer (also for Identity).
  mlir::LogicalResult declareParam(llvm::StringRef name,
                                   const InitializerData &data, bool frozen,
                                   mlir::Location loc);
  bool isTrainable(llvm::StringRef name) const;
  /// The initializer behind parameter `name` (its own, or the one an
  /// Identity re-created it from); nullptr if none.
  const InitializerData *paramSource(llvm::StringRef name) const {
    auto it = paramSources.find(name);
    return it == paramSources.end() ? nullptr : it->second;
  }
  /// Imports the nodes of `g` (the model's graph, or the branch an `If`
  /// takes) into the current scope; `path` names the enclosing If nodes in
  /// locations.
  mlir::LogicalResult importGraphNodes(const onnx::GraphProto &g,
                                       llvm::StringRef path);

private:
  mlir::LogicalResult importInputs();
  mlir::LogicalResult importInitializers();
  mlir::LogicalResult importNodes();
  mlir::LogicalResult importOutputs();
  mlir::LogicalResult readMetadata();

  mlir::MLIRContext *ctx;
  std::string displayName;
  ONNXImportOptions options;
  GraphBuilder builder;
  ModelFile modelFile;
  llvm::StringMap<ImportValue> env;
  llvm::StringMap<bool> used;
  // From the `varuna.parameters` / `varuna.buffers` metadata, if present.
  std::optional<llvm::StringMap<bool>> trainable, buffers;
  // Without that metadata: the initializers BatchNormalization reads as its
  // running mean and variance (inputs 3 and 4), which are never trained
  // (they were, and the first backward failed in ATen).
  llvm::StringMap<bool> runningStats;
  llvm::StringMap<const InitializerData *> paramSources;
  // From `varuna.embedding_padding` ({"<weight>": padding_idx}, written by
  // varuna.export for nn.Embedding(padding_idx=...)).
  llvm::StringMap<int64_t> paddingIdx;

public:
  /// The padding_idx of the embedding table `param`, if it has one.
  std::optional<int64_t> paddingIdxOf(llvm::StringRef param) const {
    auto it = paddingIdx.find(param);
    if (it == paddingIdx.end())
      return std::nullopt;
    return it->second;
  }
};

/// Imports one node; dispatches on its op type.
mlir::LogicalResult importNode(NodeContext &nc);

template <typename OpTy, typename... Args>
mlir::FailureOr<mlir::Value> NodeContext::create(Args &&...args) {
  // Build with a placeholder result type, then infer the real one: the ODS
  // builders that infer by themselves abort on failure.
  mlir::OperationState state(loc, OpTy::getOperationName());
  OpTy::build(b(), state, b().getNoneType(), std::forward<Args>(args)...);
  state.types.clear();
  llvm::SmallVector<mlir::Type, 1> types;
  if (mlir::failed(OpTy::inferReturnTypes(
          ctx(), loc, state.operands, state.attributes.getDictionary(ctx()),
          state.regions, types)))
    return error("cannot import this node: its operand shapes do not fit "
                 "(see the previous error)");
  state.addTypes(types);
  return b().create(state)->getResult(0);
}

} // namespace onnx_import
} // namespace varuna

#endif // VARUNA_LIB_IMPORT_ONNX_ONNXIMPORTERIMPL_H
