// ScatterND (in-place slice assignment as exported): the indexed elements are
// replaced, the rest kept; negative indices wrap.
// REQUIRES: torch
// RUN: rm -rf %t.empty && mkdir -p %t.empty
// RUN: varuna-eval %s --inputs %t.empty | FileCheck %s

// data [[1, 1, 1], [1, 1, 1]]; (0, 1) <- 5 and (1, -1) = (1, 2) <- 7
// -> [[1, 5, 1], [1, 1, 7]]; fingerprint with weights 1, 10, ..., 100000:
// 1 + 50 + 100 + 1000 + 10000 + 700000 = 711151.
// CHECK: scatter = 711151
module {
  func.func @forward() -> (!varuna.tensor<[], f32> {varuna.name = "scatter"}) attributes {varuna.graph} {
    %d = varuna.constant dense<1.0> : tensor<2x3xf32> -> !varuna.tensor<[2, 3], f32>
    %i = varuna.constant dense<[[0, 1], [1, -1]]> : tensor<2x2xi64> -> !varuna.tensor<[2, 2], i64>
    %u = varuna.constant dense<[5.0, 7.0]> : tensor<2xf32> -> !varuna.tensor<[2], f32>
    %s = varuna.scatter_nd %d, %i, %u : !varuna.tensor<[2, 3], f32>, !varuna.tensor<[2, 2], i64>, !varuna.tensor<[2], f32> -> !varuna.tensor<[2, 3], f32>
    %w = varuna.constant dense<[[1.0, 10.0, 100.0], [1000.0, 10000.0, 100000.0]]> : tensor<2x3xf32> -> !varuna.tensor<[2, 3], f32>
    %m = varuna.mul %s, %w : !varuna.tensor<[2, 3], f32>, !varuna.tensor<[2, 3], f32> -> !varuna.tensor<[2, 3], f32>
    %r = varuna.reduce sum, %m {axes = array<i64: 0, 1>, keepdim = false} : !varuna.tensor<[2, 3], f32> -> !varuna.tensor<[], f32>
    return %r : !varuna.tensor<[], f32>
  }
}
