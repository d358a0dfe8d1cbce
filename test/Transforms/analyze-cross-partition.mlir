// RUN: varuna-opt %S/outline-sections.mlir --varuna-find-cut-points --varuna-outline-sections --varuna-analyze-cross-partition | FileCheck %s
// RUN: varuna-opt %S/outline-sections.mlir --varuna-find-cut-points --varuna-outline-sections "--varuna-analyze-cross-partition=global-grad-norm=true overflow-check=true" | FileCheck %s --check-prefix=GLOBAL
// RUN: not varuna-opt %S/outline-sections.mlir --varuna-analyze-cross-partition 2>&1 | FileCheck %s --check-prefix=NOSECTIONS

// The tied embedding is read by the first and the last section; the value
// %x produced in section 0 and used in section 3 is forwarded by sections 1
// and 2; the mask input is re-read where used.

// CHECK: varuna.shared_param @emb sections [0, 3]
// CHECK-NOT: varuna.shared_param
// CHECK: varuna.global_reduce @loss sum over "loss"
// CHECK-NOT: varuna.global_reduce
// Sections 1 and 2 (blocks 1 and 2) are equal up to parameter names: one
// body.
// CHECK-LABEL: func.func @section_0
// CHECK-SAME: varuna.body = 0
// CHECK-SAME: varuna.forwarded = array<i64>
// CHECK-SAME: varuna.inputs = ["ids", "mask"]
// CHECK-SAME: varuna.params = ["emb", "w0"]
// CHECK-LABEL: func.func @section_1
// CHECK-SAME: varuna.body = 1
// CHECK-SAME: varuna.forwarded = array<i64: 0>
// CHECK-SAME: varuna.inputs = ["mask"]
// CHECK-SAME: varuna.params = ["w1"]
// CHECK-LABEL: func.func @section_2
// CHECK-SAME: varuna.body = 1
// CHECK-SAME: varuna.forwarded = array<i64: 0>
// CHECK-LABEL: func.func @section_3
// CHECK-SAME: varuna.body = 3
// CHECK-SAME: varuna.duplicated = 1
// CHECK-SAME: varuna.inputs = ["labels"]
// CHECK-SAME: varuna.params = ["emb"]

// GLOBAL: varuna.global_reduce @loss sum over "loss"
// GLOBAL-NEXT: varuna.global_reduce @grad_norm sum_of_squares over "gradients"
// GLOBAL-NEXT: varuna.global_reduce @overflow any over "gradients"

// NOSECTIONS: error: no sections: run varuna-outline-sections first
