// varuna-translate --emit-stage-cpp: one C++ function per distinct section
// body (sections equal up to parameter names share it), shapes as
// expressions of the micro-batch size B, and the job table.
// RUN: varuna-translate --emit-stage-cpp %s | FileCheck %s
// RUN: not varuna-translate --emit-stage-cpp %S/Inputs/unsupported-op.mlir 2>&1 | FileCheck %s --check-prefix=ERR
// RUN: not varuna-translate --emit-stage-cpp %S/Inputs/no-sections.mlir 2>&1 | FileCheck %s --check-prefix=NOSEC

// CHECK-LABEL: // ----- file: body_0.cpp
// CHECK: #include "varuna/runtime/StageAPI.h"
// CHECK: // Used by: section_0
// CHECK: extern "C" VARUNA_STAGE_API void varuna_body_0(stage::Context &ctx, const stage::Tensor *args, const stage::Tensor *params, stage::Tensor *results) {
// CHECK:   stage::Tensor v0 = stage::gather(params[0], args[0], 0);
// CHECK:   stage::Tensor v1 = stage::reshape(v0, {4 * B, 8});
// CHECK-NEXT:   v0 = stage::Tensor();
// CHECK:   results[0] = v1;

// Sections 1 and 2 read different parameters through the same code.
// CHECK-LABEL: // ----- file: body_1.cpp
// CHECK: // Used by: section_1, section_2
// CHECK:   static const double k0_v[] = {0.5};
// CHECK:   stage::Tensor v0 = stage::matmul(args[0], params[0]);
// CHECK:   stage::Tensor v1 = stage::binary(stage::Binary::mul, v0, k0);
// CHECK:   stage::Tensor v2 = stage::unary(stage::Unary::gelu_tanh, v1);
// CHECK:   stage::Tensor v3 = stage::binary(stage::Binary::add, args[0], v2);
// CHECK:   results[0] = v3;

// CHECK-LABEL: // ----- file: body_2.cpp
// CHECK: // Used by: section_3
// CHECK:   stage::Tensor v0 = stage::cross_entropy(ctx, args[0], args[1], stage::LossReduction::mean, true, -100, false);

// CHECK-LABEL: // ----- file: job_table.cpp
// CHECK: const char *const params_0[] = {"emb"};
// CHECK: const char *const params_1[] = {"w1"};
// CHECK: const char *const params_2[] = {"w2"};
// CHECK: const char *const params_3[] = {nullptr};
// CHECK:   {"section_0", 0, varuna_body_0, 1, 1, 1, params_0},
// CHECK:   {"section_1", 1, varuna_body_1, 1, 1, 1, params_1},
// CHECK:   {"section_2", 1, varuna_body_1, 1, 1, 1, params_2},
// CHECK:   {"section_3", 2, varuna_body_2, 2, 0, 1, params_3},
// CHECK: const stage::JobTable table = {stage::kAbiVersion, "0x{{[0-9a-f]+}}", 4, sections, 3};
// CHECK: varuna_stage_job_table()

// ERR: error: cannot generate code for section @section_0: 'builtin.unrealized_conversion_cast' has no C++ code generator
// NOSEC: error: no sections to generate code for: compile the job with varuna-compile

module {
  varuna.param @emb : !varuna.tensor<[10, 8], f32> init #varuna.data<file = "w.bin", offset = 0, size = 320>
  varuna.param @w1 : !varuna.tensor<[8, 8], f32> init #varuna.data<file = "w.bin", offset = 320, size = 256>
  varuna.param @w2 : !varuna.tensor<[8, 8], f32> init #varuna.data<file = "w.bin", offset = 576, size = 256>
  func.func @section_0(%ids: !varuna.tensor<[B, 4], i64> {varuna.name = "ids"}) -> (!varuna.tensor<[B*4, 8], f32> {varuna.send = 0 : i64}) attributes {varuna.section = 0 : i64} {
    %e = varuna.get_param @emb : !varuna.tensor<[10, 8], f32>
    %g = varuna.gather %e, %ids {axis = 0 : i64} : !varuna.tensor<[10, 8], f32>, !varuna.tensor<[B, 4], i64> -> !varuna.tensor<[B, 4, 8], f32>
    %r = varuna.reshape %g : !varuna.tensor<[B, 4, 8], f32> -> !varuna.tensor<[B*4, 8], f32>
    return %r : !varuna.tensor<[B*4, 8], f32>
  }
  func.func @section_1(%x: !varuna.tensor<[B*4, 8], f32> {varuna.recv = 0 : i64}) -> (!varuna.tensor<[B*4, 8], f32> {varuna.send = 0 : i64}) attributes {varuna.section = 1 : i64} {
    %w = varuna.get_param @w1 : !varuna.tensor<[8, 8], f32>
    %m = varuna.matmul %x, %w : !varuna.tensor<[B*4, 8], f32>, !varuna.tensor<[8, 8], f32> -> !varuna.tensor<[B*4, 8], f32>
    %c = varuna.constant dense<0.5> : tensor<f32> -> !varuna.tensor<[], f32>
    %s = varuna.mul %m, %c : !varuna.tensor<[B*4, 8], f32>, !varuna.tensor<[], f32> -> !varuna.tensor<[B*4, 8], f32>
    %a = varuna.unary gelu_tanh, %s : !varuna.tensor<[B*4, 8], f32>
    %y = varuna.add %x, %a : !varuna.tensor<[B*4, 8], f32>, !varuna.tensor<[B*4, 8], f32> -> !varuna.tensor<[B*4, 8], f32>
    return %y : !varuna.tensor<[B*4, 8], f32>
  }
  func.func @section_2(%x: !varuna.tensor<[B*4, 8], f32> {varuna.recv = 0 : i64}) -> (!varuna.tensor<[B*4, 8], f32> {varuna.send = 0 : i64}) attributes {varuna.section = 2 : i64} {
    %w = varuna.get_param @w2 : !varuna.tensor<[8, 8], f32>
    %m = varuna.matmul %x, %w : !varuna.tensor<[B*4, 8], f32>, !varuna.tensor<[8, 8], f32> -> !varuna.tensor<[B*4, 8], f32>
    %c = varuna.constant dense<0.5> : tensor<f32> -> !varuna.tensor<[], f32>
    %s = varuna.mul %m, %c : !varuna.tensor<[B*4, 8], f32>, !varuna.tensor<[], f32> -> !varuna.tensor<[B*4, 8], f32>
    %a = varuna.unary gelu_tanh, %s : !varuna.tensor<[B*4, 8], f32>
    %y = varuna.add %x, %a : !varuna.tensor<[B*4, 8], f32>, !varuna.tensor<[B*4, 8], f32> -> !varuna.tensor<[B*4, 8], f32>
    return %y : !varuna.tensor<[B*4, 8], f32>
  }
  func.func @section_3(%x: !varuna.tensor<[B*4, 8], f32> {varuna.recv = 0 : i64}, %labels: !varuna.tensor<[B*4], i64> {varuna.name = "labels"}) -> (!varuna.tensor<[], f32> {varuna.loss}) attributes {varuna.section = 3 : i64} {
    %l = varuna.cross_entropy mean, %x, %labels {ignore_index = -100 : i64} : !varuna.tensor<[B*4, 8], f32>, !varuna.tensor<[B*4], i64> -> !varuna.tensor<[], f32>
    return %l : !varuna.tensor<[], f32>
  }
}
