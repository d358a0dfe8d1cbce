//===- TorchScriptImporterImpl.h - TorchScript importer internals -*- C++ -*-===//
//
// Private to lib/Import/TorchScript. The importer walks the inlined `forward`
// graph of a traced module node by node. Every TorchScript value maps to a
// `TSValue`: a varuna tensor, a not yet read parameter, a symbolic integer
// (SymInt: sizes derived from the batch dimension stay affine in B), a float,
// bool, string, None, a list/tuple, or a submodule (its dotted path).
//
// TorchScriptImporter.cpp: loading, varuna.json, inputs, parameters and the
// node loop. TorchScriptOperands.cpp: operand access, casts, reshapes.
// TorchScriptOps.cpp: constants, lists, scalar arithmetic, elementwise ops.
// TorchScriptShapeOps.cpp: view/slice/split/concat. TorchScriptTensorOps.cpp:
// where/masks/clamp and factories. TorchScriptNNOps.cpp: linear algebra,
// normalization, convolution, pooling, losses, attention.
// TorchScriptFunctions.cpp: functions without a varuna op (activations,
// logsumexp, variance, norms, RMS / instance norm, elementwise losses),
// composed by the Decomposer shared with the ONNX importer.
// TorchScriptSelection.cpp: values selected by a boolean mask (x[mask]).
// TorchScriptStatistics.cpp, TorchScriptComplex.cpp: statistics functions;
// complex numbers, FFTs and stft.
// All code here runs inside the try/catch of importTorchScript.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_LIB_IMPORT_TORCHSCRIPT_TORCHSCRIPTIMPORTERIMPL_H
#define VARUNA_LIB_IMPORT_TORCHSCRIPT_TORCHSCRIPTIMPORTERIMPL_H

#include "varuna/Import/TorchScriptImporter.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SaveAndRestore.h"

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>

#include <map>
#include <tuple>
#include <memory>
#include <optional>
#include <set>
#include <type_traits>

namespace caffe2::serialize {
class PyTorchStreamReader;
}

namespace varuna::ts {

/// Orders selectedCounts' keys (mlir::Value and Type have no operator<).
struct SelectedCountOrder {
  using Key = std::tuple<mlir::Value, int64_t, mlir::Type>;
  bool operator()(const Key &a, const Key &b) const {
    auto key = [](const Key &t) {
      return std::make_tuple(std::get<0>(t).getAsOpaquePointer(),
                             std::get<1>(t),
                             std::get<2>(t).getAsOpaquePointer());
    };
    return key(a) < key(b);
  }
};

/// The importer's view of one TorchScript value.
struct TSValue {
  /// Packed: a packed sequence (pack_padded_sequence's data), kept padded:
  /// `tensor` the time-major [T, B, F] values, `lengths` each row's
  /// length (i64 [B]), `valid` the steps each row has (i1 [T, B], made
  /// once by pack_padded_sequence). PackedSizes: its batch_sizes,
  /// `lengths` and the batch size in `i`. Neither is a tensor to other ops.
  /// BatchOrder: the order pack_padded_sequence(enforce_sorted=False) sorts
  /// the examples in (a sort of the lengths [B]: sorted_indices), or with
  /// `b` its inverse (unsorted_indices); the batch size in `i`. Rows are
  /// never moved: a Tensor or Packed value with `rowsSorted` is, in torch,
  /// in the sorted order, here in the examples' (every op between the sort
  /// and its inverse works row by row, so the results are the same). Only
  /// index_select by an order along the batch axis (setting or clearing
  /// rowsSorted), pack_padded_sequence, the recurrent layers over a packed
  /// sequence and pad_packed_sequence read such values; to any other op
  /// they are an error (asTensor).
  /// MaskIndex: component `i` of torch.where(mask) / nonzero(as_tuple=True)
  /// (`tensor` the mask): as many indices as the mask selects; only
  /// x[torch.where(mask)] -- all components in order -- reads them, as
  /// x[mask] (TorchScriptSelection.cpp).
  enum class Kind {
    Other, None, Tensor, Int, Float, Bool, Str, List, Module, Packed,
    PackedSizes, BatchOrder, MaskIndex
  };
  Kind kind = Kind::Other;
  mlir::Value tensor;    // Tensor (null until a parameter is first read)
  mlir::Value lengths;   // Packed, PackedSizes
  mlir::Value valid;     // Packed
  std::string param;     // Tensor: parameter name; Module: dotted path
  SymInt i;              // Int
  double f = 0;          // Float
  bool b = false;        // Bool
  std::string s;         // Str
  std::vector<TSValue> list;
  /// A 0-d tensor made by prim::NumToTensor (or arithmetic on one): kept as
  /// a scalar so sizes stay symbolic; materialized if used as a tensor.
  bool scalarTensor = false;
  /// Tensor, Packed: the rows are in a BatchOrder's sorted order.
  bool rowsSorted = false;
  /// Tensor: x[mask] or masked_select(x, mask) -- as many rows as the mask
  /// selects, a number the data decides -- held unselected: `tensor` is the
  /// whole x, `selectMask` the mask (i1) over its first `selectDims`
  /// dimensions. Its torch shape is [selected] + x's later dimensions. Only
  /// TorchScriptSelection.cpp reads it (asTensor refuses it elsewhere).
  mlir::Value selectMask;
  int64_t selectDims = 0;
  /// Tensor: complex numbers, held as a real tensor with a trailing axis of
  /// 2 (real, imaginary; view_as_real's layout): its torch shape is the
  /// tensor's without that axis. Only TorchScriptComplex.cpp reads it.
  bool complex = false;
  /// Tensor: its contents when known at import time (a small tensor constant
  /// or what was computed from such constants alone; see foldConstant).
  std::optional<at::Tensor> known;

