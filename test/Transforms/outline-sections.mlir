// RUN: varuna-opt %s --varuna-find-cut-points --varuna-outline-sections | FileCheck %s

// Three residual blocks; the embedding output %x is also used by the head
// (a long-range activation: forwarded through the middle sections), the mask
// derives from a graph input (recomputed where used), the tied weight @emb is
// read in the first and the last section.

// CHECK-LABEL: func.func @section_0
// CHECK-SAME: (%[[IDS:.*]]: !varuna.tensor<[B, 16], i64> {varuna.name = "ids"}, %[[M0:.*]]: !varuna.tensor<[B, 16], f32> {varuna.name = "mask"})
// CHECK-SAME: -> (!varuna.tensor<[B, 16, 32], f32> {varuna.send = 0 : i64}, !varuna.tensor<[B, 16, 32], f32> {varuna.send = 1 : i64})
// CHECK-SAME: varuna.section = 0
// CHECK: varuna.get_param @emb
// CHECK: varuna.gather

// CHECK-LABEL: func.func @section_1
// CHECK-SAME: (%[[X1:.*]]: !varuna.tensor<[B, 16, 32], f32> {varuna.recv = 0 : i64}, %[[H1:.*]]: !varuna.tensor<[B, 16, 32], f32> {varuna.recv = 1 : i64}, %{{.*}}: !varuna.tensor<[B, 16], f32> {varuna.name = "mask"})
// CHECK: varuna.reshape %{{.*}} : !varuna.tensor<[B, 16], f32> -> !varuna.tensor<[B, 16, 1], f32>
// CHECK: return %[[X1]], %{{.*}} :

// CHECK-LABEL: func.func @section_2
// CHECK-SAME: (%[[X2:.*]]: !varuna.tensor<[B, 16, 32], f32> {varuna.recv = 0 : i64}
// CHECK: return %[[X2]], %{{.*}} :

// CHECK-LABEL: func.func @section_3
// CHECK-SAME: {varuna.recv = 0 : i64}
// CHECK-SAME: {varuna.name = "labels"}
// CHECK-SAME: -> (!varuna.tensor<[], f32> {varuna.loss})
// CHECK: varuna.get_param @emb
// CHECK: varuna.transpose
// CHECK: varuna.cross_entropy

varuna.param @emb : !varuna.tensor<[64, 32], f32>
varuna.param @w0 : !varuna.tensor<[32, 32], f32>
varuna.param @w1 : !varuna.tensor<[32, 32], f32>
varuna.param @w2 : !varuna.tensor<[32, 32], f32>
func.func @forward(%ids: !varuna.tensor<[B, 16], i64> {varuna.name = "ids"}, %mask2: !varuna.tensor<[B, 16], f32> {varuna.name = "mask"},
                   %labels: !varuna.tensor<[B, 16], i64> {varuna.name = "labels"}) -> (!varuna.tensor<[], f32> {varuna.loss}) attributes {varuna.graph} {
  %mask = varuna.reshape %mask2 : !varuna.tensor<[B, 16], f32> -> !varuna.tensor<[B, 16, 1], f32>
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
  %hx = varuna.add %h2, %x : !varuna.tensor<[B, 16, 32], f32>, !varuna.tensor<[B, 16, 32], f32> -> !varuna.tensor<[B, 16, 32], f32>
  %et = varuna.transpose %e, [1, 0] : !varuna.tensor<[64, 32], f32> -> !varuna.tensor<[32, 64], f32>
  %logits = varuna.matmul %hx, %et : !varuna.tensor<[B, 16, 32], f32>, !varuna.tensor<[32, 64], f32> -> !varuna.tensor<[B, 16, 64], f32>
  %lf = varuna.reshape %logits : !varuna.tensor<[B, 16, 64], f32> -> !varuna.tensor<[B*16, 64], f32>
  %yf = varuna.reshape %labels : !varuna.tensor<[B, 16], i64> -> !varuna.tensor<[B*16], i64>
  %loss = varuna.cross_entropy mean, %lf, %yf : !varuna.tensor<[B*16, 64], f32>, !varuna.tensor<[B*16], i64> -> !varuna.tensor<[], f32>
  return %loss : !varuna.tensor<[], f32>
}
