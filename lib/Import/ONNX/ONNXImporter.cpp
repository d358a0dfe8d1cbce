//===- ONNXImporter.cpp - ONNX -> varuna driver ---------------------------===//
//
// Walks the graph: inputs (with the symbolic batch dimension), initializers
// (parameters or known constants), nodes in order, outputs (loss marked).
//
//===----------------------------------------------------------------------===//

#include "varuna/Import/ONNXImporter.h"
#include "ONNXImporterImpl.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace varuna;
using namespace varuna::onnx_import;

//===----------------------------------------------------------------------===//
// NodeContext
//===----------------------------------------------------------------------===//

OpBuilder &NodeContext::b() { return importer.graph().builder(); }
MLIRContext *NodeContext::ctx() { return importer.graph().getContext(); }
size_t NodeContext::numInputs() const { return node.input_size(); }
bool NodeContext::hasInput(size_t i) const {
  return static_cast<int>(i) < node.input_size() && !node.input(i).empty();
}

ImportValue &NodeContext::input(size_t i) {
  return importer.values()[node.input(i)];
}

FailureOr<Value> NodeContext::runtime(size_t i) {
  if (!hasInput(i))
    return error("input " + Twine(i) + " is missing");
  return importer.toRuntime(input(i), loc);
}

FailureOr<KnownTensor> NodeContext::knownInput(size_t i, StringRef what) {
  if (!hasInput(i))
    return error(Twine(what) + " (input " + Twine(i) + ") is missing");
  ImportValue &v = input(i);
  if (v.isKnown())
    return *v.known;
  if (v.isParam()) {
    const InitializerData *d = importer.file().initializer(v.param);
    if (d) {
      Type et = convertElementType(ctx(), d->proto->data_type());
      if (et)
        return importer.file().readKnown(*d, et, loc);
    }
  }
  return error(Twine(what) + " '" + node.input(i) +
               "' must be known when the model is imported (a constant or "
               "computed from shapes), but it is computed at run time");
}