  // Designated initializers (C++20): the fields not named keep their
  // defaults.
  static TSValue none() { return make(Kind::None); }
  static TSValue ofTensor(mlir::Value v) {
    return {.kind = Kind::Tensor, .tensor = v};
  }
  static TSValue ofInt(SymInt v) { return {.kind = Kind::Int, .i = v}; }
  static TSValue ofFloat(double v) { return {.kind = Kind::Float, .f = v}; }
  static TSValue ofBool(bool v) { return {.kind = Kind::Bool, .b = v}; }
  static TSValue make(Kind k) { return {.kind = k}; }
  bool isScalar() const {
    return kind == Kind::Int || kind == Kind::Float || kind == Kind::Bool;
  }
};

using K = TSValue::Kind;

/// A parameter (or buffer) of the module, found by walking the attributes.
struct ParamInfo {
  std::string name;
  at::Tensor tensor;
  bool frozen = false;
  bool declared = false;
};

class TSImporter {
public:
  TSImporter(mlir::MLIRContext *ctx, llvm::StringRef path,
             const TorchScriptImportOptions &options);
  mlir::OwningOpRef<mlir::ModuleOp> run();

  using Node = torch::jit::Node;
  using JitValue = torch::jit::Value;
  using Handler = mlir::LogicalResult (TSImporter::*)(Node *, mlir::Location);

private:
  // --- TorchScriptImporter.cpp ---------------------------------------------
  mlir::LogicalResult load();
  mlir::LogicalResult readVarunaJson(const std::string &text);
  mlir::LogicalResult collectParams();
  mlir::LogicalResult addInputs();
  mlir::LogicalResult convertGraph();
  mlir::LogicalResult convertNode(Node *node);
  mlir::LogicalResult finish();
  /// Evaluates `node` with libtorch when a tensor operand is a known
  /// constant and every other operand is known too (Swin's window size is
  /// torch.min(torch.tensor(resolution)), read back with aten::Int), binding
  /// the result as a constant. False (nothing bound) when it cannot.
  bool foldConstant(Node *node, mlir::Location loc);
  /// After an in-place op on `target` (already rebound to its new value):
  /// when `target` is a slice or select of another tensor, writes the new
  /// value into that tensor (concat of the parts around it), and so on up
  /// the chain. Fails on writes that cannot be expressed: through views
  /// other than slice/select while the base is still used, into the
  /// batch-dependent dimension, into a parameter, or while another view of
  /// the same tensor, taken before the write, is used after it.
  mlir::LogicalResult writeBack(JitValue *target, Node *node,
                                mlir::Location loc);
  mlir::FailureOr<std::string> paramNameFor(llvm::StringRef path,
                                            mlir::Location loc);
  mlir::FailureOr<mlir::Value> readParam(llvm::StringRef name,
                                         mlir::Location loc);
  /// Adds p's varuna.param (once; readParam calls it on first read).
  mlir::LogicalResult declareParam(ParamInfo &p);
  mlir::FailureOr<DataAttr> dataFor(const ParamInfo &p, mlir::Location loc);

public:
  // --- helpers shared by the op files (TorchScriptImporter.cpp) -------------
  mlir::MLIRContext *ctx;
  mlir::OpBuilder &b() { return gb.builder(); }
  std::string fileName;

