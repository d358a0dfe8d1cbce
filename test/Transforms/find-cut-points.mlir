// RUN: varuna-opt %s -split-input-file --varuna-find-cut-points | FileCheck %s
// RUN: varuna-opt %s -split-input-file --varuna-find-cut-points=num-cut-points=1 | FileCheck %s --check-prefix=ONE
// RUN: not varuna-opt %s -split-input-file --varuna-find-cut-points=num-cut-points=99 2>&1 | FileCheck %s --check-prefix=TOOMANY
// RUN: not varuna-opt %s -split-input-file --varuna-find-cut-points=max-bytes-per-cut=100 2>&1 | FileCheck %s --check-prefix=CAP

// Three identical residual blocks between an embedding and a loss head. The
// cuts are the block boundaries, where only the residual stream crosses
// (16 x 32 f32 = 2048 bytes per example); the cheap embedding merges into the
// first block's section, the head (costlier than a block) keeps its own; the
// mask (input-only) and the weights never cross.

// CHECK-LABEL: func.func @blocks
// CHECK-SAME: varuna.num_sections = 4
// CHECK-SAME: varuna.repeated_block = array<i64: 1, 4, 3>
// CHECK: %[[H1:.*]] = varuna.add %{{.*}}, %{{.*}} : !varuna.tensor<[B, 16, 32], f32>
// CHECK-NEXT: %[[C1:.*]] = varuna.cut_point 1 (%[[H1]]) {bytes_per_example = 2048 : i64} : !varuna.tensor<[B, 16, 32], f32>
// CHECK-NEXT: varuna.get_param @w1
// CHECK-NEXT: varuna.matmul %[[C1]]
// CHECK: %[[H2:.*]] = varuna.add %[[C1]], %{{.*}}
// CHECK-NEXT: %[[C2:.*]] = varuna.cut_point 2 (%[[H2]]) {bytes_per_example = 2048 : i64}
// CHECK: %[[H3:.*]] = varuna.add %[[C2]], %{{.*}}
// CHECK-NEXT: %[[C3:.*]] = varuna.cut_point 3 (%[[H3]]) {bytes_per_example = 2048 : i64}
// CHECK-NEXT: varuna.get_param @head
// CHECK-NEXT: varuna.matmul %[[C3]]
// CHECK-NOT: varuna.cut_point
// CHECK: varuna.cross_entropy

// ONE-LABEL: func.func @blocks
// ONE-SAME: varuna.num_sections = 2
// ONE: varuna.cut_point 1 ({{.*}}) {bytes_per_example = 2048 : i64}
// ONE-NOT: varuna.cut_point 2

// TOOMANY: error: asked for 99 cut-points but the graph has only {{[0-9]+}} positions where it can be cut; the maximum is {{[0-9]+}}
// CAP: error: no cut-point carries at most 100 bytes per example; the smallest carries 2048

varuna.param @emb : !varuna.tensor<[64, 32], f32>
varuna.param @w0 : !varuna.tensor<[32, 32], f32>
varuna.param @w1 : !varuna.tensor<[32, 32], f32>
varuna.param @w2 : !varuna.tensor<[32, 32], f32>
varuna.param @head : !varuna.tensor<[32, 64], f32>
func.func @blocks(%ids: !varuna.tensor<[B, 16], i64>, %mask: !varuna.tensor<[B, 16, 1], f32>,
                  %labels: !varuna.tensor<[B, 16], i64>) -> !varuna.tensor<[], f32> attributes {varuna.graph} {
  %e = varuna.get_param @emb : !varuna.tensor<[64, 32], f32>
  %x = varuna.gather %e, %ids {axis = 0 : i64} : !varuna.tensor<[64, 32], f32>, !varuna.tensor<[B, 16], i64> -> !varuna.tensor<[B, 16, 32], f32>
  %w0 = varuna.get_param @w0 : !varuna.tensor<[32, 32], f32>
  %a0 = varuna.matmul %x, %w0 : !varuna.tensor<[B, 16, 32], f32>, !varuna.tensor<[32, 32], f32> -> !varuna.tensor<[B, 16, 32], f32>
  %r0 = varuna.unary relu, %a0 : !varuna.tensor<[B, 16, 32], f32>
  %m0 = varuna.mul %r0, %mask : !varuna.tensor<[B, 16, 32], f32>, !varuna.tensor<[B, 16, 1], f32> -> !varuna.tensor<[B, 16, 32], f32>
  %h0 = varuna.add %x, %m0 : !varuna.tensor<[B, 16, 32], f32>, !varuna.tensor<[B, 16, 32], f32> -> !varuna.tensor<[B, 16, 32], f32>
  %w1 = varuna.get_param @w1 : !varuna.tensor<[32, 32], f32>
  %a1 = varuna.matmul %h0, %w1 : !varuna.tensor<[B, 16, 32], f32>, !varuna.tensor<[32, 32], f32> -> !varuna.tensor<[B, 16, 32], f32>
  %r1 = varuna.unary relu, %a1 : !varuna.tensor<[B, 16, 32], f32>
  %m1 = varuna.mul %r1, %mask : !varuna.tensor<[B, 16, 32], f32>, !varuna.tensor<[B, 16, 1], f32> -> !varuna.tensor<[B, 16, 32], f32>
  %h1 = varuna.add %h0, %m1 : !varuna.tensor<[B, 16, 32], f32>, !varuna.tensor<[B, 16, 32], f32> -> !varuna.tensor<[B, 16, 32], f32>
  %w2 = varuna.get_param @w2 : !varuna.tensor<[32, 32], f32>
  %a2 = varuna.matmul %h1, %w2 : !varuna.tensor<[B, 16, 32], f32>, !varuna.tensor<[32, 32], f32> -> !varuna.tensor<[B, 16, 32], f32>
  %r2 = varuna.unary relu, %a2 : !varuna.tensor<[B, 16, 32], f32>
  %m2 = varuna.mul %r2, %mask : !varuna.tensor<[B, 16, 32], f32>, !varuna.tensor<[B, 16, 1], f32> -> !varuna.tensor<[B, 16, 32], f32>
  %h2 = varuna.add %h1, %m2 : !varuna.tensor<[B, 16, 32], f32>, !varuna.tensor<[B, 16, 32], f32> -> !varuna.tensor<[B, 16, 32], f32>
  %hw = varuna.get_param @head : !varuna.tensor<[32, 64], f32>
  %logits = varuna.matmul %h2, %hw : !varuna.tensor<[B, 16, 32], f32>, !varuna.tensor<[32, 64], f32> -> !varuna.tensor<[B, 16, 64], f32>
  %lf = varuna.reshape %logits : !varuna.tensor<[B, 16, 64], f32> -> !varuna.tensor<[B*16, 64], f32>
  %yf = varuna.reshape %labels : !varuna.tensor<[B, 16], i64> -> !varuna.tensor<[B*16], i64>
  %loss = varuna.cross_entropy mean, %lf, %yf : !varuna.tensor<[B*16, 64], f32>, !varuna.tensor<[B*16], i64> -> !varuna.tensor<[], f32>
  return %loss : !varuna.tensor<[], f32>
}
