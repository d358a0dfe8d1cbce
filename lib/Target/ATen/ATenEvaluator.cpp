//===- ATenEvaluator.cpp - Executes a varuna graph with ATen --------------===//
//
// Walks the graph function in order, evaluating each op with evaluateOp.
// Every failure (unsupported op, ATen error, unreadable weights, an op whose
// result does not match its type) becomes a diagnostic on the op.
//
//===----------------------------------------------------------------------===//

#include "varuna/Target/ATen/ATenEvaluator.h"
#include "varuna/Target/ATen/CompiledSections.h"
#include "varuna/Transforms/GraphUtils.h"
#include "varuna/runtime/Dataset.h"
#include "varuna/runtime/ParamData.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Path.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/autocast_mode.h>

#include <limits>

using namespace mlir;

namespace varuna {

namespace {

/// Ends the errors of reading a parameter's initial values.
constexpr const char *kFromSource =
    " (the initial weights are read from the model file the job was compiled "
    "from)";

std::string typeString(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return os.str();
}

std::string shapeString(c10::IntArrayRef sizes) {
  return rt::formatShape(std::vector<int64_t>(sizes.begin(), sizes.end()));
}

std::string nameOf(func::FuncOp f, unsigned i, bool result) {
  auto attr = result ? f.getResultAttrOfType<StringAttr>(i, kNameAttr)
                     : f.getArgAttrOfType<StringAttr>(i, kNameAttr);
  if (attr)
    return attr.str();
  return (result ? "result" : "arg") + std::to_string(i);
}

} // namespace

ATenEvaluator::ATenEvaluator(ModuleOp module, func::FuncOp graph,
                             ATenEvalOptions options)
    : module(module), graph(graph), options(std::move(options)),
      generator(at::make_generator<at::CPUGeneratorImpl>(this->options.seed)) {
  dataDir = this->options.dataDir;
  if (dataDir.empty())
    if (auto src = module->getAttrOfType<StringAttr>(kSourceAttr))
      dataDir = llvm::sys::path::has_parent_path(src.getValue())
                    ? llvm::sys::path::parent_path(src.getValue()).str()
                    : std::string("."); // hand-written: a bare file name
}

void ATenEvaluator::seedStep(int64_t step, int64_t stage, int64_t replica) {
  uint64_t h = rt::mix64(options.seed);
  for (int64_t v : {step, stage, replica})
    h = rt::mix64(h ^ static_cast<uint64_t>(v));
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_current_seed(h);
}

FailureOr<ATenEvaluator> ATenEvaluator::create(ModuleOp module,
                                               ATenEvalOptions options) {
  func::FuncOp graph;
  for (auto f : module.getOps<func::FuncOp>()) {
    if (!f->hasAttr(kGraphAttr))
      continue;
    if (graph)
      return module.emitError("several functions are marked varuna.graph (@")
             << graph.getSymName() << ", @" << f.getSymName() << ")";
    graph = f;
  }
  if (!graph)
    return module.emitError(
        "no graph to evaluate: no func.func has the varuna.graph attribute");
  if (graph.isExternal())
    return graph.emitError("the varuna.graph function has no body");
  return ATenEvaluator(module, graph, std::move(options));
}

std::string varuna::argumentName(func::FuncOp f, unsigned i) {
  return nameOf(f, i, false);
}

std::vector<std::string> ATenEvaluator::getInputNames() const {
  std::vector<std::string> names;
  for (unsigned i = 0, e = graph.getNumArguments(); i < e; ++i)
    names.push_back(argumentName(graph, i));
  return names;
}

std::vector<std::string> ATenEvaluator::getResultNames() const {
  std::vector<std::string> names;
  for (unsigned i = 0, e = graph.getNumResults(); i < e; ++i)
    names.push_back(nameOf(graph, i, true));
  return names;
}

std::optional<unsigned> ATenEvaluator::getLossIndex() const {
  for (unsigned i = 0, e = graph.getNumResults(); i < e; ++i)
    if (graph.getResultAttr(i, kLossAttr))
      return i;
  return std::nullopt;
}

FailureOr<int64_t> ATenEvaluator::checkInputs(ArrayRef<at::Tensor> inputs) {
  auto names = getInputNames();
  if (inputs.size() != graph.getNumArguments())
    return graph.emitError("the graph has ")
           << graph.getNumArguments() << " inputs, " << inputs.size()
           << " were given";
  // The batch size: from the first input with a batch-dependent dimension.
  std::optional<int64_t> batch;
  std::string batchFrom;
  for (auto [i, arg] : llvm::enumerate(graph.getArguments())) {
    auto type = arg.getType().dyn_cast<VTensorType>();
    if (!type)
      return graph.emitError("input '")
             << names[i] << "' is not a !varuna.tensor: "
             << typeString(arg.getType());
    const at::Tensor &t = inputs[i];
    if (t.dim() != type.getRank())
      return graph.emitError("input '")
             << names[i] << "' has shape " << shapeString(t.sizes())
             << " (rank " << t.dim() << "), its type " << typeString(type)
             << " has rank "
             << type.getRank();
    if (batch || !type.isBatched())
      continue;
    SymInt d = type.getDim(type.getBatchDim());
    int64_t size = t.size(type.getBatchDim());
    if (size <= 0 || size % d.perBatch != 0)
      return graph.emitError("input '")
             << names[i] << "' has shape " << shapeString(t.sizes())
             << ": dimension " << type.getBatchDim() << " must be a positive "
             << "multiple of " << d.perBatch << " (type " << typeString(type)
             << ")";
    batch = size / d.perBatch;
    batchFrom = names[i];
  }
  int64_t b = batch.value_or(1);
  for (auto [i, arg] : llvm::enumerate(graph.getArguments())) {
    auto type = arg.getType().cast<VTensorType>();
    const at::Tensor &t = inputs[i];
    std::vector<int64_t> want = concreteShape(type, b);
    if (t.sizes() != c10::IntArrayRef(want)) {
      auto diag = graph.emitError("input '")
                  << names[i] << "' has shape " << shapeString(t.sizes())
                  << ", expected " << rt::formatShape(want) << " (type "
                  << typeString(type);
      if (batch)
        diag << " with B = " << b << " from input '" << batchFrom << "'";
      return diag << ")";
    }
    auto dtype = toScalarType(type.getElementType());
    if (!dtype || *dtype != t.scalar_type())
      return graph.emitError("input '")
             << names[i] << "' has dtype " << dtypeName(t.scalar_type())
             << ", its type " << typeString(type) << " wants "
             << (dtype ? dtypeName(*dtype) : "an unsupported dtype");
  }
  return b;
}

at::Tensor ATenEvaluator::loadParam(ParamOp param) {
  StringRef name = param.getSymName();
  auto it = params.find(name);
  if (it != params.end())
    return it->second;
  VTensorType type = param.getTensorType();
  auto dtype = toScalarType(type.getElementType());
  if (!dtype)
    throw ATenEvalError("parameter @" + name.str() +
                        " has an unsupported element type " +
                        typeString(type.getElementType()));
  if (type.isBatched())
    throw ATenEvalError("parameter @" + name.str() +
                        " has a batch-dependent type " + typeString(type));
  DataAttr init = param.getInitData();
  if (!init)
    throw ATenEvalError("parameter @" + name.str() +
                        " has no initial values (no #varuna.data init)");
  std::vector<int64_t> shape = concreteShape(type, 0);
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(*dtype));
  int64_t want = t.numel() * t.element_size();
  if (init.getSize() != want)
    throw ATenEvalError(
        "parameter @" + name.str() + ": #varuna.data size " +
        std::to_string(init.getSize()) + " differs from the " +
        std::to_string(want) + " bytes of " + typeString(type));
  if (dataDir.empty() && !llvm::sys::path::is_absolute(init.getFile()))
    throw ATenEvalError("parameter @" + name.str() + ": its data file '" +
                        init.getFile().str() +
                        "' is relative, but the module has no varuna.source "
                        "(give a data directory)");
  std::string path = rt::resolveDataPath(dataDir, init.getFile().str());
  std::string error;
  try {
    rt::readParamBytes(dataDir, init.getFile().str(), init.getOffset(),
                       init.getSize(), t.data_ptr());
    if (init.getDigest() >= 0 &&
        rt::paramDigest(t.data_ptr(), want) != uint32_t(init.getDigest()))
      error = "parameter @" + name.str() + ": the bytes at " + path + " [" +
              std::to_string(init.getOffset()) + ", " +
              std::to_string(init.getOffset() + want) +
              ") are not those varuna-compile imported (their digest "
              "differs): the model file changed after the job was compiled; "
              "compile it again" + kFromSource;
  } catch (const rt::DataError &e) {
    error = "cannot read parameter @" + name.str() + ": " + e.what() +
            kFromSource;
  }
  if (!error.empty()) {
    if (!deferring)
      throw ATenEvalError(error);
    if (t.is_floating_point())
      t.fill_(std::numeric_limits<double>::quiet_NaN());
    else
      t.zero_();
    deferred[name.str()] = error;
  }
  params[name] = t;
  return t;
}

