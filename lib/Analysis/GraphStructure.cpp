//===- GraphStructure.cpp - Where a training graph can be cut -------------===//

#include "varuna/Analysis/GraphStructure.h"
#include "varuna/Analysis/CostModel.h"
#include "varuna/Dialect/Varuna/IR/VarunaOps.h"
#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace varuna;

namespace {

/// A parameter this small used far apart is tied, not a block on the
/// positions between its uses.
constexpr int64_t kSmallTieBytes = 64 * 1024;
/// Trainable parameters a static value derives from.
using ParamSet = llvm::SmallSetVector<StringRef, 2>;
} // namespace

int64_t GraphStructure::indexOf(Operation *op) const {
  auto it = index.find(op);
  return it == index.end() ? static_cast<int64_t>(ops.size()) : it->second;
}

GraphStructure::Kind GraphStructure::kind(Value v) const {
  auto it = kinds.find(v);
  return it == kinds.end() ? Kind::Static : it->second;
}

SmallVector<Value> GraphStructure::crossingActivations(int64_t p) const {
  SmallVector<Value> out;
  for (int64_t i = 0; i < p; ++i)
    for (Value r : ops[i]->getResults())
      if (kind(r) == Kind::Activation && lastUse.lookup(r) >= p)
        out.push_back(r);
  return out;
}

