//===- TorchScriptImporter.cpp - TorchScript -> varuna --------------------===//
//
// Loads a traced `.pt` archive with libtorch, inlines `forward`, reads the
// `varuna.json` extra file (input shapes, loss name, parameter and buffer
// names), declares graph inputs and parameters, and converts the graph node
// by node (handlers in TorchScriptOps.cpp / TorchScriptNNOps.cpp).
//
// Parameters are found by their module path (`prim::GetAttr` chains from
// `self`). A tensor reachable by several paths (a tied weight) is one
// parameter: identity is the storage, offset, sizes, strides and dtype. Its
// initial data is located inside the archive by matching the storage's bytes
// against the uncompressed `data/<key>` records (identical bytes make any
// matching record a correct reference).
//
//===----------------------------------------------------------------------===//

#include "TorchScriptImporterImpl.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Path.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/serialization/import.h>

#include <cstring>

using namespace mlir;
using namespace varuna;
using namespace varuna::ts;

namespace {
/// The first line of a libtorch error (the rest is a C++ backtrace).
std::string firstLine(const char *what) {
  StringRef s(what);
  return s.split('\n').first.trim().str();
}

/// `input_ids.1` -> `input_ids`.
std::string baseDebugName(torch::jit::Value *v) {
  std::string name = v->debugName();
  StringRef s(name);
  auto [head, tail] = s.rsplit('.');
  if (!tail.empty() && llvm::all_of(tail, llvm::isDigit))
    return head.str();
  return name;
}
} // namespace

//===----------------------------------------------------------------------===//
// Types and small helpers
//===----------------------------------------------------------------------===//

FailureOr<Type> varuna::ts::elementTypeOf(MLIRContext *ctx,
                                          c10::ScalarType t) {
  using ST = c10::ScalarType;
  Builder b(ctx);
  const std::pair<ST, Type> types[] = {
      {ST::Float, b.getF32Type()},
      {ST::Double, b.getF64Type()},
      {ST::Half, b.getF16Type()},
      {ST::BFloat16, b.getBF16Type()},
      {ST::Long, b.getI64Type()},
      {ST::Int, b.getI32Type()},
      {ST::Bool, b.getI1Type()},
      {ST::Char, b.getIntegerType(8)},
      {ST::Byte, IntegerType::get(ctx, 8, IntegerType::Unsigned)}};
  for (auto &[s, type] : types)
    if (s == t)
      return type;
  return failure();
}

FailureOr<Type> varuna::ts::elementTypeByName(MLIRContext *ctx,
                                              StringRef name) {
  static const std::pair<StringRef, c10::ScalarType> names[] = {
      {"float32", c10::ScalarType::Float},  {"float", c10::ScalarType::Float},
      {"f32", c10::ScalarType::Float},      {"float64", c10::ScalarType::Double},
      {"f64", c10::ScalarType::Double},     {"float16", c10::ScalarType::Half},
      {"f16", c10::ScalarType::Half},       {"bfloat16", c10::ScalarType::BFloat16},
      {"bf16", c10::ScalarType::BFloat16},  {"int64", c10::ScalarType::Long},
      {"i64", c10::ScalarType::Long},       {"long", c10::ScalarType::Long},
      {"int32", c10::ScalarType::Int},      {"i32", c10::ScalarType::Int},
      {"bool", c10::ScalarType::Bool},      {"i1", c10::ScalarType::Bool},
      {"int8", c10::ScalarType::Char},      {"uint8", c10::ScalarType::Byte}};
  for (auto &[n, t] : names)
    if (n == name)
      return elementTypeOf(ctx, t);
  return failure();
}

SmallVector<SymInt> varuna::ts::dimsOf(Value v) {
  return tensorType(v).getDims();
}

int64_t varuna::ts::normAxis(int64_t axis, int64_t rank) {
  if (axis < 0)
    axis += rank;
  return axis >= 0 && axis < rank ? axis : -1;
}

std::string varuna::ts::dimsStr(ArrayRef<SymInt> dims) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(dims))
    s += (i ? ", " : "") + d.str();
  return s + "]";
}

//===----------------------------------------------------------------------===//
// Importer
//===----------------------------------------------------------------------===//

TSImporter::TSImporter(MLIRContext *ctx, StringRef path,
                       const TorchScriptImportOptions &options)
    : ctx(ctx), fileName(path.str()), gb(ctx, path, options),
      path(path.str()), options(options) {
  registerBasicOps(handlers);
  registerNNOps(handlers);
}

