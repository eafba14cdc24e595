// RUN: not cnnc %s --train --emit cuda 2>&1 | FileCheck %s
// Softmax inside the network is not differentiable: one diagnostic naming the op.
func.func @forward(%x: tensor<2x3x4x4xf32> {cnn.input}, %w: tensor<10x48xf32> {cnn.param = "fc.weight"}) -> tensor<2x10xf32> {
  %f = cnn.flatten %x {axis = 1} : (tensor<2x3x4x4xf32>) -> tensor<2x48xf32>
  %y = cnn.matmul %f, %w {transpose_rhs = true} : (tensor<2x48xf32>, tensor<10x48xf32>) -> tensor<2x10xf32>
  // CHECK: error: cnn-autodiff: no gradient rule for 'cnn.softmax'
  %s = cnn.softmax %y {axis = 1} : (tensor<2x10xf32>) -> tensor<2x10xf32>
  return %s : tensor<2x10xf32>
}
