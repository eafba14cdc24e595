// RUN: not cnnc %s --train --emit cuda 2>&1 | FileCheck %s
// An op without a gradient rule between the parameters and the loss (a
// backward op, pad_grad, in the forward function): one diagnostic naming it.
func.func @forward(%x: tensor<2x3x4x4xf32> {cnn.input}, %w: tensor<14x48xf32> {cnn.param = "fc.weight"}) -> tensor<2x10xf32> {
  %f = cnn.flatten %x {axis = 1} : (tensor<2x3x4x4xf32>) -> tensor<2x48xf32>
  %y = cnn.matmul %f, %w {transpose_rhs = true} : (tensor<2x48xf32>, tensor<14x48xf32>) -> tensor<2x14xf32>
  // CHECK: error: cnn-autodiff: no gradient rule for 'cnn.pad_grad'
  %s = cnn.pad_grad %y {mode = "edge", pads = array<i64: 0, 2, 0, 2>} : (tensor<2x14xf32>) -> tensor<2x10xf32>
  return %s : tensor<2x10xf32>
}
