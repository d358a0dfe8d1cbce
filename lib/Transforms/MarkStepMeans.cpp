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
bool onlyFeedsLoss(ReduceOp mean, const llvm::DenseSet<unsigned> &lossResults) {
  SmallVector<Value> work{mean.getResult()};
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

struct MarkStepMeans
    : public varuna::impl::MarkStepMeansBase<MarkStepMeans> {
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
    graph.walk([&](ReduceOp r) {
      if (r.getKind() == ReduceKind::mean && isBatched(r.getInput()) &&
          !isBatched(r.getResult()) && onlyFeedsLoss(r, lossResults))
        r.setStepMean(true);
    });
  }
};

} // namespace
