// dropout and random draw from a generator seeded by --seed: the same seed
// gives the same values, another seed other values. The dropout keeps about
// half of 1000 ones and scales them by 2.
// REQUIRES: torch
// RUN: rm -rf %t.empty && mkdir -p %t.empty
// RUN: varuna-eval %s --inputs %t.empty --seed 1 > %t.1
// RUN: varuna-eval %s --inputs %t.empty --seed 1 > %t.1b
// RUN: varuna-eval %s --inputs %t.empty --seed 2 > %t.2
// RUN: diff %t.1 %t.1b
// RUN: not diff %t.1 %t.2
// RUN: FileCheck %s < %t.1

// CHECK: dropout = [1000] float32 sum {{[0-9]+}}
// CHECK-NEXT: uniform = [1000] float32 sum {{[0-9.]+}}

module {
  func.func @forward() -> (!varuna.tensor<[1000], f32> {varuna.name = "dropout"},
                           !varuna.tensor<[1000], f32> {varuna.name = "uniform"})
      attributes {varuna.graph} {
    %ones = varuna.full 1.0 : f32 -> !varuna.tensor<[1000], f32>
    %d = varuna.dropout %ones, 5.000000e-01 : !varuna.tensor<[1000], f32>
    %u = varuna.random uniform, 0.0, 1.0 -> !varuna.tensor<[1000], f32>
    return %d, %u : !varuna.tensor<[1000], f32>, !varuna.tensor<[1000], f32>
  }
}
