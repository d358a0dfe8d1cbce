// RUN: varuna-opt %s -split-input-file --varuna-fuse-gelu | FileCheck %s

// Erf form as torch.onnx exports nn.GELU(): x / sqrt(2), erf, + 1, * x, * 0.5.
// CHECK-LABEL: func.func @erf_form
// CHECK-SAME: (%[[X:.*]]: !varuna.tensor<[B, 8], f32>)
// CHECK-NEXT: %[[G:.*]] = varuna.unary gelu, %[[X]] : !varuna.tensor<[B, 8], f32>
// CHECK-NEXT: return %[[G]]
func.func @erf_form(%x: !varuna.tensor<[B, 8], f32>) -> !varuna.tensor<[B, 8], f32> {
  %c = varuna.constant dense<1.41421354> : tensor<f32> -> !varuna.tensor<[], f32>
  %d = varuna.div %x, %c : !varuna.tensor<[B, 8], f32>, !varuna.tensor<[], f32> -> !varuna.tensor<[B, 8], f32>
  %e = varuna.unary erf, %d : !varuna.tensor<[B, 8], f32>
  %one = varuna.constant dense<1.0> : tensor<f32> -> !varuna.tensor<[], f32>
  %a = varuna.add %e, %one : !varuna.tensor<[B, 8], f32>, !varuna.tensor<[], f32> -> !varuna.tensor<[B, 8], f32>
  %m = varuna.mul %x, %a : !varuna.tensor<[B, 8], f32>, !varuna.tensor<[B, 8], f32> -> !varuna.tensor<[B, 8], f32>
  %half = varuna.constant dense<0.5> : tensor<f32> -> !varuna.tensor<[], f32>
  %y = varuna.mul %m, %half : !varuna.tensor<[B, 8], f32>, !varuna.tensor<[], f32> -> !varuna.tensor<[B, 8], f32>
  return %y : !varuna.tensor<[B, 8], f32>
}

// -----

// Tanh form (GPT-2's gelu_new), operands in the other orders.
// CHECK-LABEL: func.func @tanh_form
// CHECK-NEXT: %[[G:.*]] = varuna.unary gelu_tanh, %arg0
// CHECK-NEXT: return %[[G]]
func.func @tanh_form(%x: !varuna.tensor<[B, 8], f32>) -> !varuna.tensor<[B, 8], f32> {
  %sq = varuna.mul %x, %x : !varuna.tensor<[B, 8], f32>, !varuna.tensor<[B, 8], f32> -> !varuna.tensor<[B, 8], f32>
  %cube = varuna.mul %x, %sq : !varuna.tensor<[B, 8], f32>, !varuna.tensor<[B, 8], f32> -> !varuna.tensor<[B, 8], f32>
  %k = varuna.constant dense<4.471500e-02> : tensor<f32> -> !varuna.tensor<[], f32>
  %w = varuna.mul %k, %cube : !varuna.tensor<[], f32>, !varuna.tensor<[B, 8], f32> -> !varuna.tensor<[B, 8], f32>
  %in = varuna.add %x, %w : !varuna.tensor<[B, 8], f32>, !varuna.tensor<[B, 8], f32> -> !varuna.tensor<[B, 8], f32>
  %s = varuna.constant dense<0.797884583> : tensor<f32> -> !varuna.tensor<[], f32>
  %arg = varuna.mul %s, %in : !varuna.tensor<[], f32>, !varuna.tensor<[B, 8], f32> -> !varuna.tensor<[B, 8], f32>
  %t = varuna.unary tanh, %arg : !varuna.tensor<[B, 8], f32>
  %one = varuna.constant dense<1.0> : tensor<f32> -> !varuna.tensor<[], f32>
  %a = varuna.add %one, %t : !varuna.tensor<[], f32>, !varuna.tensor<[B, 8], f32> -> !varuna.tensor<[B, 8], f32>
  %m = varuna.mul %x, %a : !varuna.tensor<[B, 8], f32>, !varuna.tensor<[B, 8], f32> -> !varuna.tensor<[B, 8], f32>
  %half = varuna.constant dense<0.5> : tensor<f32> -> !varuna.tensor<[], f32>
  %y = varuna.mul %half, %m : !varuna.tensor<[], f32>, !varuna.tensor<[B, 8], f32> -> !varuna.tensor<[B, 8], f32>
  return %y : !varuna.tensor<[B, 8], f32>
}

// -----

// Not GELU: a wrong constant, or an intermediate used elsewhere, is left
// alone.
// CHECK-LABEL: func.func @not_gelu
// CHECK-NOT: gelu
// CHECK: varuna.unary erf
func.func @not_gelu(%x: !varuna.tensor<[B, 8], f32>) -> (!varuna.tensor<[B, 8], f32>, !varuna.tensor<[B, 8], f32>) {
  %c = varuna.constant dense<1.41421354> : tensor<f32> -> !varuna.tensor<[], f32>
  %d = varuna.div %x, %c : !varuna.tensor<[B, 8], f32>, !varuna.tensor<[], f32> -> !varuna.tensor<[B, 8], f32>
  %e = varuna.unary erf, %d : !varuna.tensor<[B, 8], f32>
  %one = varuna.constant dense<1.0> : tensor<f32> -> !varuna.tensor<[], f32>
  %a = varuna.add %e, %one : !varuna.tensor<[B, 8], f32>, !varuna.tensor<[], f32> -> !varuna.tensor<[B, 8], f32>
  %m = varuna.mul %x, %a : !varuna.tensor<[B, 8], f32>, !varuna.tensor<[B, 8], f32> -> !varuna.tensor<[B, 8], f32>
  %third = varuna.constant dense<0.3> : tensor<f32> -> !varuna.tensor<[], f32>
  %y = varuna.mul %m, %third : !varuna.tensor<[B, 8], f32>, !varuna.tensor<[], f32> -> !varuna.tensor<[B, 8], f32>
  return %y, %a : !varuna.tensor<[B, 8], f32>, !varuna.tensor<[B, 8], f32>
}
