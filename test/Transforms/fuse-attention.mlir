// RUN: varuna-opt %s -split-input-file --varuna-fuse-attention | FileCheck %s

// GPT-2 / nanoGPT: q @ k^T * scale, masked_fill(~causal, -inf), softmax, @ v.
// The `not` of the keep-mask is looked through.
// CHECK-LABEL: func.func @causal
// CHECK-SAME: (%[[Q:[^:]*]]: {{.*}}, %[[KT:[^:]*]]: {{.*}}, %[[V:[^:]*]]: {{.*}}, %[[M:[^:]*]]: {{.*}})
// CHECK-NEXT: %[[A:.*]] = varuna.attention %[[Q]], %[[KT]], %[[V]] mask %[[M]] : !varuna.tensor<[1, 1, 16, 16], i1> {scale = 1.250000e-01 : f64} : !varuna.tensor<[B, 4, 16, 64], f32>, !varuna.tensor<[B, 4, 64, 16], f32>, !varuna.tensor<[B, 4, 16, 64], f32> -> !varuna.tensor<[B, 4, 16, 64], f32>
// CHECK-NEXT: return %[[A]]
func.func @causal(%q: !varuna.tensor<[B, 4, 16, 64], f32>, %kt: !varuna.tensor<[B, 4, 64, 16], f32>, %v: !varuna.tensor<[B, 4, 16, 64], f32>, %mask: !varuna.tensor<[1, 1, 16, 16], i1>) -> !varuna.tensor<[B, 4, 16, 64], f32> {
  %s = varuna.matmul %q, %kt : !varuna.tensor<[B, 4, 16, 64], f32>, !varuna.tensor<[B, 4, 64, 16], f32> -> !varuna.tensor<[B, 4, 16, 16], f32>
  %c = varuna.constant dense<0.125> : tensor<f32> -> !varuna.tensor<[], f32>
  %x = varuna.mul %s, %c : !varuna.tensor<[B, 4, 16, 16], f32>, !varuna.tensor<[], f32> -> !varuna.tensor<[B, 4, 16, 16], f32>
  %n = varuna.unary not, %mask : !varuna.tensor<[1, 1, 16, 16], i1>
  %inf = varuna.constant dense<0xFF800000> : tensor<f32> -> !varuna.tensor<[], f32>
  %w = varuna.where %n, %inf, %x : !varuna.tensor<[1, 1, 16, 16], i1>, !varuna.tensor<[], f32>, !varuna.tensor<[B, 4, 16, 16], f32> -> !varuna.tensor<[B, 4, 16, 16], f32>
  %p = varuna.softmax %w {axis = 3 : i64} : !varuna.tensor<[B, 4, 16, 16], f32>
  %y = varuna.matmul %p, %v : !varuna.tensor<[B, 4, 16, 16], f32>, !varuna.tensor<[B, 4, 16, 64], f32> -> !varuna.tensor<[B, 4, 16, 64], f32>
  return %y : !varuna.tensor<[B, 4, 16, 64], f32>
}

// -----

// No mask, scores divided by a constant; the mask in the other `where` form
// is used as it is.
// CHECK-LABEL: func.func @div_no_mask
// CHECK-NEXT: varuna.attention %arg0, %arg1, %arg2 {scale = 2.500000e-01 : f64}
// CHECK-NEXT: return
func.func @div_no_mask(%q: !varuna.tensor<[B, 2, 8, 4], f32>, %kt: !varuna.tensor<[B, 2, 4, 8], f32>, %v: !varuna.tensor<[B, 2, 8, 4], f32>) -> !varuna.tensor<[B, 2, 8, 4], f32> {
  %s = varuna.matmul %q, %kt : !varuna.tensor<[B, 2, 8, 4], f32>, !varuna.tensor<[B, 2, 4, 8], f32> -> !varuna.tensor<[B, 2, 8, 8], f32>
  %c = varuna.constant dense<4.0> : tensor<f32> -> !varuna.tensor<[], f32>
  %x = varuna.div %s, %c : !varuna.tensor<[B, 2, 8, 8], f32>, !varuna.tensor<[], f32> -> !varuna.tensor<[B, 2, 8, 8], f32>
  %p = varuna.softmax %x {axis = 3 : i64} : !varuna.tensor<[B, 2, 8, 8], f32>
  %y = varuna.matmul %p, %v : !varuna.tensor<[B, 2, 8, 8], f32>, !varuna.tensor<[B, 2, 8, 4], f32> -> !varuna.tensor<[B, 2, 8, 4], f32>
  return %y : !varuna.tensor<[B, 2, 8, 4], f32>
}

