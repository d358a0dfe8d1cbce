//===- FindCutPoints.cpp - Place cut-points in a training graph -----------===//

#include "varuna/Analysis/GraphStructure.h"
#include "varuna/Dialect/Varuna/IR/VarunaOps.h"
#include "varuna/Transforms/GraphUtils.h"
#include "varuna/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace varuna {
#define GEN_PASS_DEF_FINDCUTPOINTS
#include "varuna/Transforms/Passes.h.inc"
} // namespace varuna

using namespace mlir;
using namespace varuna;

namespace {

constexpr int64_t kDefaultCuts = 8;

struct FindCutPoints
    : public varuna::impl::FindCutPointsBase<FindCutPoints> {
  using FindCutPointsBase::FindCutPointsBase;

  void runOnOperation() override {
    FailureOr<func::FuncOp> found = getTrainingGraph(getOperation());
    if (failed(found))
      return signalPassFailure();
    func::FuncOp graph = *found;
    if (!graph.getOps<CutPointOp>().empty()) {
      graph.emitError("the graph already has cut-points");
      return signalPassFailure();
    }
    FailureOr<GraphStructure> g = GraphStructure::analyze(graph);
    if (failed(g))
      return signalPassFailure();
    FailureOr<SmallVector<int64_t>> cuts = choose(graph, *g);
    if (failed(cuts))
      return signalPassFailure();
    insertCuts(graph, *g, *cuts);
  }

  bool usable(const GraphStructure &g, int64_t p) const {
    return g.isClean(p) &&
           (maxBytesPerCut <= 0 || g.crossingBytes(p).perBatch <= maxBytesPerCut);
  }

  /// Cut j near the j/(K+1) point of the compute, fewest bytes within half a
  /// section of it (closest to the target on ties).
  FailureOr<SmallVector<int64_t>>
  selectBalanced(func::FuncOp graph, const GraphStructure &g,
                 ArrayRef<int64_t> candidates, int64_t k) {
    if (static_cast<int64_t>(candidates.size()) < k) {
      graph.emitError("asked for ")
          << k << " cut-points but the graph has only " << candidates.size()
          << " positions where it can be cut"
          << (maxBytesPerCut > 0 ? " under max-bytes-per-cut" : "")
          << "; the maximum is " << candidates.size();
      return failure();
    }
    double total = g.totalWeight(), half = total / (2.0 * (k + 1));
    SmallVector<int64_t> chosen;
    size_t next = 0; // candidates[next..] are after the last chosen cut
    for (int64_t j = 1; j <= k; ++j) {
      double target = total * j / (k + 1);
      // Keep enough candidates for the remaining cuts.
      size_t last = candidates.size() - (k - j) - 1;
      int64_t best = -1;
      auto better = [&](size_t a, size_t b) {
        int64_t pa = candidates[a], pb = candidates[b];
        int64_t ba = g.crossingBytes(pa).perBatch, bb = g.crossingBytes(pb).perBatch;
        if (ba != bb)
          return ba < bb;
        if (g.moduleSplits(pa) != g.moduleSplits(pb))
          return g.moduleSplits(pa) < g.moduleSplits(pb);
        return std::abs(g.weightBefore(pa) - target) <
               std::abs(g.weightBefore(pb) - target);
      };
      for (size_t c = next; c <= last; ++c)
        if (std::abs(g.weightBefore(candidates[c]) - target) <= half &&
            (best < 0 || better(c, best)))
          best = c;
      if (best < 0) { // nothing in the window: the closest candidate
        for (size_t c = next; c <= last; ++c)
          if (best < 0 || std::abs(g.weightBefore(candidates[c]) - target) <
                              std::abs(g.weightBefore(candidates[best]) -
                                       target))
            best = c;
      }
      chosen.push_back(candidates[best]);
      next = best + 1;
    }
    return chosen;
  }

  FailureOr<SmallVector<int64_t>> choose(func::FuncOp graph,
                                         const GraphStructure &g) {
    int64_t n = g.numOps();
    SmallVector<int64_t> clean;
    int64_t smallest = -1;
    for (int64_t p = 1; p < n; ++p) {
      if (!g.isClean(p))
        continue;
      int64_t b = g.crossingBytes(p).perBatch;
      smallest = smallest < 0 ? b : std::min(smallest, b);
      if (usable(g, p))
        clean.push_back(p);
    }
    if (clean.empty()) {
      if (smallest >= 0) {
        graph.emitError("no cut-point carries at most ")
            << static_cast<int64_t>(maxBytesPerCut)
            << " bytes per example; the smallest carries "
            << smallest;
        return failure();
      }
      if (numCutPoints > 0) {
        graph.emitError("the graph has no position where it can be cut");
        return failure();
      }
      graph.emitWarning("the graph has no position where it can be cut; it "
                        "stays one section");
      return SmallVector<int64_t>();
    }

    Builder b(&getContext());
    std::optional<RepeatedBlock> block = findRepeatedBlock(g);
    SmallVector<int64_t> boundaries;
    if (block && 2 * block->period * block->count >= g.numActivationOps()) {
      graph->setAttr("varuna.repeated_block",
                     b.getDenseI64ArrayAttr(
                         {block->start, block->period, block->count}));
      boundaries = blockBoundaries(g, *block);
    }
    if (numCutPoints > 0) {
      if (!boundaries.empty() &&
          numCutPoints <= static_cast<int64_t>(boundaries.size()))
        return selectBalanced(graph, g, boundaries, numCutPoints);
      return selectBalanced(graph, g, clean, numCutPoints);
    }
    if (boundaries.empty())
      return selectBalanced(graph, g, clean,
                            std::min<int64_t>(kDefaultCuts, clean.size()));
    mergeSmallEnds(g, boundaries);
    return boundaries;
  }

  /// The block boundaries at the phase where the fewest bytes cross.
  SmallVector<int64_t> blockBoundaries(const GraphStructure &g,
                                       const RepeatedBlock &blk) {
    int64_t n = g.numOps();
    SmallVector<int64_t> best;
    int64_t bestBytes = 0, bestSplits = 0;
    for (int64_t phase = 0; phase < blk.period; ++phase) {
      SmallVector<int64_t> pos;
      int64_t bytes = 0, splits = 0;
      // Before each occurrence (shifted by the phase), and after the last.
      SmallVector<int64_t> at(blk.starts.begin(), blk.starts.end());
      if (!at.empty())
        at.push_back(at.back() + blk.period);
      for (int64_t s : at) {
        int64_t a = s + phase;
        if (a < 1 || a >= g.numActivationOps())
          continue;
        int64_t p = g.positionBeforeActivation(a);
        if (p < 1 || p >= n || !usable(g, p))
          continue;
        pos.push_back(p);
        bytes += g.crossingBytes(p).perBatch;
        splits += g.moduleSplits(p);
      }
      // More usable boundaries first, then fewer bytes per boundary, then
      // fewer framework modules split (the model's own layer boundaries).
      auto perCut = [](int64_t v, size_t count) {
        return count ? double(v) / count : 0.0;
      };
      double b = perCut(bytes, pos.size()), bb = perCut(bestBytes, best.size());
      if (pos.size() > best.size() ||
          (pos.size() == best.size() && !pos.empty() &&
           (b < bb || (b == bb && perCut(splits, pos.size()) <
                                      perCut(bestSplits, best.size()))))) {
        best = pos;
        bestBytes = bytes;
        bestSplits = splits;
      }
    }
    return best;
  }

  /// Drops the first (last) cut when the section before (after) it has under
  /// a quarter of the median section's compute.
  void mergeSmallEnds(const GraphStructure &g, SmallVector<int64_t> &cuts) {
    if (cuts.size() < 2)
      return;
    auto sectionWeights = [&]() {
      SmallVector<double> w;
      int64_t prev = 0;
      for (int64_t c : cuts) {
        w.push_back(g.weightBefore(c) - g.weightBefore(prev));
        prev = c;
      }
      w.push_back(g.totalWeight() - g.weightBefore(prev));
      return w;
    };
    SmallVector<double> w = sectionWeights();
    SmallVector<double> sorted(w);
    llvm::sort(sorted);
    double median = sorted[sorted.size() / 2];
    if (w.back() < 0.25 * median)
      cuts.pop_back();
    if (cuts.size() >= 2 && w.front() < 0.25 * median)
      cuts.erase(cuts.begin());
  }

  void insertCuts(func::FuncOp graph, const GraphStructure &g,
                  ArrayRef<int64_t> cuts) {
    OpBuilder b(&getContext());
    DenseMap<Value, Value> current;
    for (auto [k, p] : llvm::enumerate(cuts)) {
      SmallVector<Value> crossing = g.crossingActivations(p);
      SmallVector<Value> operands;
      for (Value v : crossing)
        operands.push_back(current.lookup(v) ? current.lookup(v) : v);
      Operation *at = g.op(p);
      b.setInsertionPoint(at);
      auto cut = b.create<CutPointOp>(
          at->getLoc(), b.getI64IntegerAttr(k + 1), operands);
      cut->setAttr("bytes_per_example",
                   b.getI64IntegerAttr(g.crossingBytes(p).perBatch));
      for (auto [v, cur, r] :
           llvm::zip(crossing, operands, cut.getResults())) {
        cur.replaceUsesWithIf(r, [&](OpOperand &use) {
          Operation *user = use.getOwner();
          return user != cut && !isa<CutPointOp>(user) &&
                 g.indexOf(user) >= p;
        });
        current[v] = r;
      }
    }
    graph->setAttr("varuna.num_sections",
                   b.getI64IntegerAttr(static_cast<int64_t>(cuts.size()) + 1));
  }
};

} // namespace
