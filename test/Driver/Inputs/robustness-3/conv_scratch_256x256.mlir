// A 256 x 256 kernel over a 1 x 1 x 8 x 8 input padded by 2172 on each
// side: a 4097 x 4097 result (64 MiB), but im2col buffers of 65536 rows of
// 4097^2 floats each (8.8 TB).
func.func @forward(%x: tensor<1x1x8x8xf32> {cnn.input}) -> tensor<1x1x4097x4097xf32> {
  %w = cnn.constant dense<1.000000e+00> : tensor<1x1x256x256xf32>
  %y = cnn.conv2d %x, %w {dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 2172, 2172, 2172, 2172>, strides = array<i64: 1, 1>} : (tensor<1x1x8x8xf32>, tensor<1x1x256x256xf32>) -> tensor<1x1x4097x4097xf32>
  return %y : tensor<1x1x4097x4097xf32>
}