  /// "node 12 (aten::foo) at models.py:85: " for messages.
  std::string where(Node *node) const;
  mlir::InFlightDiagnostic error(Node *node, mlir::Location loc);

  TSValue &lookup(JitValue *v) { return env[v]; }
  void bind(JitValue *v, TSValue t) { env[v] = std::move(t); }
  void forget(JitValue *v) { env.erase(v); }
  void bindTensor(JitValue *v, mlir::Value t) { env[v] = TSValue::ofTensor(t); }
  /// Binds the node's (single) output to `r` if it succeeded.
  mlir::LogicalResult bindResult(Node *n, mlir::FailureOr<mlir::Value> r) {
    if (mlir::failed(r))
      return mlir::failure();
    bindTensor(n->output(), *r);
    return mlir::success();
  }

  /// Operand i's value, or null when the node has fewer operands.
  TSValue *operand(Node *n, unsigned i) {
    return i < n->inputs().size() ? &lookup(n->input(i)) : nullptr;
  }
  /// `values` expanded to their common broadcast shape (an error naming
  /// the shapes when they do not broadcast).
  mlir::FailureOr<llvm::SmallVector<mlir::Value>>
  broadcastValues(Node *n, mlir::Location loc,
                  llvm::ArrayRef<mlir::Value> values);
  /// Dimension i of `v` repeated r times through a new axis of 1 expanded
  /// to r and merged back: the new axis before i tiles the whole dimension
  /// (repeat), after i repeats each element (repeat_interleave).
  mlir::FailureOr<mlir::Value> repeatAxis(Node *n, mlir::Location loc,
                                          mlir::Value v, int64_t i, SymInt r,
                                          bool interleave);
  /// Emits "operand I is not WHAT" at the node and fails.
  mlir::LogicalResult operandError(Node *n, unsigned i, mlir::Location loc,
                                   llvm::StringRef what);
  /// normAxis(v, size), or fails with "<what> V out of range" at the node.
  mlir::FailureOr<int64_t> normIndex(Node *n, int64_t v, int64_t size,
                                     mlir::Location loc,
                                     llvm::StringRef what = "dimension");

  /// Operand accessors: fail with a diagnostic naming the node and operand.
  mlir::FailureOr<mlir::Value> tensorArg(Node *n, unsigned i,
                                         mlir::Location loc);
  bool isNoneArg(Node *n, unsigned i) {
    return i >= n->inputs().size() || lookup(n->input(i)).kind ==
                                          TSValue::Kind::None;
  }
  /// Operand i read by `read`, or `dflt` when it is None or missing.
  template <typename T>
  mlir::FailureOr<T> optArg(
      Node *n, unsigned i, mlir::Location loc,
      mlir::FailureOr<T> (TSImporter::*read)(Node *, unsigned, mlir::Location),
      std::type_identity_t<T> dflt) {
    if (isNoneArg(n, i))
      return dflt;
    return (this->*read)(n, i, loc);
  }
  mlir::FailureOr<SymInt> symIntArg(Node *n, unsigned i, mlir::Location loc);
  mlir::FailureOr<int64_t> intArg(Node *n, unsigned i, mlir::Location loc);
  mlir::FailureOr<double> floatArg(Node *n, unsigned i, mlir::Location loc);
  mlir::FailureOr<bool> boolArg(Node *n, unsigned i, mlir::Location loc);
  mlir::FailureOr<std::string> strArg(Node *n, unsigned i, mlir::Location loc);
  mlir::FailureOr<llvm::SmallVector<SymInt>>
  symIntListArg(Node *n, unsigned i, mlir::Location loc);
  mlir::FailureOr<llvm::SmallVector<int64_t>>
  intListArg(Node *n, unsigned i, mlir::Location loc);
  /// Operand i as reduction axes of a rank-`rank` tensor: an int or an int
  /// list, normalized, sorted and unique; None or empty means all axes.
  mlir::FailureOr<llvm::SmallVector<int64_t>>
  axesArg(Node *n, unsigned i, int64_t rank, mlir::Location loc);
  /// Operand i as torch's loss reduction enum (0 none, 1 mean, 2 sum);
  /// None or missing is mean, any other value an error naming it.
  mlir::FailureOr<LossReduction> reductionArg(Node *n, unsigned i,
                                              mlir::Location loc);
  /// A tensor list (prim::ListConstruct of tensors).
  mlir::FailureOr<llvm::SmallVector<mlir::Value>>
  tensorListArg(Node *n, unsigned i, mlir::Location loc);
  /// The element type named by a ScalarType int argument (None -> null).
  mlir::FailureOr<mlir::Type> dtypeArg(Node *n, unsigned i,
                                       mlir::Location loc);

