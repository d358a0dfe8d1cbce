// A value's step-1 slices along one static axis that tile it exactly (a
// fused qkv projection cut into q, k and v) become one stage::split, made
// where the first of them is and read by each: one autograd node whose
// backward concatenates the pieces' gradients instead of adding
// zero-padded ones. Slices that leave a gap, overlap or step stay slices.
// RUN: varuna-translate --emit-stage-cpp %s | FileCheck %s

// CHECK-LABEL: // ----- file: body_0.cpp
// CHECK:        stage::Tensor split0[3];
// CHECK-NEXT:   stage::split(args[0], 1, {2, 1, 3}, split0);
// CHECK-NEXT:   stage::Tensor v0 = std::move(split0[2]);
// CHECK-NEXT:   stage::Tensor v1 = std::move(split0[0]);
// CHECK:        stage::Tensor v2 = stage::slice(args[1], 1, 0, 2, 1);
// CHECK-NEXT:   stage::Tensor v3 = stage::slice(args[1], 1, 3, 6, 1);
// CHECK-NEXT:   stage::Tensor v4 = stage::slice(args[1], 1, 1, 4, 1);
// CHECK-NEXT:   stage::Tensor v5 = std::move(split0[1]);
// CHECK-NEXT:   stage::Tensor v6 = stage::slice(args[2], 1, 0, 6, 2);
// CHECK-NEXT:   stage::Tensor v7 = stage::slice(args[2], 1, 1, 6, 2);
// CHECK-NOT:    stage::split(

module {
  func.func @section_0(%x: !varuna.tensor<[B, 6], f32> {varuna.name = "x"}, %y: !varuna.tensor<[B, 6], f32> {varuna.name = "y"}, %z: !varuna.tensor<[B, 6], f32> {varuna.name = "z"}) -> (!varuna.tensor<[B, 3], f32>, !varuna.tensor<[B, 2], f32>, !varuna.tensor<[B, 2], f32>, !varuna.tensor<[B, 3], f32>, !varuna.tensor<[B, 3], f32>, !varuna.tensor<[B, 1], f32>, !varuna.tensor<[B, 3], f32>, !varuna.tensor<[B, 3], f32>) attributes {varuna.section = 0 : i64} {
    %c = varuna.slice %x {axis = 1 : i64, end = 6 : i64, start = 3 : i64, step = 1 : i64} : !varuna.tensor<[B, 6], f32> -> !varuna.tensor<[B, 3], f32>
    %a = varuna.slice %x {axis = 1 : i64, end = 2 : i64, start = 0 : i64, step = 1 : i64} : !varuna.tensor<[B, 6], f32> -> !varuna.tensor<[B, 2], f32>
    %g1 = varuna.slice %y {axis = 1 : i64, end = 2 : i64, start = 0 : i64, step = 1 : i64} : !varuna.tensor<[B, 6], f32> -> !varuna.tensor<[B, 2], f32>
    %g2 = varuna.slice %y {axis = 1 : i64, end = 6 : i64, start = 3 : i64, step = 1 : i64} : !varuna.tensor<[B, 6], f32> -> !varuna.tensor<[B, 3], f32>
    %r = varuna.slice %y {axis = 1 : i64, end = 4 : i64, start = 1 : i64, step = 1 : i64} : !varuna.tensor<[B, 6], f32> -> !varuna.tensor<[B, 3], f32>
    %b = varuna.slice %x {axis = 1 : i64, end = 3 : i64, start = 2 : i64, step = 1 : i64} : !varuna.tensor<[B, 6], f32> -> !varuna.tensor<[B, 1], f32>
    %e = varuna.slice %z {axis = 1 : i64, end = 6 : i64, start = 0 : i64, step = 2 : i64} : !varuna.tensor<[B, 6], f32> -> !varuna.tensor<[B, 3], f32>
    %o = varuna.slice %z {axis = 1 : i64, end = 6 : i64, start = 1 : i64, step = 2 : i64} : !varuna.tensor<[B, 6], f32> -> !varuna.tensor<[B, 3], f32>
    return %c, %a, %g1, %g2, %r, %b, %e, %o : !varuna.tensor<[B, 3], f32>, !varuna.tensor<[B, 2], f32>, !varuna.tensor<[B, 2], f32>, !varuna.tensor<[B, 3], f32>, !varuna.tensor<[B, 3], f32>, !varuna.tensor<[B, 1], f32>, !varuna.tensor<[B, 3], f32>, !varuna.tensor<[B, 3], f32>
  }
}
