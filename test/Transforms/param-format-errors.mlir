// RUN: cnnc-opt %s -split-input-file -cnn-param-format -verify-diagnostics
// cnn-param-format's errors: @train_step and @forward share a parameter by
// its name, so one name must mean one tensor (fuzz/corpus/pipeline had a
// module with two filters named "conv1.weight"; with the stem padded to 4
// channels the pass built an invalid slice and aborted).

// @forward's "conv1.weight" is another filter than @train_step's.
// expected-error @+1 {{cnn-param-format: parameter 'conv1.weight' is 'tensor<16x8x1x1xf32>' in @forward but 'tensor<8x3x3x3xf32>' in @train_step}}
func.func @forward(%x: tensor<2x4x4x8xf32> {cnn.input},
                   %w: tensor<16x8x1x1xf32> {cnn.param = "conv1.weight"}) -> tensor<16x8x1x1xf32> {
  return %w : tensor<16x8x1x1xf32>
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
