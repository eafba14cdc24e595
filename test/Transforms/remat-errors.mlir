// cnn-remat's options out of range are one error and a failed pass, not a
// silent "no budget" (a negative budget would otherwise recompute every
// candidate).
// RUN: not cnnc-opt %s -cnn-remat="budget-percent=150" 2>&1 | FileCheck %s --check-prefix=PCT
// RUN: not cnnc-opt %s -cnn-remat="budget-mb=-1" 2>&1 | FileCheck %s --check-prefix=MB
// RUN: not cnnc-opt %s -cnn-remat="min-gap=0" 2>&1 | FileCheck %s --check-prefix=GAP
// PCT: error: cnn-remat: budget-mb must be >= 0, budget-percent in [0, 100] and min-gap >= 1, got 0, 150 and 16
// MB: error: cnn-remat: budget-mb must be >= 0, budget-percent in [0, 100] and min-gap >= 1, got -1, 0 and 16
// GAP: error: cnn-remat: budget-mb must be >= 0, budget-percent in [0, 100] and min-gap >= 1, got 0, 0 and 0
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = cnn.relu %x : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
