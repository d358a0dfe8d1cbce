//===- GraphBuilder.cpp - Builds a varuna training-graph module -----------===//

#include "varuna/Import/GraphBuilder.h"
#include "varuna/runtime/ParamData.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace varuna;

GraphBuilder::GraphBuilder(MLIRContext *ctx, StringRef sourcePath,
                           const ImportOptions &options)
    : b(ctx), options(options),
      sourceDir(llvm::sys::path::parent_path(sourcePath).str()) {
  ctx->getOrLoadDialect<VarunaDialect>();
  ctx->getOrLoadDialect<func::FuncDialect>();
  Location loc = FileLineColLoc::get(ctx, sourcePath, 0, 0);
  module = ModuleOp::create(loc);
  // Absolute, so that the module's relative data files resolve from any
  // directory the module is later used in (a bare "gpt.onnx" had no
  // directory at all).
  SmallString<256> absSource(sourcePath);
  llvm::sys::fs::make_absolute(absSource);
  (*module)->setAttr(kSourceAttr, b.getStringAttr(absSource));
  b.setInsertionPointToEnd(module->getBody());
  graph = b.create<func::FuncOp>(loc, options.graphName,
                                 b.getFunctionType({}, {}));
  graph->setAttr(kGraphAttr, b.getUnitAttr());
  Block *entry = graph.addEntryBlock();
  b.setInsertionPointToEnd(entry);
}

Value GraphBuilder::addInput(StringRef name, VTensorType type, Location loc) {
  Block &entry = graph.getBody().front();
  Value arg = entry.addArgument(type, loc);
  inputNames.push_back(name.str());
  return arg;
}

FailureOr<ParamOp> GraphBuilder::addParam(StringRef name, VTensorType type,
                                          DataAttr init, bool frozen,
                                          Location loc) {
  if (params.count(name)) {
    emitError(loc) << "duplicate parameter name '" << name << "'";
    return failure();
  }
  if (init && init.getDigest() < 0) {
    // Read back from where the importer says the bytes are: the digest the
    // loaders check (docs/dialect.md), and a check of the importer's offset.
    uint32_t digest;
    std::string error;
    if (!rt::fileParamDigest(sourceDir, init.getFile().str(), init.getOffset(),
                             init.getSize(), digest, error)) {
      emitError(loc) << "cannot read the values of parameter '" << name
                     << "': " << error;
      return failure();
    }
    init = DataAttr::get(b.getContext(), init.getFile(), init.getOffset(),
                         init.getSize(), digest);
  }
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(graph);
  auto param = b.create<ParamOp>(loc, b.getStringAttr(name),
                                 TypeAttr::get(type), init ? Attribute(init) : Attribute(),
                                 frozen ? b.getUnitAttr() : UnitAttr());
  params[name] = param;
  return param;
}

Value GraphBuilder::getParam(StringRef name, Location loc) {
  auto it = paramValues.find(name);
  if (it != paramValues.end())
    return it->second;
  auto p = params.find(name);
  if (p == params.end())
    return {};
  Value v = b.create<GetParamOp>(loc, p->second.getType(),
                                 FlatSymbolRefAttr::get(b.getContext(), name));
  paramValues[name] = v;
  return v;
}

bool varuna::isScalarFloat(Value v) {
  auto t = v.getType().dyn_cast<VTensorType>();
  return t && t.getRank() == 0 && t.getElementType().isa<FloatType>();
}

LogicalResult
GraphBuilder::finish(ArrayRef<std::pair<std::string, Value>> results,
                     Location loc, int lossIndex) {
  if (lossIndex < 0) {
    for (auto [i, r] : llvm::enumerate(results))
      if (r.first == "loss" && isScalarFloat(r.second))
        lossIndex = i;
    if (lossIndex < 0) {
      int found = 0;
      for (auto [i, r] : llvm::enumerate(results))
        if (isScalarFloat(r.second))
          lossIndex = i, ++found;
      if (found != 1)
        lossIndex = -1;
    }
  }
  if (lossIndex < 0 && options.requireLoss)
    return emitError(loc) << "the graph has no scalar floating-point loss "
                             "output (outputs: "
                          << results.size() << ")";

  SmallVector<Value> values;
  SmallVector<Type> types;
  for (auto &r : results) {
    values.push_back(r.second);
    types.push_back(r.second.getType());
  }
  b.create<func::ReturnOp>(loc, values);
  Block &entry = graph.getBody().front();
  graph.setFunctionType(b.getFunctionType(entry.getArgumentTypes(), types));
  for (auto [i, name] : llvm::enumerate(inputNames))
    graph.setArgAttr(i, kNameAttr, b.getStringAttr(name));
  for (auto [i, r] : llvm::enumerate(results)) {
    graph.setResultAttr(i, kNameAttr, b.getStringAttr(r.first));
    if (static_cast<int>(i) == lossIndex)
      graph.setResultAttr(i, kLossAttr, b.getUnitAttr());
  }
  return success();
}

Location varuna::nodeLocation(MLIRContext *ctx, StringRef file,
                              StringRef nodeName, int64_t index) {
  Location fileLoc = FileLineColLoc::get(ctx, file, index, 0);
  if (nodeName.empty())
    return fileLoc;
  return NameLoc::get(StringAttr::get(ctx, nodeName), fileLoc);
}