std::optional<std::pair<std::string, std::string>>
ATenEvaluator::firstUnrestored(const std::set<std::string> &restored) const {
  for (const auto &[name, error] : deferred)
    if (!restored.count(name))
      return std::make_pair(name, error);
  return std::nullopt;
}

FailureOr<std::vector<at::Tensor>>
ATenEvaluator::run(ArrayRef<at::Tensor> inputs) {
  FailureOr<int64_t> batch = checkInputs(inputs);
  if (failed(batch))
    return failure();
  ATenOpContext ctx = makeContext(*batch);
  return runFunction(graph, inputs, ctx);
}

ATenOpContext ATenEvaluator::makeContext(int64_t batch) {
  ATenOpContext ctx;
  ctx.batch = batch;
  ctx.generator = generator;
  ctx.countLoss = static_cast<bool>(options.onLossCount);
  ctx.getParam = [this](ParamOp p) { return loadParam(p); };
  return ctx;
}

/// The parameters training writes: every batch_norm's running statistics.
static llvm::StringSet<> writtenParams(ModuleOp module) {
  llvm::StringSet<> written;
  module.walk([&](BatchNormOp bn) {
    for (Value v : {bn.getRunningMean(), bn.getRunningVar()})
      if (auto get = v ? v.getDefiningOp<GetParamOp>() : GetParamOp())
        written.insert(get.getName());
  });
  return written;
}