  /// Materializes a value as a tensor: scalars become rank-0 constants of
  /// `like` (or their natural type when null).
  mlir::FailureOr<mlir::Value> asTensor(const TSValue &v, mlir::Type like,
                                        mlir::Location loc, Node *n);
  mlir::Value scalarConstant(double value, mlir::Type elementType,
                             mlir::Location loc);
  mlir::FailureOr<VTensorType> typeFromDims(llvm::ArrayRef<SymInt> dims,
                                            mlir::Type elementType,
                                            mlir::Location loc);
  mlir::Value cast(mlir::Value v, mlir::Type elementType, mlir::Location loc);
  mlir::FailureOr<mlir::Value> reshape(mlir::Value v,
                                       llvm::ArrayRef<SymInt> dims,
                                       mlir::Location loc);

  /// Creates an op implementing InferTypeOpInterface after checking that its
  /// result type can be inferred (a diagnostic at loc otherwise).
  template <typename OpTy>
  mlir::FailureOr<mlir::Value>
  make(mlir::Location loc, mlir::ValueRange operands,
       llvm::ArrayRef<mlir::NamedAttribute> attrs = {}) {
    llvm::SmallVector<mlir::Type, 1> types;
    auto dict = mlir::DictionaryAttr::get(ctx, attrs);
    if (failed(OpTy::inferReturnTypes(ctx, loc, operands, dict, {}, types)))
      return mlir::failure();
    if (types.size() != 1 || !types[0]) {
      mlir::emitError(loc) << "cannot represent the result type of "
                           << OpTy::getOperationName();
      return mlir::failure();
    }
    return b().create<OpTy>(loc, types, operands, attrs)->getResult(0);
  }
  mlir::NamedAttribute attr(llvm::StringRef name, mlir::Attribute a) {
    return b().getNamedAttr(name, a);
  }
  mlir::NamedAttribute i64(llvm::StringRef name, int64_t v) {
    return attr(name, b().getI64IntegerAttr(v));
  }

  /// A value of the importer for a constant (number, list, string, tensor).
  mlir::FailureOr<TSValue> fromConstant(const c10::IValue &v, Node *n,
                                        mlir::Location loc);

  /// A slice (step 1) or select of `base`, recorded so that an in-place op
  /// on it can be written back (writeBack).
  struct ViewInfo {
    JitValue *base = nullptr;
    int64_t axis = 0;
    int64_t start = 0, end = 0; // normalized, in [0, size]
    bool select = false;        // the axis was removed
    bool whole = false;         // all of base (a slice of every element)
  };
  void recordView(Node *n, ViewInfo info) { views[n->output()] = info; }

