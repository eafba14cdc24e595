// Pad (constant, reflect, edge), slice and an auxiliary classifier: a
// forward function returning two logits (GoogLeNet/Inception style).
func.func @forward(%x: tensor<4x3x8x8xf32> {cnn.input},
                   %w1: tensor<8x3x3x3xf32> {cnn.param = "conv1.weight"},
                   %w2: tensor<8x8x3x3xf32> {cnn.param = "conv2.weight"},
                   %wf: tensor<10x8xf32> {cnn.param = "fc.weight"},
                   %wa: tensor<10x4xf32> {cnn.param = "aux.weight"}) -> (tensor<4x10xf32>, tensor<4x10xf32>) {
  %p0 = cnn.pad %x {pads = array<i64: 0, 0, 1, 1, 0, 0, 1, 1>, mode = "reflect"} : (tensor<4x3x8x8xf32>) -> tensor<4x3x10x10xf32>
  %c = cnn.conv2d %p0, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<4x3x10x10xf32>, tensor<8x3x3x3xf32>) -> tensor<4x8x8x8xf32>
  %r = cnn.relu %c : (tensor<4x8x8x8xf32>) -> tensor<4x8x8x8xf32>
  %p1 = cnn.pad %r {pads = array<i64: 0, 0, 1, 0, 0, 0, 0, 1>, mode = "constant", value = 0.0 : f32} : (tensor<4x8x8x8xf32>) -> tensor<4x8x9x9xf32>
  %a = cnn.avg_pool2d %p1 {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, ceil_mode = false, count_include_pad = true} : (tensor<4x8x9x9xf32>) -> tensor<4x8x4x4xf32>
  %p2 = cnn.pad %a {pads = array<i64: 0, 0, 2, 2, 0, 0, 2, 2>, mode = "edge"} : (tensor<4x8x4x4xf32>) -> tensor<4x8x8x8xf32>
  %c2 = cnn.conv2d %p2, %w2 {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<4x8x8x8xf32>, tensor<8x8x3x3xf32>) -> tensor<4x8x4x4xf32>
  %q = cnn.global_avg_pool %c2 : (tensor<4x8x4x4xf32>) -> tensor<4x8x1x1xf32>
  %f = cnn.flatten %q {axis = 1} : (tensor<4x8x1x1xf32>) -> tensor<4x8xf32>
  %y = cnn.matmul %f, %wf {transpose_rhs = true} : (tensor<4x8xf32>, tensor<10x8xf32>) -> tensor<4x10xf32>
  // The auxiliary head reads half of the channels.
  %qa = cnn.global_avg_pool %a : (tensor<4x8x4x4xf32>) -> tensor<4x8x1x1xf32>
  %fa = cnn.flatten %qa {axis = 1} : (tensor<4x8x1x1xf32>) -> tensor<4x8xf32>
  %s = cnn.slice %fa {offsets = array<i64: 0, 2>, sizes = array<i64: 4, 4>} : (tensor<4x8xf32>) -> tensor<4x4xf32>
  %ya = cnn.matmul %s, %wa {transpose_rhs = true} : (tensor<4x4xf32>, tensor<10x4xf32>) -> tensor<4x10xf32>
  return %y, %ya : tensor<4x10xf32>, tensor<4x10xf32>
}