FailureOr<std::vector<std::pair<std::string, at::Tensor>>>
ATenEvaluator::stateBuffers(
    const std::function<bool(llvm::StringRef)> &wanted) {
  llvm::StringSet<> written = writtenParams(module);
  return loadParams([&](ParamOp p) {
    return written.contains(p.getSymName()) &&
           (!wanted || wanted(p.getSymName()));
  });
}

FailureOr<std::vector<std::pair<std::string, at::Tensor>>>
ATenEvaluator::constantParams(
    const std::function<bool(llvm::StringRef)> &wanted) {
  llvm::StringSet<> written = writtenParams(module);
  llvm::StringSet<> read = getReadParamNames(module);
  return loadParams([&](ParamOp p) {
    return p.getFrozen() && read.contains(p.getSymName()) &&
           !written.contains(p.getSymName()) &&
           (!wanted || wanted(p.getSymName()));
  });
}

FailureOr<std::vector<std::pair<std::string, at::Tensor>>>
ATenEvaluator::loadParams(const std::function<bool(ParamOp)> &keep) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (ParamOp p : module.getOps<ParamOp>()) {
    if (!keep(p))
      continue;
    try {
      out.emplace_back(p.getSymName().str(), loadParam(p));
    } catch (const std::exception &e) {
      return p.emitError() << e.what(), failure();
    }
  }
  return out;
}

FailureOr<std::vector<std::pair<std::string, at::Tensor>>>
ATenEvaluator::unreadParams() {
  llvm::StringSet<> read = getReadParamNames(module);
  return loadParams([&](ParamOp p) {
    return !p.getFrozen() && !read.contains(p.getSymName());
  });
}

FailureOr<std::vector<std::pair<std::string, at::Tensor>>>
ATenEvaluator::trainableParams(
    const std::function<bool(llvm::StringRef)> &wanted) {
  llvm::StringSet<> read = getReadParamNames(module);
  auto out = loadParams([&](ParamOp p) {
    return !p.getFrozen() && read.contains(p.getSymName()) &&
           (!wanted || wanted(p.getSymName()));
  });
  if (succeeded(out))
    for (auto &[name, t] : *out)
      if (!t.requires_grad())
        t.requires_grad_(true);
  return out;
}

std::vector<func::FuncOp> ATenEvaluator::getSections() const {
  std::vector<func::FuncOp> sections;
  for (auto f : const_cast<ModuleOp &>(module).getOps<func::FuncOp>())
    if (f->hasAttr("varuna.section"))
      sections.push_back(f);
  llvm::stable_sort(sections, [](func::FuncOp a, func::FuncOp b) {
    return a->getAttrOfType<IntegerAttr>("varuna.section").getInt() <
           b->getAttrOfType<IntegerAttr>("varuna.section").getInt();
  });
  return sections;
}

FailureOr<std::vector<at::Tensor>>
ATenEvaluator::runSection(func::FuncOp section, ArrayRef<at::Tensor> args,
                          int64_t batch) {
  ATenOpContext ctx = makeContext(batch);
  return runFunction(section, args, ctx);
}

