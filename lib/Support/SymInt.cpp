//===- SymInt.cpp - Integers affine in the micro-batch size ---------------===//

#include "varuna/Support/SymInt.h"

using namespace varuna;

static int64_t floorDivInt(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0)))
    --q;
  return q;
}

std::optional<SymInt> SymInt::mul(SymInt o) const {
  if (perBatch != 0 && o.perBatch != 0)
    return std::nullopt;
  return SymInt(perBatch * o.constant + o.perBatch * constant,
                constant * o.constant);
}

std::optional<SymInt> varuna::product(llvm::ArrayRef<SymInt> dims) {
  SymInt p(1);
  for (SymInt d : dims) {
    std::optional<SymInt> m = p.mul(d);
    if (!m)
      return std::nullopt;
    p = *m;
  }
  return p;
}

std::optional<SymInt> SymInt::divExact(SymInt o) const {
  if (o.isStatic()) {
    if (o.constant == 0 || perBatch % o.constant || constant % o.constant)
      return std::nullopt;
    return SymInt(perBatch / o.constant, constant / o.constant);
  }
  // (a B + c) / (p B + q) is a constant k only if a = k p and c = k q.
  if (perBatch % o.perBatch)
    return std::nullopt;
  int64_t k = perBatch / o.perBatch;
  if (constant != k * o.constant)
    return std::nullopt;
  return SymInt(k);
}

std::optional<SymInt> SymInt::floorDiv(SymInt o) const {
  if (!o.isStatic() || o.constant == 0)
    return divExact(o);
  if (perBatch % o.constant)
    return std::nullopt;
  // floor((a B + c) / d) = (a/d) B + floor(c / d) when d | a.
  return SymInt(perBatch / o.constant, floorDivInt(constant, o.constant));
}

std::optional<SymInt> SymInt::mod(SymInt o) const {
  if (!o.isStatic() || o.constant == 0 || perBatch % o.constant)
    return std::nullopt;
  int64_t r = constant - floorDivInt(constant, o.constant) * o.constant;
  return SymInt(r);
}

std::string SymInt::str() const {
  if (perBatch == 0)
    return std::to_string(constant);
  std::string s = "B";
  if (perBatch != 1)
    s += "*" + std::to_string(perBatch);
  if (constant > 0)
    s += "+" + std::to_string(constant);
  else if (constant < 0)
    s += std::to_string(constant);
  return s;
}