  // --- TorchScriptOps.cpp ---------------------------------------------------
  static void registerBasicOps(llvm::StringMap<Handler> &table);
  mlir::LogicalResult convertConstant(Node *n, mlir::Location loc);
  mlir::LogicalResult convertScalarArith(Node *n, mlir::Location loc,
                                         llvm::StringRef op);
  bool isScalarNode(Node *n);
  /// Elementwise binary op `kind` (add sub mul div pow maximum minimum and
  /// or, or a compare predicate) with torch type promotion.
  mlir::FailureOr<mlir::Value> binary(llvm::StringRef kind, const TSValue &a,
                                      const TSValue &b, mlir::Location loc,
                                      Node *n);
  mlir::FailureOr<mlir::Value> unary(UnaryKind kind, mlir::Value v,
                                     mlir::Location loc);
  /// varuna.reduce `kind` of `x` over sorted unique `axes`.
  mlir::FailureOr<mlir::Value> reduce(ReduceKind kind, mlir::Value x,
                                      llvm::ArrayRef<int64_t> axes,
                                      bool keepdim, mlir::Location loc);
  mlir::FailureOr<mlir::Value> sliceOf(mlir::Value v, int64_t axis,
                                       SymInt start, SymInt end, int64_t step,
                                       mlir::Location loc, Node *n);
  mlir::FailureOr<mlir::Value> transpose(mlir::Value v,
                                         llvm::ArrayRef<int64_t> perm,
                                         mlir::Location loc);
  mlir::FailureOr<mlir::Value> swapDims(mlir::Value v, int64_t a, int64_t b,
                                        mlir::Location loc);
  /// i1 [T, B]: step t < lengths[b], for a time-major x [T, B, ...] with a
  /// static T and lengths [B] (a packed sequence's steps).
  mlir::FailureOr<mlir::Value> stepsWithin(mlir::Value x, mlir::Value lengths,
                                           mlir::Location loc);

  /// `index` [K] viewed along `axis` of `like`'s rank and expanded to its
  /// shape (scatterAlong's per-element index).
  mlir::FailureOr<mlir::Value> indexAlong(mlir::Value index, int64_t axis,
                                          mlir::Value like, mlir::Location loc);
  /// i1 of rank `rank`, `size` along `axis` (1 elsewhere): whether `index`
  /// [K] names each position.
  mlir::FailureOr<mlir::Value> indexMask(mlir::Value index, int64_t axis,
                                         int64_t size, int64_t rank,
                                         mlir::Location loc, Node *n);

#define VARUNA_TS_HANDLER(NAME)                                                \
  mlir::LogicalResult NAME(Node *n, mlir::Location loc);
#include "TorchScriptHandlers.def"
#undef VARUNA_TS_HANDLER

  // --- TorchScriptNNOps.cpp -------------------------------------------------
  static void registerNNOps(llvm::StringMap<Handler> &table);
  /// x [N, C, *] normalized over each group of C / groups channels and all
  /// positions (a layer_norm of x viewed as [N, groups, rest]), then scaled
  /// and shifted per channel by operands weightIdx / biasIdx unless None.
  mlir::FailureOr<mlir::Value> groupNorm(Node *n, mlir::Location loc,
                                         mlir::Value x, int64_t groups,
                                         unsigned weightIdx, unsigned biasIdx,
                                         double eps);
  /// aten::gather / aten::index_select (x, dim, index): OpTy with an axis.
  template <typename OpTy>
  mlir::LogicalResult hGatherAlong(Node *n, mlir::Location loc);
  /// index_select(x, dim, order) or x[order] by a BatchOrder along the
  /// batch axis: x itself, its rows marked sorted (or no longer, for the
  /// inverse).
  mlir::LogicalResult selectByOrder(Node *n, mlir::Location loc,
                                    const TSValue &order, int64_t dim);
  /// sort / argsort across the examples of their lengths (hTopK).
  bool sortsExamples(Node *n, mlir::Location loc);
  // --- TorchScriptStatistics.cpp -------------------------------------------
  /// The r-th smallest element (from 0) along static `axis` of v and its
  /// index (i64), with the axis kept as 1 or dropped (median, kthvalue).
  mlir::FailureOr<std::pair<mlir::Value, mlir::Value>>
  orderStatistic(Node *n, mlir::Location loc, mlir::Value v, int64_t axis,
                 int64_t r, bool keepdim);
  /// While set (by the handlers named at TSValue::Kind::BatchOrder),
  /// asTensor accepts values whose rows are sorted.
  bool sortedRowsOk = false;

