// The default GPU pipeline (NHWC, f16, fusion) on a residual block,
// y1 = relu(conv1(y0) + y0) with y0 = relu(conv0(x)): the gradient at y0 is
// relu_grad(conv_bwd_data(dz1, w1) + dz1, y0), which cnn-dgrad-epilogue
// makes one fused_conv2d_bwd_data. It lowers to one runtime call that runs
// cuDNN's dgrad + add + ReLU-backward graph or the split form (here the
// 1x1 convolution's cuBLASLt matmul, then the epilogue in place), whichever
// the runtime timed faster; no separate add/relu_grad kernel is left.
// RUN: cnnc %s --train --optimizer sgd --emit cuda -o %t.cu --mlir-print-ir-after=cnn-dgrad-epilogue 2>%t.ir
// RUN: FileCheck %s < %t.cu
// RUN: FileCheck %s --check-prefix=IR < %t.ir
// RUN: cnnc %s --train --optimizer sgd --emit cuda -o %t.off.cu --dgrad-epilogue=false
// RUN: FileCheck %s --check-prefix=OFF < %t.off.cu
// REQUIRES: nvcc
// RUN: %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t.cu -o %t.o

// IR: cnn.fused_conv2d_bwd_data
// IR-SAME: (tensor<8x8x8x16xf16>, tensor<16x1x1x16xf16>, tensor<8x8x8x16xf16>, tensor<8x8x8x16xf16>) -> tensor<8x8x8x16xf16>

// The split form: the 1x1 convolution's gradient as a matmul, then
// dx = y0 > 0 ? round(dx + addend) : 0 in place.
// CHECK-LABEL: static void dgradAddReluSplit0(cnnrt::Context &ctx, const void *dy, const void *w,
// CHECK-NEXT: const void *addend, const void *reluOut, void *dx) {
// CHECK: ctx.matmul({{[0-9]+}}, dy, w, dx);
// CHECK-NEXT: k{{[0-9]+}}<<<{{.*}}>>>(static_cast<__half *>(dx), static_cast<const __half *>(addend), static_cast<const __half *>(reluOut), static_cast<__half *>(dx));
// CHECK-NEXT: CNNRT_CHECK_KERNEL(ctx, "{{.*}}", "cnn.fused_conv2d_bwd_data k{{[0-9]+}}");
// CHECK: ctx.registerConvBwdDataAddRelu(0, [[CONV:[0-9]+]], dgradAddReluSplit0, "
// CHECK-LABEL: static void trainStep(
// CHECK: ctx.convBwdDataAddRelu(0, P<__half>(A, {{[0-9]+}}), P<__half>(A, {{[0-9]+}}), P<__half>(A, {{[0-9]+}}), P<__half>(A, {{[0-9]+}}), P<__half>(A, {{[0-9]+}}));
// CHECK-NOT: ctx.convBwdDataAddRelu(

// OFF-NOT: convBwdDataAddRelu
func.func @forward(%x: tensor<8x3x8x8xf32> {cnn.input},
                   %w0: tensor<16x3x3x3xf32> {cnn.param = "conv0.weight"},
                   %w1: tensor<16x16x1x1xf32> {cnn.param = "conv1.weight"},
                   %wf: tensor<10x16xf32> {cnn.param = "fc.weight"}) -> tensor<8x10xf32> {
  %c0 = cnn.conv2d %x, %w0 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<8x3x8x8xf32>, tensor<16x3x3x3xf32>) -> tensor<8x16x8x8xf32>
  %y0 = cnn.relu %c0 : (tensor<8x16x8x8xf32>) -> tensor<8x16x8x8xf32>
  %c1 = cnn.conv2d %y0, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<8x16x8x8xf32>, tensor<16x16x1x1xf32>) -> tensor<8x16x8x8xf32>
  %s = cnn.add %c1, %y0 : (tensor<8x16x8x8xf32>, tensor<8x16x8x8xf32>) -> tensor<8x16x8x8xf32>
  %y1 = cnn.relu %s : (tensor<8x16x8x8xf32>) -> tensor<8x16x8x8xf32>
  %q = cnn.global_avg_pool %y1 : (tensor<8x16x8x8xf32>) -> tensor<8x16x1x1xf32>
  %f = cnn.flatten %q {axis = 1} : (tensor<8x16x1x1xf32>) -> tensor<8x16xf32>
  %y = cnn.matmul %f, %wf {transpose_rhs = true} : (tensor<8x16xf32>, tensor<10x16xf32>) -> tensor<8x10xf32>
  return %y : tensor<8x10xf32>
}
