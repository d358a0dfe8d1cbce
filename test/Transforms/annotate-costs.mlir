// RUN: varuna-opt %s --varuna-annotate-costs | FileCheck %s
// RUN: varuna-opt %s --varuna-annotate-costs --varuna-annotate-costs | FileCheck %s
// RUN: not varuna-opt %S/Inputs/no-graph.mlir --varuna-annotate-costs 2>&1 | FileCheck %s --check-prefix=NOGRAPH
// NOGRAPH: error: no training graph: expected a func.func marked 'varuna.graph'

// Hand-computed: matmul [B,16,32] x [32,96] = 2*16*96*32 = 98304 FLOPs per
// example, backward twice that, result 16*96*4 bytes per example.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: varuna.total_cost = #varuna.cost<flops = B*[[TOTAL:[0-9]+]]
// CHECK: %[[W:.*]] = varuna.get_param @w {varuna.cost = #varuna.cost<flops = 0, backward = 0, bytes = 0>}
// CHECK: varuna.matmul %{{.*}}, %[[W]] {varuna.cost = #varuna.cost<flops = B*98304, backward = B*196608, bytes = B*6144>}
// GELU: 14 FLOPs per element (16*96 elements per example).
// CHECK: varuna.unary gelu, {{.*}} {varuna.cost = #varuna.cost<flops = B*21504, backward = B*23040, bytes = B*6144>}
// conv [B,3,8,8] -> [B,4,8,8] with 3x3 kernel: 2 * (4*8*8) * 3*9 = 13824
// CHECK: varuna.conv {{.*}}varuna.cost = #varuna.cost<flops = B*13824, backward = B*27648, bytes = B*1024>
// A static op costs a constant.
// CHECK: varuna.transpose {{.*}}varuna.cost = #varuna.cost<flops = 0, backward = 0, bytes = 12288>
// cross-entropy: 6 FLOPs per logit, scalar result.
// CHECK: varuna.cross_entropy {{.*}}varuna.cost = #varuna.cost<flops = B*9216, backward = B*4608, bytes = 4>
varuna.param @w : !varuna.tensor<[32, 96], f32>
varuna.param @k : !varuna.tensor<[4, 3, 3, 3], f32>
func.func @forward(%x: !varuna.tensor<[B, 16, 32], f32>, %img: !varuna.tensor<[B, 3, 8, 8], f32>,
                   %labels: !varuna.tensor<[B, 16], i64>) -> !varuna.tensor<[], f32> attributes {varuna.graph} {
  %w = varuna.get_param @w : !varuna.tensor<[32, 96], f32>
  %y = varuna.matmul %x, %w : !varuna.tensor<[B, 16, 32], f32>, !varuna.tensor<[32, 96], f32> -> !varuna.tensor<[B, 16, 96], f32>
  %g = varuna.unary gelu, %y : !varuna.tensor<[B, 16, 96], f32>
  %k = varuna.get_param @k : !varuna.tensor<[4, 3, 3, 3], f32>
  %c = varuna.conv %img, %k {dilations = array<i64: 1, 1>, groups = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : !varuna.tensor<[B, 3, 8, 8], f32>, !varuna.tensor<[4, 3, 3, 3], f32> -> !varuna.tensor<[B, 4, 8, 8], f32>
  %wt = varuna.transpose %w, [1, 0] : !varuna.tensor<[32, 96], f32> -> !varuna.tensor<[96, 32], f32>
  %gf = varuna.reshape %g : !varuna.tensor<[B, 16, 96], f32> -> !varuna.tensor<[B*16, 96], f32>
  %lf = varuna.reshape %labels : !varuna.tensor<[B, 16], i64> -> !varuna.tensor<[B*16], i64>
  %loss = varuna.cross_entropy mean, %gf, %lf : !varuna.tensor<[B*16, 96], f32>, !varuna.tensor<[B*16], i64> -> !varuna.tensor<[], f32>
  return %loss : !varuna.tensor<[], f32>
}
