//===- LossNormalization.cpp - How micro-batch losses add up --------------===//

#include "varuna/Target/ATen/LossNormalization.h"
#include "varuna/Target/ATen/ATenEvaluator.h"
#include "varuna/Transforms/GraphUtils.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include <ATen/ATen.h>
#include <functional>
#include <stdexcept>

using namespace mlir;
using namespace varuna;

/// Whether `v` is computed from the graph's inputs and constants alone (no
/// parameter, no random numbers), so that its value for the whole step can
/// be computed before the step runs.
static bool fromInputsAlone(Value v, llvm::DenseMap<Value, bool> &memo) {
  auto it = memo.find(v);
  if (it != memo.end())
    return it->second;
  Operation *op = v.getDefiningOp();
  bool ok = true;
  if (op) {
    if (llvm::isa<ParamOp, GetParamOp, SharedParamOp, DropoutOp, RandomOp,
                  GlobalReduceOp>(op) ||
        op->getNumRegions() != 0)
      ok = false;
    else
      ok = llvm::all_of(op->getOperands(),
                        [&](Value o) { return fromInputsAlone(o, memo); });
  }
  memo[v] = ok;
  return ok;
}

static SmallVector<CrossEntropyOp> meanCrossEntropies(func::FuncOp f) {
  SmallVector<CrossEntropyOp> means;
  f.walk([&](CrossEntropyOp ce) {
    if (ce.getReduction() == LossReduction::mean)
      means.push_back(ce);
  });
  return means;
}

static bool sameLoss(CrossEntropyOp a, CrossEntropyOp b) {
  return a.getIgnoreIndex() == b.getIgnoreIndex() &&
         a.getLogInput() == b.getLogInput() &&
         a.getLabelSmoothing() == b.getLabelSmoothing();
}

std::optional<LabelCounter> LabelCounter::create(ModuleOp job) {
  func::FuncOp graph = findTrainingGraph(job);
  if (!graph || graph.getBody().empty())
    return std::nullopt;
  LabelCounter c;
  c.graph = graph;
  for (CrossEntropyOp ce : meanCrossEntropies(graph))
    c.means.push_back(ce);
  if (c.means.empty())
    return std::nullopt;
  llvm::DenseMap<Value, bool> memo;
  for (CrossEntropyOp ce : c.means)
    if (ce->getParentOp() != graph.getOperation() ||
        !fromInputsAlone(ce.getLabels(), memo))
      return std::nullopt;
  // The ops computing the labels, in program order.
  llvm::DenseSet<Operation *> needed;
  SmallVector<Value> work;
  for (CrossEntropyOp ce : c.means)
    work.push_back(ce.getLabels());
  while (!work.empty()) {
    Operation *op = work.pop_back_val().getDefiningOp();
    if (!op || !needed.insert(op).second)
      continue;
    for (Value o : op->getOperands())
      work.push_back(o);
  }
  for (Operation &op : graph.getBody().front())
    if (needed.contains(&op))
      c.slice.push_back(&op);
  for (unsigned i = 0; i < graph.getNumArguments(); ++i)
    c.inputs.push_back(argumentName(graph, i));
  // Sections run the graph's ops in its order: the k-th mean of the
  // sections taken in order is the graph's k-th. Checked, not assumed.
  FailureOr<SmallVector<func::FuncOp>> sections = getSections(job);
  if (failed(sections))
    return std::nullopt;
  size_t at = 0;
  for (func::FuncOp s : *sections) {
    c.sectionStart.push_back(at);
    for (CrossEntropyOp ce : meanCrossEntropies(s)) {
      if (at == c.means.size() || !sameLoss(ce, c.means[at]))
        return std::nullopt;
      ++at;
    }
  }
  if (!sections->empty() && at != c.means.size())
    return std::nullopt;
  c.sectionStart.push_back(at);
  return c;
}

