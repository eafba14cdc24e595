// The elementwise ops of issue 32 through the training step and the CUDA
// target: their scalar bodies and derivatives become straight-line C in the
// fused kernels, with the primitives expm1f (elu, selu, celu), log1pf
// (softplus), logf (log) and the tie / NaN selects of maximum and minimum.
// RUN: cnnc %s --train -O0 --emit cuda | FileCheck %s
// RUN: cnnc %s --train -O0 --emit cuda -o %t.cu
// RUN: %if nvcc %{ %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t.cu -o %t.o %}
// RUN: cnnc %s --train --emit cuda -o %t.opt.cu
// RUN: %if nvcc %{ %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t.opt.cu -o %t.opt.o %}

// CHECK-DAG: expm1f(
// CHECK-DAG: log1pf(
// CHECK-DAG: logf(
// CHECK-DAG: fmaxf(
// CHECK-DAG: fminf(
// A tie halves the gradient: t = (a0 == a1) ? dy * 0.5 : dy. (The
// statements between them depend on the host compiler's order of evaluating
// the builder calls' arguments, unspecified in C++: gcc and clang differ.)
// CHECK-DAG: bool [[EQ:t[0-9]+]] = a0 == a1;{{.*}} = [[EQ]] ?

func.func @forward(%x: tensor<2x4x3x3xf32> {cnn.input},
                   %s: tensor<4xf32> {cnn.param = "slope"},
                   %fc: tensor<10x4xf32> {cnn.param = "fc.weight"}) -> tensor<2x10xf32> {
  %a = cnn.elu %x {alpha = 0.7 : f32} : (tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
  %b = cnn.selu %a {alpha = 1.67326319 : f32, gamma = 1.05070102 : f32} : (tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
  %c = cnn.celu %b {alpha = 0.5 : f32} : (tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
  %sr = cnn.reshape %s : (tensor<4xf32>) -> tensor<1x4x1x1xf32>
  %p = cnn.prelu %c, %sr : (tensor<2x4x3x3xf32>, tensor<1x4x1x1xf32>) -> tensor<2x4x3x3xf32>
  %mx = cnn.maximum %p, %x : (tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
  %mn = cnn.minimum %mx, %sr : (tensor<2x4x3x3xf32>, tensor<1x4x1x1xf32>) -> tensor<2x4x3x3xf32>
  %sp = cnn.softplus %mn : (tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
  %l = cnn.log %sp : (tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
  %g = cnn.global_avg_pool %l : (tensor<2x4x3x3xf32>) -> tensor<2x4x1x1xf32>
  %f = cnn.reshape %g : (tensor<2x4x1x1xf32>) -> tensor<2x4xf32>
  %y = cnn.matmul %f, %fc {transpose_rhs = true} : (tensor<2x4xf32>, tensor<10x4xf32>) -> tensor<2x10xf32>
  return %y : tensor<2x10xf32>
}
