// The default GPU pipeline (NHWC, f16, fusion) on conv -> BN -> ReLU: the
// ReLU gradient fuses into the BN gradient, and since the ReLU output is
// the BN normalization itself (no residual add between), cnn-fuse gives the
// fused op the normalization's alpha and beta instead of the ReLU output
// (fused_batch_norm_affine_relu_grad): the NHWC lowering reduces the masked
// gradient with the tiled reduction (nhwcPartial8 mode 4: C % 8 == 0, the
// mask recomputed from x) and computes dx in one elementwise kernel that
// recomputes the mask again; neither reads the ReLU output, and the masked
// gradient is never stored.
// RUN: cnnc %s --train --optimizer sgd --emit cuda --stats -o %t.cu 2>&1 | FileCheck %s --check-prefix=STATS
// RUN: FileCheck %s < %t.cu
// RUN: FileCheck %s --check-prefix=KERNEL < %t.cu
// STATS: cnnc: stats: fusion bn_relu_grad_ops 2
// STATS-NEXT: cnnc: stats: fusion bn_relu_masks_recomputed 1

// The reductions' partial sums go through the Context's scratch buffer
// (not a __device__ array per translation unit), reserved before any step.
// CHECK-LABEL: static void prepareModel(
// CHECK-NEXT: ctx.reductionScratch({{[0-9]+}});
// CHECK-LABEL: static void trainStep(
// The forward normalization + ReLU: x * alpha + beta, the rounding to f16,
// after the statistics from the convolution's sums (cnn-conv-stats).
// CHECK: ctx.convStatsFwd(
// CHECK: cnn.batch_norm_finalize bnFinalize
// CHECK: k{{[0-9]+}}<<<{{.*}}>>>(P<__half>(A, [[X:[0-9]+]]), P<float>(A, [[AL:[0-9]+]]), P<float>(A, [[BE:[0-9]+]]), P<__half>(A, [[Y:[0-9]+]]));
// CHECK: nhwcPartial8<4, __half><<<dim3(1, {{[0-9]+}}), dim3(2, 128), 0, s>>>([[SCRATCH:ctx.reductionScratch\([0-9]+\)]], P<__half>(A, [[DY:[0-9]+]]), P<__half>(A, [[X]]), (const __half *)nullptr, P<float>(A, {{[0-9]+}}), P<float>(A, {{[0-9]+}}), P<float>(A, [[AL]]), P<float>(A, [[BE]]),
// CHECK-NEXT: CNNRT_CHECK_KERNEL(ctx, "{{.*}}", "cnn.fused_batch_norm_affine_relu_grad nhwc{{.*}}");
// One block per channel (16) adds the tiles.
// CHECK-NEXT: nhwcBnGradFinish<float><<<16, 256, 0, s>>>([[SCRATCH]],
// CHECK-NEXT: CNNRT_CHECK_KERNEL(ctx, "{{.*}}", "cnn.fused_batch_norm_affine_relu_grad nhwc{{.*}}");
// CHECK-NEXT: k[[K:[0-9]+]]<<<{{.*}}>>>(P<__half>(A, [[DY]]), P<__half>(A, [[X]]), {{.*}}, P<float>(A, [[AL]]), P<float>(A, [[BE]]), P<__half>(A,
// CHECK-NOT: "cnn.relu_grad
// The dx kernel recomputes the mask as the forward computed y.
// KERNEL: float g = __half2float(__float2half_rn(a1 * a7 + a8)) > 0.f ? a0 : 0.f;
func.func @forward(%x: tensor<8x3x8x8xf32> {cnn.input},
                   %w1: tensor<16x3x3x3xf32> {cnn.param = "conv1.weight"},
                   %g: tensor<16xf32> {cnn.param = "bn.weight"},
                   %be: tensor<16xf32> {cnn.param = "bn.bias"},
                   %rm: tensor<16xf32> {cnn.buffer = "bn.running_mean"},
                   %rv: tensor<16xf32> {cnn.buffer = "bn.running_var"},
                   %wf: tensor<10x16xf32> {cnn.param = "fc.weight"}) -> tensor<8x10xf32> {
  %c = cnn.conv2d %x, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<8x3x8x8xf32>, tensor<16x3x3x3xf32>) -> tensor<8x16x8x8xf32>
  %n = cnn.batch_norm %c, %g, %be, %rm, %rv {epsilon = 1.0e-5 : f32} : (tensor<8x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<8x16x8x8xf32>
  %r = cnn.relu %n : (tensor<8x16x8x8xf32>) -> tensor<8x16x8x8xf32>
  %q = cnn.global_avg_pool %r : (tensor<8x16x8x8xf32>) -> tensor<8x16x1x1xf32>
  %f = cnn.flatten %q {axis = 1} : (tensor<8x16x1x1xf32>) -> tensor<8x16xf32>
  %y = cnn.matmul %f, %wf {transpose_rhs = true} : (tensor<8x16xf32>, tensor<10x16xf32>) -> tensor<8x10xf32>
  return %y : tensor<8x10xf32>
}
