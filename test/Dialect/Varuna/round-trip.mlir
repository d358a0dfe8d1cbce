// RUN: varuna-opt %s | FileCheck %s
// RUN: varuna-opt %s --mlir-print-op-generic | varuna-opt | FileCheck %s

// CHECK-LABEL: varuna.param @wte.weight : !varuna.tensor<[64, 32], f32> init #varuna.data<file = "gpt.onnx", offset = 128, size = 8192>
varuna.param @wte.weight : !varuna.tensor<[64, 32], f32> init #varuna.data<file = "gpt.onnx", offset = 128, size = 8192>
// CHECK: varuna.param @wpe.weight : !varuna.tensor<[16, 32], f32> init #varuna.data<file = "gpt.onnx", offset = 8320, size = 2048, digest = 4294967295>
varuna.param @wpe.weight : !varuna.tensor<[16, 32], f32> init #varuna.data<file = "gpt.onnx", offset = 8320, size = 2048, digest = 4294967295>
// CHECK: varuna.param @ln.weight : !varuna.tensor<[32], f32>{{$}}
varuna.param @ln.weight : !varuna.tensor<[32], f32>
// CHECK: varuna.param @bn.running_mean : !varuna.tensor<[4], f32> frozen
varuna.param @bn.running_mean : !varuna.tensor<[4], f32> frozen

// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[IDS:.*]]: !varuna.tensor<[B, 16], i64> {varuna.name = "input_ids"}
func.func @forward(%ids: !varuna.tensor<[B, 16], i64> {varuna.name = "input_ids"},
                   %labels: !varuna.tensor<[B, 16], i64> {varuna.name = "labels"})
    -> (!varuna.tensor<[], f32> {varuna.loss, varuna.name = "loss"}) attributes {varuna.graph} {
  // CHECK: %[[W:.*]] = varuna.get_param @wte.weight : !varuna.tensor<[64, 32], f32>
  %w = varuna.get_param @wte.weight : !varuna.tensor<[64, 32], f32>
  // CHECK: %[[X:.*]] = varuna.gather %[[W]], %[[IDS]] {axis = 0 : i64} : !varuna.tensor<[64, 32], f32>, !varuna.tensor<[B, 16], i64> -> !varuna.tensor<[B, 16, 32], f32>
  %x = varuna.gather %w, %ids {axis = 0 : i64} : !varuna.tensor<[64, 32], f32>, !varuna.tensor<[B, 16], i64> -> !varuna.tensor<[B, 16, 32], f32>
  // CHECK: varuna.gather %[[W]], %[[IDS]] {axis = 0 : i64, padding_idx = 0 : i64}
  %xp = varuna.gather %w, %ids {axis = 0 : i64, padding_idx = 0 : i64} : !varuna.tensor<[64, 32], f32>, !varuna.tensor<[B, 16], i64> -> !varuna.tensor<[B, 16, 32], f32>
  %g = varuna.get_param @ln.weight : !varuna.tensor<[32], f32>
  // CHECK: varuna.layer_norm %[[X]] weight %{{.*}} : !varuna.tensor<[32], f32> {axis = 2 : i64, epsilon = 1.000000e-05 : f64}
  %n = varuna.layer_norm %x weight %g : !varuna.tensor<[32], f32> {axis = 2 : i64, epsilon = 1.0e-5 : f64} : !varuna.tensor<[B, 16, 32], f32> -> !varuna.tensor<[B, 16, 32], f32>
  // CHECK: varuna.unary gelu_tanh, %{{.*}} : !varuna.tensor<[B, 16, 32], f32>
  %a = varuna.unary gelu_tanh, %n : !varuna.tensor<[B, 16, 32], f32>
  // CHECK: varuna.dropout %{{.*}}, 1.000000e-01 : !varuna.tensor<[B, 16, 32], f32>
  %d = varuna.dropout %a, 0.1 : !varuna.tensor<[B, 16, 32], f32>
  %wt = varuna.transpose %w, [1, 0] : !varuna.tensor<[64, 32], f32> -> !varuna.tensor<[32, 64], f32>
  // CHECK: varuna.matmul {{.*}} -> !varuna.tensor<[B, 16, 64], f32>
  %logits = varuna.matmul %d, %wt : !varuna.tensor<[B, 16, 32], f32>, !varuna.tensor<[32, 64], f32> -> !varuna.tensor<[B, 16, 64], f32>
  // CHECK: varuna.reshape %{{.*}} : !varuna.tensor<[B, 16, 64], f32> -> !varuna.tensor<[B*16, 64], f32>
  %flat = varuna.reshape %logits : !varuna.tensor<[B, 16, 64], f32> -> !varuna.tensor<[B*16, 64], f32>
  %lab = varuna.reshape %labels : !varuna.tensor<[B, 16], i64> -> !varuna.tensor<[B*16], i64>
  // CHECK: varuna.cross_entropy mean, {{.*}} {ignore_index = -100 : i64} : !varuna.tensor<[B*16, 64], f32>, !varuna.tensor<[B*16], i64> -> !varuna.tensor<[], f32>
  %loss = varuna.cross_entropy mean, %flat, %lab {ignore_index = -100 : i64} : !varuna.tensor<[B*16, 64], f32>, !varuna.tensor<[B*16], i64> -> !varuna.tensor<[], f32>
  // Class weights: an optional [C] operand.
  // CHECK: varuna.cross_entropy mean, %{{.*}}, %{{.*}} weight %{{.*}} : !varuna.tensor<[64], f32> {label_smoothing = 1.000000e-01 : f64} : !varuna.tensor<[B*16, 64], f32>, !varuna.tensor<[B*16], i64> -> !varuna.tensor<[], f32>
  %cw = varuna.full 0.5 : f32 -> !varuna.tensor<[64], f32>
  %weighted = varuna.cross_entropy mean, %flat, %lab weight %cw : !varuna.tensor<[64], f32> {label_smoothing = 0.1 : f64} : !varuna.tensor<[B*16, 64], f32>, !varuna.tensor<[B*16], i64> -> !varuna.tensor<[], f32>
  return %loss : !varuna.tensor<[], f32>
}

