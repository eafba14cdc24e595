// A "spatial_sum" lowering the reduction cannot take (axes [1, 3], not one
// run: a hand-edited step) is one error of the printer naming it, not a
// wrong launch.
// RUN: cnnc-opt %s --cnn-autodiff --cse --cnn-gpu-pipeline -o %t.step.mlir
// RUN: sed 's/vector = 8, reduction = "thread_per_result">, cnn.offset/vector = 8>, cnn.lowering = "spatial_sum", cnn.offset/' %t.step.mlir > %t.stale.mlir
// RUN: not cnnc-translate --cnn-to-cuda %t.stale.mlir -o /dev/null 2>&1 | FileCheck %s
// CHECK: error: CUDA backend: 'cnn.reduce_sum' has cnn.lowering = "spatial_sum" but does not sum one run of dimensions as spatialSumTiles can (run cnn-select-lowering again)
// CHECK-NOT: error:
func.func @forward(%x: tensor<2x8x4x4xf32> {cnn.input},
                   %fc: tensor<10x4xf32> {cnn.param = "fc.weight"}) -> tensor<2x10xf32> {
  %r = cnn.reduce_sum %x {axes = array<i64: 1, 3>} : (tensor<2x8x4x4xf32>) -> tensor<2x1x4x1xf32>
  %f = cnn.reshape %r : (tensor<2x1x4x1xf32>) -> tensor<2x4xf32>
  %y = cnn.matmul %f, %fc {transpose_rhs = true} : (tensor<2x4xf32>, tensor<10x4xf32>) -> tensor<2x10xf32>
  return %y : tensor<2x10xf32>
}
