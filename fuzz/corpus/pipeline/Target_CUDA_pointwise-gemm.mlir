// NHWC 1x1 convolutions with stride 1, no padding and one group are matrix
// products over the pixels: the forward, data-gradient and filter-gradient
// run as cuBLASLt matmuls. A strided 1x1 convolution (a ResNet downsample)
// stays a cuDNN convolution.
// RUN: cnnc %s --train --precision fp32 --optimizer sgd --emit cuda -o %t.cu
// RUN: FileCheck %s < %t.cu

// CHECK-LABEL: static void prepareModel(
// Y[NHW=2*4*4, K=16] = X[32, C=8] W[16, 8]^T
// CHECK-DAG: ctx.registerMatmul([[FWD:[0-9]+]], cnnrt::MatmulDesc{32, 16, 8, false, true, cnnrt::DType::F32}, "pw");
// dX[32, 8] = dY[32, 16] W[16, 8]
// CHECK-DAG: ctx.registerMatmul([[BWD:[0-9]+]], cnnrt::MatmulDesc{32, 8, 16, false, false, cnnrt::DType::F32}, "pw");
// dW[16, 8] = dY^T X over the 32 pixels
// CHECK-DAG: ctx.registerMatmul([[WGT:[0-9]+]], cnnrt::MatmulDesc{16, 8, 32, true, false, cnnrt::DType::F32}, "pw");
// CHECK-DAG: ctx.registerConv({{[0-9]+}}, cnnrt::ConvDesc{2, 8, 8, 8, 8, 1, 1, 4, 4, 0, 0, 0, 0, 2, 2, 1, 1, 1, cnnrt::DType::F32, cnnrt::Layout::NHWC}, "strided");
// CHECK-LABEL: static void trainStep(
// CHECK: ctx.convFwd(
// CHECK: ctx.matmul([[FWD]],
// CHECK: ctx.matmul([[BWD]],
// CHECK: ctx.matmul([[WGT]],
// CHECK: ctx.convBwdFilter(
func.func @forward(%x: tensor<2x8x8x8xf32> {cnn.input},
                   %w1: tensor<8x8x1x1xf32> {cnn.param = "down.weight"},
                   %w2: tensor<16x8x1x1xf32> {cnn.param = "pw.weight"},
                   %wf: tensor<10x256xf32> {cnn.param = "fc.weight"}) -> tensor<2x10xf32> {
  %d = cnn.conv2d %x, %w1 {strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x8x8x8xf32>, tensor<8x8x1x1xf32>) -> tensor<2x8x4x4xf32> loc("strided")
  %r = cnn.relu %d : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  %p = cnn.conv2d %r, %w2 {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x8x4x4xf32>, tensor<16x8x1x1xf32>) -> tensor<2x16x4x4xf32> loc("pw")
  %f = cnn.flatten %p {axis = 1} : (tensor<2x16x4x4xf32>) -> tensor<2x256xf32>
  %y = cnn.matmul %f, %wf {transpose_rhs = true} : (tensor<2x256xf32>, tensor<10x256xf32>) -> tensor<2x10xf32>
  return %y : tensor<2x10xf32>
}