std::string TSImporter::where(Node *node) const {
  std::string s = "node " + std::to_string(nodeIndex.lookup(node));
  // Prefer the user's Python source (from the archive's debug records) over
  // the serialized code/__torch__.py.
  torch::jit::SourceRange range = node->sourceRange();
  if (auto original = range.findSourceRangeThatGenerated())
    range = *original;
  if (auto flc = range.file_line_col()) {
    auto &[file, line, col] = *flc;
    s += " (" + llvm::sys::path::filename(file).str() + ":" +
         std::to_string(line) + ")";
  }
  return s;
}

InFlightDiagnostic TSImporter::error(Node *node, Location loc) {
  InFlightDiagnostic d = emitError(loc);
  d << "'" << node->kind().toQualString() << "' at " << where(node) << ": ";
  return d;
}

OwningOpRef<ModuleOp> TSImporter::run() {
  if (failed(load()) || failed(collectParams()) || failed(addInputs()) ||
      failed(convertGraph()) || failed(finish()))
    return nullptr;
  OwningOpRef<ModuleOp> result = gb.takeModule();
  if (failed(mlir::verify(*result)))
    return nullptr;
  return result;
}

LogicalResult TSImporter::load() {
  Location fileLoc = FileLineColLoc::get(ctx, path, 0, 0);
  torch::jit::ExtraFilesMap extra{{"varuna.json", ""}};
  try {
    module = torch::jit::load(path, c10::Device(c10::kCPU), extra);
  } catch (const c10::Error &e) {
    // torch.save writes the same zip format with data.pkl but no
    // constants.pkl; libtorch calls that "likely corrupted".
    bool torchSave = false;
    try {
      caffe2::serialize::PyTorchStreamReader zip(path);
      torchSave = zip.hasRecord("data.pkl") && !zip.hasRecord("constants.pkl");
    } catch (const c10::Error &) {
    }
    if (torchSave)
      return emitError(fileLoc)
             << "'" << path
             << "' was written by torch.save (a pickled tensor, state_dict "
                "or module), not torch.jit.save: it holds no TorchScript "
                "graph; save the model with varuna.export(model, inputs, "
                "'model.pt') (or torch.jit.trace(model, inputs).save(...))";
    return emitError(fileLoc)
           << "cannot load TorchScript archive '" << path
           << "': " << firstLine(e.what_without_backtrace())
           << " (expected a torch.jit.save archive, e.g. from varuna.export)";
  }
  const std::string &json = extra["varuna.json"];
  if (!json.empty() && failed(readVarunaJson(json)))
    return failure();

  auto method = module.find_method("forward");
  if (!method)
    return emitError(fileLoc) << "TorchScript module in '" << path
                              << "' has no 'forward' method";
  graph = method->graph()->copy();
  torch::jit::Inline(*graph);
  torch::jit::EliminateDeadCode(graph);

  try {
    reader = std::make_unique<caffe2::serialize::PyTorchStreamReader>(path);
  } catch (const c10::Error &e) {
    return emitError(fileLoc) << "cannot read the records of '" << path
                              << "': " << firstLine(e.what_without_backtrace());
  }
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false);
  if (!buf)
    return emitError(fileLoc) << "cannot read '" << path
                              << "': " << buf.getError().message();
  fileBytes = std::move(*buf);
  return success();
}

LogicalResult TSImporter::readVarunaJson(const std::string &text) {
  Location loc = FileLineColLoc::get(ctx, path, 0, 0);
  auto fail = [&](const Twine &msg) {
    return emitError(loc) << "invalid varuna.json in '" << path << "': " << msg;
  };
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(text);
  if (!parsed)
    return fail(llvm::toString(parsed.takeError()));
  const llvm::json::Object *root = parsed->getAsObject();
  if (!root)
    return fail("not a JSON object");
  haveJson = true;
  if (auto loss = root->getString("loss"))
    lossName = loss->str();
  auto strings = [&](StringRef key, std::vector<std::string> &out) {
    if (const llvm::json::Array *a = root->getArray(key))
      for (const llvm::json::Value &v : *a)
        if (auto s = v.getAsString())
          out.push_back(s->str());
  };
  strings("parameters", jsonParams);
  strings("buffers", jsonBuffers);
  const llvm::json::Array *inputs = root->getArray("inputs");
  if (!inputs)
    return success();
  for (const llvm::json::Value &v : *inputs) {
    const llvm::json::Object *o = v.getAsObject();
    if (!o)
      return fail("'inputs' entries must be objects");
    InputSpec spec;
    auto name = o->getString("name");
    const llvm::json::Array *shape = o->getArray("shape");
    if (!name || !shape)
      return fail("an input lacks 'name' or 'shape'");
    spec.name = name->str();
    int64_t batchDim = o->getInteger("batch_dim").value_or(0);
    for (auto [i, d] : llvm::enumerate(*shape)) {
      auto n = d.getAsInteger();
      if (!n)
        return fail("input '" + spec.name + "' has a non-integer dimension");
      spec.dims.push_back(static_cast<int64_t>(i) == batchDim
                              ? SymInt::batch()
                              : SymInt(*n));
    }
    StringRef dtype = o->getString("dtype").value_or("float32");
    auto elt = elementTypeByName(ctx, dtype);
    if (failed(elt))
      return fail("input '" + spec.name + "' has unsupported dtype '" + dtype +
                  "'");
    spec.elementType = *elt;
    jsonInputs.push_back(std::move(spec));
  }
  return success();
}

