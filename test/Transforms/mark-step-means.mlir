// RUN: varuna-opt %s -split-input-file --varuna-mark-step-means -verify-diagnostics | FileCheck %s

// A cross_entropy plus a mean over the examples (an auxiliary loss): the mean
// is marked; the mean over features only (still per example) is not.
// CHECK-LABEL: func.func @aux_loss
// CHECK: varuna.reduce mean, %arg0 {axes = array<i64: 1>, keepdim = false} :
// CHECK: varuna.reduce mean, {{.*}} {axes = array<i64: 0>, keepdim = false, step_mean}
// CHECK: varuna.cross_entropy mean
func.func @aux_loss(%x: !varuna.tensor<[B, 4], f32>, %y: !varuna.tensor<[B], i64>) -> (!varuna.tensor<[], f32> {varuna.loss}) attributes {varuna.graph} {
  %f = varuna.reduce mean, %x {axes = array<i64: 1>, keepdim = false} : !varuna.tensor<[B, 4], f32> -> !varuna.tensor<[B], f32>
  %m = varuna.reduce mean, %f {axes = array<i64: 0>, keepdim = false} : !varuna.tensor<[B], f32> -> !varuna.tensor<[], f32>
  %ce = varuna.cross_entropy mean, %x, %y {ignore_index = 0 : i64} : !varuna.tensor<[B, 4], f32>, !varuna.tensor<[B], i64> -> !varuna.tensor<[], f32>
  %c = varuna.constant dense<0.01> : tensor<f32> -> !varuna.tensor<[], f32>
  %s = varuna.mul %m, %c : !varuna.tensor<[], f32>, !varuna.tensor<[], f32> -> !varuna.tensor<[], f32>
  %l = varuna.add %ce, %s : !varuna.tensor<[], f32>, !varuna.tensor<[], f32> -> !varuna.tensor<[], f32>
  return %l : !varuna.tensor<[], f32>
}

// -----

// A term that does not depend on the examples (a weight penalty, a number)
// becomes a step mean of itself over the examples: micro-batches whose
// losses add up count it once. Found through add / sub, neg and mul by a
// factor; a factor itself is left alone.
// CHECK-LABEL: func.func @penalty
// CHECK: %[[W:.*]] = varuna.get_param @w
// CHECK: %[[P:.*]] = varuna.reduce sum, %[[W]]
// CHECK: %[[E:.*]] = varuna.expand %[[P]] : !varuna.tensor<[], f32> -> !varuna.tensor<[B], f32>
// CHECK: %[[M:.*]] = varuna.reduce mean, %[[E]] {axes = array<i64: 0>, keepdim = false, step_mean}
// CHECK: varuna.add %{{.*}}, %[[M]]
// CHECK: %[[E2:.*]] = varuna.expand %{{.*}} : !varuna.tensor<[], f32> -> !varuna.tensor<[B], f32>
// CHECK: %[[M2:.*]] = varuna.reduce mean, %[[E2]] {axes = array<i64: 0>, keepdim = false, step_mean}
// CHECK: varuna.sub %[[M2]], %{{.*}}
// CHECK: %[[H:.*]] = varuna.constant dense<5.000000e-01>
// CHECK: varuna.mul %{{.*}}, %[[H]]
// CHECK-NOT: varuna.expand
varuna.param @w : !varuna.tensor<[4], f32>
func.func @penalty(%x: !varuna.tensor<[B, 4], f32>, %y: !varuna.tensor<[B], i64>) -> (!varuna.tensor<[], f32> {varuna.loss}) attributes {varuna.graph} {
  %w = varuna.get_param @w : !varuna.tensor<[4], f32>
  %p = varuna.reduce sum, %w {axes = array<i64: 0>, keepdim = false} : !varuna.tensor<[4], f32> -> !varuna.tensor<[], f32>
  %ce = varuna.cross_entropy sum, %x, %y : !varuna.tensor<[B, 4], f32>, !varuna.tensor<[B], i64> -> !varuna.tensor<[], f32>
  %a = varuna.add %ce, %p : !varuna.tensor<[], f32>, !varuna.tensor<[], f32> -> !varuna.tensor<[], f32>
  %one = varuna.constant dense<1.0> : tensor<f32> -> !varuna.tensor<[], f32>
  %n = varuna.unary neg, %a : !varuna.tensor<[], f32>
  %s = varuna.sub %one, %n : !varuna.tensor<[], f32>, !varuna.tensor<[], f32> -> !varuna.tensor<[], f32>
  %cst = varuna.constant dense<0.5> : tensor<f32> -> !varuna.tensor<[], f32>
  %l = varuna.mul %s, %cst : !varuna.tensor<[], f32>, !varuna.tensor<[], f32> -> !varuna.tensor<[], f32>
  return %l : !varuna.tensor<[], f32>
}

// -----