FailureOr<std::vector<at::Tensor>>
ATenEvaluator::runSections(ArrayRef<at::Tensor> inputs) {
  FailureOr<int64_t> batch = checkInputs(inputs);
  if (failed(batch))
    return failure();
  llvm::StringMap<at::Tensor> byName;
  for (auto [name, t] : llvm::zip(getInputNames(), inputs))
    byName[name] = t;
  FailureOr<SmallVector<func::FuncOp>> sections =
      varuna::getSections(module, /*required=*/true);
  if (failed(sections))
    return failure();
  ATenOpContext ctx = makeContext(*batch);
  std::vector<at::Tensor> sent;
  for (func::FuncOp s : *sections) {
    auto args = sectionArguments(s, sent, byName);
    if (failed(args))
      return failure();
    auto out = runFunction(s, *args, ctx);
    if (failed(out))
      return failure();
    sent = std::move(*out);
  }
  return sent;
}

FailureOr<std::vector<at::Tensor>>
sectionArguments(func::FuncOp s, ArrayRef<at::Tensor> received,
                 const llvm::StringMap<at::Tensor> &inputs) {
  std::vector<at::Tensor> args;
  for (BlockArgument a : s.getArguments()) {
    unsigned i = a.getArgNumber();
    if (auto r = s.getArgAttrOfType<IntegerAttr>(i, "varuna.recv")) {
      if (r.getInt() >= static_cast<int64_t>(received.size()))
        return s.emitError("receives value ")
                   << r.getInt() << " but the previous section sent "
                   << received.size(),
               failure();
      args.push_back(received[r.getInt()]);
      continue;
    }
    auto name = s.getArgAttrOfType<StringAttr>(i, kNameAttr);
    auto it = name ? inputs.find(name.getValue()) : inputs.end();
    if (it == inputs.end())
      return s.emitError("argument ")
                 << i << " is neither received nor a graph input",
             failure();
    args.push_back(it->second);
  }
  return args;
}

FailureOr<std::vector<at::Tensor>>
forwardSections(ATenEvaluator &evaluator, ArrayRef<func::FuncOp> sections,
                const llvm::StringMap<at::Tensor> &inputs, int64_t batch,
                std::vector<SectionStash> &stash) {
  at::NoGradGuard noGrad;
  stash.assign(sections.size(), SectionStash());
  std::vector<at::Tensor> sent;
  for (auto [k, s] : llvm::enumerate(sections)) {
    auto args = sectionArguments(s, sent, inputs);
    if (failed(args))
      return failure();
    stash[k].args = std::move(*args);
    stash[k].rng = evaluator.getGenerator().get_state();
    auto out = evaluator.runSection(s, stash[k].args, batch);
    if (failed(out))
      return failure();
    sent = std::move(*out);
  }
  return sent;
}

FailureOr<std::vector<at::Tensor>>
ATenEvaluator::runCompiled(unsigned k, func::FuncOp func,
                           ArrayRef<at::Tensor> args, ATenOpContext &ctx) {
  const CompiledSections &compiled = *options.compiled;
  if (k >= compiled.numSections())
    return func.emitError("section ") << k << " is not in the stage library",
           failure();
  if (compiledParams.size() < compiled.numSections())
    compiledParams.resize(compiled.numSections());
  std::vector<ParamOp> &ops = compiledParams[k];
  if (ops.empty())
    for (const std::string &name : compiled.params(k)) {
      auto p = SymbolTable::lookupNearestSymbolFrom<ParamOp>(
          func, StringAttr::get(func.getContext(), name));
      if (!p)
        return func.emitError("no varuna.param named @") << name, failure();
      ops.push_back(p);
    }
  try {
    std::vector<at::Tensor> params;
    params.reserve(ops.size());
    for (ParamOp p : ops)
      params.push_back(loadParam(p));
    std::vector<at::Tensor> out = compiled.run(k, args, params, ctx.batch,
                                               ctx.generator,
                                               ctx.lossCountSink());
    if (ctx.lossCount >= 0 && options.onLossCount)
      options.onLossCount(ctx.lossCount);
    ctx.lossCount = -1;
    return out;
  } catch (const std::exception &e) {
    return func.emitError() << e.what(), failure();
  }
}