/// Parses "name=B,16:int64" (dims separated by ',' or 'x'; `B`, `BATCH` or
/// `B*k` mark the batch dimension; the dtype defaults to float32).
static LogicalResult parseShapeSpec(MLIRContext *ctx, StringRef spec,
                                    std::string &name,
                                    SmallVectorImpl<SymInt> &dims, Type &elt,
                                    std::string &error) {
  auto [lhs, rhs] = spec.split('=');
  if (rhs.empty() && !spec.contains('=')) {
    error = "expected name=DIMS[:dtype]";
    return failure();
  }
  name = lhs.trim().str();
  auto [shape, dtype] = rhs.split(':');
  auto t = elementTypeByName(ctx, dtype.empty() ? "float32" : dtype.trim());
  if (failed(t)) {
    error = ("unknown dtype '" + dtype + "'").str();
    return failure();
  }
  elt = *t;
  SmallVector<StringRef> parts;
  // Empty parts are errors: "B,,4" was read as [B, 4].
  shape.split(parts, ',', -1, /*KeepEmpty=*/true);
  if (parts.size() == 1)
    shape.split(parts = {}, 'x', -1, true);
  for (StringRef p : parts) {
    p = p.trim();
    if (p.empty()) {
      error = "an empty dimension";
      return failure();
    }
    int64_t k = 1, n = 0;
    if (p == "B" || p == "BATCH" || p == "batch") {
      dims.push_back(SymInt::batch());
    } else if (p.consume_front("B*") && !p.getAsInteger(10, k) && k > 0) {
      dims.push_back(SymInt::batch(k));
    } else if (!p.getAsInteger(10, n) && n >= 0) {
      dims.push_back(n);
    } else {
      error = ("bad dimension '" + p + "'").str();
      return failure();
    }
  }
  return success();
}