std::vector<double>
LabelCounter::count(const llvm::StringMap<at::Tensor> &inputs,
                    int64_t batch) const {
  // Labels are integers: no autograd here.
  llvm::DenseMap<Value, at::Tensor> values;
  func::FuncOp f = graph;
  for (auto [i, name] : llvm::enumerate(this->inputs)) {
    auto it = inputs.find(name);
    if (it != inputs.end())
      values[f.getArgument(i)] = it->second;
  }
  ATenOpContext ctx;
  ctx.batch = batch;
  auto valueOf = [&](Operation *user, Value v) {
    auto it = values.find(v);
    if (it != values.end())
      return it->second;
    std::string what = "an operand of '" +
                       user->getName().getStringRef().str() + "'";
    if (auto arg = llvm::dyn_cast<BlockArgument>(v))
      what = "graph input '" + this->inputs[arg.getArgNumber()] + "'";
    throw std::runtime_error("counting the step's labels: " + what +
                             " has no value");
  };
  for (Operation *op : slice) {
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
      throw std::runtime_error("counting the step's labels: '" +
                               op->getName().getStringRef().str() +
                               "' failed: " + e.what());
    }
  }
  std::vector<double> counts;
  for (CrossEntropyOp ce : means) {
    at::Tensor labels = valueOf(ce, ce.getLabels());
    auto ignore = ce.getIgnoreIndex();
    counts.push_back(
        ignore ? double(labels.ne(static_cast<int64_t>(*ignore))
                            .sum()
                            .item<int64_t>())
               : double(labels.numel()));
  }
  return counts;
}

std::vector<double>
LabelCounter::count(const std::vector<rt::BatchTensor> &rows,
                    int64_t batch) const {
  llvm::StringMap<at::Tensor> byName;
  for (auto [name, row] : llvm::zip(inputs, rows))
    byName[name] = tensorFromNpy(row.array);
  return count(byName, batch);
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

LossAggregation varuna::lossAggregation(ModuleOp job) {
  func::FuncOp graph = findTrainingGraph(job);
  if (!graph || graph.getBody().empty())
    return LossAggregation::Mean;
  // Mean cross_entropies normalize by the step's labels when they can.
  const bool countable = LabelCounter::create(job).has_value();
  bool normalizes = false;
  auto batched = [](Value v) {
    auto t = llvm::dyn_cast<VTensorType>(v.getType());
    return t && t.isBatched();
  };
  // What a value without a batch dimension is, as a function of the
  // examples: Const (none of them), Sum (linear in sums over them: sums,
  // their sums and differences, scaled by constants), Mean (a mean over
  // them), Other (anything else: a ratio of two reductions, a log of a
  // sum, ...).
  enum Kind { Const, Sum, Mean, Other };
  llvm::DenseMap<Value, Kind> memo;
  std::function<Kind(Value)> kind = [&](Value v) -> Kind {
    auto it = memo.find(v);
    if (it != memo.end())
      return it->second;
    Operation *op = v.getDefiningOp();
    Kind k = Other;
    if (batched(v))
      k = Other;
    else if (!op)
      k = Const;
    else if (llvm::any_of(op->getOperands(), batched)) {
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
      }
    } else {
      std::vector<Kind> in;
      for (Value o : op->getOperands())
        in.push_back(kind(o));
      bool allConst = llvm::all_of(in, [](Kind x) { return x == Const; });
      auto linear = [](Kind x) { return x == Const || x == Sum; };
      if (allConst)
        k = Const;
      else if (llvm::isa<AddOp, SubOp>(op))
        k = llvm::all_of(in, linear) ? Sum
            : in[0] == Mean && in[1] == Mean ? Mean
                                              : Other;
      else if (llvm::isa<MulOp>(op))
        k = in[0] == Const ? in[1] : in[1] == Const ? in[0] : Other;
      else if (llvm::isa<DivOp>(op))
        k = in[1] == Const ? in[0] : Other;
      else if (llvm::isa<CastOp, ReshapeOp>(op))
        k = in[0];
    }
    memo[v] = k;
    return k;
  };
  Operation *ret = graph.getBody().front().getTerminator();
  for (unsigned i = 0; i < graph.getNumResults(); ++i)
    if (graph.getResultAttr(i, kLossAttr) && i < ret->getNumOperands()) {
      if (kind(ret->getOperand(i)) != Sum)
        return LossAggregation::Mean;
      return normalizes ? LossAggregation::Normalized : LossAggregation::Sum;
    }
  return LossAggregation::Mean;
}
