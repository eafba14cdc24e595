// A conv, a BatchNorm in eval mode (use_running_stats) and one in training
// mode (see test/Transforms/autodiff-bn-eval.mlir).
func.func @forward(%x: tensor<2x3x4x4xf32> {cnn.input},
                   %w: tensor<3x3x1x1xf32> {cnn.param = "conv.weight"},
                   %s: tensor<3xf32> {cnn.param = "bn.weight"},
                   %b: tensor<3xf32> {cnn.param = "bn.bias"},
                   %s2: tensor<3xf32> {cnn.param = "bn2.weight"},
                   %b2: tensor<3xf32> {cnn.param = "bn2.bias"},
                   %m: tensor<3xf32> {cnn.buffer = "bn.running_mean"},
                   %v: tensor<3xf32> {cnn.buffer = "bn.running_var"},
                   %m2: tensor<3xf32> {cnn.buffer = "bn2.running_mean"},
                   %v2: tensor<3xf32> {cnn.buffer = "bn2.running_var"}) -> tensor<2x3xf32> {
  %c = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x3x4x4xf32>, tensor<3x3x1x1xf32>) -> tensor<2x3x4x4xf32>
  %n = cnn.batch_norm %c, %s, %b, %m, %v {epsilon = 1.0e-5 : f32, use_running_stats} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  %n2 = cnn.batch_norm %n, %s2, %b2, %m2, %v2 {epsilon = 1.0e-5 : f32} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  %g = cnn.global_avg_pool %n2 : (tensor<2x3x4x4xf32>) -> tensor<2x3x1x1xf32>
  %f = cnn.flatten %g {axis = 1} : (tensor<2x3x1x1xf32>) -> tensor<2x3xf32>
  return %f : tensor<2x3xf32>
}