const onnx::AttributeProto *NodeContext::attr(StringRef name) const {
  for (const auto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

std::optional<int64_t> NodeContext::intAttr(StringRef name) const {
  if (auto *a = attr(name))
    return a->i();
  return std::nullopt;
}

std::optional<float> NodeContext::floatAttr(StringRef name) const {
  if (auto *a = attr(name))
    return a->f();
  return std::nullopt;
}

std::optional<std::vector<int64_t>>
NodeContext::intsAttr(StringRef name) const {
  if (auto *a = attr(name))
    return std::vector<int64_t>(a->ints().begin(), a->ints().end());
  return std::nullopt;
}

std::optional<std::string> NodeContext::stringAttr(StringRef name) const {
  if (auto *a = attr(name))
    return a->s();
  return std::nullopt;
}

bool NodeContext::outputUsed(size_t i) const {
  return static_cast<int>(i) < node.output_size() &&
         !node.output(i).empty() && importer.isUsed(node.output(i));
}

void NodeContext::setOutput(size_t i, Value v) {
  ImportValue iv;
  iv.value = v;
  setOutput(i, iv);
}

void NodeContext::setOutput(size_t i, KnownTensor t) {
  ImportValue iv;
  iv.known = std::move(t);
  setOutput(i, iv);
}

void NodeContext::setOutput(size_t i, ImportValue v) {
  if (static_cast<int>(i) < node.output_size() && !node.output(i).empty())
    importer.values()[node.output(i)] = std::move(v);
}

InFlightDiagnostic NodeContext::emitError() {
  return mlir::emitError(loc)
         << node.op_type() << " node '" << node.name() << "': ";
}

LogicalResult NodeContext::error(const Twine &msg) {
  emitError() << msg;
  return failure();
}

//===----------------------------------------------------------------------===//
// Importer
//===----------------------------------------------------------------------===//

Importer::Importer(MLIRContext *ctx, StringRef displayName,
                   const ONNXImportOptions &options)
    : ctx(ctx), displayName(displayName.str()), options(options),
      builder(ctx, displayName, options) {}

bool Importer::isTrainable(StringRef name) const {
  if (buffers && buffers->count(name))
    return false;
  if (trainable)
    return trainable->count(name);
  return !runningStats.count(name);
}

LogicalResult Importer::readMetadata() {
  Location loc = FileLineColLoc::get(ctx, displayName, 0, 0);
  for (const auto &n : modelFile.model().graph().node())
    if (n.op_type() == "BatchNormalization" && n.domain().empty())
      for (int i : {3, 4})
        if (i < n.input_size() && !n.input(i).empty())
          runningStats[n.input(i)] = true;
  for (const auto &kv : modelFile.model().metadata_props()) {
    if (kv.key() == "varuna.embedding_padding") {
      auto parsed = llvm::json::parse(kv.value());
      llvm::json::Object *obj = parsed ? parsed->getAsObject() : nullptr;
      if (!obj) {
        if (!parsed)
          llvm::consumeError(parsed.takeError());
        return emitError(loc) << "metadata 'varuna.embedding_padding' is not "
                                 "a JSON object of parameter: padding_idx";
      }
      for (const auto &[name, v] : *obj) {
        std::optional<int64_t> idx = v.getAsInteger();
        if (!idx || *idx < 0)
          return emitError(loc)
                 << "metadata 'varuna.embedding_padding': '" << name.str()
                 << "' has no padding_idx >= 0";
        paddingIdx[name.str()] = *idx;
      }
      continue;
    }
    if (kv.key() != "varuna.parameters" && kv.key() != "varuna.buffers")
      continue;
    auto parsed = llvm::json::parse(kv.value());
    llvm::json::Array *arr = parsed ? parsed->getAsArray() : nullptr;
    if (!arr) {
      if (!parsed)
        llvm::consumeError(parsed.takeError());
      return emitError(loc) << "metadata '" << kv.key()
                            << "' is not a JSON list of names";
    }
    llvm::StringMap<bool> names;
    for (const auto &v : *arr)
      if (auto s = v.getAsString())
        names[*s] = true;
    (kv.key() == "varuna.parameters" ? trainable : buffers) = std::move(names);
  }
  return success();
}

LogicalResult Importer::importInputs() {
  const onnx::GraphProto &g = modelFile.model().graph();
  llvm::StringMap<bool> inits;
  for (const auto &i : g.initializer())
    inits[i.name()] = true;
  for (const auto &in : g.input()) {
    if (inits.count(in.name()))
      continue; // old IR versions list initializers as inputs too
    Location loc = nodeLocation(ctx, displayName, in.name(), 0);
    if (!in.type().has_tensor_type())
      return emitError(loc) << "graph input '" << in.name()
                            << "' is not a tensor";
    const auto &tt = in.type().tensor_type();
    Type et = convertElementType(ctx, tt.elem_type());
    if (!et)
      return emitError(loc) << "graph input '" << in.name()
                            << "' has unsupported element type "
                            << onnxTypeName(tt.elem_type());
    if (!tt.has_shape())
      return emitError(loc) << "graph input '" << in.name()
                            << "' has no shape; export with known shapes";
    SmallVector<int64_t> shape;
    int64_t batchDim = -1;
    for (int i = 0; i < tt.shape().dim_size(); ++i) {
      const auto &d = tt.shape().dim(i);
      if (d.has_dim_value()) {
        shape.push_back(d.dim_value());
        continue;
      }
      if (i != 0)
        return emitError(loc)
               << "graph input '" << in.name() << "': dimension " << i
               << " is symbolic ('" << d.dim_param()
               << "'); only the batch dimension (0) may be symbolic. "
                  "Re-export with a fixed size for it";
      batchDim = 0;
      shape.push_back(1);
    }
    // torch.onnx.export(..., export_params=False) writes the parameters
    // as graph inputs (with their fixed shapes) and no initializers.
    if (batchDim < 0 && g.initializer_size() == 0 && !shape.empty() &&
        g.input_size() > 1)
      return emitError(loc)
             << "graph input '" << in.name() << "' has a fixed shape and the "
             << "model has no initializers: its parameters are graph inputs "
                "(exported with export_params=False?); export the model "
                "with its parameters (varuna.export, or torch.onnx.export's "
                "default export_params=True)";
    if (batchDim < 0)
      return emitError(loc)
             << "graph input '" << in.name() << "' has a static batch "
             << "dimension"
             << (shape.empty() ? std::string()
                               : " of " + std::to_string(shape[0]))
             << ": the model was exported with its batch size baked in. "
                "Re-export with a dynamic batch axis (torch.onnx.export(..., "
                "dynamic_axes={'"
             << in.name() << "': {0: 'batch'}}), which varuna.export does)";
    auto type = VTensorType::get(ctx, shape, batchDim, et);
    env[in.name()].value = builder.addInput(in.name(), type, loc);
  }
  return success();
}

LogicalResult Importer::declareParam(StringRef name,
                                     const InitializerData &data, bool frozen,
                                     Location loc) {
  const onnx::TensorProto &t = *data.proto;
  Type et = convertElementType(ctx, t.data_type());
  if (!et)
    return emitError(loc) << "initializer '" << t.name()
                          << "' has unsupported element type "
                          << onnxTypeName(t.data_type());
  SmallVector<int64_t> shape(t.dims().begin(), t.dims().end());
  for (int64_t d : shape)
    if (d < 0)
      return emitError(loc) << "initializer '" << t.name()
                            << "' has a negative dimension";
  auto type = VTensorType::get(ctx, shape, -1, et);
  DataAttr init;
  if (data.offset >= 0) {
    int64_t expect = type.getSizeInBytes().constant;
    if (data.size != expect)
      return emitError(loc) << "initializer '" << t.name() << "' has "
                            << data.size << " bytes of data, expected "
                            << expect << " for its shape";
    init = DataAttr::get(ctx, data.file, data.offset, data.size, -1);
  } else {
    return emitError(loc) << "parameter '" << name
                          << "' stores its values in typed fields rather "
                             "than raw bytes; re-save the model with raw "
                             "data (onnx.save does by default)";
  }
  if (failed(builder.addParam(name, type, init, frozen, loc)))
    return failure();
  paramSources[name] = &data;
  env[name].param = name.str();
  return success();
}

/// Names exporters give to tensors they made by folding (`val_13` from the
/// dynamo exporter, `onnx::MatMul_291` from the TorchScript one).
static bool isGeneratedName(StringRef name) {
  if (name.startswith("onnx::") || name.startswith("/"))
    return true;
  if (!name.consume_front("val_"))
    return false;
  return !name.empty() && llvm::all_of(name, llvm::isDigit);
}

/// Whether torch.onnx.export(dynamo=True) wrote `m`: its nodes are named
/// node_<op>..., the TorchScript exporter's /module/Op_n.
static bool isDynamoExport(const onnx::ModelProto &m) {
  if (m.producer_name() != "pytorch" || m.graph().node_size() == 0)
    return false;
  return llvm::all_of(m.graph().node(), [](const onnx::NodeProto &n) {
    return StringRef(n.name()).starts_with("node_");
  });
}

LogicalResult Importer::importInitializers() {
  const onnx::GraphProto &g = modelFile.model().graph();
  Location loc = FileLineColLoc::get(ctx, displayName, 0, 0);
  // The dynamo exporter writes constants as float initializers (val_2: the
  // GELU's sqrt(2), a mask's -inf) and merges initializers that start out
  // equal (every LayerNorm's weight became blocks.0.ln.weight): without
  // varuna's metadata the parameters cannot be told apart, and training
  // them differed from PyTorch (22% in the loss; NaN once -inf trained).
  // Refused for training; a forward (varuna-eval) computes the same.
  if (!trainable && isDynamoExport(modelFile.model())) {
    const char *what =
        "was written by torch.onnx.export(dynamo=True), which stores "
        "constants as initializers (val_<n>) and merges initializers that "
        "start out equal (e.g. every LayerNorm's weight into one): which "
        "are parameters, and which are one parameter, is lost";
    const char *fix = "export the model with varuna.export(model, inputs, "
                      "path) (or torch.onnx.export(..., dynamo=False))";
    if (options.forTraining)
      return emitError(loc) << "'" << displayName << "' " << what
                            << ", so training it would differ from "
                               "PyTorch: "
                            << fix;
    mlir::emitWarning(loc) << "'" << displayName << "' " << what
                           << ": its forward is right, but do not train it; "
                           << fix;
  }
  if (!trainable) {
    // Without varuna metadata, say so when the exporter folded parameters
    // into unnamed tensors: identity and ties with the originals are lost.
    SmallVector<StringRef> generated;
    for (const auto &t : g.initializer()) {
      Type et = convertElementType(ctx, t.data_type());
      int64_t n = 1;
      for (int64_t d : t.dims())
        n *= d;
      if (et && et.isa<FloatType>() && n > 1 && isGeneratedName(t.name()))
        generated.push_back(t.name());
    }
    if (!generated.empty()) {
      auto diag = mlir::emitWarning(loc)
                  << generated.size()
                  << " float initializers have exporter-generated names (";
      llvm::interleaveComma(ArrayRef(generated).take_front(4), diag);
      diag << (generated.size() > 4 ? ", ...)" : ")")
           << ": the exporter folded parameters into new tensors (e.g. a "
              "transposed weight). They are imported as trainable "
              "parameters, but their link to the original parameters (and "
              "any tie) is lost. Export with varuna.export, or "
              "torch.onnx.export(..., dynamo=False, training="
              "TrainingMode.TRAINING, do_constant_folding=False)";
    }
  }
  for (const auto &t : g.initializer()) {
    const InitializerData *d = modelFile.initializer(t.name());
    Type et = convertElementType(ctx, t.data_type());
    int64_t n = 1;
    for (int64_t dim : t.dims())
      n *= dim;
    bool isFloat = et && et.isa<FloatType>();
    bool listed = (trainable && trainable->count(t.name())) ||
                  (buffers && buffers->count(t.name()));
    // Parameters: float initializers (or those the exporter listed);
    // small integer initializers are constants for shape arithmetic.
    bool asParam = listed || (isFloat && !trainable) ||
                   n > kMaxKnownElements;
    if (!listed && trainable && isFloat && n > 1) {
      // Not a parameter of the exported module: the exporter made it by
      // constant folding (e.g. a transposed weight). Its values are what the
      // graph computes with, so it stays trainable, under the exporter's name.
      mlir::emitWarning(loc)
          << "initializer '" << t.name()
          << "' is not a named parameter of the exported module (the "
             "exporter folded parameters into it; export with "
             "do_constant_folding=False to keep the names); it is imported "
             "as a trainable parameter";
      if (failed(declareParam(t.name(), *d, /*frozen=*/false, loc)))
        return failure();
      continue;
    }
    if (asParam) {
      if (failed(declareParam(t.name(), *d, !isTrainable(t.name()) || !isFloat,
                              loc)))
        return failure();
      continue;
    }
    if (!et)
      return emitError(loc) << "initializer '" << t.name()
                            << "' has unsupported element type "
                            << onnxTypeName(t.data_type());
    auto known = modelFile.readKnown(*d, et, loc);
    if (failed(known))
      return failure();
    env[t.name()].known = std::move(*known);
  }
  return success();
}

FailureOr<Value> Importer::materialize(const KnownTensor &t, Location loc) {
  if (!t.isStatic())
    return emitError(loc) << "a value computed from the batch size is used "
                             "as tensor data; only shapes may depend on it",
           failure();
  OpBuilder &b = builder.builder();
  auto shapedType = RankedTensorType::get(t.shape, t.elementType);
  DenseElementsAttr attr;
  if (t.isFloat()) {
    SmallVector<APFloat> vals;
    const llvm::fltSemantics &sem =
        t.elementType.cast<FloatType>().getFloatSemantics();
    for (double v : t.floats) {
      APFloat f(v);
      bool lost;
      f.convert(sem, APFloat::rmNearestTiesToEven, &lost);
      vals.push_back(f);
    }
    attr = DenseElementsAttr::get(shapedType, vals);
  } else {
    unsigned width = t.elementType.getIntOrFloatBitWidth();
    SmallVector<APInt> vals;
    for (const SymInt &v : t.ints)
      vals.push_back(APInt(width, v.constant, /*isSigned=*/true));
    attr = DenseElementsAttr::get(shapedType, vals);
  }
  auto type = VTensorType::get(b.getContext(), t.shape, -1, t.elementType);
  return b.create<ConstantOp>(loc, type, attr).getResult();
}

FailureOr<Value> Importer::toRuntime(ImportValue &v, Location loc) {
  if (v.value)
    return v.value;
  if (v.isParam())
    return builder.getParam(v.param, loc);
  if (v.isKnown()) {
    auto m = materialize(*v.known, loc);
    if (succeeded(m))
      v.value = *m; // materialize once
    return m;
  }
  if (v.sequence)
    return emitError(loc) << "a sequence of " << v.sequence->size()
                          << " tensors is used as one tensor",
           failure();
  if (v.batchSize)
    return emitError(loc) << "the batch size " << v.batchSize->str()
                          << " cast to floating point is used as tensor "
                             "data; it can only divide a sum over the "
                             "batch dimension (loss.sum() / x.shape[0])",
           failure();
  return emitError(loc) << "use of a value that no node produced",
         failure();
}

/// Marks every value a node of `g`, or of a graph nested in one of its
/// nodes' attributes (an If's branches), reads.
static void markUsed(const onnx::GraphProto &g, llvm::StringMap<bool> &used) {
  for (const auto &n : g.node()) {
    for (const auto &in : n.input())
      used[in] = true;
    for (const auto &a : n.attribute()) {
      if (a.has_g())
        markUsed(a.g(), used);
      for (const auto &sub : a.graphs())
        markUsed(sub, used);
    }
  }
  for (const auto &o : g.output())
    used[o.name()] = true;
}

LogicalResult Importer::importNodes() {
  const onnx::GraphProto &g = modelFile.model().graph();
  // Loops first: the nodes that feed one (a Range over the batch, say)
  // would otherwise fail on their own with an error about them.
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto &node = g.node(i);
    if (node.op_type() != "Loop" && node.op_type() != "Scan")
      continue;
    std::string name = node.name().empty() ? node.op_type() : node.name();
    return emitError(nodeLocation(ctx, displayName, name, i))
           << "ONNX " << node.op_type() << " node '" << name
           << "' is not supported: "
           << (node.op_type() == "Loop"
                   ? "torch's exporter writes a loop for nn.EmbeddingBag "
                     "(over its bags) and for Python loops in scripted "
                     "code; a traced model has none. Export to TorchScript "
                     "(varuna.export(model, batch, \"model.pt\")), which "
                     "keeps embedding_bag as one op"
                   : "a Scan runs its body once per step of a sequence; "
                     "varuna imports graphs without control flow (torch's "
                     "exporter writes none for a traced model: export with "
                     "varuna.export)"),
           failure();
  }
  markUsed(g, used);
  return importGraphNodes(g, "");
}

LogicalResult Importer::importGraphNodes(const onnx::GraphProto &g,
                                         StringRef path) {
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto &node = g.node(i);
    std::string name = node.name().empty() ? node.op_type() : node.name();
    Location loc = nodeLocation(
        ctx, displayName, path.empty() ? name : (path + "/" + name).str(), i);
    NodeContext nc{*this, node, loc};
    if (!node.domain().empty() && node.domain() != "ai.onnx")
      return nc.error("op domain '" + node.domain() +
                      "' is not supported (only the default ONNX domain)");
    for (int k = 0; k < node.input_size(); ++k)
      if (!node.input(k).empty() && !env.count(node.input(k)))
        return nc.error("input '" + node.input(k) +
                        "' is not produced by any earlier node, input or "
                        "initializer (the graph is not in topological order "
                        "or is malformed)");
    if (failed(importNode(nc)))
      return failure();
    for (int k = 0; k < node.output_size(); ++k)
      if (!node.output(k).empty() && used.count(node.output(k)) &&
          !env.count(node.output(k)))
        return nc.error("output " + Twine(k) + " ('" + node.output(k) +
                        "') is used but this importer does not produce it");
  }
  return success();
}

