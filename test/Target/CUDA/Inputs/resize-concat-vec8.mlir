// resize-concat.mlir with a skip of 8 channels: every channel count of the
// fused forms a multiple of 8 (cnn-select-lowering's "vec8" in NHWC).
func.func @forward(%x: tensor<2x3x16x16xf32> {cnn.input},
                   %w1: tensor<8x3x3x3xf32> {cnn.param = "down.weight"},
                   %ws: tensor<8x3x3x3xf32> {cnn.param = "skip.weight"},
                   %w2: tensor<4x16x3x3xf32> {cnn.param = "up.weight"},
                   %w3: tensor<4x16x3x3xf32> {cnn.param = "up2.weight"},
                   %wf: tensor<10x8xf32> {cnn.param = "fc.weight"}) -> tensor<2x10xf32> {
  %d = cnn.conv2d %x, %w1 {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x3x16x16xf32>, tensor<8x3x3x3xf32>) -> tensor<2x8x8x8xf32>
  %s = cnn.conv2d %x, %ws {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x3x16x16xf32>, tensor<8x3x3x3xf32>) -> tensor<2x8x16x16xf32>
  %u = cnn.resize %d {size = array<i64: 16, 16>, mode = "linear", scales = array<f64: 2.0, 2.0>} : (tensor<2x8x8x8xf32>) -> tensor<2x8x16x16xf32>
  %cat = cnn.concat %u, %s {axis = 1} : (tensor<2x8x16x16xf32>, tensor<2x8x16x16xf32>) -> tensor<2x16x16x16xf32>
  %c = cnn.conv2d %cat, %w2 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x16x16x16xf32>, tensor<4x16x3x3xf32>) -> tensor<2x4x16x16xf32>
  %n = cnn.resize %d {size = array<i64: 16, 16>, coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"} : (tensor<2x8x8x8xf32>) -> tensor<2x8x16x16xf32>
  %cat2 = cnn.concat %s, %n {axis = 1} : (tensor<2x8x16x16xf32>, tensor<2x8x16x16xf32>) -> tensor<2x16x16x16xf32>
  %c2 = cnn.conv2d %cat2, %w3 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x16x16x16xf32>, tensor<4x16x3x3xf32>) -> tensor<2x4x16x16xf32>
  %sum = cnn.concat %c, %c2 {axis = 1} : (tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>) -> tensor<2x8x16x16xf32>
  %q = cnn.global_avg_pool %sum : (tensor<2x8x16x16xf32>) -> tensor<2x8x1x1xf32>
  %f = cnn.flatten %q {axis = 1} : (tensor<2x8x1x1xf32>) -> tensor<2x8xf32>
  %y = cnn.matmul %f, %wf {transpose_rhs = true} : (tensor<2x8xf32>, tensor<10x8xf32>) -> tensor<2x10xf32>
  return %y : tensor<2x10xf32>
}