  // --- TorchScriptSelection.cpp ---------------------------------------------
  /// Whether `n` reads a value selected by a boolean mask
  /// (TSValue::selectMask), directly or in a list.
  bool readsSelection(Node *n);
  /// Imports such a node (`h`: its handler, null when it has none); the ops
  /// it takes and how are listed at the top of TorchScriptSelection.cpp.
  mlir::LogicalResult convertSelected(Node *n, mlir::Location loc,
                                      llvm::StringRef kind, Handler h);
  /// Binds n's output to x selected by `mask` over x's leading dimensions
  /// (an error unless the mask is boolean and its shape theirs).
  mlir::LogicalResult bindSelection(Node *n, mlir::Location loc,
                                    mlir::Value x, mlir::Value mask);
  /// "<node>: reads a tensor selected by a boolean mask ...: " (the caller
  /// adds what is wrong with it).
  mlir::InFlightDiagnostic selectionError(Node *n, mlir::Location loc);
  /// `mask` reshaped to broadcast against `like` (1s after its dimensions).
  mlir::FailureOr<mlir::Value> broadcastMask(mlir::Value mask,
                                             mlir::Value like,
                                             mlir::Location loc);
  /// The sum, mean (divided by the selected count, at least 1), max or min
  /// of a selection over its selected rows and the whole tensor's
  /// `trailing` axes (sorted, each >= selectDims); keepdim gives torch's
  /// shape.
  mlir::FailureOr<mlir::Value> selectedReduce(Node *n, mlir::Location loc,
                                              const TSValue &sel,
                                              llvm::ArrayRef<int64_t> trailing,
                                              ReduceKind kind, bool keepdim);
  /// The masks of the selections so far (a mask computed again is
  /// replaced by the first).
  std::vector<mlir::Value> selectionMasks;
  /// selectedReduce's divisors by mask, elements per row and element type.
  std::map<std::tuple<mlir::Value, int64_t, mlir::Type>, mlir::Value,
           SelectedCountOrder>
      selectedCounts;
  /// labels [N, S] (static S) with each row's labels where `mask` is set
  /// moved to its front, in order, zeros after (ctc_loss's padded targets).
  mlir::FailureOr<mlir::Value> compactedRows(mlir::Value labels,
                                             mlir::Value mask,
                                             mlir::Location loc);

  // --- TorchScriptComplex.cpp -----------------------------------------------
  /// Whether `n` reads a complex tensor (TSValue::complex) or makes one.
  bool touchesComplex(Node *n);
  /// Imports such a node (`op`: its name without "aten::"); the ops it
  /// takes and how are listed at the top of TorchScriptComplex.cpp.
  mlir::LogicalResult convertComplex(Node *n, mlir::Location loc,
                                     llvm::StringRef op);
  /// torch.fft's fft / ifft / rfft / irfft (1-D, 2-D, n-D) as DFT matmuls.
  mlir::LogicalResult convertStft(Node *n, mlir::Location loc);
  mlir::LogicalResult convertFFT(Node *n, mlir::Location loc,
                                 llvm::StringRef op);
  /// The real tensor (trailing axis of 2) behind a complex value.
  mlir::FailureOr<mlir::Value> complexTensor(const TSValue &v,
                                             mlir::Location loc);

private:
  GraphBuilder gb;
  std::string path;
  TorchScriptImportOptions options;
  torch::jit::Module module;
  std::shared_ptr<torch::jit::Graph> graph;
  llvm::DenseMap<JitValue *, TSValue> env;
  llvm::DenseMap<Node *, int64_t> nodeIndex;
  llvm::DenseMap<JitValue *, ViewInfo> views;

  // varuna.json
  bool haveJson = false;
  struct InputSpec {
    std::string name;
    llvm::SmallVector<SymInt> dims;
    mlir::Type elementType;
  };
  std::vector<InputSpec> jsonInputs;
  std::string lossName = "loss";
  std::vector<std::string> jsonParams, jsonBuffers;

