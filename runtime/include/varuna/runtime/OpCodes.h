//===- OpCodes.h - Op variants shared by the evaluator and generated code -===//
//
// Torch-free and MLIR-free: the enums that select an op's variant (which
// unary function, which reduction, ...) in the runtime kernels
// (Kernels.h, StageAPI.h). Their values equal the varuna dialect's enum
// attributes (VarunaOps.td); the evaluator static_asserts this, and the
// emitter prints the enumerator names listed in the k*Names tables.
//
//===----------------------------------------------------------------------===//

#ifndef VARUNA_RUNTIME_OPCODES_H
#define VARUNA_RUNTIME_OPCODES_H

#include <cstdint>

namespace varuna::rt {

/// Element types of tensors the kernels create (constants, full, arange,
/// random, cast).
enum class ElemType : int { f16, bf16, f32, f64, i1, i8, u8, i32, i64 };
inline constexpr const char *kElemTypeNames[] = {
    "f16", "bf16", "f32", "f64", "i1", "i8", "u8", "i32", "i64"};

enum class Unary : int {
  neg, exp, log, sqrt, rsqrt, reciprocal, tanh, erf, sigmoid, relu, gelu,
  gelu_tanh, abs, logical_not, sin, cos, silu, softplus, floor, ceil,
  tan, atan, asin, acos, sinh, cosh, sign, round, trunc, expm1, log1p,
  stop_gradient, lgamma, digamma, erfinv, erfc
};
inline constexpr const char *kUnaryNames[] = {
    "neg", "exp", "log", "sqrt", "rsqrt", "reciprocal", "tanh",
    "erf", "sigmoid", "relu", "gelu", "gelu_tanh", "abs", "logical_not",
    "sin", "cos", "silu", "softplus", "floor", "ceil", "tan", "atan",
    "asin", "acos", "sinh", "cosh", "sign", "round", "trunc", "expm1",
    "log1p", "stop_gradient", "lgamma", "digamma", "erfinv", "erfc"};

enum class Binary : int { add, sub, mul, div, pow, maximum, minimum, logical_and, logical_or };
inline constexpr const char *kBinaryNames[] = {
    "add", "sub", "mul", "div", "pow", "maximum", "minimum", "logical_and",
    "logical_or"};

enum class Compare : int { eq, ne, lt, le, gt, ge };
inline constexpr const char *kCompareNames[] = {"eq", "ne", "lt",
                                                "le", "gt", "ge"};

enum class Reduce : int { sum, mean, max, min, prod };
inline constexpr const char *kReduceNames[] = {"sum", "mean", "max", "min",
                                               "prod"};

enum class Pool : int { max, avg };
inline constexpr const char *kPoolNames[] = {"max", "avg"};

enum class LossReduction : int { none, sum, mean };
inline constexpr const char *kLossReductionNames[] = {"none", "sum", "mean"};

enum class Distribution : int { uniform, normal };
enum class Linalg : int { inv, det, logabsdet, cholesky, solve };
inline constexpr const char *kLinalgNames[] = {"inv", "det", "logabsdet",
                                               "cholesky", "solve"};
inline constexpr const char *kDistributionNames[] = {"uniform", "normal"};

} // namespace varuna::rt

#endif // VARUNA_RUNTIME_OPCODES_H
