//===- AnnotateCosts.cpp - Attach cost estimates to every op --------------===//

#include "varuna/Analysis/CostModel.h"
#include "varuna/Dialect/Varuna/IR/VarunaOps.h"
#include "varuna/Transforms/GraphUtils.h"
#include "varuna/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace varuna {
#define GEN_PASS_DEF_ANNOTATECOSTS
#include "varuna/Transforms/Passes.h.inc"
} // namespace varuna

using namespace mlir;
using namespace varuna;

namespace {
struct AnnotateCosts : public varuna::impl::AnnotateCostsBase<AnnotateCosts> {
  void runOnOperation() override {
    FailureOr<func::FuncOp> found = getTrainingGraph(getOperation());
    if (failed(found))
      return signalPassFailure();
    MLIRContext *ctx = &getContext();
    for (func::FuncOp graph : {*found}) {
      OpCost total;
      WalkResult r = graph.walk([&](Operation *op) {
        if (op == graph.getOperation() || !isa<VarunaDialect>(op->getDialect()))
          return WalkResult::advance();
        FailureOr<OpCost> c = getOpCost(op);
        if (failed(c))
          return WalkResult::interrupt();
        op->setAttr("varuna.cost",
                    CostAttr::get(ctx, c->flops, c->backward, c->bytes));
        total += *c;
        return WalkResult::advance();
      });
      if (r.wasInterrupted())
        return signalPassFailure();
      graph->setAttr("varuna.total_cost", CostAttr::get(ctx, total.flops,
                                                        total.backward,
                                                        total.bytes));
    }
  }
};
} // namespace