LogicalResult TSImporter::addInputs() {
  Location fileLoc = FileLineColLoc::get(ctx, path, 0, 0);
  auto inputs = graph->inputs();
  // Input 0 is `self`: the root module (path "").
  if (inputs.empty())
    return emitError(fileLoc) << "forward has no `self` input";
  bind(inputs[0], TSValue::make(TSValue::Kind::Module));
  std::vector<torch::jit::Value *> tensors(inputs.begin() + 1, inputs.end());
  if (haveJson && !jsonInputs.empty() && jsonInputs.size() != tensors.size())
    return emitError(fileLoc)
           << "varuna.json lists " << jsonInputs.size()
           << " inputs but the traced forward takes " << tensors.size();

  // --input-shape entries, by name.
  std::map<std::string, InputSpec> overrides;
  for (const std::string &s : options.inputShapes) {
    InputSpec spec;
    std::string err;
    if (failed(parseShapeSpec(ctx, s, spec.name, spec.dims, spec.elementType,
                              err)))
      return emitError(fileLoc) << "bad --input-shape '" << s << "': " << err
                                << " (expected e.g. input_ids=B,16:int64)";
    if (!overrides.emplace(spec.name, spec).second)
      return emitError(fileLoc)
             << "--input-shape gives '" << spec.name
             << "' twice; give each input once";
  }

  std::vector<std::string> names;
  for (auto [i, v] : llvm::enumerate(tensors))
    names.push_back(haveJson && i < jsonInputs.size() ? jsonInputs[i].name
                                                      : baseDebugName(v));
  for (auto &[name, spec] : overrides)
    if (!llvm::is_contained(names, name))
      return emitError(fileLoc)
             << "--input-shape names '" << name
             << "', which is not an input of forward (inputs: "
             << llvm::join(names, ", ") << ")";

  for (auto [i, v] : llvm::enumerate(tensors)) {
    Location loc = nodeLocation(ctx, path, names[i], 0);
    if (!v->type()->cast<c10::TensorType>())
      return emitError(loc) << "forward input '" << names[i]
                            << "' is not a tensor (type "
                            << v->type()->str() << ")";
    const InputSpec *spec = nullptr;
    auto it = overrides.find(names[i]);
    if (it != overrides.end())
      spec = &it->second;
    else if (haveJson && i < jsonInputs.size())
      spec = &jsonInputs[i];
    if (!spec)
      return emitError(loc)
             << "no shape for input '" << names[i] << "' of '" << path
             << "': export the model with varuna.export (which records the "
                "input shapes in varuna.json) or pass --input-shape "
             << names[i] << "=B,...:dtype";
    auto type = typeFromDims(spec->dims, spec->elementType, loc);
    if (failed(type))
      return failure();
    bindTensor(v, gb.addInput(names[i], *type, loc));
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Parameters
//===----------------------------------------------------------------------===//

static std::string tensorKey(const at::Tensor &t) {
  std::string key =
      std::to_string(reinterpret_cast<uintptr_t>(
          t.storage().unsafeGetStorageImpl())) +
      "/" + std::to_string(t.storage_offset()) + "/" +
      std::string(c10::toString(t.scalar_type()));
  for (int64_t s : t.sizes())
    key += "," + std::to_string(s);
  key += ";";
  for (int64_t s : t.strides())
    key += "," + std::to_string(s);
  return key;
}

LogicalResult TSImporter::collectParams() {
  llvm::StringMap<at::Tensor> all;
  std::vector<std::pair<std::string, bool>> order; // (name, frozen)
  // A parameter saved with requires_grad=False is frozen, as PyTorch
  // leaves it (varuna.export lists those under "buffers" in varuna.json;
  // a plain torch.jit.trace archive records only the flag, and they were
  // trained).
  for (const auto &p : module.named_parameters(/*recurse=*/true)) {
    all[p.name] = p.value;
    order.push_back({p.name, !p.value.requires_grad()});
  }
  for (const auto &p : module.named_buffers(/*recurse=*/true)) {
    all[p.name] = p.value;
    order.push_back({p.name, true});
  }
  // Names listed in varuna.json win (they are the names the user sees).
  std::vector<std::pair<std::string, bool>> preferred;
  for (const std::string &n : jsonParams)
    preferred.push_back({n, false});
  for (const std::string &n : jsonBuffers)
    preferred.push_back({n, true});
  preferred.insert(preferred.end(), order.begin(), order.end());

  std::map<std::string, std::string> byKey;
  for (auto &[name, frozen] : preferred) {
    auto it = all.find(name);
    if (it == all.end())
      continue;
    if (canonicalByPath.count(name))
      continue;
    std::string key = tensorKey(it->second);
    auto [k, inserted] = byKey.insert({key, name});
    canonicalByPath[name] = k->second;
    if (inserted) {
      paramOrder.push_back(name);
      ParamInfo info;
      info.name = name;
      info.tensor = it->second;
      info.frozen = frozen;
      paramsByName[name] = info;
    }
  }
  return success();
}

FailureOr<std::string> TSImporter::paramNameFor(StringRef attrPath,
                                                Location loc) {
  auto it = canonicalByPath.find(attrPath);
  if (it != canonicalByPath.end())
    return it->second;
  // A tensor attribute that is neither a parameter nor a buffer: frozen.
  SmallVector<StringRef> parts;
  attrPath.split(parts, '.');
  c10::IValue cur = module._ivalue();
  for (StringRef p : parts) {
    if (!cur.isObject() || !cur.toObject()->type()->hasAttribute(p.str()))
      return emitError(loc) << "cannot resolve attribute '" << attrPath << "'",
             failure();
    cur = cur.toObject()->getAttr(p.str());
  }
  if (!cur.isTensor())
    return emitError(loc) << "attribute '" << attrPath << "' is not a tensor",
           failure();
  ParamInfo info;
  info.name = attrPath.str();
  info.tensor = cur.toTensor();
  info.frozen = true;
  paramsByName[info.name] = info;
  canonicalByPath[attrPath] = info.name;
  return info.name;
}

FailureOr<DataAttr> TSImporter::dataFor(const ParamInfo &p, Location loc) {
  const at::Tensor &t = p.tensor;
  if (!t.is_contiguous())
    return emitError(loc) << "parameter '" << p.name
                          << "' is not contiguous; make it contiguous "
                             "(.contiguous()) before exporting",
           failure();
  const c10::Storage &storage = t.storage();
  size_t nbytes = storage.nbytes();
  const char *data = static_cast<const char *>(storage.data());
  int64_t found = -1;
  std::string foundName;
  for (const std::string &rec : reader->getAllRecords()) {
    StringRef r(rec);
    size_t slash = r.rfind('/');
    if (slash == StringRef::npos || !r.substr(0, slash).ends_with("data"))
      continue;
    if (r.substr(0, slash) != "data" && !r.substr(0, slash).ends_with("/data"))
      continue;
    if (reader->getRecordSize(rec) != nbytes)
      continue;
    size_t offset = reader->getRecordOffset(rec);
    if (offset + nbytes > fileBytes->getBufferSize())
      continue;
    if (nbytes && std::memcmp(fileBytes->getBufferStart() + offset, data,
                              nbytes) != 0)
      continue;
    bool claimed = claimedRecords.count(rec);
    if (found < 0 || (!claimed && claimedRecords.count(foundName))) {
      found = static_cast<int64_t>(offset);
      foundName = rec;
    }
    if (!claimed)
      break;
  }
  if (found < 0)
    return emitError(loc) << "cannot locate the data of parameter '" << p.name
                          << "' (" << nbytes << " bytes) among the "
                          << "uncompressed data records of '" << path << "'",
           failure();
  claimedRecords.insert(foundName);
  int64_t elt = t.element_size();
  // `file` is relative to the directory of the source model (docs/dialect.md),
  // i.e. the archive itself.
  return DataAttr::get(ctx, llvm::sys::path::filename(path),
                       found + t.storage_offset() * elt, t.numel() * elt,
                       /*digest: GraphBuilder::addParam*/ -1);
}

FailureOr<Value> TSImporter::readParam(StringRef name, Location loc) {
  auto it = paramsByName.find(name.str());
  if (it == paramsByName.end())
    return emitError(loc) << "unknown parameter '" << name << "'", failure();
  ParamInfo &p = it->second;
  if (!p.declared && failed(declareParam(p)))
    return failure();
  return gb.getParam(p.name, loc);
}

LogicalResult TSImporter::declareParam(ParamInfo &p) {
  Location ploc = nodeLocation(ctx, path, p.name, 0);
  // A complex tensor's bytes are view_as_real's: its real type, a trailing
  // axis of 2 (TSValue::complex).
  bool complex = p.tensor.is_complex();
  auto elt = elementTypeOf(ctx, complex ? c10::toRealValueType(
                                              p.tensor.scalar_type())
                                        : p.tensor.scalar_type());
  if (failed(elt))
    return emitError(ploc) << "parameter '" << p.name
                           << "' has unsupported dtype "
                           << c10::toString(p.tensor.scalar_type());
  SmallVector<int64_t> shape(p.tensor.sizes().begin(), p.tensor.sizes().end());
  if (complex)
    shape.push_back(2);
  auto type = VTensorType::get(ctx, shape, -1, *elt);
  auto data = dataFor(p, ploc);
  if (failed(data) || failed(gb.addParam(p.name, type, *data, p.frozen, ploc)))
    return failure();
  p.declared = true;
  return success();
}

/// Converts a constant IValue (an attribute that is not a tensor).
static TSValue fromIValue(const c10::IValue &v) {
  if (v.isNone())
    return TSValue::none();
  if (v.isInt())
    return TSValue::ofInt(v.toInt());
  if (v.isDouble())
    return TSValue::ofFloat(v.toDouble());
  if (v.isBool())
    return TSValue::ofBool(v.toBool());
  if (v.isString()) {
    TSValue t = TSValue::make(TSValue::Kind::Str);
    t.s = v.toStringRef();
    return t;
  }
  if (v.isList() || v.isTuple()) {
    TSValue t = TSValue::make(TSValue::Kind::List);
    if (v.isList()) {
      for (const c10::IValue &e : v.toListRef())
        t.list.push_back(fromIValue(e));
    } else {
      for (const c10::IValue &e : v.toTupleRef().elements())
        t.list.push_back(fromIValue(e));
    }
    return t;
  }
  return TSValue();
}

LogicalResult TSImporter::hGetAttr(Node *n, Location loc) {
  TSValue base = lookup(n->input(0));
  if (base.kind != TSValue::Kind::Module)
    return error(n, loc) << "attribute access on a value that is not a module";
  std::string name = n->s(c10::attr::name);
  std::string attrPath = base.param.empty() ? name : base.param + "." + name;
  c10::TypePtr type = n->output()->type();
  if (type->cast<c10::ClassType>()) {
    TSValue m = TSValue::make(TSValue::Kind::Module);
    m.param = attrPath;
    bind(n->output(), m);
    return success();
  }
  if (type->cast<c10::TensorType>()) {
    auto canonical = paramNameFor(attrPath, loc);
    if (failed(canonical))
      return failure();
    TSValue t = TSValue::make(TSValue::Kind::Tensor);
    t.param = *canonical;
    auto p = paramsByName.find(*canonical);
    t.complex = p != paramsByName.end() && p->second.tensor.is_complex();
    bind(n->output(), t);
    return success();
  }
  // A plain Python attribute (int, float, bool, list...).
  c10::IValue cur = module._ivalue();
  SmallVector<StringRef> parts;
  StringRef(attrPath).split(parts, '.');
  for (StringRef p : parts) {
    if (!cur.isObject() || !cur.toObject()->type()->hasAttribute(p.str()))
      return error(n, loc) << "cannot resolve attribute '" << attrPath << "'";
    cur = cur.toObject()->getAttr(p.str());
  }
  TSValue v = fromIValue(cur);
  if (v.kind == TSValue::Kind::Other)
    return error(n, loc) << "attribute '" << attrPath << "' of type "
                         << type->str() << " is not supported";
  bind(n->output(), v);
  return success();
}

//===----------------------------------------------------------------------===//
// Graph
//===----------------------------------------------------------------------===//

LogicalResult TSImporter::convertGraph() {
  int64_t index = 0;
  for (Node *n : graph->nodes())
    nodeIndex[n] = index++;
  // Control flow is named first: in a scripted forward the nodes computing
  // the condition (aten::Bool, aten::__isnot__ of F.cross_entropy's
  // `size_average is not None`) came first and were refused as unsupported
  // ops, as if one op were missing.
  for (Node *n : graph->nodes())
    if (!n->blocks().empty())
      return error(n, nodeLocation(ctx, path, n->kind().toQualString(),
                                   nodeIndex.lookup(n)))
             << "control flow is not supported: the forward (or a submodule "
                "it calls) was scripted with torch.jit.script, which keeps "
                "its if/for statements; trace the model with torch.jit.trace "
                "(or varuna.export), which runs them on the example inputs";
  for (Node *n : graph->nodes())
    if (failed(convertNode(n)))
      return failure();
  return success();
}

LogicalResult TSImporter::convertNode(Node *n) {
  std::string kind = n->kind().toQualString();
  Location loc = nodeLocation(ctx, path, kind, nodeIndex.lookup(n));
  StringRef k(kind);
  bool inplace = k.ends_with("_") && !k.ends_with("__") && !k.empty();
  StringRef functional = inplace ? k.drop_back() : k;
  if (inplace && n->inputs().size() > 0) {
    TSValue &self = lookup(n->input(0));
    if (self.kind == TSValue::Kind::Tensor && !self.param.empty()) {
      // BatchNorm's num_batches_tracked.add_(1): the runtime keeps batch
      // norms' state; dropping it changes no result. Any other write of a
      // parameter or buffer carries state into the next step, which a
      // traced graph cannot (an EMA, a step counter): refused even when
      // this forward does not read it again.
      if (!n->output()->hasUses() &&
          StringRef(self.param).ends_with("num_batches_tracked"))
        return success();
      return error(n, loc) << "in-place update of parameter or buffer '"
                           << self.param
                           << "' inside forward is not supported: state "
                              "carried into the next step is lost in an "
                              "exported graph; keep it outside the model "
                              "(pass it in as an input)";
    }
  }
  // An out= argument writes the result into an existing tensor (e.g.
  // spectral_norm's power iteration keeps its vectors so in training mode).
  if (const c10::FunctionSchema *schema = n->maybeSchema())
    for (auto [i, arg] : llvm::enumerate(schema->arguments()))
      if (arg.name() == "out" && arg.alias_info() &&
          arg.alias_info()->isWrite() && i < n->inputs().size()) {
        const TSValue &target = lookup(n->input(i));
        std::string what = target.param.empty()
                               ? std::string("a tensor")
                               : "buffer '" + target.param + "'";
        return error(n, loc)
               << "writes its result into " << what
               << " (out=): state kept across forward passes is not "
                  "supported (spectral_norm's power iteration keeps its "
                  "vectors so in training mode; in eval mode they stay "
                  "fixed)";
      }
  // A dict returned by forward: finish() takes its keys and values.
  if (k == "prim::DictConstruct" && n->output()->uses().size() == 1 &&
      n->output()->uses()[0].user == graph->return_node())
    return success();
  if (!inplace && foldConstant(n, loc))
    return success();
  bool complex = touchesComplex(n);
  auto it = handlers.find(functional);
  bool selection = !complex && readsSelection(n);
  if (!complex && !selection && it == handlers.end()) {
    std::string src = where(n);
    return emitError(loc) << "unsupported TorchScript op '" << kind
                          << "' at " << src;
  }
  // Errors from op verification/inference (emitted at loc) get a note
  // naming the TorchScript node and its source line.
  ScopedDiagnosticHandler handler(ctx, [&](Diagnostic &d) {
    if (d.getSeverity() == DiagnosticSeverity::Error &&
        d.str().find(" at node ") == std::string::npos)
      d.attachNote() << "while importing '" << kind << "' at " << where(n);
    return failure(); // keep propagating to the tool's handler
  });
  if (failed(complex     ? convertComplex(n, loc, n->kind().toUnqualString())
             : selection ? convertSelected(n, loc, kind,
                                           it == handlers.end() ? nullptr
                                                                : it->second)
                         : (this->*(it->second))(n, loc)))
    return failure();
  if (inplace && n->outputs().size() == 1) {
    bind(n->input(0), lookup(n->output()));
    return writeBack(n->input(0), n, loc);
  }
  return success();
}

/// Whether `v` is read by a node after `n` (or is a graph output).
static bool usedAfter(TSImporter::JitValue *v, TSImporter::Node *n) {
  for (const torch::jit::Use &u : v->uses())
    if (u.user == n->owningGraph()->return_node() || n->isBefore(u.user))
      return true;
  return false;
}

LogicalResult TSImporter::writeBack(JitValue *target, Node *n, Location loc) {
  // Whether `v` is a view (of a view ...) of `base`.
  auto isViewOf = [&](JitValue *v, JitValue *base) {
    for (auto it = views.find(v); it != views.end();
         it = views.find(it->second.base))
      if (it->second.base == base)
        return true;
    return false;
  };
  llvm::SmallPtrSet<JitValue *, 4> chain{target};
  for (auto it = views.find(target); it != views.end();
       it = views.find(target)) {
    ViewInfo view = it->second;
    for (auto &entry : views)
      if (!chain.contains(entry.first) && isViewOf(entry.first, view.base) &&
          usedAfter(entry.first, n))
        return error(n, loc) << "in-place write into a tensor that another "
                                "view of it, made at "
                             << where(entry.first->node())
                             << ", reads afterwards is not supported";
    TSValue &baseValue = lookup(view.base);
    if (baseValue.kind == K::Tensor && !baseValue.param.empty())
      return error(n, loc) << "in-place update of parameter or buffer '"
                           << baseValue.param
                           << "' inside forward is not supported: state "
                              "carried into the next step is lost in an "
                              "exported graph; keep it outside the model "
                              "(pass it in as an input)";
    Value baseTensor = baseValue.tensor;
    Value part = lookup(target).tensor;
    if (baseValue.complex != lookup(target).complex)
      return error(n, loc) << "in-place write of a "
                           << (lookup(target).complex ? "complex" : "real")
                           << " value into a "
                           << (baseValue.complex ? "complex" : "real")
                           << " tensor is not supported";
    if (baseValue.kind != K::Tensor || !baseTensor || !part)
      return error(n, loc) << "in-place write into a value that is not a "
                              "tensor";
    part = cast(part, tensorType(baseTensor).getElementType(), loc);
    Value updated = part;
    if (!view.whole) {
      SmallVector<SymInt> dims = dimsOf(baseTensor);
      if (!dims[view.axis].isStatic())
        return error(n, loc) << "in-place write into part of the "
                                "batch-dependent dimension "
                             << view.axis << " is not supported";
      int64_t size = dims[view.axis].constant;
      if (view.select) {
        SmallVector<SymInt> withAxis = dimsOf(part);
        withAxis.insert(withAxis.begin() + view.axis, SymInt(1));
        auto r = reshape(part, withAxis, loc);
        if (failed(r))
          return failure();
        part = *r;
      }
      SmallVector<Value> pieces;
      if (view.start > 0) {
        auto before = sliceOf(baseTensor, view.axis, 0, view.start, 1, loc, n);
        if (failed(before))
          return failure();
        pieces.push_back(*before);
      }
      pieces.push_back(part);
      if (view.end < size) {
        auto after = sliceOf(baseTensor, view.axis, view.end, size, 1, loc, n);
        if (failed(after))
          return failure();
        pieces.push_back(*after);
      }
      updated = pieces.front();
      if (pieces.size() > 1) {
        auto c = make<ConcatOp>(loc, pieces, {i64("axis", view.axis)});
        if (failed(c))
          return failure();
        updated = *c;
      }
    }
    TSValue written = TSValue::ofTensor(updated);
    written.complex = baseValue.complex; // the same layout either way
    bind(view.base, written);
    target = view.base;
    chain.insert(target);
  }
  // A write through a view we do not track would leave the tensor it views
  // unchanged here: refuse it unless that tensor is not read again.
  Node *maker = target->node();
  static const llvm::StringSet<> viewOps = {
      "slice", "select", "view", "reshape", "unsqueeze", "squeeze",
      "transpose", "t", "permute", "expand", "expand_as", "narrow",
      "diagonal", "as_strided", "unfold", "view_as", "flatten", "unflatten",
      "swapaxes", "movedim"};
  if (maker->kind().is_aten() && viewOps.contains(opName(maker)) &&
      !maker->inputs().empty() && usedAfter(maker->input(0), n))
    return error(n, loc) << "in-place write through the view made by '"
                         << maker->kind().toQualString() << "' at "
                         << where(maker)
                         << " is not supported (write through a slice or an "
                            "index, or use the op's out-of-place form)";
  return success();
}

LogicalResult TSImporter::finish() {
  Location loc = FileLineColLoc::get(ctx, path, 0, 0);
  // The outputs, flattened: a tuple's or list's elements in order (named
  // output<i>), a dict's values (named by their keys: a traced model may
  // return {"loss": ..., "logits": ...}, as Hugging Face's do).
  std::vector<TSValue> outs;
  std::vector<std::string> keys;
  for (JitValue *v : graph->outputs()) {
    Node *producer = v->node();
    if (producer->kind() == c10::Symbol::fromQualString("prim::DictConstruct")) {
      for (size_t k = 0; k + 1 < producer->inputs().size(); k += 2) {
        TSValue &key = lookup(producer->input(k));
        if (key.kind != TSValue::Kind::Str)
          return emitError(loc) << "forward returns a dict whose keys are "
                                   "not strings; return the loss first (a "
                                   "tensor, or a tuple starting with it)";
        keys.push_back(key.s);
        outs.push_back(lookup(producer->input(k + 1)));
      }
      continue;
    }
    TSValue &t = lookup(v);
    if (t.kind == TSValue::Kind::List)
      outs.insert(outs.end(), t.list.begin(), t.list.end());
    else
      outs.push_back(t);
    keys.resize(outs.size());
  }
  std::vector<Value> values;
  for (auto [i, t] : llvm::enumerate(outs)) {
    if (t.kind != TSValue::Kind::Tensor)
      return emitError(loc) << "forward output "
                            << (keys[i].empty() ? std::to_string(i)
                                                : "'" + keys[i] + "'")
                            << " is not a tensor; return the loss (and "
                               "optionally other tensors)";
    Value v = t.tensor;
    if (!v) {
      auto p = readParam(t.param, loc);
      if (failed(p))
        return failure();
      v = *p;
    }
    values.push_back(v);
  }
  // The loss: a dict's "loss", else the first output when it is a scalar
  // float, else the one scalar float output (forward may return (logits,
  // loss)). Only it is named the loss (varuna.json's name for it): the
  // logits of (logits, loss) were named "loss", the loss "output1".
  int lossIndex = -1;
  for (auto [i, v] : llvm::enumerate(values))
    if (keys[i] == "loss" && isScalarFloat(v))
      lossIndex = i;
  if (lossIndex < 0 && !values.empty() && isScalarFloat(values[0]))
    lossIndex = 0;
  else if (lossIndex < 0 && llvm::count_if(values, isScalarFloat) == 1)
    lossIndex = llvm::find_if(values, isScalarFloat) - values.begin();
  std::vector<std::pair<std::string, Value>> results;
  for (auto [i, v] : llvm::enumerate(values))
    results.push_back({static_cast<int>(i) == lossIndex ? lossName
                       : keys[i].empty() ? "output" + std::to_string(i)
                                         : keys[i],
                       v});
  // Parameters the traced forward never read (a pooler the loss does not
  // use) are still the model's: declared, so that checkpoints and
  // --dump-params hold every entry of its state_dict that is a parameter.
  // Training leaves them as they are, as PyTorch does (gradient None).
  // Unread buffers are not declared (BatchNorm's num_batches_tracked, whose
  // count the graph does not keep; PyTorch's load_state_dict fills it in).
  for (const std::string &name : paramOrder) {
    ParamInfo &p = paramsByName[name];
    if (!p.frozen && !p.declared && failed(declareParam(p)))
      return failure();
  }
  return gb.finish(results, loc, lossIndex);
}

//===----------------------------------------------------------------------===//
// Entry point
//===----------------------------------------------------------------------===//

bool varuna::torchScriptImportAvailable() { return true; }

OwningOpRef<ModuleOp>
varuna::importTorchScript(MLIRContext *ctx, StringRef path,
                          const TorchScriptImportOptions &options) {
  Location loc = FileLineColLoc::get(ctx, path, 0, 0);
  try {
    TSImporter importer(ctx, path, options);
    return importer.run();
  } catch (const c10::Error &e) {
    emitError(loc) << "TorchScript import of '" << path
                   << "' failed: " << firstLine(e.what_without_backtrace());
  } catch (const std::exception &e) {
    emitError(loc) << "TorchScript import of '" << path
                   << "' failed: " << firstLine(e.what());
  }
  return nullptr;
}
