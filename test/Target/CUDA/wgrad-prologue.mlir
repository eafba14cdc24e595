// The default GPU pipeline (NHWC, f16, fusion) on conv -> BN -> ReLU ->
// conv -> BN: the second convolution takes the first BN's apply + ReLU as
// its prologue (cnn-conv-stats), and so does its filter gradient
// (fused_conv2d_bwd_filter): one runtime call that runs cuDNN's
// scale-bias-ReLU + wgrad graph or the split form (the normalization into
// the runtime's scratch buffer, then the convolution's filter gradient),
// whichever the runtime timed faster. The normalized tensor is made by no
// kernel of the step. Opt-in (--wgrad-prologue): the default keeps the
// recomputation kernel (ResNet-50's step measured faster without).
// RUN: cnnc %s --train --optimizer sgd --emit cuda -o %t.cu --wgrad-prologue
// RUN: FileCheck %s < %t.cu
// RUN: cnnc %s --train --optimizer sgd --emit cuda -o %t.off.cu
// RUN: FileCheck %s --check-prefix=OFF < %t.off.cu
// REQUIRES: nvcc
// RUN: %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t.cu -o %t.o

// The second conv + statistics' split form (what CNNRT_DETERMINISTIC runs):
// the prologue eight channels a thread (C = 16), the convolution, the
// shifted sums with f32 chunks (nhwcPartial8<1>'s tiling: M = 512 rows in
// 8 tiles of 64) and their fixed-order finish.
// CHECK-LABEL: static void convStatsSplit1(
// CHECK: nhwcScaleShiftRelu8<__half><<<4, 256, 0, s>>>(static_cast<const __half *>(x), scale, shift, static_cast<__half *>(scratch), 8192ll, 16);
// CHECK-NEXT: CNNRT_CHECK_KERNEL
// CHECK-NEXT: x = scratch;
// CHECK-NEXT: ctx.convFwd(1, x, w, y);
// CHECK-NEXT: nhwcShiftedSums8<__half><<<dim3(1, 8), dim3(2, 128), 0, s>>>(ctx.reductionScratch(256), static_cast<__half *>(y), 512ll, 16, 64ll);
// CHECK-NEXT: CNNRT_CHECK_KERNEL
// CHECK-NEXT: nhwcSumsFinish<__half><<<16, 256, 0, s>>>(ctx.reductionScratch(256), static_cast<__half *>(y), sum, sumSq, 512ll, 16, 8);
// CHECK-LABEL: static void wgradPrologueSplit0(cnnrt::Context &ctx, const void *x, const void *dy,
// CHECK-NEXT: void *dw, const float *scale, const float *shift, void *scratch) {
// CHECK: nhwcScaleShiftRelu8<__half><<<4, 256, 0, s>>>(static_cast<const __half *>(x), scale, shift, static_cast<__half *>(scratch), 8192ll, 16);
// CHECK: ctx.convBwdFilter({{[0-9]+}}, scratch, dy, dw);
// CHECK: ctx.registerConvBwdFilterPrologue(0, {{[0-9]+}}, wgradPrologueSplit0, "
// CHECK-LABEL: static void trainStep(
// CHECK: ctx.convBwdFilterPrologue(0, P<__half>(A, {{[0-9]+}}), P<__half>(A, {{[0-9]+}}), P<__half>(A, {{[0-9]+}}), P<float>(A, {{[0-9]+}}), P<float>(A, {{[0-9]+}}));
// CHECK-NOT: ctx.convBwdFilterPrologue(

// OFF-NOT: convBwdFilterPrologue
func.func @forward(%x: tensor<8x3x8x8xf32> {cnn.input},
                   %w1: tensor<16x3x3x3xf32> {cnn.param = "conv1.weight"},
                   %g: tensor<16xf32> {cnn.param = "bn.weight"},
                   %be: tensor<16xf32> {cnn.param = "bn.bias"},
                   %rm: tensor<16xf32> {cnn.buffer = "bn.running_mean"},
                   %rv: tensor<16xf32> {cnn.buffer = "bn.running_var"},
                   %w2: tensor<16x16x3x3xf32> {cnn.param = "conv2.weight"},
                   %g2: tensor<16xf32> {cnn.param = "bn2.weight"},
                   %be2: tensor<16xf32> {cnn.param = "bn2.bias"},
                   %rm2: tensor<16xf32> {cnn.buffer = "bn2.running_mean"},
                   %rv2: tensor<16xf32> {cnn.buffer = "bn2.running_var"},
                   %wf: tensor<10x16xf32> {cnn.param = "fc.weight"}) -> tensor<8x10xf32> {
  %c = cnn.conv2d %x, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<8x3x8x8xf32>, tensor<16x3x3x3xf32>) -> tensor<8x16x8x8xf32>
  %n = cnn.batch_norm %c, %g, %be, %rm, %rv {epsilon = 1.0e-5 : f32} : (tensor<8x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<8x16x8x8xf32>
  %r = cnn.relu %n : (tensor<8x16x8x8xf32>) -> tensor<8x16x8x8xf32>
  %c2 = cnn.conv2d %r, %w2 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<8x16x8x8xf32>, tensor<16x16x3x3xf32>) -> tensor<8x16x8x8xf32>
  %n2 = cnn.batch_norm %c2, %g2, %be2, %rm2, %rv2 {epsilon = 1.0e-5 : f32} : (tensor<8x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<8x16x8x8xf32>
  %q = cnn.global_avg_pool %n2 : (tensor<8x16x8x8xf32>) -> tensor<8x16x1x1xf32>
  %f = cnn.flatten %q {axis = 1} : (tensor<8x16x1x1xf32>) -> tensor<8x16xf32>
  %y = cnn.matmul %f, %wf {transpose_rhs = true} : (tensor<8x16xf32>, tensor<10x16xf32>) -> tensor<8x10xf32>
  return %y : tensor<8x10xf32>
}
