//===- CostModel.h - Static cost estimates of varuna ops --------*- C++ -*-===//
//
// Forward FLOPs, backward FLOPs and result bytes of one op, each an affine
// function of the micro-batch size B (varuna::SymInt). Exact for matmul and
// convolution; documented per-element estimates elsewhere (docs/cost-model.md).
// Measured per-section times from calibration replace these estimates when
// available; the static model only has to rank and balance.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_ANALYSIS_COSTMODEL_H
#define VARUNA_ANALYSIS_COSTMODEL_H

#include "varuna/Support/SymInt.h"
#include "mlir/IR/Operation.h"

namespace varuna {

struct OpCost {
  SymInt flops;    // forward
  SymInt backward; // gradients w.r.t. every input
  SymInt bytes;    // bytes of the results (activations written)

  OpCost &operator+=(const OpCost &o) {
    flops = flops + o.flops;
    backward = backward + o.backward;
    bytes = bytes + o.bytes;
    return *this;
  }
};

/// The cost of `op`. Ops outside the varuna dialect (func.return) cost 0.
/// Fails only for a cost that is not affine in B (never for a verified op).
mlir::FailureOr<OpCost> getOpCost(mlir::Operation *op);

} // namespace varuna

#endif // VARUNA_ANALYSIS_COSTMODEL_H