// CHECK-LABEL: func.func @keep_form
// CHECK-NEXT: varuna.attention %arg0, %arg1, %arg2 mask %arg3 : !varuna.tensor<[8, 8], i1> {scale = 1.000000e+00 : f64}
func.func @keep_form(%q: !varuna.tensor<[B, 2, 8, 4], f32>, %kt: !varuna.tensor<[B, 2, 4, 8], f32>, %v: !varuna.tensor<[B, 2, 8, 4], f32>, %keep: !varuna.tensor<[8, 8], i1>) -> !varuna.tensor<[B, 2, 8, 4], f32> {
  %s = varuna.matmul %q, %kt : !varuna.tensor<[B, 2, 8, 4], f32>, !varuna.tensor<[B, 2, 4, 8], f32> -> !varuna.tensor<[B, 2, 8, 8], f32>
  %inf = varuna.constant dense<0xFF800000> : tensor<f32> -> !varuna.tensor<[], f32>
  %w = varuna.where %keep, %s, %inf : !varuna.tensor<[8, 8], i1>, !varuna.tensor<[B, 2, 8, 8], f32>, !varuna.tensor<[], f32> -> !varuna.tensor<[B, 2, 8, 8], f32>
  %p = varuna.softmax %w {axis = 3 : i64} : !varuna.tensor<[B, 2, 8, 8], f32>
  %y = varuna.matmul %p, %v : !varuna.tensor<[B, 2, 8, 8], f32>, !varuna.tensor<[B, 2, 8, 4], f32> -> !varuna.tensor<[B, 2, 8, 4], f32>
  return %y : !varuna.tensor<[B, 2, 8, 4], f32>
}

// -----

// Left alone: the probabilities are also returned (another use), and a
// dropout with ratio > 0 sits before the last matmul.
// CHECK-LABEL: func.func @probs_used
// CHECK-NOT: varuna.attention
// CHECK: varuna.softmax
func.func @probs_used(%q: !varuna.tensor<[B, 2, 8, 4], f32>, %kt: !varuna.tensor<[B, 2, 4, 8], f32>, %v: !varuna.tensor<[B, 2, 8, 4], f32>) -> (!varuna.tensor<[B, 2, 8, 4], f32>, !varuna.tensor<[B, 2, 8, 8], f32>) {
  %s = varuna.matmul %q, %kt : !varuna.tensor<[B, 2, 8, 4], f32>, !varuna.tensor<[B, 2, 4, 8], f32> -> !varuna.tensor<[B, 2, 8, 8], f32>
  %p = varuna.softmax %s {axis = 3 : i64} : !varuna.tensor<[B, 2, 8, 8], f32>
  %y = varuna.matmul %p, %v : !varuna.tensor<[B, 2, 8, 8], f32>, !varuna.tensor<[B, 2, 8, 4], f32> -> !varuna.tensor<[B, 2, 8, 4], f32>
  return %y, %p : !varuna.tensor<[B, 2, 8, 4], f32>, !varuna.tensor<[B, 2, 8, 8], f32>
}

// CHECK-LABEL: func.func @dropout
// CHECK-NOT: varuna.attention
// CHECK: varuna.dropout
func.func @dropout(%q: !varuna.tensor<[B, 2, 8, 4], f32>, %kt: !varuna.tensor<[B, 2, 4, 8], f32>, %v: !varuna.tensor<[B, 2, 8, 4], f32>) -> !varuna.tensor<[B, 2, 8, 4], f32> {
  %s = varuna.matmul %q, %kt : !varuna.tensor<[B, 2, 8, 4], f32>, !varuna.tensor<[B, 2, 4, 8], f32> -> !varuna.tensor<[B, 2, 8, 8], f32>
  %p = varuna.softmax %s {axis = 3 : i64} : !varuna.tensor<[B, 2, 8, 8], f32>
  %d = varuna.dropout %p, 1.000000e-01 : !varuna.tensor<[B, 2, 8, 8], f32>
  %y = varuna.matmul %d, %v : !varuna.tensor<[B, 2, 8, 8], f32>, !varuna.tensor<[B, 2, 8, 4], f32> -> !varuna.tensor<[B, 2, 8, 4], f32>
  return %y : !varuna.tensor<[B, 2, 8, 4], f32>
}

