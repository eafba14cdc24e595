// A small segmentation net: per-pixel logits N x C x H x W (conv -> relu ->
// 1x1 conv to 5 classes) and an auxiliary head of the same H x W, as
// torchvision's FCN/DeepLabV3 return {'out', 'aux'}.
func.func @forward(%x: tensor<2x3x4x4xf32> {cnn.input},
                   %w1: tensor<8x3x3x3xf32> {cnn.param = "conv1.weight"},
                   %w2: tensor<5x8x1x1xf32> {cnn.param = "classifier.weight"},
                   %wa: tensor<5x8x1x1xf32> {cnn.param = "aux.weight"}) -> (tensor<2x5x4x4xf32>, tensor<2x5x4x4xf32>) {
  %c = cnn.conv2d %x, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x3x4x4xf32>, tensor<8x3x3x3xf32>) -> tensor<2x8x4x4xf32>
  %r = cnn.relu %c : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  %y = cnn.conv2d %r, %w2 {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x8x4x4xf32>, tensor<5x8x1x1xf32>) -> tensor<2x5x4x4xf32>
  %ya = cnn.conv2d %r, %wa {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x8x4x4xf32>, tensor<5x8x1x1xf32>) -> tensor<2x5x4x4xf32>
  return %y, %ya : tensor<2x5x4x4xf32>, tensor<2x5x4x4xf32>
}
