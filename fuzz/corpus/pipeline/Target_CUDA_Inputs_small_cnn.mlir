// conv + bias + relu + maxpool + BN + residual add + global pool + linear:
// one of every op family the CUDA target lowers.
func.func @forward(%x: tensor<4x3x8x8xf32> {cnn.input},
                   %w1: tensor<8x3x3x3xf32> {cnn.param = "conv1.weight"},
                   %b1: tensor<8xf32> {cnn.param = "conv1.bias"},
                   %g: tensor<8xf32> {cnn.param = "bn.weight"},
                   %be: tensor<8xf32> {cnn.param = "bn.bias"},
                   %rm: tensor<8xf32> {cnn.buffer = "bn.running_mean"},
                   %rv: tensor<8xf32> {cnn.buffer = "bn.running_var"},
                   %wf: tensor<10x8xf32> {cnn.param = "fc.weight"},
                   %bf: tensor<10xf32> {cnn.param = "fc.bias"}) -> tensor<4x10xf32> {
  %c = cnn.conv2d %x, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<4x3x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<4x8x8x8xf32>
  %cb = cnn.bias_add %c, %b1 : (tensor<4x8x8x8xf32>, tensor<8xf32>) -> tensor<4x8x8x8xf32>
  %r = cnn.relu %cb : (tensor<4x8x8x8xf32>) -> tensor<4x8x8x8xf32>
  %p = cnn.max_pool2d %r {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, ceil_mode = false} : (tensor<4x8x8x8xf32>) -> tensor<4x8x4x4xf32>
  %n = cnn.batch_norm %p, %g, %be, %rm, %rv {epsilon = 1.0e-5 : f32} : (tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8x4x4xf32>
  %a = cnn.add %n, %p : (tensor<4x8x4x4xf32>, tensor<4x8x4x4xf32>) -> tensor<4x8x4x4xf32>
  %q = cnn.global_avg_pool %a : (tensor<4x8x4x4xf32>) -> tensor<4x8x1x1xf32>
  %f = cnn.flatten %q {axis = 1} : (tensor<4x8x1x1xf32>) -> tensor<4x8xf32>
  %y = cnn.matmul %f, %wf {transpose_rhs = true} : (tensor<4x8xf32>, tensor<10x8xf32>) -> tensor<4x10xf32>
  %yb = cnn.bias_add %y, %bf : (tensor<4x10xf32>, tensor<10xf32>) -> tensor<4x10xf32>
  return %yb : tensor<4x10xf32>
}
