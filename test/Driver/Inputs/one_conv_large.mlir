// One 3x3 convolution on 8 x 64 x 256 x 256 (128 MiB in f32, 64 MiB in f16):
// the automatic workspace sizes of workspace-auto.test.
func.func @forward(%x: tensor<8x64x256x256xf32> {cnn.input},
                   %w: tensor<64x64x3x3xf32> {cnn.param = "conv.weight"},
                   %wf: tensor<10x64xf32> {cnn.param = "fc.weight"}) -> tensor<8x10xf32> {
  %c = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<8x64x256x256xf32>, tensor<64x64x3x3xf32>) -> tensor<8x64x256x256xf32>
  %q = cnn.global_avg_pool %c : (tensor<8x64x256x256xf32>) -> tensor<8x64x1x1xf32>
  %f = cnn.flatten %q {axis = 1} : (tensor<8x64x1x1xf32>) -> tensor<8x64xf32>
  %y = cnn.matmul %f, %wf {transpose_rhs = true} : (tensor<8x64xf32>, tensor<10x64xf32>) -> tensor<8x10xf32>
  return %y : tensor<8x10xf32>
}