LogicalResult Importer::importOutputs() {
  const onnx::GraphProto &g = modelFile.model().graph();
  SmallVector<std::pair<std::string, Value>> results;
  for (const auto &o : g.output()) {
    Location loc = nodeLocation(ctx, displayName, o.name(), 0);
    auto it = env.find(o.name());
    if (it == env.end())
      return emitError(loc) << "graph output '" << o.name()
                            << "' is not produced by any node";
    auto v = toRuntime(it->second, loc);
    if (failed(v))
      return failure();
    results.push_back({o.name(), *v});
  }
  if (results.empty())
    return emitError(FileLineColLoc::get(ctx, displayName, 0, 0))
           << "the graph has no outputs";
  return builder.finish(results, FileLineColLoc::get(ctx, displayName, 0, 0));
}

OwningOpRef<ModuleOp> Importer::run(StringRef bytes, StringRef baseDir) {
  Location loc = FileLineColLoc::get(ctx, displayName, 0, 0);
  if (failed(modelFile.load(bytes, displayName, baseDir, loc)) ||
      failed(readMetadata()) || failed(importInputs()) ||
      failed(importInitializers()) || failed(importNodes()) ||
      failed(importOutputs()))
    return nullptr;
  OwningOpRef<ModuleOp> module = builder.takeModule();
  if (failed(mlir::verify(*module)))
    return nullptr;
  return module;
}

OwningOpRef<ModuleOp>
varuna::importONNXFromBuffer(MLIRContext *ctx, StringRef bytes,
                             StringRef displayName, StringRef baseDir,
                             const ONNXImportOptions &options) {
  Importer importer(ctx, displayName, options);
  return importer.run(bytes, baseDir);
}

OwningOpRef<ModuleOp> varuna::importONNX(MLIRContext *ctx, StringRef path,
                                         const ONNXImportOptions &options) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false);
  if (!buf) {
    emitError(FileLineColLoc::get(ctx, path, 0, 0))
        << "cannot read '" << path << "': " << buf.getError().message();
    return nullptr;
  }
  SmallString<256> dir(path);
  llvm::sys::path::remove_filename(dir);
  return importONNXFromBuffer(ctx, (*buf)->getBuffer(), path, dir, options);
}
