// A "tiled" lowering on a transpose that is no batched 2-D transpose
// ((0, 2, 1, 3) keeps its innermost dimension: a hand-edited step) is one
// error of the printer naming it, not a wrong launch.
// RUN: cnnc-opt %s --cnn-autodiff --cse --cnn-gpu-pipeline -o %t.step.mlir
// RUN: sed 's/permutation = array<i64: 0, 2, 1, 3>/cnn.lowering = "tiled", permutation = array<i64: 0, 2, 1, 3>/' %t.step.mlir > %t.stale.mlir
// RUN: not cnnc-translate --cnn-to-cuda %t.stale.mlir -o /dev/null 2>&1 | FileCheck %s
// CHECK: error: CUDA backend: 'cnn.transpose' has cnn.lowering = "tiled" but is not a batched 2-D transpose as batchedTranspose2D takes it (run cnn-select-lowering again)
// CHECK-NOT: error:
func.func @forward(%x: tensor<2x32x16x32xf32> {cnn.input},
                   %fc: tensor<10x16384xf32> {cnn.param = "fc.weight"}) -> tensor<2x10xf32> {
  %t = cnn.transpose %x {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x32x16x32xf32>) -> tensor<2x16x32x32xf32>
  %f = cnn.reshape %t : (tensor<2x16x32x32xf32>) -> tensor<2x16384xf32>
  %y = cnn.matmul %f, %fc {transpose_rhs = true} : (tensor<2x16384xf32>, tensor<10x16384xf32>) -> tensor<2x10xf32>
  return %y : tensor<2x10xf32>
}
