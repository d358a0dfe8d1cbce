//===- LossNormalization.cpp - How micro-batch losses add up --------------===//

#include "varuna/Target/ATen/LossNormalization.h"
#include "varuna/Target/ATen/ATenEvaluator.h"
#include "varuna/Transforms/GraphUtils.h"
#include "varuna/runtime/Kernels.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include <ATen/ATen.h>
#include <functional>
#include <stdexcept>

using namespace mlir;
using namespace varuna;

/// A frozen parameter no batch_norm updates: a constant of the model (a
/// loss's class weights).
static bool isConstantParam(GetParamOp get) {
  auto p = SymbolTable::lookupNearestSymbolFrom<ParamOp>(get, get.getNameAttr());
  return p && p.getFrozen() &&
         llvm::none_of(get->getUsers(),
                       [](Operation *u) { return llvm::isa<BatchNormOp>(u); });
}

/// Whether `v` is computed from the graph's inputs and constants alone (no
/// parameter -- but for constant ones with `constantParams` -- no random
/// numbers), so that its value for the whole step can be computed before
/// the step runs.
static bool fromInputsAlone(Value v, llvm::DenseMap<Value, bool> &memo,
                            bool constantParams = false) {
  auto it = memo.find(v);
  if (it != memo.end())
    return it->second;
  Operation *op = v.getDefiningOp();
  bool ok = true;
  if (auto get = llvm::dyn_cast_or_null<GetParamOp>(op))
    ok = constantParams && isConstantParam(get);
  else if (op) {
    if (llvm::isa<ParamOp, SharedParamOp, DropoutOp, RandomOp,
                  GlobalReduceOp>(op) ||
        op->getNumRegions() != 0)
      ok = false;
    else
      ok = llvm::all_of(op->getOperands(), [&](Value o) {
        return fromInputsAlone(o, memo, constantParams);
      });
  }
  memo[v] = ok;
  return ok;
}

/// The ops of `f` that take a step denominator inside a
/// rt::LossDenominators scope, in program order: mean cross_entropies,
/// step_mean reduces and step divisors.
static SmallVector<Operation *> stepMeans(func::FuncOp f) {
  SmallVector<Operation *> means;
  f.walk([&](Operation *op) {
    if (llvm::isa<DivOp>(op) && op->hasAttr(kStepDivisorAttr)) {
      means.push_back(op);
    } else if (auto ce = llvm::dyn_cast<CrossEntropyOp>(op)) {
      if (ce.getReduction() == LossReduction::mean)
        means.push_back(op);
    } else if (auto r = llvm::dyn_cast<ReduceOp>(op)) {
      if (r.getStepMean())
        means.push_back(op);
    }
  });
  return means;
}

/// Whether a section's mean `a` is the graph's `b` (the same loss, or the
/// same reduction of the same shape).
static bool sameMean(Operation *a, Operation *b) {
  if (auto ca = llvm::dyn_cast<CrossEntropyOp>(a)) {
    auto cb = llvm::dyn_cast<CrossEntropyOp>(b);
    return cb && ca.getIgnoreIndex() == cb.getIgnoreIndex() &&
           ca.getLogInput() == cb.getLogInput() &&
           ca.getLabelSmoothing() == cb.getLabelSmoothing() &&
           bool(ca.getWeight()) == bool(cb.getWeight());
  }
  if (llvm::isa<DivOp>(a))
    return llvm::isa<DivOp>(b) &&
           a->getOperand(1).getType() == b->getOperand(1).getType();
  auto ra = llvm::cast<ReduceOp>(a);
  auto rb = llvm::dyn_cast<ReduceOp>(b);
  return rb && ra.getAxes() == rb.getAxes() &&
         ra.getInput().getType() == rb.getInput().getType();
}

std::optional<InputSlice> InputSlice::create(func::FuncOp graph,
                                             ArrayRef<Value> roots,
                                             ParamLoader params) {
  llvm::DenseMap<Value, bool> memo;
  for (Value v : roots)
    if (v.getParentRegion() != &graph.getBody() ||
        !fromInputsAlone(v, memo, /*constantParams=*/bool(params)))
      return std::nullopt;
  InputSlice slice;
  slice.graph = graph;
  slice.params = std::move(params);
  slice.roots.assign(roots.begin(), roots.end());
  llvm::DenseSet<Operation *> needed;
  SmallVector<Value> work(roots.begin(), roots.end());
  while (!work.empty()) {
    Operation *op = work.pop_back_val().getDefiningOp();
    if (!op || !needed.insert(op).second)
      continue;
    for (Value o : op->getOperands())
      work.push_back(o);
  }
  for (Operation &op : graph.getBody().front())
    if (needed.contains(&op))
      slice.ops.push_back(&op);
  slice.reads.assign(graph.getNumArguments(), false);
  for (unsigned i = 0; i < graph.getNumArguments(); ++i)
    slice.inputs.push_back(argumentName(graph, i));
  for (Value v : roots)
    if (auto arg = llvm::dyn_cast<BlockArgument>(v))
      slice.reads[arg.getArgNumber()] = true;
  for (Operation *op : slice.ops)
    for (Value o : op->getOperands())
      if (auto arg = llvm::dyn_cast<BlockArgument>(o))
        slice.reads[arg.getArgNumber()] = true;
  return slice;
}