FailureOr<GraphStructure> GraphStructure::analyze(func::FuncOp graph) {
  GraphStructure g;
  if (!graph.getBody().hasOneBlock())
    return graph.emitError("the graph body must be a single block"),
           failure();
  Block &body = graph.getBody().front();
  for (Operation &op : body.without_terminator()) {
    if (op.getNumRegions())
      return op.emitError("ops with regions cannot be partitioned"), failure();
    g.index[&op] = g.ops.size();
    g.ops.push_back(&op);
  }
  int64_t n = g.ops.size();
  ModuleOp module = graph->getParentOfType<ModuleOp>();

  // Kinds, and the trainable parameters behind each static value.
  DenseMap<Value, bool> fromInput, fromParam, fromRandom;
  DenseMap<Value, ParamSet> paramsOf;
  llvm::StringMap<int64_t> paramBytes; // -1: not static
  for (BlockArgument a : body.getArguments()) {
    fromInput[a] = true;
    g.kinds[a] = Kind::InputOnly;
  }
  for (int64_t i = 0; i < n; ++i) {
    Operation *op = g.ops[i];
    bool in = false, par = false, rnd = isa<RandomOp>(op);
    ParamSet ps;
    if (auto get = dyn_cast<GetParamOp>(op)) {
      auto param = module ? module.lookupSymbol<ParamOp>(get.getNameAttr())
                          : ParamOp();
      if (param && !param.getFrozen()) {
        par = true;
        ps.insert(get.getName());
        SymInt size = param.getTensorType().getSizeInBytes();
        paramBytes[get.getName()] = size.isStatic() ? size.constant : -1;
      }
    }
    for (Value v : op->getOperands()) {
      in |= fromInput.lookup(v);
      par |= fromParam.lookup(v);
      rnd |= fromRandom.lookup(v);
      auto it = paramsOf.find(v);
      if (it != paramsOf.end())
        ps.insert(it->second.begin(), it->second.end());
    }
    Kind k = (rnd || (in && par)) ? Kind::Activation
             : in                 ? Kind::InputOnly
                                  : Kind::Static;
    for (Value r : op->getResults()) {
      fromInput[r] = in;
      fromParam[r] = par;
      fromRandom[r] = rnd;
      g.kinds[r] = k;
      if (k == Kind::Static && !ps.empty())
        paramsOf[r] = ps;
    }
    // A non-static op consumes the parameters behind its static operands.
    if (k != Kind::Static)
      for (StringRef p : ps)
        g.uses[p].push_back(i);
  }

  // Weights (per example) and prefix sums.
  g.weights.assign(n, 0.0);
  g.prefix.assign(n + 1, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    FailureOr<OpCost> c = getOpCost(g.ops[i]);
    if (failed(c))
      return failure();
    g.weights[i] = double(c->flops.perBatch) + double(c->backward.perBatch) +
                   double(c->bytes.perBatch);
    g.prefix[i + 1] = g.prefix[i] + g.weights[i];
  }

  // Crossing activation bytes per position (difference arrays).
  SmallVector<SymInt> diff(n + 2);
  SmallVector<int64_t> countDiff(n + 2, 0);
  for (int64_t i = 0; i < n; ++i)
    for (Value r : g.ops[i]->getResults()) {
      if (g.kind(r) != Kind::Activation)
        continue;
      int64_t last = i;
      for (Operation *user : r.getUsers())
        last = std::max(last, g.indexOf(user));
      g.lastUse[r] = last;
      if (last <= i)
        continue;
      SymInt size = r.getType().cast<VTensorType>().getSizeInBytes();
      diff[i + 1] = diff[i + 1] + size;
      diff[last + 1] = diff[last + 1] - size;
      countDiff[i + 1]++;
      countDiff[last + 1]--;
    }
  g.bytesAt.assign(n + 1, SymInt());
  SmallVector<int64_t> crossingCount(n + 1, 0);
  SymInt run;
  int64_t cnt = 0;
  for (int64_t p = 0; p <= n; ++p) {
    run = run + diff[p];
    cnt += countDiff[p];
    g.bytesAt[p] = run;
    crossingCount[p] = cnt;
  }

  // Parameters used on both sides of a position: ties if their uses span
  // more than half the graph or they are small (a gate or a scale applied
  // after a few layers: summing its gradient over two stages costs next to
  // nothing, while blocking every position between its uses kept an ALBERT
  // with a gate after layers 0 and 3 in two sections, 89% in the first),
  // otherwise the position is not clean.
  SmallVector<int64_t> blockedDiff(n + 2, 0);
  for (auto &[name, useIdx] : g.uses) {
    int64_t lo = *std::min_element(useIdx.begin(), useIdx.end()),
            hi = *std::max_element(useIdx.begin(), useIdx.end());
    if (hi <= lo)
      continue;
    auto size = paramBytes.find(name);
    bool small = size != paramBytes.end() && size->second >= 0 &&
                 size->second <= kSmallTieBytes;
    if (2 * (hi - lo) > n || small) {
      g.ties[name] = useIdx;
      continue;
    }
    blockedDiff[lo + 1]++;
    blockedDiff[hi + 1]--;
  }
  g.clean.assign(n + 1, false);
  int64_t blocked = 0;
  double total = g.prefix[n];
  for (int64_t p = 0; p <= n; ++p) {
    blocked += blockedDiff[p];
    // Canonical positions only: right after an activation op, so that two
    // different cuts always have compute between them.
    bool afterActivation =
        p >= 1 && g.ops[p - 1]->getNumResults() > 0 &&
        g.kind(g.ops[p - 1]->getResult(0)) == Kind::Activation;
    g.clean[p] = p >= 1 && p < n && afterActivation && blocked == 0 &&
                 crossingCount[p] > 0 && g.prefix[p] > 0 &&
                 g.prefix[p] < total;
  }

  // Modules split by each position.
  llvm::StringMap<std::pair<int64_t, int64_t>> moduleSpan;
  for (auto &[name, useIdx] : g.uses) {
    SmallVector<StringRef> parts;
    name.split(parts, '.');
    size_t keep = parts.size() > 1 ? parts.size() - 1 : 1;
    for (size_t i = 0; i < parts.size(); ++i)
      if (!parts[i].empty() && llvm::all_of(parts[i], llvm::isDigit)) {
        keep = i + 1;
        break;
      }
    StringRef module(name.data(),
                     parts[keep - 1].end() - name.data());
    auto lo = *std::min_element(useIdx.begin(), useIdx.end());
    auto hi = *std::max_element(useIdx.begin(), useIdx.end());
    auto [it, inserted] = moduleSpan.try_emplace(module, lo, hi);
    if (!inserted)
      it->second = {std::min(it->second.first, lo),
                    std::max(it->second.second, hi)};
  }
  SmallVector<int64_t> splitDiff(n + 2, 0);
  for (auto &entry : moduleSpan) {
    auto [lo, hi] = entry.second;
    if (hi > lo && 2 * (hi - lo) <= n) {
      splitDiff[lo + 1]++;
      splitDiff[hi + 1]--;
    }
  }
  g.splits.assign(n + 1, 0);
  for (int64_t p = 0, run = 0; p <= n; ++p) {
    run += splitDiff[p];
    g.splits[p] = run;
  }

  // The activation sequence and its structural hashes.
  DenseMap<Operation *, int64_t> actIndex;
  for (int64_t i = 0; i < n; ++i) {
    Operation *op = g.ops[i];
    if (op->getNumResults() == 0 || g.kind(op->getResult(0)) != Kind::Activation)
      continue;
    actIndex[op] = g.actOps.size();
    g.actOps.push_back(i);
  }
  for (auto [k, i] : llvm::enumerate(g.actOps)) {
    Operation *op = g.ops[i];
    llvm::hash_code h = llvm::hash_value(op->getName().getStringRef());
    for (NamedAttribute a : op->getAttrs())
      if (a.getName() != "varuna.cost")
        h = llvm::hash_combine(h, a.getName(), a.getValue());
    for (Type t : op->getResultTypes())
      h = llvm::hash_combine(h, t.getAsOpaquePointer());
    for (Value v : op->getOperands()) {
      Kind kd = g.kind(v);
      h = llvm::hash_combine(h, static_cast<int>(kd),
                             v.getType().getAsOpaquePointer());
      if (kd != Kind::Activation)
        continue;
      if (auto r = v.dyn_cast<OpResult>())
        h = llvm::hash_combine(h, int64_t(k) - actIndex.lookup(r.getOwner()),
                               r.getResultNumber());
    }
    g.hashes.push_back(h);
  }
  return g;
}

