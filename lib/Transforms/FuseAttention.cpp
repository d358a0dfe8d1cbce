//===- FuseAttention.cpp - One op for attention written out ---------------===//

#include "varuna/Dialect/Varuna/IR/VarunaOps.h"
#include "varuna/Transforms/GraphUtils.h"
#include "varuna/Transforms/Passes.h"
#include "mlir/IR/Builders.h"
#include <cmath>

namespace varuna {
#define GEN_PASS_DEF_FUSEATTENTION
#include "varuna/Transforms/Passes.h.inc"
} // namespace varuna

using namespace mlir;
using namespace varuna;

namespace {

VTensorType typeOf(Value v) { return v.getType().dyn_cast<VTensorType>(); }

bool isNegInf(Value v) {
  auto c = splatFloatConstant(v);
  return c && std::isinf(*c) && *c < 0;
}

/// A scalar splat constant (rank 0 or all dims 1).
std::optional<double> scalarConstant(Value v) {
  VTensorType t = typeOf(v);
  if (!t || !llvm::all_of(t.getDims(), [](SymInt d) { return d == SymInt(1); }))
    return std::nullopt;
  return splatFloatConstant(v);
}

struct Match {
  MatmulOp scores, out;
  Value keep; // may be null: no mask
  bool negateCond = false;
  double scale = 1.0;
};

/// Matches the chain ending in `out` (the probabilities @ values matmul).
std::optional<Match> matchAttention(MatmulOp out) {
  Match m;
  m.out = out;
  Value p = out.getLhs();
  auto softmax = p.getDefiningOp<SoftmaxOp>();
  if (!softmax || !p.hasOneUse() || softmax.getLog())
    return std::nullopt;
  Value x = softmax.getInput();
  VTensorType xt = typeOf(x);
  if (!xt || softmax.getAxis() != static_cast<uint64_t>(xt.getRank() - 1) ||
      !x.hasOneUse())
    return std::nullopt;
  if (auto where = x.getDefiningOp<WhereOp>()) {
    Value cond = where.getCond();
    if (isNegInf(where.getLhs())) {
      x = where.getRhs();
      m.negateCond = true;
    } else if (isNegInf(where.getRhs())) {
      x = where.getLhs();
    } else {
      return std::nullopt;
    }
    if (typeOf(x) != xt || !x.hasOneUse())
      return std::nullopt;
    m.keep = cond;
    if (m.negateCond)
      if (auto n = cond.getDefiningOp<UnaryOp>())
        if (n.getKind() == UnaryKind::logical_not) {
          m.keep = n.getInput();
          m.negateCond = false;
        }
  }
  if (auto mul = x.getDefiningOp<MulOp>()) {
    auto c = scalarConstant(mul.getRhs());
    Value s = mul.getLhs();
    if (!c) {
      c = scalarConstant(mul.getLhs());
      s = mul.getRhs();
    }
    if (!c || typeOf(s) != xt || !s.hasOneUse())
      return std::nullopt;
    m.scale = *c;
    x = s;
  } else if (auto div = x.getDefiningOp<DivOp>()) {
    auto c = scalarConstant(div.getRhs());
    if (!c || *c == 0 || typeOf(div.getLhs()) != xt ||
        !div.getLhs().hasOneUse())
      return std::nullopt;
    m.scale = 1.0 / *c;
    x = div.getLhs();
  }
  m.scores = x.getDefiningOp<MatmulOp>();
  if (!m.scores)
    return std::nullopt;
  // Same rank >= 3 and the same leading dims for q, k_t and v.
  VTensorType q = typeOf(m.scores.getLhs()), kt = typeOf(m.scores.getRhs()),
              v = typeOf(out.getRhs());
  if (!q || !kt || !v || q.getRank() < 3 || kt.getRank() != q.getRank() ||
      v.getRank() != q.getRank() ||
      !q.getElementType().isa<FloatType>())
    return std::nullopt;
  for (int64_t i = 0; i + 2 < q.getRank(); ++i)
    if (q.getDim(i) != kt.getDim(i) || q.getDim(i) != v.getDim(i))
      return std::nullopt;
  if (m.keep) {
    VTensorType mt = typeOf(m.keep);
    if (!mt || !mt.getElementType().isInteger(1) || mt.getRank() > xt.getRank())
      return std::nullopt;
  }
  return m;
}

struct FuseAttention : public varuna::impl::FuseAttentionBase<FuseAttention> {
  void runOnOperation() override {
    SmallVector<Match> found;
    getOperation().walk([&](MatmulOp out) {
      if (auto m = matchAttention(out))
        found.push_back(*m);
    });
    for (Match &m : found) {
      OpBuilder b(m.out);
      Value keep = m.keep;
      if (keep && m.negateCond)
        keep = b.create<UnaryOp>(m.out.getLoc(), keep.getType(),
                                 UnaryKind::logical_not, keep);
      auto att = b.create<AttentionOp>(
          m.out.getLoc(), m.out.getType(), m.scores.getLhs(),
          m.scores.getRhs(), m.out.getRhs(), keep, b.getF64FloatAttr(m.scale));
      m.out.getResult().replaceAllUsesWith(att.getResult());
    }
    eraseDeadPureOps(getOperation());
  }
};

} // namespace