std::vector<at::Tensor>
InputSlice::evaluate(const llvm::StringMap<at::Tensor> &byName,
                     int64_t batch) const {
  // From inputs alone: nothing here needs autograd.
  llvm::DenseMap<Value, at::Tensor> values;
  func::FuncOp f = graph;
  for (auto [i, name] : llvm::enumerate(inputs)) {
    auto it = byName.find(name);
    if (it != byName.end())
      values[f.getArgument(i)] = it->second;
  }
  ATenOpContext ctx;
  ctx.batch = batch;
  if (params)
    ctx.getParam = params;
  auto valueOf = [&](Operation *user, Value v) {
    auto it = values.find(v);
    if (it != values.end())
      return it->second;
    std::string what = "an operand of '" +
                       user->getName().getStringRef().str() + "'";
    if (auto arg = llvm::dyn_cast<BlockArgument>(v))
      what = "graph input '" + inputs[arg.getArgNumber()] + "'";
    throw std::runtime_error("computing the loss's counts from the data: " +
                             what + " has no value");
  };
  for (Operation *op : ops) {
    std::vector<at::Tensor> operands;
    for (Value v : op->getOperands())
      operands.push_back(valueOf(op, v));
    if (llvm::isa<CutPointOp>(op)) {
      for (auto [r, t] : llvm::zip(op->getResults(), operands))
        values[r] = t;
      continue;
    }
    try {
      values[op->getResult(0)] = evaluateOp(op, operands, ctx);
    } catch (const std::exception &e) {
      throw std::runtime_error("computing the loss's counts from the data: '" +
                               op->getName().getStringRef().str() +
                               "' failed: " + e.what());
    }
  }
  std::vector<at::Tensor> out;
  for (Value v : roots)
    out.push_back(valueOf(f.getOperation(), v));
  return out;
}

std::vector<at::Tensor>
InputSlice::evaluate(const std::vector<rt::BatchTensor> &rows,
                     int64_t batch) const {
  llvm::StringMap<at::Tensor> byName;
  for (size_t i = 0; i < inputs.size() && i < rows.size(); ++i)
    if (reads[i])
      byName[inputs[i]] = tensorFromNpy(rows[i].array);
  return evaluate(byName, batch);
}

std::optional<LabelCounter>
LabelCounter::create(ModuleOp job, InputSlice::ParamLoader params) {
  func::FuncOp graph = findTrainingGraph(job);
  if (!graph || graph.getBody().empty())
    return std::nullopt;
  SmallVector<Operation *> means = stepMeans(graph);
  // Each cross_entropy's labels (and weights), each step divisor.
  SmallVector<Value> roots;
  for (Operation *op : means)
    if (llvm::isa<DivOp>(op)) {
      roots.push_back(op->getOperand(1));
    } else if (auto ce = llvm::dyn_cast<CrossEntropyOp>(op)) {
      roots.push_back(ce.getLabels());
      if (Value w = ce.getWeight()) {
        if (!params) // class weights are read through `params`
          return std::nullopt;
        roots.push_back(w);
      }
    }
  std::optional<InputSlice> slice =
      InputSlice::create(graph, roots, std::move(params));
  if (means.empty() || !slice)
    return std::nullopt;
  LabelCounter c(std::move(*slice));
  c.means.assign(means.begin(), means.end());
  // Sections run the graph's ops in its order: the k-th mean of the
  // sections taken in order is the graph's k-th. Checked, not assumed.
  FailureOr<SmallVector<func::FuncOp>> sections = getSections(job);
  if (failed(sections))
    return std::nullopt;
  size_t at = 0;
  for (func::FuncOp s : *sections) {
    c.sectionStart.push_back(at);
    for (Operation *op : stepMeans(s)) {
      if (at == c.means.size() || !sameMean(op, c.means[at]))
        return std::nullopt;
      ++at;
    }
  }
  if (!sections->empty() && at != c.means.size())
    return std::nullopt;
  c.sectionStart.push_back(at);
  return c;
}

static double countOf(CrossEntropyOp ce, const at::Tensor &labels,
                      const at::Tensor &weight) {
  auto ignore = ce.getIgnoreIndex();
  return rt::crossEntropyCount(labels, ignore.has_value(),
                               ignore ? static_cast<int64_t>(*ignore) : 0,
                               weight);
}

