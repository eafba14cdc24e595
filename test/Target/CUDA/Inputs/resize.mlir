// Upsampling in an FPN-like step: a bilinear (PyTorch's half_pixel, scale 2)
// upsampling of a convolution's output and a nearest (PyTorch's asymmetric
// floor) upsampling of a coarser level, added as a lateral connection.
func.func @forward(%x: tensor<4x3x8x8xf32> {cnn.input},
                   %w1: tensor<8x3x3x3xf32> {cnn.param = "conv1.weight"},
                   %w2: tensor<8x8x3x3xf32> {cnn.param = "conv2.weight"},
                   %wf: tensor<10x8xf32> {cnn.param = "fc.weight"}) -> tensor<4x10xf32> {
  %c = cnn.conv2d %x, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<4x3x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<4x8x8x8xf32>
  %r = cnn.relu %c : (tensor<4x8x8x8xf32>) -> tensor<4x8x8x8xf32>
  %u = cnn.resize %r {size = array<i64: 16, 16>, mode = "linear", scales = array<f64: 2.0, 2.0>} : (tensor<4x8x8x8xf32>) -> tensor<4x8x16x16xf32>
  %c2 = cnn.conv2d %u, %w2 {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<4x8x16x16xf32>, tensor<8x8x3x3xf32>) -> tensor<4x8x8x8xf32>
  %n = cnn.resize %c2 {size = array<i64: 16, 16>, coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"} : (tensor<4x8x8x8xf32>) -> tensor<4x8x16x16xf32>
  %s = cnn.add %n, %u : (tensor<4x8x16x16xf32>, tensor<4x8x16x16xf32>) -> tensor<4x8x16x16xf32>
  %q = cnn.global_avg_pool %s : (tensor<4x8x16x16xf32>) -> tensor<4x8x1x1xf32>
  %f = cnn.flatten %q {axis = 1} : (tensor<4x8x1x1xf32>) -> tensor<4x8xf32>
  %y = cnn.matmul %f, %wf {transpose_rhs = true} : (tensor<4x8xf32>, tensor<10x8xf32>) -> tensor<4x10xf32>
  return %y : tensor<4x10xf32>
}