  // parameters: canonical names by tensor identity, paths to canonical names
  std::map<std::string, ParamInfo> paramsByName;
  /// The canonical names of paramsByName in module order (parameters, then
  /// buffers; varuna.json's names first).
  std::vector<std::string> paramOrder;
  llvm::StringMap<std::string> canonicalByPath;
  std::unique_ptr<llvm::MemoryBuffer> fileBytes;
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> reader;
  std::set<std::string> claimedRecords;
  llvm::StringMap<Handler> handlers;
};

/// Builds compositions of varuna ops at one location (hMath, complex
/// numbers); each step fails with a diagnostic of the op it could not build.
struct MathBuilder {
  TSImporter &imp;
  mlir::Location loc;
  mlir::Type et;

  mlir::Value c(double v) { return imp.scalarConstant(v, et, loc); }
  mlir::FailureOr<mlir::Value> un(UnaryKind k,
                                  mlir::FailureOr<mlir::Value> x) {
    return mlir::failed(x) ? x : imp.unary(k, *x, loc);
  }
  template <typename OpTy>
  mlir::FailureOr<mlir::Value> bin(mlir::FailureOr<mlir::Value> a,
                                   mlir::FailureOr<mlir::Value> b) {
    if (mlir::failed(a) || mlir::failed(b))
      return mlir::failure();
    return imp.make<OpTy>(loc, {*a, *b});
  }
  mlir::FailureOr<mlir::Value> cmp(ComparePredicate p,
                                   mlir::FailureOr<mlir::Value> a,
                                   mlir::FailureOr<mlir::Value> b) {
    if (mlir::failed(a) || mlir::failed(b))
      return mlir::failure();
    return imp.make<CompareOp>(
        loc, {*a, *b},
        {imp.attr("predicate",
                  ComparePredicateAttr::get(imp.b().getContext(), p))});
  }
  mlir::FailureOr<mlir::Value> where(mlir::FailureOr<mlir::Value> cond,
                                     mlir::FailureOr<mlir::Value> a,
                                     mlir::FailureOr<mlir::Value> b) {
    if (mlir::failed(cond) || mlir::failed(a) || mlir::failed(b))
      return mlir::failure();
    return imp.make<WhereOp>(loc, {*cond, *a, *b});
  }
};

mlir::FailureOr<mlir::Type> elementTypeOf(mlir::MLIRContext *ctx,
                                          c10::ScalarType t);
mlir::FailureOr<mlir::Type> elementTypeByName(mlir::MLIRContext *ctx,
                                              llvm::StringRef name);
llvm::SmallVector<SymInt> dimsOf(mlir::Value v);
/// Operand 0 of `n` as a floating-point tensor (integers become f32, as
/// torch's floating functions promote them).
mlir::FailureOr<mlir::Value> floatInput(TSImporter &imp, TSImporter::Node *n,
                                        mlir::Location loc);
/// For the reductions with an optional dimension (median, argmax, quantile):
/// with `all`, x flattened to one dimension and axis 0; else x and operand
/// `dimAt` normalized.
mlir::FailureOr<std::pair<mlir::Value, int64_t>>
flatOrAxis(TSImporter &imp, TSImporter::Node *n, mlir::Location loc,
           mlir::Value x, bool all, unsigned dimAt);
inline VTensorType tensorType(mlir::Value v) {
  return v.getType().cast<VTensorType>();
}
/// "aten::add_" -> "add"; "prim::ListConstruct" -> "ListConstruct".
std::string opName(torch::jit::Node *n);
/// torch's type promotion between two tensor element types.
mlir::Type promoteTypes(mlir::Type a, mlir::Type b);
/// The element type a scalar takes next to a tensor of element type `t`.
mlir::Type promoteScalarType(mlir::MLIRContext *ctx, mlir::Type t,
                             const TSValue &s);
inline bool isFloatType(mlir::Type t) { return t.isa<mlir::FloatType>(); }
/// "[B, 16, 4]".
std::string dimsStr(llvm::ArrayRef<SymInt> dims);
/// Normalizes a possibly negative axis; -1 if out of range.
int64_t normAxis(int64_t axis, int64_t rank);

} // namespace varuna::ts

#endif // VARUNA_LIB_IMPORT_TORCHSCRIPT_TORCHSCRIPTIMPORTERIMPL_H
