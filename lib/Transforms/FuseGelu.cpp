//===- FuseGelu.cpp - One op for GELU written out elementwise -------------===//

#include "varuna/Dialect/Varuna/IR/VarunaOps.h"
#include "varuna/Transforms/GraphUtils.h"
#include "varuna/Transforms/Passes.h"
#include "mlir/IR/Builders.h"
#include <cmath>

namespace varuna {
#define GEN_PASS_DEF_FUSEGELU
#include "varuna/Transforms/Passes.h.inc"
} // namespace varuna

using namespace mlir;
using namespace varuna;

namespace {

bool isConstant(Value v, double want) {
  auto got = splatFloatConstant(v);
  return got && std::abs(*got - want) <= 1e-5 * std::abs(want);
}

bool singleUse(Value v) { return v.hasOneUse(); }

/// If `op` is a binary op of type OpTy with one operand the constant `c`,
/// returns the other operand.
template <typename OpTy>
Value otherThanConstant(Operation *op, double c) {
  auto bin = dyn_cast_or_null<OpTy>(op);
  if (!bin)
    return {};
  if (isConstant(bin.getRhs(), c))
    return bin.getLhs();
  if (isConstant(bin.getLhs(), c))
    return bin.getRhs();
  return {};
}

/// If `op` is OpTy(a, b) with one side equal to `x`, returns the other.
template <typename OpTy>
Value otherThan(Operation *op, Value x) {
  auto bin = dyn_cast_or_null<OpTy>(op);
  if (!bin)
    return {};
  if (bin.getLhs() == x)
    return bin.getRhs();
  if (bin.getRhs() == x)
    return bin.getLhs();
  return {};
}

/// The single user of `v` (nullptr unless exactly one).
Operation *soleUser(Value v) {
  return singleUse(v) ? *v.getUsers().begin() : nullptr;
}

/// From f(x) = erf(...) or tanh(...), checks the common tail
/// 0.5 * (x * (1 + f)) and returns the final op, or nullptr.
Operation *matchTail(Value f, Value x) {
  Operation *add = soleUser(f);
  Value a = otherThanConstant<AddOp>(add, 1.0);
  if (a != f)
    return nullptr;
  Operation *mul = soleUser(add->getResult(0));
  if (otherThan<MulOp>(mul, x) != add->getResult(0))
    return nullptr;
  Operation *half = soleUser(mul->getResult(0));
  if (otherThanConstant<MulOp>(half, 0.5) != mul->getResult(0))
    return nullptr;
  return half;
}

/// x for x^3 written as x*(x*x), (x*x)*x or pow(x, 3).
Value matchCube(Value v) {
  if (auto pow = v.getDefiningOp<PowOp>())
    return isConstant(pow.getRhs(), 3.0) ? pow.getLhs() : Value();
  auto outer = v.getDefiningOp<MulOp>();
  if (!outer)
    return {};
  for (auto [sq, x] : {std::pair{outer.getLhs(), outer.getRhs()},
                       std::pair{outer.getRhs(), outer.getLhs()}}) {
    auto inner = sq.getDefiningOp<MulOp>();
    if (inner && inner.getLhs() == x && inner.getRhs() == x &&
        singleUse(sq))
      return x;
  }
  return {};
}

struct FuseGelu : public varuna::impl::FuseGeluBase<FuseGelu> {
  void runOnOperation() override {
    SmallVector<std::pair<Operation *, std::pair<Value, UnaryKind>>> found;
    getOperation().walk([&](UnaryOp f) {
      if (f.getKind() == UnaryKind::erf) {
        // erf(x / sqrt(2)) or erf(x * (1 / sqrt(2)))
        Operation *arg = f.getInput().getDefiningOp();
        if (!arg || !singleUse(f.getInput()))
          return;
        Value x = otherThanConstant<MulOp>(arg, 1.0 / std::sqrt(2.0));
        if (auto div = dyn_cast<DivOp>(arg))
          if (isConstant(div.getRhs(), std::sqrt(2.0)))
            x = div.getLhs();
        if (!x)
          return;
        if (Operation *end = matchTail(f.getResult(), x))
          found.push_back({end, {x, UnaryKind::gelu}});
      } else if (f.getKind() == UnaryKind::tanh) {
        // tanh(sqrt(2/pi) * (x + 0.044715 * x^3))
        Operation *scale = f.getInput().getDefiningOp();
        if (!scale || !singleUse(f.getInput()))
          return;
        Value inner = otherThanConstant<MulOp>(scale, std::sqrt(2.0 / M_PI));
        auto add = inner ? inner.getDefiningOp<AddOp>() : AddOp();
        if (!add || !singleUse(inner))
          return;
        for (auto [x, w] : {std::pair{add.getLhs(), add.getRhs()},
                            std::pair{add.getRhs(), add.getLhs()}}) {
          Operation *wop = w.getDefiningOp();
          Value cube = otherThanConstant<MulOp>(wop, 0.044715);
          if (!cube || !singleUse(w) || matchCube(cube) != x)
            continue;
          if (Operation *end = matchTail(f.getResult(), x))
            found.push_back({end, {x, UnaryKind::gelu_tanh}});
          break;
        }
      }
    });
    for (auto &[end, xk] : found) {
      auto [x, kind] = xk;
      OpBuilder b(end);
      Value gelu = b.create<UnaryOp>(end->getLoc(), x.getType(), kind, x);
      if (gelu.getType() != end->getResult(0).getType())
        continue; // a broadcast made the chain wider than x: leave it
      end->getResult(0).replaceAllUsesWith(gelu);
    }
    eraseDeadPureOps(getOperation());
  }
};

} // namespace