// CHECK-LABEL: func.func @shapes
func.func @shapes(%x: !varuna.tensor<[B, 3, 8, 8], f32>, %m: !varuna.tensor<[B, 8], i64>) -> !varuna.tensor<[B, 4, 4, 4], f32> {
  %c = varuna.constant dense<[[1.0, 0.0], [0.0, 1.0]]> : tensor<2x2xf32> -> !varuna.tensor<[2, 2], f32>
  // CHECK: varuna.trilu %{{.*}} {k = 1 : i64, upper = true} : !varuna.tensor<[2, 2], f32>
  %t = varuna.trilu %c {k = 1 : i64, upper = true} : !varuna.tensor<[2, 2], f32>
  %f = varuna.full 0.0 : f32 -> !varuna.tensor<[B, 8], f32>
  %z = varuna.full 0 : i64 -> !varuna.tensor<[B, 8], i64>
  // CHECK: varuna.compare eq, {{.*}} -> !varuna.tensor<[B, 8], i1>
  %e = varuna.compare eq, %m, %z : !varuna.tensor<[B, 8], i64>, !varuna.tensor<[B, 8], i64> -> !varuna.tensor<[B, 8], i1>
  %s = varuna.where %e, %f, %f : !varuna.tensor<[B, 8], i1>, !varuna.tensor<[B, 8], f32>, !varuna.tensor<[B, 8], f32> -> !varuna.tensor<[B, 8], f32>
  %p = varuna.arange 0.0, 1.0 -> !varuna.tensor<[8], i64>
  // CHECK: varuna.reduce mean, {{.*}} {axes = array<i64: 2, 3>, keepdim = true} : !varuna.tensor<[B, 3, 8, 8], f32> -> !varuna.tensor<[B, 3, 1, 1], f32>
  %r = varuna.reduce mean, %x {axes = array<i64: 2, 3>, keepdim = true} : !varuna.tensor<[B, 3, 8, 8], f32> -> !varuna.tensor<[B, 3, 1, 1], f32>
  %w = varuna.constant dense<1.0> : tensor<4x3x3x3xf32> -> !varuna.tensor<[4, 3, 3, 3], f32>
  // CHECK: varuna.conv {{.*}} -> !varuna.tensor<[B, 4, 8, 8], f32>
  %y = varuna.conv %x, %w {dilations = array<i64: 1, 1>, groups = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : !varuna.tensor<[B, 3, 8, 8], f32>, !varuna.tensor<[4, 3, 3, 3], f32> -> !varuna.tensor<[B, 4, 8, 8], f32>
  // CHECK: varuna.pool max, {{.*}} -> !varuna.tensor<[B, 4, 4, 4], f32>
  %q = varuna.pool max, %y {ceil_mode = false, count_include_pad = false, dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : !varuna.tensor<[B, 4, 8, 8], f32> -> !varuna.tensor<[B, 4, 4, 4], f32>
  %sl = varuna.slice %q {axis = 1 : i64, start = 0 : i64, end = 2 : i64, step = 1 : i64} : !varuna.tensor<[B, 4, 4, 4], f32> -> !varuna.tensor<[B, 2, 4, 4], f32>
  // CHECK: varuna.concat {{.*}} {axis = 1 : i64} : (!varuna.tensor<[B, 2, 4, 4], f32>, !varuna.tensor<[B, 2, 4, 4], f32>) -> !varuna.tensor<[B, 4, 4, 4], f32>
  %cc = varuna.concat %sl, %sl {axis = 1 : i64} : (!varuna.tensor<[B, 2, 4, 4], f32>, !varuna.tensor<[B, 2, 4, 4], f32>) -> !varuna.tensor<[B, 4, 4, 4], f32>
  return %cc : !varuna.tensor<[B, 4, 4, 4], f32>
}

// CHECK-LABEL: func.func @cut
// CHECK: %[[C:.*]]:2 = varuna.cut_point 1 (%{{.*}}, %{{.*}}) {bytes_per_example = 1024 : i64} : !varuna.tensor<[B, 16, 32], f32>, !varuna.tensor<[B, 16], f32>
// CHECK: varuna.add %[[C]]#0, %[[C]]#0
func.func @cut(%x: !varuna.tensor<[B, 16, 32], f32>, %m: !varuna.tensor<[B, 16], f32>) -> !varuna.tensor<[B, 16, 32], f32> {
  %c:2 = varuna.cut_point 1 (%x, %m) {bytes_per_example = 1024 : i64} : !varuna.tensor<[B, 16, 32], f32>, !varuna.tensor<[B, 16], f32>
  %y = varuna.add %c#0, %c#0 : !varuna.tensor<[B, 16, 32], f32>, !varuna.tensor<[B, 16, 32], f32> -> !varuna.tensor<[B, 16, 32], f32>
  return %y : !varuna.tensor<[B, 16, 32], f32>
}

// CHECK-LABEL: func.func @conv_transpose
// CHECK: varuna.conv_transpose {{.*}} -> !varuna.tensor<[B, 4, 16, 16], f32>
func.func @conv_transpose(%x: !varuna.tensor<[B, 4, 8, 8], f32>, %w: !varuna.tensor<[4, 2, 3, 3], f32>, %b: !varuna.tensor<[4], f32>) -> !varuna.tensor<[B, 4, 16, 16], f32> {
  %y = varuna.conv_transpose %x, %w bias %b : !varuna.tensor<[4], f32> {dilations = array<i64: 1, 1>, groups = 2 : i64, output_padding = array<i64: 1, 1>, pads = array<i64: 1, 1>, strides = array<i64: 2, 2>} : !varuna.tensor<[B, 4, 8, 8], f32>, !varuna.tensor<[4, 2, 3, 3], f32> -> !varuna.tensor<[B, 4, 16, 16], f32>
  return %y : !varuna.tensor<[B, 4, 16, 16], f32>
}

// CHECK-LABEL: func.func @linalg
// CHECK: varuna.linalg inv %{{.*}} : (!varuna.tensor<[4, 4], f32>) -> !varuna.tensor<[4, 4], f32>
// CHECK: varuna.linalg logabsdet %{{.*}} : (!varuna.tensor<[B, 4, 4], f32>) -> !varuna.tensor<[B], f32>
// CHECK: varuna.linalg solve %{{.*}}, %{{.*}} : (!varuna.tensor<[B, 4, 4], f32>, !varuna.tensor<[B, 4], f32>) -> !varuna.tensor<[B, 4], f32>
func.func @linalg(%a: !varuna.tensor<[4, 4], f32>, %b: !varuna.tensor<[B, 4, 4], f32>,
                  %r: !varuna.tensor<[B, 4], f32>) -> !varuna.tensor<[B, 4], f32> {
  %0 = varuna.linalg inv %a : (!varuna.tensor<[4, 4], f32>) -> !varuna.tensor<[4, 4], f32>
  %1 = varuna.linalg logabsdet %b : (!varuna.tensor<[B, 4, 4], f32>) -> !varuna.tensor<[B], f32>
  %2 = varuna.linalg solve %b, %r : (!varuna.tensor<[B, 4, 4], f32>, !varuna.tensor<[B, 4], f32>) -> !varuna.tensor<[B, 4], f32>
  return %2 : !varuna.tensor<[B, 4], f32>
}
