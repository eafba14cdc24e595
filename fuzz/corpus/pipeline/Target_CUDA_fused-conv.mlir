// Lowering of cnn.fused_conv2d: with a bias and a relu (or no) activation it
// becomes one runtime call that runs cuDNN's conv+bias+activation call or the
// convolution + the generated epilogue, whichever the runtime timed faster;
// clip (ReLU6) and bias-less convolutions, which cuDNN's call cannot express,
// always run as the convolution + the epilogue kernel.
// RUN: cnnc %s --train --layout nchw --precision fp32 --fuse --optimizer sgd --emit cuda -o %t.cu
// RUN: FileCheck %s < %t.cu
// REQUIRES: nvcc
// RUN: %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t.cu -o %t.o

// ReLU6 stays conv + a generated epilogue kernel:
// CHECK: v += a1; v = fminf(fmaxf(v, 0.0f), 6.0f); r0 = v;
// conv + bias + residual add + relu: the epilogue the runtime may replace by
// cuDNN's call, with the residual as its third input.
// CHECK: v += a1; v += a2; v = v > 0.f ? v : 0.f; r0 = v;
// CHECK-LABEL: static void convEpilogue0(cnnrt::Context &ctx, void *y, const void *bias,
// CHECK: (static_cast<float *>(y), static_cast<const float *>(bias), static_cast<const float *>(residual), static_cast<float *>(y));
// CHECK-NOT: static void convEpilogue1(

// CHECK-LABEL: static void prepareModel(
// CHECK: ctx.registerConv(0, {{.*}}"conv_relu6");
// CHECK: ctx.registerConvBiasAct(0, 0, cnnrt::Activation::Relu, true, convEpilogue0, "conv_res");
// The eval step's identical epilogue is shared.
// CHECK: ctx.registerConvBiasAct(1, 0, cnnrt::Activation::Relu, true, convEpilogue0, "conv_res");

// CHECK-LABEL: static void trainStep(
// CHECK: ctx.convFwd(0, P<float>(A, 0), P<float>(A, {{[0-9]+}}), P<float>(A, [[Y0:[0-9]+]]));
// CHECK-NEXT: k{{[0-9]+}}<<<
// CHECK-NOT: convFwd
// CHECK: ctx.convBiasActFwd(0, P<float>(A, [[Y0]]), P<float>(A, {{[0-9]+}}), P<float>(A, {{[0-9]+}}), P<float>(A, 0), P<float>(A, {{[0-9]+}}));

func.func @forward(%x: tensor<2x4x6x6xf32> {cnn.input},
                   %w1: tensor<4x4x3x3xf32> {cnn.param = "conv1.weight"},
                   %b1: tensor<4xf32> {cnn.param = "conv1.bias"},
                   %w2: tensor<4x4x3x3xf32> {cnn.param = "conv2.weight"},
                   %b2: tensor<4xf32> {cnn.param = "conv2.bias"},
                   %wf: tensor<10x144xf32> {cnn.param = "fc.weight"}) -> tensor<2x10xf32> {
  %c = cnn.conv2d %x, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x4x6x6xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x6x6xf32> loc("conv_relu6")
  %cb = cnn.bias_add %c, %b1 : (tensor<2x4x6x6xf32>, tensor<4xf32>) -> tensor<2x4x6x6xf32>
  %r = cnn.clip %cb {min = 0.0 : f32, max = 6.0 : f32} : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %c2 = cnn.conv2d %r, %w2 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x4x6x6xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x6x6xf32> loc("conv_res")
  %cb2 = cnn.bias_add %c2, %b2 : (tensor<2x4x6x6xf32>, tensor<4xf32>) -> tensor<2x4x6x6xf32>
  %a = cnn.add %cb2, %x : (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %r2 = cnn.relu %a : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %f = cnn.flatten %r2 {axis = 1} : (tensor<2x4x6x6xf32>) -> tensor<2x144xf32>
  %y = cnn.matmul %f, %wf {transpose_rhs = true} : (tensor<2x144xf32>, tensor<10x144xf32>) -> tensor<2x10xf32>
  return %y : tensor<2x10xf32>
}