/// How many elements a step_mean reduce averages over `batch` examples.
static double countOf(ReduceOp r, int64_t batch) {
  auto in = llvm::cast<VTensorType>(r.getInput().getType());
  double n = 1;
  for (int64_t axis : r.getAxes())
    n *= double(in.getDim(axis).at(batch));
  return n;
}

std::vector<double>
LabelCounter::count(const std::vector<rt::BatchTensor> &rows,
                    int64_t batch) const {
  std::vector<at::Tensor> values = labels.evaluate(rows, batch);
  std::vector<double> counts;
  size_t next = 0; // the next root: labels (then weights), a divisor
  for (Operation *op : means) {
    if (llvm::isa<DivOp>(op)) {
      counts.push_back(values[next++].item<double>());
    } else if (auto ce = llvm::dyn_cast<CrossEntropyOp>(op)) {
      const at::Tensor &labels = values[next++];
      at::Tensor weight = ce.getWeight() ? values[next++] : at::Tensor();
      counts.push_back(countOf(ce, labels, weight));
    } else
      counts.push_back(countOf(llvm::cast<ReduceOp>(op), batch));
  }
  return counts;
}

size_t LabelCounter::meansIn(int first, int end) const {
  if (sectionStart.size() == 1) // no sections: the graph runs whole
    return means.size();
  return sectionStart[end] - sectionStart[first];
}

std::vector<double>
LabelCounter::forSections(const std::vector<double> &counts, int first,
                          int end) const {
  if (sectionStart.size() == 1)
    return counts;
  return std::vector<double>(counts.begin() + sectionStart[first],
                             counts.begin() + sectionStart[end]);
}

namespace {
struct LossAnalysis {
  LossAggregation aggregation = LossAggregation::Mean;
  Value divisor; ///< Ratio: the count the sum is divided by
  /// The loss when it is neither a sum, a ratio nor a mean over the
  /// examples (see lossSplitsInexactly).
  Value inexact;
};
} // namespace

