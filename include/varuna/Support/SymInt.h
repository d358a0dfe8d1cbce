//===- SymInt.h - Integers affine in the micro-batch size -------*- C++ -*-===//
//
// A SymInt is `perBatch * B + constant`, where B is the micro-batch size chosen
// at run time. Tensor dimensions are SymInts with constant == 0 (a multiple of
// B) or perBatch == 0 (static); FLOPs and bytes of every op are SymInts, so a
// cost is known for every micro-batch size from one analysis.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_SUPPORT_SYMINT_H
#define VARUNA_SUPPORT_SYMINT_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/Hashing.h"
#include <cstdint>
#include <optional>
#include <string>

namespace varuna {

struct SymInt {
  int64_t perBatch = 0;
  int64_t constant = 0;

  constexpr SymInt() = default;
  constexpr SymInt(int64_t c) : perBatch(0), constant(c) {} // NOLINT: implicit
  constexpr SymInt(int64_t b, int64_t c) : perBatch(b), constant(c) {}
  static constexpr SymInt batch(int64_t multiple = 1) { return {multiple, 0}; }

  bool isStatic() const { return perBatch == 0; }
  /// True for `k*B` with k >= 1 (a valid batch-dependent dimension).
  bool isBatchMultiple() const { return perBatch > 0 && constant == 0; }
  /// Value at a concrete micro-batch size.
  int64_t at(int64_t b) const { return perBatch * b + constant; }

  SymInt operator+(SymInt o) const {
    return {perBatch + o.perBatch, constant + o.constant};
  }
  SymInt operator-(SymInt o) const {
    return {perBatch - o.perBatch, constant - o.constant};
  }
  SymInt operator-() const { return {-perBatch, -constant}; }
  SymInt scaled(int64_t k) const { return {perBatch * k, constant * k}; }
  bool operator==(SymInt o) const {
    return perBatch == o.perBatch && constant == o.constant;
  }
  bool operator!=(SymInt o) const { return !(*this == o); }

  /// Product; fails when both sides depend on B (the result would be
  /// quadratic in B, which no valid shape or cost is).
  std::optional<SymInt> mul(SymInt o) const;
  /// Exact division by a SymInt: a static divisor must divide both
  /// coefficients; a batch-dependent divisor must divide exactly to a static
  /// result (B*16 / B = 16). Fails otherwise.
  std::optional<SymInt> divExact(SymInt o) const;
  /// Floor division and modulo when the result is still affine in B (the
  /// divisor is static and divides perBatch). Fails otherwise.
  std::optional<SymInt> floorDiv(SymInt o) const;
  std::optional<SymInt> mod(SymInt o) const;

  /// "16", "B", "B*4", "B*4+2".
  std::string str() const;
};

/// The product of `dims`; fails when more than one of them depends on B (the
/// result would be quadratic in B). The element count of any tensor, or of a
/// run of its dimensions, always exists: a shape has at most one
/// batch-dependent dimension.
std::optional<SymInt> product(llvm::ArrayRef<SymInt> dims);

inline llvm::hash_code hash_value(const SymInt &s) {
  return llvm::hash_combine(s.perBatch, s.constant);
}

} // namespace varuna

#endif // VARUNA_SUPPORT_SYMINT_H
