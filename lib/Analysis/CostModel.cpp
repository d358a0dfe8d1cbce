//===- CostModel.cpp - Static cost estimates of varuna ops ----------------===//

#include "varuna/Analysis/CostModel.h"
#include "varuna/Dialect/Varuna/IR/VarunaOps.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace varuna;

namespace {

VTensorType typeOf(Value v) { return v.getType().cast<VTensorType>(); }

/// FLOPs per element of an elementwise function.
int64_t unaryFlops(UnaryKind kind) {
  switch (kind) {
  case UnaryKind::stop_gradient:
    return 0;
  case UnaryKind::neg:
  case UnaryKind::abs:
  case UnaryKind::relu:
  case UnaryKind::logical_not:
  case UnaryKind::floor:
  case UnaryKind::ceil:
  case UnaryKind::sign:
  case UnaryKind::round:
  case UnaryKind::trunc:
    return 1;
  case UnaryKind::gelu:
  case UnaryKind::gelu_tanh:
  case UnaryKind::silu:
  case UnaryKind::softplus:
    return 14;
  default:
    return 8; // exp, log, sqrt, rsqrt, reciprocal, tanh, erf, sigmoid, sin,
              // cos, tan, atan, asin, acos, sinh, cosh, expm1, log1p
  }
}

std::optional<SymInt> times(SymInt a, SymInt b) { return a.mul(b); }

} // namespace

FailureOr<OpCost> varuna::getOpCost(Operation *op) {
  OpCost c;
  if (op->getDialect() == nullptr ||
      !isa<VarunaDialect>(op->getDialect()))
    return c;
  for (Value r : op->getResults())
    if (auto t = r.getType().dyn_cast<VTensorType>())
      c.bytes = c.bytes + t.getSizeInBytes();
  SymInt out = op->getNumResults() == 1 && op->getResult(0).getType().isa<VTensorType>()
                   ? typeOf(op->getResult(0)).getNumElements()
                   : SymInt(0);
  // Per-element ops: forward `k` FLOPs per result element, backward `kb`.
  auto perElement = [&](int64_t k, int64_t kb) {
    c.flops = out.scaled(k);
    c.backward = out.scaled(kb);
  };
  bool ok = true;
  llvm::TypeSwitch<Operation *>(op)
      .Case<GetParamOp, ParamOp>([&](auto) { c.bytes = SymInt(0); })
      .Case<ConstantOp, FullOp, ArangeOp, ReshapeOp, ExpandOp, TransposeOp,
            SliceOp, ConcatOp, GatherElementsOp, PadOp>(
          [&](auto) { perElement(0, 0); })
      .Case<GatherOp>([&](auto) {
        // Backward of a lookup is a scatter-add of the result.
        perElement(0, 1);
      })
      .Case<AddOp, SubOp, MulOp, DivOp, MaximumOp, MinimumOp, AndOp, OrOp,
            CompareOp, WhereOp, CastOp, TriluOp, CumsumOp, RandomOp>(
          [&](auto) { perElement(1, 1); })
      .Case<PowOp>([&](auto) { perElement(8, 10); })
      .Case<DropoutOp>([&](auto) { perElement(2, 1); })
      .Case<UnaryOp>([&](UnaryOp u) {
        int64_t k = unaryFlops(u.getKind());
        // stop_gradient has no backward.
        perElement(k, u.getKind() == UnaryKind::stop_gradient ? 0 : k + 1);
      })
      .Case<SoftmaxOp>([&](auto) { perElement(5, 4); })
      .Case<LayerNormOp, BatchNormOp>([&](auto) { perElement(8, 12); })
      .Case<ReduceOp>([&](ReduceOp r) {
        SymInt in = typeOf(r.getInput()).getNumElements();
        c.flops = in;
        c.backward = in;
      })
      .Case<LinalgOp>([&](LinalgOp l) {
        // About n^3 per matrix (and per right-hand side for solve), the
        // backward about twice that.
        VTensorType a = typeOf(l->getOperand(0));
        int64_t n = a.getDim(a.getRank() - 1).constant;
        SymInt matrices = a.getNumElements().floorDiv(n * n).value_or(SymInt(1));
        c.flops = matrices.scaled(n * n * n);
        c.backward = matrices.scaled(2 * n * n * n);
      })
      .Case<MatmulOp>([&](MatmulOp m) {
        // 2 * (result elements) * (contraction size); backward computes the
        // gradient of both operands: twice the forward.
        VTensorType lhs = typeOf(m.getLhs());
        SymInt k = lhs.getDim(lhs.getRank() - 1);
        auto f = times(out, k);
        if (!f) {
          ok = false;
          return;
        }
        c.flops = f->scaled(2);
        c.backward = f->scaled(4);
      })
      .Case<AttentionOp>([&](AttentionOp at) {
        // scores = [..., Tq, Tk]: q @ k_t (2*d per score), softmax (5),
        // p @ v (2*dv per score); the backward recomputes the scores and
        // takes the gradient of all three operands (about twice).
        VTensorType q = typeOf(at.getQuery()), kt = typeOf(at.getKeyT()),
                    v = typeOf(at.getValue());
        auto rows = q.getNumElements().divExact(q.getDim(q.getRank() - 1));
        auto scores = rows ? times(*rows, kt.getDim(kt.getRank() - 1))
                           : std::nullopt;
        SymInt d = q.getDim(q.getRank() - 1), dv = v.getDim(v.getRank() - 1);
        if (!scores || !d.isStatic() || !dv.isStatic()) {
          ok = false;
          return;
        }
        int64_t perScore = 2 * d.constant + 5 + 2 * dv.constant;
        c.flops = scores->scaled(perScore);
        c.backward = scores->scaled(2 * perScore + 4);
      })
      .Case<ConvOp>([&](ConvOp conv) {
        VTensorType w = typeOf(conv.getWeight());
        int64_t perOut = w.getShape()[1]; // C / groups
        for (int64_t i = 2; i < w.getRank(); ++i)
          perOut *= w.getShape()[i];
        c.flops = out.scaled(2 * perOut);
        c.backward = out.scaled(4 * perOut);
      })
      .Case<ConvTransposeOp>([&](ConvTransposeOp conv) {
        // Each input element meets every (F / groups) x kernel weight.
        VTensorType in = typeOf(conv.getInput()), w = typeOf(conv.getWeight());
        int64_t perIn = w.getShape()[1];
        for (int64_t i = 2; i < w.getRank(); ++i)
          perIn *= w.getShape()[i];
        int64_t perRow = 1;
        for (int64_t i = 1; i < in.getRank(); ++i)
          perRow *= in.getShape()[i];
        SymInt rows = in.getDim(0);
        c.flops = rows.scaled(2 * perIn * perRow);
        c.backward = rows.scaled(4 * perIn * perRow);
      })
      .Case<PoolOp>([&](PoolOp p) {
        int64_t window = 1;
        for (int64_t k : p.getKernel())
          window *= k;
        perElement(window, window);
      })
      .Case<CrossEntropyOp>([&](CrossEntropyOp ce) {
        SymInt logits = typeOf(ce.getLogits()).getNumElements();
        c.flops = logits.scaled(6);
        c.backward = logits.scaled(3);
      })
      .Default([&](Operation *) { perElement(1, 1); });
  if (!ok)
    return op->emitError("cost is not affine in the batch size"), failure();
  return c;
}
