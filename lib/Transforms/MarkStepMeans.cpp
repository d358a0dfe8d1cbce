//===- MarkStepMeans.cpp - The loss's means over the examples -------------===//
//
// See the pass description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "varuna/Dialect/Varuna/IR/VarunaDialect.h"
#include "varuna/Dialect/Varuna/IR/VarunaOps.h"
#include "varuna/Transforms/GraphUtils.h"
#include "varuna/Transforms/Passes.h"
#include "llvm/ADT/DenseSet.h"

namespace varuna {
#define GEN_PASS_DEF_MARKSTEPMEANS
#include "varuna/Transforms/Passes.h.inc"
} // namespace varuna

using namespace mlir;
using namespace varuna;

namespace {

/// Whether everything computed from `mean` has no batch dimension and ends
/// only in the graph's loss results (`lossResults`), which it reaches.
bool onlyFeedsLoss(Value mean, const llvm::DenseSet<unsigned> &lossResults) {
  SmallVector<Value> work{mean};
  llvm::DenseSet<Operation *> seen;
  bool reachesLoss = false;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (llvm::isa<func::ReturnOp>(user)) {
        if (!lossResults.contains(use.getOperandNumber()))
          return false;
        reachesLoss = true;
        continue;
      }
      if (user->getNumRegions() != 0)
        return false;
      if (!seen.insert(user).second)
        continue;
      for (Value r : user->getResults()) {
        if (!llvm::isa<VTensorType>(r.getType()) || isBatched(r))
          return false;
        work.push_back(r);
      }
    }
  }
  return reachesLoss;
}

/// Whether `v` is computed without any value that has the batch dimension
/// (from parameters and constants alone).
bool batchIndependent(Value v, llvm::DenseMap<Value, bool> &memo) {
  auto it = memo.find(v);
  if (it != memo.end())
    return it->second;
  Operation *op = v.getDefiningOp();
  bool independent = !isBatched(v) && op && op->getNumRegions() == 0 &&
                     llvm::all_of(op->getOperands(), [&](Value o) {
                       return batchIndependent(o, memo);
                     });
  memo[v] = independent;
  return independent;
}

/// The terms of `loss` that do not depend on the examples: operands of the
/// add / sub (through neg, cast, reshape, and mul / div by a factor that
/// does not depend on them either) whose other side does.
void batchIndependentTerms(Value loss, llvm::DenseMap<Value, bool> &memo,
                           SmallVectorImpl<OpOperand *> &terms) {
  Operation *op = loss.getDefiningOp();
  if (!op || batchIndependent(loss, memo))
    return;
  if (llvm::isa<AddOp, SubOp>(op)) {
    for (OpOperand &o : op->getOpOperands()) {
      if (batchIndependent(o.get(), memo))
        terms.push_back(&o);
      else
        batchIndependentTerms(o.get(), memo, terms);
    }
  } else if (llvm::isa<UnaryOp>(op)) {
    if (llvm::cast<UnaryOp>(op).getKind() == UnaryKind::neg)
      batchIndependentTerms(op->getOperand(0), memo, terms);
  } else if (llvm::isa<CastOp, ReshapeOp>(op)) {
    batchIndependentTerms(op->getOperand(0), memo, terms);
  } else if (llvm::isa<MulOp, DivOp>(op)) {
    Value a = op->getOperand(0), b = op->getOperand(1);
    if (batchIndependent(b, memo))
      batchIndependentTerms(a, memo, terms);
    else if (llvm::isa<MulOp>(op) && batchIndependent(a, memo))
      batchIndependentTerms(b, memo, terms);
  }
}

struct MarkStepMeans : public varuna::impl::MarkStepMeansBase<MarkStepMeans> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp graph = findTrainingGraph(module);
    if (!graph || graph.getBody().empty())
      return;
    FailureOr<SmallVector<func::FuncOp>> sections = getSections(module);
    if (failed(sections))
      return signalPassFailure();
    if (!sections->empty()) {
      sections->front().emitError(
          "varuna-mark-step-means runs before varuna-outline-sections: the "
          "sections would not carry the marks");
      return signalPassFailure();
    }
    llvm::DenseSet<unsigned> lossResults;
    for (unsigned i = 0; i < graph.getNumResults(); ++i)
      if (graph.getResultAttr(i, kLossAttr))
        lossResults.insert(i);
    if (lossResults.empty())
      return;
    // Terms that do not depend on the examples (a weight penalty, a KL of
    // weight posteriors, a number) become a step mean of themselves over
    // the examples, so that micro-batches whose losses add up count them
    // once, not once each.
    llvm::DenseMap<Value, bool> memo;
    SmallVector<OpOperand *> terms;
    auto ret =
        llvm::cast<func::ReturnOp>(graph.getBody().front().getTerminator());
    for (unsigned i : lossResults)
      batchIndependentTerms(ret.getOperand(i), memo, terms);
    for (OpOperand *term : terms) {
      auto type = llvm::dyn_cast<VTensorType>(term->get().getType());
      if (!type || type.getRank() != 0)
        continue;
      OpBuilder b(term->getOwner());
      Location loc = term->getOwner()->getLoc();
      auto perExample = b.create<ExpandOp>(
          loc,
          VTensorType::get(b.getContext(), {1}, /*batchDim=*/0,
                           type.getElementType()),
          term->get());
      auto mean = b.create<ReduceOp>(loc, type, ReduceKind::mean, perExample,
                                     ArrayRef<int64_t>{0}, /*keepdim=*/false,
                                     /*step_mean=*/true);
      term->set(mean);
    }
    graph.walk([&](ReduceOp r) {
      if (r.getKind() == ReduceKind::mean && isBatched(r.getInput()) &&
          !isBatched(r.getResult()) && onlyFeedsLoss(r, lossResults))
        r.setStepMean(true);
    });
    // The importer's means over x[mask] selections (kStepDivisorAttr) keep
    // the mark only where they feed nothing but the loss, likewise.
    graph.walk([&](DivOp d) {
      if (d->hasAttr(kStepDivisorAttr) && !onlyFeedsLoss(d, lossResults))
        d->removeAttr(kStepDivisorAttr);
    });
  }
};

} // namespace