namespace {
/// ATen's CPU autocast at `dtype` while alive; the state before it is put
/// back after, and the cache of cast weights is dropped when the outermost
/// scope ends (the weights change at the next optimizer step).
class AutocastScope {
public:
  explicit AutocastScope(at::ScalarType dtype)
      : wasEnabled(at::autocast::is_autocast_enabled(at::kCPU)),
        oldDtype(at::autocast::get_autocast_dtype(at::kCPU)) {
    at::autocast::set_autocast_enabled(at::kCPU, true);
    at::autocast::set_autocast_dtype(at::kCPU, dtype);
    at::autocast::increment_nesting();
  }
  ~AutocastScope() {
    if (at::autocast::decrement_nesting() == 0)
      at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(at::kCPU, wasEnabled);
    at::autocast::set_autocast_dtype(at::kCPU, oldDtype);
  }

private:
  bool wasEnabled;
  at::ScalarType oldDtype;
};
} // namespace

FailureOr<std::vector<at::Tensor>>
ATenEvaluator::runFunction(func::FuncOp func, ArrayRef<at::Tensor> args,
                           ATenOpContext &ctx) {
  if (!options.autocast)
    return runFunctionBody(func, args, ctx);
  FailureOr<std::vector<at::Tensor>> out = failure();
  {
    AutocastScope scope(*options.autocast);
    out = runFunctionBody(func, args, ctx);
  }
  if (failed(out))
    return failure();
  for (auto [t, type] : llvm::zip(*out, func.getFunctionType().getResults()))
    if (auto v = type.dyn_cast<VTensorType>())
      if (auto want = toScalarType(v.getElementType()))
        if (t.defined() && t.scalar_type() != *want)
          t = t.to(*want);
  return out;
}

FailureOr<std::vector<at::Tensor>>
ATenEvaluator::runFunctionBody(func::FuncOp func, ArrayRef<at::Tensor> args,
                               ATenOpContext &ctx) {
  if (options.compiled)
    if (auto k = func->getAttrOfType<IntegerAttr>("varuna.section"))
      return runCompiled(k.getInt(), func, args, ctx);
  llvm::DenseMap<Value, at::Tensor> values;
  for (auto [arg, t] : llvm::zip(func.getArguments(), args))
    values[arg] = t;
  auto lookup = [&](Value v) -> at::Tensor {
    auto it = values.find(v);
    return it == values.end() ? at::Tensor() : it->second;
  };

  std::vector<at::Tensor> results;
  for (Operation &op : func.getBody().front()) {
    std::vector<at::Tensor> operands;
    for (Value v : op.getOperands()) {
      at::Tensor t = lookup(v);
      if (!t.defined())
        return op.emitError("operand #")
               << operands.size() << " has no value (defined outside the "
               << "graph's entry block?)";
      operands.push_back(t);
    }
    if (isa<func::ReturnOp>(op)) {
      results = std::move(operands);
      break;
    }
    if (isa<CutPointOp>(op)) {
      // A stage boundary: passes its values through unchanged.
      for (auto [result, t] : llvm::zip(op.getResults(), operands))
        values[result] = t;
      continue;
    }
    if (op.getNumRegions() != 0 || op.getNumResults() != 1)
      return op.emitError("the ATen evaluator supports only single-result "
                          "varuna ops without regions, not '")
             << op.getName() << "'";
    at::Tensor out;
    try {
      out = evaluateOp(&op, operands, ctx);
      if (options.observer)
        options.observer(&op, operands, out);
    } catch (const ATenEvalError &e) {
      return op.emitError() << e.what();
    } catch (const c10::Error &e) {
      return op.emitError("ATen failed: ") << e.what_without_backtrace();
    } catch (const std::exception &e) {
      return op.emitError("evaluation failed: ") << e.what();
    }
    if (options.checkResultTypes) {
      auto type = op.getResult(0).getType().dyn_cast<VTensorType>();
      if (!type)
        return op.emitError("result is not a !varuna.tensor");
      std::vector<int64_t> want = concreteShape(type, ctx.batch);
      auto dtype = toScalarType(type.getElementType());
      if (out.sizes() != c10::IntArrayRef(want) || !dtype ||
          (out.scalar_type() != *dtype &&
           !(options.autocast && at::isFloatingType(*dtype))))
        return op.emitError("ATen produced a ")
               << dtypeName(out.scalar_type()) << " tensor of shape "
               << shapeString(out.sizes()) << ", the result type "
               << typeString(type)
               << " says " << rt::formatShape(want) << " (B = " << ctx.batch
               << ")";
    }
    values[op.getResult(0)] = out;
  }
  if (results.size() != func.getNumResults())
    return func.emitError("the function body does not end in func.return");
  if (ctx.lossCount >= 0 && options.onLossCount)
    options.onLossCount(ctx.lossCount);
  ctx.lossCount = -1;
  return results;
}

} // namespace varuna
