// RUN: varuna-opt %S/find-cut-points.mlir -split-input-file --varuna-annotate-costs --varuna-find-cut-points --varuna-outline-sections --varuna-partition | FileCheck %s
// RUN: varuna-opt %S/find-cut-points.mlir -split-input-file --varuna-annotate-costs --varuna-find-cut-points --varuna-outline-sections --varuna-partition=stages=2 | FileCheck %s --check-prefix=TWO
// RUN: not varuna-opt %S/find-cut-points.mlir -split-input-file --varuna-annotate-costs --varuna-find-cut-points --varuna-outline-sections --varuna-partition=stages=5 2>&1 | FileCheck %s --check-prefix=TOOMANY
// RUN: not varuna-opt %S/find-cut-points.mlir -split-input-file --varuna-annotate-costs --varuna-find-cut-points --varuna-outline-sections --varuna-partition=memory-limit=1000 2>&1 | FileCheck %s --check-prefix=MEMORY

// Four sections (embedding + block 0, block 1, block 2, head): every P from
// 1 to 4. Per example (forward + backward FLOPs, from the cost model):
// sections 102400, 101888, 101888 and 205824 (the head's matmul is twice a
// block's and it adds the loss). P = 2: [0,3) [3,4) has bottleneck 306176,
// better than [0,2) [2,4) (307712). P = 3 and 4 are bound by the head.

// CHECK: varuna.partitions = [
// CHECK-SAME: boundaries = array<i64: 0, 4>{{.*}}stages = 1
// CHECK-SAME: bottleneck = 3.061760e+05 : f64, boundaries = array<i64: 0, 3, 4>{{.*}}stages = 2
// CHECK-SAME: bottleneck = 2.058240e+05 : f64, boundaries = array<i64: 0, 1, 3, 4>{{.*}}stages = 3
// CHECK-SAME: boundaries = array<i64: 0, 1, 2, 3, 4>{{.*}}stages = 4

// TWO: varuna.partitions = [{bottleneck = 3.061760e+05 : f64, boundaries = array<i64: 0, 3, 4>, imbalance = {{.*}}, stages = 2 : i64}]

// TOOMANY: error: P = 5 is larger than the 4 sections; the maximum is 4
// MEMORY: error: no pipeline depth fits the memory limit of 1000 bytes per device

// A measured profile replaces the estimates: section 2 dominates, so with
// P = 2 it gets a stage of its own side.
// RUN: varuna-opt %S/find-cut-points.mlir -split-input-file --varuna-annotate-costs --varuna-find-cut-points --varuna-outline-sections "--varuna-partition=stages=2 profile=%S/Inputs/profile-4.json" | FileCheck %s --check-prefix=PROFILE
// PROFILE: varuna.partitions = [{bottleneck = 3.300000e-02 : f64, boundaries = array<i64: 0, 2, 4>
// varuna-calibrate's calibration.json is a profile too: its times by
// micro-batch size, of which the largest (4) counts -- section 3 dominates
// there (at size 1 section 0 would).
// RUN: varuna-opt %S/find-cut-points.mlir -split-input-file --varuna-annotate-costs --varuna-find-cut-points --varuna-outline-sections "--varuna-partition=stages=2 profile=%S/Inputs/profile-4-cal.json" | FileCheck %s --check-prefix=CALPROFILE
// CALPROFILE: varuna.partitions = [{bottleneck = 1.200000e-01 : f64, boundaries = array<i64: 0, 3, 4>
// RUN: not varuna-opt %S/find-cut-points.mlir -split-input-file --varuna-annotate-costs --varuna-find-cut-points --varuna-outline-sections "--varuna-partition=profile=%S/Inputs/profile-1.json" 2>&1 | FileCheck %s --check-prefix=BADPROFILE
// BADPROFILE: error: profile '{{.*}}profile-1.json': has 1 sections, the model has 4
// A time the partitioner's sums overflow on (it crashed): refused as
// varuna-plan refuses it in a calibration.
// RUN: not varuna-opt %S/find-cut-points.mlir -split-input-file --varuna-annotate-costs --varuna-find-cut-points --varuna-outline-sections "--varuna-partition=profile=%S/Inputs/profile-4-huge.json" 2>&1 | FileCheck %s --check-prefix=HUGEPROFILE
// HUGEPROFILE: error: profile '{{.*}}profile-4-huge.json': sections[1]: a time of 1.00e+300 s is outside [0, 1e15]
