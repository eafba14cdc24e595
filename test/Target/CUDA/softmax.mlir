// cnn.softmax over any axis on the GPU target (split attention and
// selective kernels take it over the radix, axis 1 of N x radix x C x 1 x 1):
// the tensor is outer x n x inner around the axis; inner 1 (the last axis,
// or only 1s after it) is softmaxRows, one block per row, any other axis
// softmaxStrided, one thread per (outer, inner) pair. f32 math, f16 storage
// in the GPU default (fp16 NHWC). Forward and gradient (reduce_sum over the
// axis) through the training step, compiled by nvcc.
// RUN: cnnc %s --train -O0 --emit cuda | FileCheck %s
// RUN: cnnc %s --train --emit cuda | FileCheck %s --check-prefix=F16
// RUN: cnnc %s --train -O0 --emit cuda -o %t.cu
// RUN: %if nvcc %{ %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t.cu -o %t.o %}
// RUN: cnnc %s --train --emit cuda -o %t.opt.cu
// RUN: %if nvcc %{ %nvcc -std=c++17 -arch=sm_80 -I%cnnc_src/runtime/include -c %t.opt.cu -o %t.opt.o %}

// The kernel reads x[(o * n + k) * inner + i] in f32 and stores T.
// (The kernel is kernels/Softmax.cuh's, printed with the prelude.)
// CHECK: __global__ void softmaxStrided(const T *x, T *y, int64_t outer, int n,
// CHECK-NEXT: int64_t inner) {
// Axis 1 of 2x4x3x3: outer 2, n 4, inner 9.
// CHECK: softmaxStrided<float><<<1, 256, 0, s>>>({{.*}}, 2ll, 4, 9ll);
// CHECK-NEXT: "cnn.softmax softmaxStrided<float>"
// Axis 1 of 2x4x1x1: a row of 4 per block.
// CHECK: softmaxRows<float><<<2, 256, 0, s>>>({{.*}}, 4);
// The radix of 2x2x2x1x1: outer 2, n 2, inner 2.
// CHECK: softmaxStrided<float><<<1, 256, 0, s>>>({{.*}}, 2ll, 2, 2ll);
// The gradient sums dy * y over the axis.
// CHECK: cnn.reduce_sum

// F16: softmaxStrided<__half><<<1, 256, 0, s>>>({{.*}}, 2ll, 4, 9ll);
// F16: softmaxRows<__half><<<2, 256, 0, s>>>({{.*}}, 4);
// F16: softmaxStrided<__half><<<1, 256, 0, s>>>({{.*}}, 2ll, 2, 2ll);

func.func @forward(%x: tensor<2x4x3x3xf32> {cnn.input},
                   %s: tensor<4xf32> {cnn.param = "scale"},
                   %fc: tensor<10x4xf32> {cnn.param = "fc.weight"}) -> tensor<2x10xf32> {
  %sr = cnn.reshape %s : (tensor<4xf32>) -> tensor<1x4x1x1xf32>
  %a = cnn.mul %x, %sr : (tensor<2x4x3x3xf32>, tensor<1x4x1x1xf32>) -> tensor<2x4x3x3xf32>
  %p = cnn.softmax %a {axis = 1 : i64} : (tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
  %g = cnn.global_avg_pool %p : (tensor<2x4x3x3xf32>) -> tensor<2x4x1x1xf32>
  %q = cnn.softmax %g {axis = 1 : i64} : (tensor<2x4x1x1xf32>) -> tensor<2x4x1x1xf32>
  %r = cnn.reshape %q : (tensor<2x4x1x1xf32>) -> tensor<2x2x2x1x1xf32>
  %t = cnn.softmax %r {axis = 1 : i64} : (tensor<2x2x2x1x1xf32>) -> tensor<2x2x2x1x1xf32>
  %f = cnn.reshape %t : (tensor<2x2x2x1x1xf32>) -> tensor<2x4xf32>
  %y = cnn.matmul %f, %fc {transpose_rhs = true} : (tensor<2x4xf32>, tensor<10x4xf32>) -> tensor<2x10xf32>
  return %y : tensor<2x10xf32>
}
