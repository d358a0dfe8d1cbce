// Semantics of individual ops in the ATen evaluator on hand-computed values.
// Each result is a scalar "fingerprint" (elements weighted by 1, 10, 100, ...).
// REQUIRES: torch
// RUN: rm -rf %t.empty && mkdir -p %t.empty
// RUN: varuna-eval %s --inputs %t.empty | FileCheck %s

// CHECK: cumsum_excl_rev = 479
// CHECK-NEXT: gather_negative = 32140
// CHECK-NEXT: conv_asymmetric_pads = 531
// CHECK-NEXT: maxpool_ceil = 345
// CHECK-NEXT: avgpool_asym_exclude_pad = 64.5
// CHECK-NEXT: cross_entropy_ignore = 1.09861231
// CHECK-NEXT: gelu = 0.841344714
// CHECK-NEXT: gelu_tanh = 0.841192007
// CHECK-NEXT: div_int_trunc = -3
// CHECK-NEXT: prod = 24
// CHECK-NEXT: pad = 24
// CHECK-NEXT: tril = 8
// CHECK-NEXT: gather_elements = 302
// CHECK-NEXT: arange = [4] float32 sum 2

module {
  func.func @forward() -> (
      !varuna.tensor<[], f32> {varuna.name = "cumsum_excl_rev"},
      !varuna.tensor<[], f32> {varuna.name = "gather_negative"},
      !varuna.tensor<[], f32> {varuna.name = "conv_asymmetric_pads"},
      !varuna.tensor<[], f32> {varuna.name = "maxpool_ceil"},
      !varuna.tensor<[], f32> {varuna.name = "avgpool_asym_exclude_pad"},
      !varuna.tensor<[], f32> {varuna.name = "cross_entropy_ignore"},
      !varuna.tensor<[], f32> {varuna.name = "gelu"},
      !varuna.tensor<[], f32> {varuna.name = "gelu_tanh"},
      !varuna.tensor<[], i64> {varuna.name = "div_int_trunc"},
      !varuna.tensor<[], f32> {varuna.name = "prod"},
      !varuna.tensor<[], f32> {varuna.name = "pad"},
      !varuna.tensor<[], f32> {varuna.name = "tril"},
      !varuna.tensor<[], f32> {varuna.name = "gather_elements"},
      !varuna.tensor<[4], f32> {varuna.name = "arange"})
      attributes {varuna.graph} {
    %w4 = varuna.constant dense<[1.0, 10.0, 100.0, 1000.0]> : tensor<4xf32> -> !varuna.tensor<[4], f32>
    %w3 = varuna.constant dense<[1.0, 10.0, 100.0]> : tensor<3xf32> -> !varuna.tensor<[3], f32>
    %w2 = varuna.constant dense<[1.0, 10.0]> : tensor<2xf32> -> !varuna.tensor<[2], f32>

    // [1, 2, 3, 4] -> exclusive reverse cumsum [9, 7, 4, 0]
    %x = varuna.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32> -> !varuna.tensor<[4], f32>
    // (a cut-point passes its values through)
    %xc = varuna.cut_point 1 (%x) {bytes_per_example = 16 : i64} : !varuna.tensor<[4], f32>
    %cs = varuna.cumsum %xc {axis = 0 : i64, exclusive = true, reverse = true} : !varuna.tensor<[4], f32> -> !varuna.tensor<[4], f32>
    %cs_w = varuna.mul %cs, %w4 : !varuna.tensor<[4], f32>, !varuna.tensor<[4], f32> -> !varuna.tensor<[4], f32>
    %r0 = varuna.reduce sum, %cs_w {axes = array<i64: 0>, keepdim = false} : !varuna.tensor<[4], f32> -> !varuna.tensor<[], f32>

    // [10, 20, 30, 40][[-1, 0], [1, -2]] = [[40, 10], [20, 30]]
    %t = varuna.constant dense<[10.0, 20.0, 30.0, 40.0]> : tensor<4xf32> -> !varuna.tensor<[4], f32>
    %idx = varuna.constant dense<[[-1, 0], [1, -2]]> : tensor<2x2xi64> -> !varuna.tensor<[2, 2], i64>
    %g = varuna.gather %t, %idx {axis = 0 : i64} : !varuna.tensor<[4], f32>, !varuna.tensor<[2, 2], i64> -> !varuna.tensor<[2, 2], f32>
    %g4 = varuna.reshape %g : !varuna.tensor<[2, 2], f32> -> !varuna.tensor<[4], f32>
    %g_w = varuna.mul %g4, %w4 : !varuna.tensor<[4], f32>, !varuna.tensor<[4], f32> -> !varuna.tensor<[4], f32>
    %r1 = varuna.reduce sum, %g_w {axes = array<i64: 0>, keepdim = false} : !varuna.tensor<[4], f32> -> !varuna.tensor<[], f32>

    // [1, 2, 3] padded left by 1, kernel [1, 1] -> [1, 3, 5]
    %ci = varuna.constant dense<[[[[1.0, 2.0, 3.0]]]]> : tensor<1x1x1x3xf32> -> !varuna.tensor<[1, 1, 1, 3], f32>
    %cw = varuna.constant dense<[[[[1.0, 1.0]]]]> : tensor<1x1x1x2xf32> -> !varuna.tensor<[1, 1, 1, 2], f32>
    %co = varuna.conv %ci, %cw {strides = array<i64: 1, 1>, pads = array<i64: 0, 1, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : !varuna.tensor<[1, 1, 1, 3], f32>, !varuna.tensor<[1, 1, 1, 2], f32> -> !varuna.tensor<[1, 1, 1, 3], f32>
    %co_w = varuna.mul %co, %w3 : !varuna.tensor<[1, 1, 1, 3], f32>, !varuna.tensor<[3], f32> -> !varuna.tensor<[1, 1, 1, 3], f32>
    %r2 = varuna.reduce sum, %co_w {axes = array<i64: 0, 1, 2, 3>, keepdim = false} : !varuna.tensor<[1, 1, 1, 3], f32> -> !varuna.tensor<[], f32>

    // max pool k2 s2 ceil_mode over [1, 5, 2, 4, 3] -> [5, 4, 3]
    %pi = varuna.constant dense<[[[1.0, 5.0, 2.0, 4.0, 3.0]]]> : tensor<1x1x5xf32> -> !varuna.tensor<[1, 1, 5], f32>
    %po = varuna.pool max, %pi {kernel = array<i64: 2>, strides = array<i64: 2>, pads = array<i64: 0, 0>, dilations = array<i64: 1>, ceil_mode = true, count_include_pad = false} : !varuna.tensor<[1, 1, 5], f32> -> !varuna.tensor<[1, 1, 3], f32>
    %po_w = varuna.mul %po, %w3 : !varuna.tensor<[1, 1, 3], f32>, !varuna.tensor<[3], f32> -> !varuna.tensor<[1, 1, 3], f32>
    %r3 = varuna.reduce sum, %po_w {axes = array<i64: 0, 1, 2>, keepdim = false} : !varuna.tensor<[1, 1, 3], f32> -> !varuna.tensor<[], f32>

    // avg pool k3 s1 pads begin 1, end 0, padding not counted, over [3, 6, 9] -> [4.5, 6]
    %ai = varuna.constant dense<[[[3.0, 6.0, 9.0]]]> : tensor<1x1x3xf32> -> !varuna.tensor<[1, 1, 3], f32>
    %ao = varuna.pool avg, %ai {kernel = array<i64: 3>, strides = array<i64: 1>, pads = array<i64: 1, 0>, dilations = array<i64: 1>, ceil_mode = false, count_include_pad = false} : !varuna.tensor<[1, 1, 3], f32> -> !varuna.tensor<[1, 1, 2], f32>
    %ao_w = varuna.mul %ao, %w2 : !varuna.tensor<[1, 1, 2], f32>, !varuna.tensor<[2], f32> -> !varuna.tensor<[1, 1, 2], f32>
    %r4 = varuna.reduce sum, %ao_w {axes = array<i64: 0, 1, 2>, keepdim = false} : !varuna.tensor<[1, 1, 2], f32> -> !varuna.tensor<[], f32>

    // uniform logits over 3 classes, second label ignored: log(3)
    %lg = varuna.full 0.0 : f32 -> !varuna.tensor<[2, 3], f32>
    %lb = varuna.constant dense<[0, -100]> : tensor<2xi64> -> !varuna.tensor<[2], i64>
    %r5 = varuna.cross_entropy mean, %lg, %lb {ignore_index = -100 : i64} : !varuna.tensor<[2, 3], f32>, !varuna.tensor<[2], i64> -> !varuna.tensor<[], f32>

    %one = varuna.constant dense<1.0> : tensor<f32> -> !varuna.tensor<[], f32>
    %r6 = varuna.unary gelu, %one : !varuna.tensor<[], f32>
    %r7 = varuna.unary gelu_tanh, %one : !varuna.tensor<[], f32>

    %m7 = varuna.constant dense<-7> : tensor<i64> -> !varuna.tensor<[], i64>
    %p2 = varuna.constant dense<2> : tensor<i64> -> !varuna.tensor<[], i64>
    %r8 = varuna.div %m7, %p2 : !varuna.tensor<[], i64>, !varuna.tensor<[], i64> -> !varuna.tensor<[], i64>

    %q = varuna.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32> -> !varuna.tensor<[2, 2], f32>
    %r9 = varuna.reduce prod, %q {axes = array<i64: 0, 1>, keepdim = false} : !varuna.tensor<[2, 2], f32> -> !varuna.tensor<[], f32>

    // [1, 2] padded 1 before, 2 after with 7 -> [7, 1, 2, 7, 7]
    %pv = varuna.constant dense<[1.0, 2.0]> : tensor<2xf32> -> !varuna.tensor<[2], f32>
    %pp = varuna.pad %pv, [1, 2], value(7.0 : f32) : !varuna.tensor<[2], f32> -> !varuna.tensor<[5], f32>
    %r10 = varuna.reduce sum, %pp {axes = array<i64: 0>, keepdim = false} : !varuna.tensor<[5], f32> -> !varuna.tensor<[], f32>

    // tril (k = 0) of [[1, 2], [3, 4]] -> [[1, 0], [3, 4]]
    %tl = varuna.trilu %q {k = 0 : i64, upper = false} : !varuna.tensor<[2, 2], f32>
    %r11 = varuna.reduce sum, %tl {axes = array<i64: 0, 1>, keepdim = false} : !varuna.tensor<[2, 2], f32> -> !varuna.tensor<[], f32>

    // torch.gather([[1, 2], [3, 4]], 1, [[1], [-2]]) = [[2], [3]] -> 2 + 100 * 3
    %gi = varuna.constant dense<[[1], [-2]]> : tensor<2x1xi64> -> !varuna.tensor<[2, 1], i64>
    %ge = varuna.gather_elements %q, %gi {axis = 1 : i64} : !varuna.tensor<[2, 2], f32>, !varuna.tensor<[2, 1], i64> -> !varuna.tensor<[2, 1], f32>
    %ge2 = varuna.reshape %ge : !varuna.tensor<[2, 1], f32> -> !varuna.tensor<[2], f32>
    %w100 = varuna.constant dense<[1.0, 100.0]> : tensor<2xf32> -> !varuna.tensor<[2], f32>
    %ge_w = varuna.mul %ge2, %w100 : !varuna.tensor<[2], f32>, !varuna.tensor<[2], f32> -> !varuna.tensor<[2], f32>
    %r12 = varuna.reduce sum, %ge_w {axes = array<i64: 0>, keepdim = false} : !varuna.tensor<[2], f32> -> !varuna.tensor<[], f32>

    // start -1, step 1 -> [-1, 0, 1, 2] (sum 2)
    %ar = varuna.arange -1.0, 1.0 -> !varuna.tensor<[4], f32>

    return %r0, %r1, %r2, %r3, %r4, %r5, %r6, %r7, %r8, %r9, %r10, %r11, %r12, %ar : !varuna.tensor<[], f32>, !varuna.tensor<[], f32>, !varuna.tensor<[], f32>, !varuna.tensor<[], f32>, !varuna.tensor<[], f32>, !varuna.tensor<[], f32>, !varuna.tensor<[], f32>, !varuna.tensor<[], f32>, !varuna.tensor<[], i64>, !varuna.tensor<[], f32>, !varuna.tensor<[], f32>, !varuna.tensor<[], f32>, !varuna.tensor<[], f32>, !varuna.tensor<[4], f32>
  }
}
