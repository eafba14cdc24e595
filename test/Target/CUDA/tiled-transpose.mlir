// --tiled-transpose: cnn-select-lowering's "tiled" transposes print
// describeTiledTranspose's launch, kernels/Transpose.cuh's
// batchedTranspose2D over (batch, rows, cols) with a block per 32 x 32 tile
// (up to #cnn.launch's grid ceiling). Here GroupNorm's channel view of an
// NHWC f16 step, 4 x 32 channels x 16 x 16: NHWC -> NCHW is batch 4, rows
// H x W = 256, columns C = 32 (4 x 8 x 1 = 32 tiles), NCHW -> NHWC the
// reverse. Without the flag the same transposes stay generated gathers.
// RUN: cnnc %s --train --emit cuda -o %t.cu
// RUN: FileCheck %s < %t.cu
// RUN: cnnc %s --train --emit cuda --tiled-transpose=false -o %t.off.cu
// RUN: FileCheck %s --check-prefix=OFF < %t.off.cu
// RUN: %if nvcc %{ %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t.cu -o %t.o %}

// The prelude holds the kernel (it always does).
// CHECK: batchedTranspose2D(const T *__restrict__ in, T *__restrict__ out,
// CHECK-LABEL: static void trainStep(cnnrt::Context &ctx) {
// CHECK: batchedTranspose2D<__half><<<32, 256, 0, s>>>(P<__half>(A, {{[0-9]+}}), P<__half>(A, {{[0-9]+}}), 4ll, 256ll, 32ll);
// CHECK-NEXT: "cnn.transpose batchedTranspose2D<__half>"
// CHECK: batchedTranspose2D<__half><<<32, 256, 0, s>>>(P<__half>(A, {{[0-9]+}}), P<__half>(A, {{[0-9]+}}), 4ll, 256ll, 32ll);
// CHECK: batchedTranspose2D<__half><<<32, 256, 0, s>>>(P<__half>(A, {{[0-9]+}}), P<__half>(A, {{[0-9]+}}), 4ll, 32ll, 256ll);
// CHECK-NOT: "cnn.transpose k
// CHECK-LABEL: static void evalStep(cnnrt::Context &ctx) {
// CHECK: batchedTranspose2D<__half><<<32, 256, 0, s>>>(P<__half>(A, {{[0-9]+}}), P<__half>(A, {{[0-9]+}}), 4ll, 256ll, 32ll);
// CHECK-NOT: "cnn.transpose k
// OFF-LABEL: static void trainStep(cnnrt::Context &ctx) {
// OFF-NOT: batchedTranspose2D<
// OFF: "cnn.transpose k{{[0-9]+}}"
// OFF-NOT: batchedTranspose2D<

func.func @forward(%x: tensor<4x32x16x16xf32> {cnn.input},
                   %w: tensor<32x32x1x1xf32> {cnn.param = "conv.weight"},
                   %w2: tensor<32x32x3x3xf32> {cnn.param = "conv2.weight"},
                   %scale: tensor<32xf32> {cnn.param = "gn.weight"},
                   %shift: tensor<32xf32> {cnn.param = "gn.bias"},
                   %fc: tensor<10x32xf32> {cnn.param = "fc.weight"}) -> tensor<4x10xf32> {
  %c = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<4x32x16x16xf32>, tensor<32x32x1x1xf32>) -> tensor<4x32x16x16xf32>
  %g = cnn.reshape %c : (tensor<4x32x16x16xf32>) -> tensor<4x8x1024xf32>
  %mu = cnn.reduce_mean %g {axes = array<i64: 2>} : (tensor<4x8x1024xf32>) -> tensor<4x8x1xf32>
  %n = cnn.sub %g, %mu : (tensor<4x8x1024xf32>, tensor<4x8x1xf32>) -> tensor<4x8x1024xf32>
  %v = cnn.reshape %n : (tensor<4x8x1024xf32>) -> tensor<4x32x16x16xf32>
  %s = cnn.reshape %scale : (tensor<32xf32>) -> tensor<1x32x1x1xf32>
  %m = cnn.mul %v, %s : (tensor<4x32x16x16xf32>, tensor<1x32x1x1xf32>) -> tensor<4x32x16x16xf32>
  %b = cnn.bias_add %m, %shift : (tensor<4x32x16x16xf32>, tensor<32xf32>) -> tensor<4x32x16x16xf32>
  %r = cnn.relu %b : (tensor<4x32x16x16xf32>) -> tensor<4x32x16x16xf32>
  %y = cnn.conv2d %r, %w2 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<4x32x16x16xf32>, tensor<32x32x3x3xf32>) -> tensor<4x32x16x16xf32>
  %p = cnn.global_avg_pool %y : (tensor<4x32x16x16xf32>) -> tensor<4x32x1x1xf32>
  %f = cnn.reshape %p : (tensor<4x32x1x1xf32>) -> tensor<4x32xf32>
  %o = cnn.matmul %f, %fc {transpose_rhs = true} : (tensor<4x32xf32>, tensor<10x32xf32>) -> tensor<4x10xf32>
  return %o : tensor<4x10xf32>
}