static LossAnalysis analyzeLoss(ModuleOp job) {
  LossAnalysis result;
  func::FuncOp graph = findTrainingGraph(job);
  if (!graph || graph.getBody().empty())
    return result;
  // Mean cross_entropies normalize by the step's labels when they can
  // (class weights: frozen parameters the trainers load; none is read here).
  bool countable =
      LabelCounter::create(job, [](ParamOp) -> at::Tensor {
        throw std::logic_error("the loss analysis reads no parameter");
      }).has_value();
  bool normalizes = false;
  llvm::DenseMap<Value, bool> fromInputs;
  // What a value without a batch dimension is, as a function of the
  // examples: Const (none of them), Sum (linear in sums over them: sums,
  // their sums and differences, scaled by constants), Ratio (a Sum divided
  // by a value computed from the inputs alone), Mean (a mean over them),
  // Other (anything else: a ratio of two reductions of the model's values,
  // a log of a sum, ...).
  enum Kind { Const, Sum, Ratio, Mean, Other };
  llvm::DenseMap<Value, Kind> memo;
  // A Ratio's divisor: Ratios by the same one add up (`n = mask.sum()`
  // dividing two sums; the importer's selection means when their count
  // cannot be taken from the step's inputs, which share it per mask).
  llvm::DenseMap<Value, Value> divisorOf;
  std::function<Kind(Value)> kind = [&](Value v) -> Kind {
    auto it = memo.find(v);
    if (it != memo.end())
      return it->second;
    Operation *op = v.getDefiningOp();
    Kind k = Other;
    if (isBatched(v))
      k = Other;
    else if (!op)
      k = Const;
    else if (llvm::isa<CutPointOp>(op)) { // passes each operand on
      Value in = op->getOperand(llvm::cast<OpResult>(v).getResultNumber());
      k = kind(in);
      if (Value d = divisorOf.lookup(in))
        divisorOf[v] = d;
    } else if (llvm::any_of(op->getOperands(), isBatched)) {
      // Reduces the batch dimension away.
      if (auto ce = llvm::dyn_cast<CrossEntropyOp>(op)) {
        k = ce.getReduction() == LossReduction::sum    ? Sum
            : ce.getReduction() == LossReduction::mean ? Mean
                                                       : Other;
        if (k == Mean && countable) { // the step's count divides its sum
          k = Sum;
          normalizes = true;
        }
      } else if (auto r = llvm::dyn_cast<ReduceOp>(op)) {
        k = r.getKind() == ReduceKind::sum    ? Sum
            : r.getKind() == ReduceKind::mean ? Mean
                                              : Other;
        if (k == Mean && r.getStepMean() && countable) { // as above
          k = Sum;
          normalizes = true;
        }
      }
    } else {
      std::vector<Kind> in;
      for (Value o : op->getOperands())
        in.push_back(kind(o));
      bool allConst = llvm::all_of(in, [](Kind x) { return x == Const; });
      auto linear = [](Kind x) { return x == Const || x == Sum; };
      // The divisor of the one non-constant operand, or of both when they
      // are Ratios by the same one.
      Value d0 = op->getNumOperands() > 0 ? divisorOf.lookup(op->getOperand(0))
                                          : Value();
      Value d1 = op->getNumOperands() > 1 ? divisorOf.lookup(op->getOperand(1))
                                          : Value();
      Value divisor = d0 && d1 ? (d0 == d1 ? d0 : Value()) : d0 ? d0 : d1;
      if (allConst)
        k = Const;
      else if (llvm::isa<AddOp, SubOp>(op))
        k = llvm::all_of(in, linear) ? Sum
            : in[0] == Mean && in[1] == Mean ? Mean
            : in[0] == Ratio && in[1] == Ratio && divisor ? Ratio
                                                          : Other;
      else if (llvm::isa<MulOp>(op))
        k = in[0] == Const ? in[1] : in[1] == Const ? in[0] : Other;
      else if (llvm::isa<DivOp>(op)) {
        Value d = op->getOperand(1);
        if (in[1] == Const)
          k = in[0];
        else if (in[0] == Sum && op->hasAttr(kStepDivisorAttr) && countable) {
          k = Sum; // the step's count divides its sum, as above
          normalizes = true;
        } else if (in[0] == Sum &&
                 fromInputsAlone(d, fromInputs, /*constantParams=*/true)) {
          k = Ratio;
          divisor = result.divisor = d;
        } else
          k = Other;
      } else if (llvm::isa<CastOp, ReshapeOp>(op))
        k = in[0];
      else if (auto r = llvm::dyn_cast<ReduceOp>(op))
        // Over other dimensions than the examples': linear.
        k = r.getKind() == ReduceKind::sum || r.getKind() == ReduceKind::mean
                ? in[0]
                : Other;
      else if (auto u = llvm::dyn_cast<UnaryOp>(op))
        k = u.getKind() == UnaryKind::neg ? in[0] : Other;
      if (k == Ratio)
        divisorOf[v] = divisor;
    }
    memo[v] = k;
    return k;
  };
  Operation *ret = graph.getBody().front().getTerminator();
  for (unsigned i = 0; i < graph.getNumResults(); ++i)
    if (graph.getResultAttr(i, kLossAttr) && i < ret->getNumOperands()) {
      Kind k = kind(ret->getOperand(i));
      if (k == Other) {
        // Inexact unless it is a combination of means once the mean
        // cross_entropies count as means again (the Mean aggregation).
        Value divisor = result.divisor;
        countable = false;
        memo.clear();
        if (kind(ret->getOperand(i)) == Other)
          result.inexact = ret->getOperand(i);
        result.divisor = divisor;
      }
      if (k == Sum)
        result.aggregation =
            normalizes ? LossAggregation::Normalized : LossAggregation::Sum;
      // A ratio over normalized means would divide twice: Mean then.
      else if (k == Ratio && !normalizes)
        result.aggregation = LossAggregation::Ratio;
      break;
    }
  return result;
}

LossAggregation varuna::lossAggregation(ModuleOp job) {
  return analyzeLoss(job).aggregation;
}

Value varuna::lossSplitsInexactly(ModuleOp job) {
  return analyzeLoss(job).inexact;
}

std::optional<LossDivisor>
LossDivisor::create(ModuleOp job, InputSlice::ParamLoader params) {
  LossAnalysis a = analyzeLoss(job);
  if (a.aggregation != LossAggregation::Ratio)
    return std::nullopt;
  std::optional<InputSlice> slice = InputSlice::create(
      findTrainingGraph(job), {a.divisor}, std::move(params));
  if (!slice)
    return std::nullopt;
  return LossDivisor(std::move(*slice));
}

double LossDivisor::evaluate(const llvm::StringMap<at::Tensor> &inputs,
                             int64_t batch) const {
  return slice.evaluate(inputs, batch).front().item<double>();
}

double LossDivisor::evaluate(const std::vector<rt::BatchTensor> &rows,
                             int64_t batch) const {
  return slice.evaluate(rows, batch).front().item<double>();
}

std::string varuna::zeroDivisorMessage(int64_t microBatch) {
  return "the loss divides a sum by a count computed from the inputs, 0 "
         "for these " +
         std::to_string(microBatch) +
         " examples (every label ignored?): the micro-batch's loss is 0/0 "
         "and cannot be weighted. Use larger micro-batches, or a mean "
         "cross_entropy with ignore_index (and class weights, if any), which "
         "divides by the whole step's count and is exact";
}