std::optional<RepeatedBlock> varuna::findRepeatedBlock(const GraphStructure &g,
                                                       int64_t minPeriod) {
  int64_t n = g.numActivationOps();
  std::vector<RepeatedBlock> candidates;
  for (int64_t period = minPeriod; period <= n / 2; ++period) {
    // Longest run of i with hash(i) == hash(i + period).
    int64_t run = 0, bestRun = 0, bestStart = 0;
    for (int64_t i = 0; i + period < n; ++i) {
      if (g.structuralHash(i) == g.structuralHash(i + period)) {
        if (++run > bestRun) {
          bestRun = run;
          bestStart = i - run + 1;
        }
      } else {
        run = 0;
      }
    }
    if (bestRun / period + 1 < 2)
      continue;
    // Every occurrence of [bestStart, bestStart + period), left to right.
    RepeatedBlock b{bestStart, period, 0, {}};
    for (int64_t i = 0; i + period <= n;) {
      int64_t j = 0;
      while (j < period &&
             g.structuralHash(i + j) == g.structuralHash(bestStart + j))
        ++j;
      if (j == period) {
        b.starts.push_back(i);
        i += period;
      } else {
        ++i;
      }
    }
    b.count = static_cast<int64_t>(b.starts.size());
    candidates.push_back(std::move(b));
  }
  // The smallest period covering nearly as much as any: a block of several
  // layers with the op between them (a gate after every third) covers a
  // little more than the layer itself, whose occurrences are the cuts
  // wanted.
  int64_t most = 0;
  for (const RepeatedBlock &b : candidates)
    most = std::max(most, b.count * b.period);
  for (RepeatedBlock &b : candidates) // by ascending period
    if (10 * b.count * b.period >= 9 * most)
      return std::move(b);
  return std::nullopt;
}
