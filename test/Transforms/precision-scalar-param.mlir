// RUN: cnnc-opt %s -cnn-autodiff -cnn-precision | FileCheck %s

// A 0-d learned scalar (timm's NormFreeBlock skipinit gain) broadcast by a
// reshape: the reshapes from and to 0-d keep their operand's element type
// (0-d values stay f32 in cnn-precision); the mul reads the reshaped gain
// through a cast to f16 as any f32 operand, and its gradient, an f32
// per-channel sum, is reshaped back to the f32 0-d gradient of the update.
func.func @forward(%x: tensor<2x4x3x3xf32> {cnn.input},
                   %g: tensor<f32> {cnn.param = "blk.skipinit_gain"},
                   %w: tensor<5x36xf32> {cnn.param = "fc.weight"}) -> tensor<2x5xf32> {
  %r = cnn.reshape %g : (tensor<f32>) -> tensor<1x1x1x1xf32>
  %y = cnn.mul %x, %r : (tensor<2x4x3x3xf32>, tensor<1x1x1x1xf32>) -> tensor<2x4x3x3xf32>
  %f = cnn.reshape %y : (tensor<2x4x3x3xf32>) -> tensor<2x36xf32>
  %o = cnn.matmul %f, %w {transpose_rhs = true} : (tensor<2x36xf32>, tensor<5x36xf32>) -> tensor<2x5xf32>
  return %o : tensor<2x5xf32>
}

// CHECK-LABEL: func.func @train_step
// CHECK: %[[R:.*]] = cnn.reshape %{{.*}} : (tensor<f32>) -> tensor<1x1x1x1xf32>
// CHECK: %[[R16:.*]] = cnn.cast %[[R]] : (tensor<1x1x1x1xf32>) -> tensor<1x1x1x1xf16>
// CHECK: cnn.mul %{{.*}}, %[[R16]] : (tensor<2x4x3x3xf16>, tensor<1x1x1x1xf16>) -> tensor<2x4x3x3xf16>
// CHECK: %[[S:.*]] = cnn.reduce_sum %{{.*}} {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x4x3x3xf32>) -> tensor<1x1x1x1xf32>
// CHECK: %[[G:.*]] = cnn.reshape %[[S]] : (tensor<1x1x1x1xf32>) -> tensor<f32>
// CHECK: cnn.sgd_update %{{.*}}, %[[G]],
