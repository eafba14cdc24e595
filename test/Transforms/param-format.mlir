// RUN: cnnc-opt %s -split-input-file -cnn-param-format | FileCheck %s
// cnn-param-format stores a convolution filter (and its optimizer state) as
// the NHWC convolution reads it: K, R, S, C' with the channels padded.

// The f16 step: cast -> transpose -> pad before the convolution, slice ->
// transpose of the filter gradient before sgd_update. The parameter, its
// momentum and the returned values become 8x3x3x8 with cnn.public_shape;
// the convolution reads the cast of the parameter, the update and the
// loss-scale check read the filter gradient as computed. @forward folds the
// same chain.
// CHECK-LABEL: func @forward
// CHECK-SAME: %arg1: tensor<8x3x3x8xf32> {cnn.param = "conv1.weight", cnn.public_shape = array<i64: 8, 3, 3, 3>}
// CHECK-NEXT: %[[C:.*]] = cnn.cast %arg1 : (tensor<8x3x3x8xf32>) -> tensor<8x3x3x8xf16>
// CHECK-NEXT: cnn.conv2d %arg0, %[[C]]
// CHECK-LABEL: func @train_step
// CHECK-SAME: %arg1: tensor<8x3x3x8xf32> {cnn.param = "conv1.weight", cnn.public_shape = array<i64: 8, 3, 3, 3>}
// CHECK-SAME: %arg2: tensor<8x3x3x8xf32> {cnn.public_shape = array<i64: 8, 3, 3, 3>, cnn.state = "conv1.weight.momentum_buffer"}
// CHECK-SAME: -> (tensor<8x3x3x8xf32> {cnn.param = "conv1.weight", cnn.public_shape = array<i64: 8, 3, 3, 3>}, tensor<8x3x3x8xf32> {cnn.public_shape = array<i64: 8, 3, 3, 3>, cnn.state = "conv1.weight.momentum_buffer"})
// CHECK-NOT: cnn.transpose
// CHECK-NOT: cnn.pad
// CHECK-NOT: cnn.slice
// CHECK: %[[DW:.*]] = cnn.conv2d_bwd_filter
// CHECK-NEXT: %[[OK:.*]] = cnn.all_finite %[[DW]]
// CHECK-NEXT: cnn.sgd_update %arg1, %[[DW]], %arg2, %arg3, %arg4, %arg5, %[[OK]]
// CHECK-SAME: (tensor<8x3x3x8xf32>, tensor<8x3x3x8xf16>, tensor<8x3x3x8xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<8x3x3x8xf32>, tensor<8x3x3x8xf32>)
func.func @forward(%x: tensor<2x4x4x8xf16> {cnn.input, cnn.image_layout = #cnn.layout<NHWC>, cnn.image_shape = array<i64: 2, 3, 4, 4>},
                   %w: tensor<8x3x3x3xf32> {cnn.param = "conv1.weight"}) -> tensor<2x4x4x8xf16> {
  %0 = cnn.cast %w : (tensor<8x3x3x3xf32>) -> tensor<8x3x3x3xf16>
  %1 = cnn.transpose %0 {permutation = array<i64: 0, 2, 3, 1>} : (tensor<8x3x3x3xf16>) -> tensor<8x3x3x3xf16>
  %2 = cnn.pad %1 {pads = array<i64: 0, 0, 0, 0, 0, 0, 0, 5>} : (tensor<8x3x3x3xf16>) -> tensor<8x3x3x8xf16>
  %y = cnn.conv2d %x, %2 {dilations = array<i64: 1, 1>, groups = 1 : i64, layout = #cnn.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x4x8xf16>, tensor<8x3x3x8xf16>) -> tensor<2x4x4x8xf16>
  return %y : tensor<2x4x4x8xf16>
}
func.func @train_step(%x: tensor<2x4x4x8xf16> {cnn.input, cnn.image_layout = #cnn.layout<NHWC>, cnn.image_shape = array<i64: 2, 3, 4, 4>},
                      %w: tensor<8x3x3x3xf32> {cnn.param = "conv1.weight"},
                      %m: tensor<8x3x3x3xf32> {cnn.state = "conv1.weight.momentum_buffer"},
                      %lr: tensor<f32> {cnn.lr}, %step: tensor<f32> {cnn.step}, %scale: tensor<f32>,
                      %dy: tensor<2x4x4x8xf16>)
    -> (tensor<8x3x3x3xf32> {cnn.param = "conv1.weight"}, tensor<8x3x3x3xf32> {cnn.state = "conv1.weight.momentum_buffer"}) {
  %0 = cnn.cast %w : (tensor<8x3x3x3xf32>) -> tensor<8x3x3x3xf16>
  %1 = cnn.transpose %0 {permutation = array<i64: 0, 2, 3, 1>} : (tensor<8x3x3x3xf16>) -> tensor<8x3x3x3xf16>
  %2 = cnn.pad %1 {pads = array<i64: 0, 0, 0, 0, 0, 0, 0, 5>} : (tensor<8x3x3x3xf16>) -> tensor<8x3x3x8xf16>
  %y = cnn.conv2d %x, %2 {dilations = array<i64: 1, 1>, groups = 1 : i64, layout = #cnn.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x4x8xf16>, tensor<8x3x3x8xf16>) -> tensor<2x4x4x8xf16>
  %dw = cnn.conv2d_bwd_filter %x, %dy {dilations = array<i64: 1, 1>, groups = 1 : i64, layout = #cnn.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x4x8xf16>, tensor<2x4x4x8xf16>) -> tensor<8x3x3x8xf16>
  %s = cnn.slice %dw {offsets = array<i64: 0, 0, 0, 0>, sizes = array<i64: 8, 3, 3, 3>} : (tensor<8x3x3x8xf16>) -> tensor<8x3x3x3xf16>
  %g = cnn.transpose %s {permutation = array<i64: 0, 3, 1, 2>} : (tensor<8x3x3x3xf16>) -> tensor<8x3x3x3xf16>
  %ok = cnn.all_finite %g : (tensor<8x3x3x3xf16>) -> tensor<f32>
  %p, %mom = cnn.sgd_update %w, %g, %m, %lr, %step, %scale, %ok {dampening = 0.0 : f32, momentum = 0.9 : f32, nesterov = false, weight_decay = 0.0 : f32} : (tensor<8x3x3x3xf32>, tensor<8x3x3x3xf16>, tensor<8x3x3x3xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<8x3x3x3xf32>, tensor<8x3x3x3xf32>)
  return %p, %mom : tensor<8x3x3x3xf32>, tensor<8x3x3x3xf32>
}

// -----

// The f32 step (no cast), Adam: both moments take the stored form; no pad.
// CHECK-LABEL: func @train_step
// CHECK-SAME: %arg0: tensor<4x3x3x8xf32> {cnn.param = "w", cnn.public_shape = array<i64: 4, 8, 3, 3>}
// CHECK-SAME: %arg1: tensor<4x3x3x8xf32> {cnn.public_shape = array<i64: 4, 8, 3, 3>, cnn.state = "w.exp_avg"}
// CHECK-SAME: %arg2: tensor<4x3x3x8xf32> {cnn.public_shape = array<i64: 4, 8, 3, 3>, cnn.state = "w.exp_avg_sq"}
// CHECK-NEXT: cnn.conv2d %arg5, %arg0
// CHECK-NEXT: %[[DW:.*]] = cnn.conv2d_bwd_filter
// CHECK-NEXT: cnn.adam_update %arg0, %[[DW]], %arg1, %arg2
func.func @train_step(%w: tensor<4x8x3x3xf32> {cnn.param = "w"},
                      %m: tensor<4x8x3x3xf32> {cnn.state = "w.exp_avg"},
                      %v: tensor<4x8x3x3xf32> {cnn.state = "w.exp_avg_sq"},
                      %lr: tensor<f32> {cnn.lr}, %step: tensor<f32> {cnn.step},
                      %x: tensor<2x4x4x8xf32>, %dy: tensor<2x4x4x4xf32>)
    -> (tensor<2x4x4x4xf32>, tensor<4x8x3x3xf32> {cnn.param = "w"}, tensor<4x8x3x3xf32> {cnn.state = "w.exp_avg"}, tensor<4x8x3x3xf32> {cnn.state = "w.exp_avg_sq"}) {
  %1 = cnn.transpose %w {permutation = array<i64: 0, 2, 3, 1>} : (tensor<4x8x3x3xf32>) -> tensor<4x3x3x8xf32>
  %y = cnn.conv2d %x, %1 {dilations = array<i64: 1, 1>, groups = 1 : i64, layout = #cnn.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x4x8xf32>, tensor<4x3x3x8xf32>) -> tensor<2x4x4x4xf32>
  %dw = cnn.conv2d_bwd_filter %x, %dy {dilations = array<i64: 1, 1>, groups = 1 : i64, layout = #cnn.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x4x8xf32>, tensor<2x4x4x4xf32>) -> tensor<4x3x3x8xf32>
  %g = cnn.transpose %dw {permutation = array<i64: 0, 3, 1, 2>} : (tensor<4x3x3x8xf32>) -> tensor<4x8x3x3xf32>
  %p, %m2, %v2 = cnn.adam_update %w, %g, %m, %v, %lr, %step {beta1 = 0.9 : f32, beta2 = 0.999 : f32, epsilon = 1.0e-8 : f32, weight_decay = 0.0 : f32, decoupled = false} : (tensor<4x8x3x3xf32>, tensor<4x8x3x3xf32>, tensor<4x8x3x3xf32>, tensor<4x8x3x3xf32>, tensor<f32>, tensor<f32>) -> (tensor<4x8x3x3xf32>, tensor<4x8x3x3xf32>, tensor<4x8x3x3xf32>)
  return %y, %p, %m2, %v2 : tensor<2x4x4x4xf32>, tensor<4x8x3x3xf32>, tensor<4x8x3x3xf32>, tensor<4x8x3x3xf32>
}

// -----

// Left alone: the filter's padded channels meet an input whose channels
// past 3 are not known to be zero (their gradient need not be zero), and a
// filter with a use besides its chain and update.
// CHECK-LABEL: func @train_step
// CHECK-SAME: %arg0: tensor<8x3x3x3xf32> {cnn.param = "a"}
// CHECK-SAME: %arg1: tensor<8x3x3x3xf32> {cnn.param = "b"}
// CHECK-NOT: public_shape
// CHECK: cnn.pad
// CHECK: cnn.transpose
func.func @train_step(%a: tensor<8x3x3x3xf32> {cnn.param = "a"}, %b: tensor<8x3x3x3xf32> {cnn.param = "b"},
                      %m: tensor<8x3x3x3xf32> {cnn.state = "a.momentum_buffer"}, %lr: tensor<f32> {cnn.lr}, %step: tensor<f32> {cnn.step},
                      %x: tensor<2x4x4x8xf32>, %dy: tensor<2x4x4x8xf32>)
    -> (tensor<2x4x4x8xf32>, tensor<8x3x3x3xf32> {cnn.param = "a"}, tensor<8x3x3x3xf32> {cnn.state = "a.momentum_buffer"}, tensor<8x3x3x3xf32>) {
  %1 = cnn.transpose %a {permutation = array<i64: 0, 2, 3, 1>} : (tensor<8x3x3x3xf32>) -> tensor<8x3x3x3xf32>
  %2 = cnn.pad %1 {pads = array<i64: 0, 0, 0, 0, 0, 0, 0, 5>} : (tensor<8x3x3x3xf32>) -> tensor<8x3x3x8xf32>
  %y = cnn.conv2d %x, %2 {dilations = array<i64: 1, 1>, groups = 1 : i64, layout = #cnn.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x4x8xf32>, tensor<8x3x3x8xf32>) -> tensor<2x4x4x8xf32>
  %dw = cnn.conv2d_bwd_filter %x, %dy {dilations = array<i64: 1, 1>, groups = 1 : i64, layout = #cnn.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>) -> tensor<8x3x3x8xf32>
  %s = cnn.slice %dw {offsets = array<i64: 0, 0, 0, 0>, sizes = array<i64: 8, 3, 3, 3>} : (tensor<8x3x3x8xf32>) -> tensor<8x3x3x3xf32>
  %g = cnn.transpose %s {permutation = array<i64: 0, 3, 1, 2>} : (tensor<8x3x3x3xf32>) -> tensor<8x3x3x3xf32>
  %p, %mom = cnn.sgd_update %a, %g, %m, %lr, %step {dampening = 0.0 : f32, momentum = 0.9 : f32, nesterov = false, weight_decay = 0.0 : f32} : (tensor<8x3x3x3xf32>, tensor<8x3x3x3xf32>, tensor<8x3x3x3xf32>, tensor<f32>, tensor<f32>) -> (tensor<8x3x3x3xf32>, tensor<8x3x3x3xf32>)
  %bt = cnn.transpose %b {permutation = array<i64: 0, 2, 3, 1>} : (tensor<8x3x3x3xf32>) -> tensor<8x3x3x3xf32>
  return %y, %p, %mom, %b : tensor<2x4x4x8xf32>, tensor<8x3x3x3xf32>, tensor<8x3x3x3xf32>, tensor<8x3x3x3xf32>
}
