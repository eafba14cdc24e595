// pipeline-memory-cuda.test: three 3x3 convolutions with ReLU, global
// pooling and a linear layer at batch 64 of 32x32 images, ~8 MiB of
// activations per convolution kept for the backward pass, so that a
// budget in MiB splits it.
func.func @forward(%x: tensor<64x3x32x32xf32> {cnn.input},
                   %w1: tensor<32x3x3x3xf32> {cnn.param = "conv1.weight"},
                   %w2: tensor<32x32x3x3xf32> {cnn.param = "conv2.weight"},
                   %w3: tensor<32x32x3x3xf32> {cnn.param = "conv3.weight"},
                   %wf: tensor<10x32xf32> {cnn.param = "fc.weight"},
                   %bf: tensor<10xf32> {cnn.param = "fc.bias"}) -> tensor<64x10xf32> {
  %c1 = cnn.conv2d %x, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<64x3x32x32xf32>, tensor<32x3x3x3xf32>) -> tensor<64x32x32x32xf32>
  %r1 = cnn.relu %c1 : (tensor<64x32x32x32xf32>) -> tensor<64x32x32x32xf32>
  %c2 = cnn.conv2d %r1, %w2 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<64x32x32x32xf32>, tensor<32x32x3x3xf32>) -> tensor<64x32x32x32xf32>
  %r2 = cnn.relu %c2 : (tensor<64x32x32x32xf32>) -> tensor<64x32x32x32xf32>
  %c3 = cnn.conv2d %r2, %w3 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<64x32x32x32xf32>, tensor<32x32x3x3xf32>) -> tensor<64x32x32x32xf32>
  %r3 = cnn.relu %c3 : (tensor<64x32x32x32xf32>) -> tensor<64x32x32x32xf32>
  %q = cnn.global_avg_pool %r3 : (tensor<64x32x32x32xf32>) -> tensor<64x32x1x1xf32>
  %f = cnn.flatten %q {axis = 1} : (tensor<64x32x1x1xf32>) -> tensor<64x32xf32>
  %y = cnn.matmul %f, %wf {transpose_rhs = true} : (tensor<64x32xf32>, tensor<10x32xf32>) -> tensor<64x10xf32>
  %yb = cnn.bias_add %y, %bf : (tensor<64x10xf32>, tensor<10xf32>) -> tensor<64x10xf32>
  return %yb : tensor<64x10xf32>
}