// A batch statistic that normalizes the examples again (x - x.mean(0)) keeps
// its micro-batch's value: not marked, though the loss reads it too.
// CHECK-LABEL: func.func @batch_statistic
// CHECK-NOT: step_mean
func.func @batch_statistic(%x: !varuna.tensor<[B, 4], f32>) -> (!varuna.tensor<[], f32> {varuna.loss}) attributes {varuna.graph} {
  %m = varuna.reduce mean, %x {axes = array<i64: 0>, keepdim = true} : !varuna.tensor<[B, 4], f32> -> !varuna.tensor<[1, 4], f32>
  %d = varuna.sub %x, %m : !varuna.tensor<[B, 4], f32>, !varuna.tensor<[1, 4], f32> -> !varuna.tensor<[B, 4], f32>
  %s = varuna.reduce sum, %d {axes = array<i64: 0, 1>, keepdim = false} : !varuna.tensor<[B, 4], f32> -> !varuna.tensor<[], f32>
  %n = varuna.reduce sum, %m {axes = array<i64: 0, 1>, keepdim = false} : !varuna.tensor<[1, 4], f32> -> !varuna.tensor<[], f32>
  %l = varuna.add %s, %n : !varuna.tensor<[], f32>, !varuna.tensor<[], f32> -> !varuna.tensor<[], f32>
  return %l : !varuna.tensor<[], f32>
}

// -----

// A mean the graph also returns as another output (a metric) keeps its
// micro-batch's value: not marked.
// CHECK-LABEL: func.func @metric
// CHECK-NOT: step_mean
func.func @metric(%x: !varuna.tensor<[B, 4], f32>) -> (!varuna.tensor<[], f32> {varuna.loss}, !varuna.tensor<[], f32>) attributes {varuna.graph} {
  %m = varuna.reduce mean, %x {axes = array<i64: 0, 1>, keepdim = false} : !varuna.tensor<[B, 4], f32> -> !varuna.tensor<[], f32>
  %l = varuna.unary neg, %m : !varuna.tensor<[], f32>
  return %l, %m : !varuna.tensor<[], f32>, !varuna.tensor<[], f32>
}

// -----

// Sections would not carry the marks: the pass runs before outlining.
func.func @forward(%x: !varuna.tensor<[B, 4], f32>) -> (!varuna.tensor<[], f32> {varuna.loss}) attributes {varuna.graph} {
  %m = varuna.reduce mean, %x {axes = array<i64: 0, 1>, keepdim = false} : !varuna.tensor<[B, 4], f32> -> !varuna.tensor<[], f32>
  return %m : !varuna.tensor<[], f32>
}
// expected-error @+1 {{varuna-mark-step-means runs before varuna-outline-sections}}
func.func @section_0(%x: !varuna.tensor<[B, 4], f32>) -> !varuna.tensor<[], f32> attributes {varuna.section = 0 : i64} {
  %m = varuna.reduce mean, %x {axes = array<i64: 0, 1>, keepdim = false} : !varuna.tensor<[B, 4], f32> -> !varuna.tensor<[], f32>
  return %m : !varuna.tensor<[], f32>
}

// -----

// Means over an x[mask] selection (the importer's division by the selected
// count, marked varuna.step_divisor): kept where the quotient feeds only the
// loss; dropped where it also scales the examples (a batch statistic).
// CHECK-LABEL: func.func @selection_means
// CHECK: %[[LOSSMEAN:.*]] = varuna.div %{{.*}}, %{{.*}} {varuna.step_divisor}
// CHECK: %[[STAT:.*]] = varuna.div %{{.*}}, %{{.*}} :
// CHECK: varuna.mul %arg0, %[[STAT]]
func.func @selection_means(%x: !varuna.tensor<[B, 4], f32>, %m: !varuna.tensor<[B, 4], i1>) -> (!varuna.tensor<[], f32> {varuna.loss}) attributes {varuna.graph} {
  %zero = varuna.constant dense<0.0> : tensor<f32> -> !varuna.tensor<[], f32>
  %one = varuna.constant dense<1.0> : tensor<f32> -> !varuna.tensor<[], f32>
  %kept = varuna.where %m, %x, %zero : !varuna.tensor<[B, 4], i1>, !varuna.tensor<[B, 4], f32>, !varuna.tensor<[], f32> -> !varuna.tensor<[B, 4], f32>
  %sum = varuna.reduce sum, %kept {axes = array<i64: 0, 1>, keepdim = false} : !varuna.tensor<[B, 4], f32> -> !varuna.tensor<[], f32>
  %mf = varuna.cast %m : !varuna.tensor<[B, 4], i1> -> !varuna.tensor<[B, 4], f32>
  %cnt = varuna.reduce sum, %mf {axes = array<i64: 0, 1>, keepdim = false} : !varuna.tensor<[B, 4], f32> -> !varuna.tensor<[], f32>
  %d = varuna.maximum %cnt, %one : !varuna.tensor<[], f32>, !varuna.tensor<[], f32> -> !varuna.tensor<[], f32>
  %mean = varuna.div %sum, %d {varuna.step_divisor} : !varuna.tensor<[], f32>, !varuna.tensor<[], f32> -> !varuna.tensor<[], f32>
  %stat = varuna.div %sum, %d {varuna.step_divisor} : !varuna.tensor<[], f32>, !varuna.tensor<[], f32> -> !varuna.tensor<[], f32>
  %scaled = varuna.mul %x, %stat : !varuna.tensor<[B, 4], f32>, !varuna.tensor<[], f32> -> !varuna.tensor<[B, 4], f32>
  %s2 = varuna.reduce sum, %scaled {axes = array<i64: 0, 1>, keepdim = false} : !varuna.tensor<[B, 4], f32> -> !varuna.tensor<[], f32>
  %l = varuna.add %mean, %s2 : !varuna.tensor<[], f32>, !varuna.tensor<[], f32> -> !varuna.tensor<[], f32>
  return %l : !varuna.tensor<[], f32>
}
