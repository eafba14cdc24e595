// The default GPU pipeline (NHWC, f16, fusion) on ResNet's stem, conv -> BN
// -> ReLU -> 3x3/2 max pooling: cnn-max-pool-index makes the pooling record
// each window's argmax and take the BN apply + ReLU as its prologue, so the
// normalized tensor is made by no kernel and stored nowhere, and the pooling
// gradient is one gather routed by the recorded index (no argmax pass in
// the backward step, nothing kept in the library workspace), done where the
// BN + ReLU gradient reads it (fused_max_pool2d_batch_norm_relu_grad: the
// full-size pooling gradient is never stored). Without fusion the gather is
// its own kernel. The fold is --pool-bn-grad's (off by default: measured
// slower on the H100, docs/benchmarks.md session 17).
// RUN: cnnc %s --train --optimizer sgd --emit cuda -o %t.cu --pool-bn-grad --mlir-print-ir-after=cnn-max-pool-index 2>%t.ir
// RUN: FileCheck %s < %t.cu
// RUN: FileCheck %s --check-prefix=IR < %t.ir
// RUN: cnnc %s --train --optimizer sgd --emit cuda -o %t.off.cu --max-pool-index=false
// RUN: FileCheck %s --check-prefix=OFF < %t.off.cu
// RUN: cnnc %s --train --optimizer sgd --emit cuda -o %t.nofuse.cu --fuse=false
// RUN: FileCheck %s --check-prefix=NOFUSE < %t.nofuse.cu
// RUN: cnnc %s --train --optimizer sgd --emit cuda -o %t.apart.cu
// RUN: FileCheck %s --check-prefix=APART < %t.apart.cu
// REQUIRES: nvcc
// RUN: %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t.cu -o %t.o
// RUN: %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t.apart.cu -o %t.apart.o
// The printer has the fused gradient in its "vec8" form only, and says so for
// a step whose op lacks that choice (here removed by hand):
// RUN: cnnc-opt %s --cnn-autodiff --cse --cnn-gpu-pipeline=pool-bn-grad=true -o %t.step.mlir
// RUN: FileCheck %s --check-prefix=HASVEC < %t.step.mlir
// RUN: sed '/fused_max_pool2d_batch_norm_relu_grad/s/cnn.lowering = "vec8", //' %t.step.mlir > %t.novec.mlir
// RUN: not cnnc-translate --cnn-to-cuda %t.novec.mlir -o %t.novec.cu 2>&1 | FileCheck %s --check-prefix=NOVEC
// HASVEC: cnn.fused_max_pool2d_batch_norm_relu_grad {{.*}}cnn.lowering = "vec8"
// NOVEC: error: 'cnn.fused_max_pool2d_batch_norm_relu_grad' op the CUDA target has this op for NHWC tensors of a multiple of 8 channels only (cnn-select-lowering's 'vec8'), got 'tensor<8x8x8x16xf16>'

// IR: cnn.fused_max_pool2d %{{.*}}, %alpha, %beta
// IR-SAME: (tensor<8x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>) -> (tensor<8x4x4x16xf16>, tensor<8x4x4x16xui8>)
// IR-NOT: cnn.max_pool2d_index_grad
// IR: cnn.fused_max_pool2d_batch_norm_relu_grad
// IR-SAME: (tensor<8x4x4x16xf16>, tensor<8x4x4x16xui8>, tensor<8x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<8x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>)

// CHECK-LABEL: static void trainStep(
// CHECK: maxPoolIndexNHWC8<__half, true><<<{{[0-9]+}}, 256, 0, s>>>(P<__half>(A, {{[0-9]+}}), P<float>(A, {{[0-9]+}}), P<float>(A, {{[0-9]+}}), P<__half>(A, {{[0-9]+}}), P<uint8_t>(A, [[IDX:[0-9]+]]), PoolParams{8, 16, 8, 8, 4, 4, 3, 3, 2, 2, 1, 1, 1, 1, false});
// CHECK-NOT: maxPoolBwdGatherNHWC8<
// CHECK: poolBnGradPartial8<__half><<<dim3(1, {{[0-9]+}}), dim3(2, 128), 0, s>>>([[SCRATCH:ctx.reductionScratch\([0-9]+\)]], P<__half>(A, [[DY:[0-9]+]]), P<uint8_t>(A, [[IDX]]), P<__half>(A, [[X:[0-9]+]]), {{.*}}, PoolParams{8, 16, 8, 8, 4, 4, 3, 3, 2, 2, 1, 1, 1, 1, false}, {{[0-9]+}}ll);
// CHECK: nhwcBnGradFinish<float><<<16, 256, 0, s>>>([[SCRATCH]],
// CHECK: poolBnGradApply8<__half, float><<<{{[0-9]+}}, 256, 0, s>>>(P<__half>(A, [[DY]]), P<uint8_t>(A, [[IDX]]), P<__half>(A, [[X]]), {{.*}}, PoolParams{8, 16, 8, 8, 4, 4, 3, 3, 2, 2, 1, 1, 1, 1, false}, 512.0f);
// CHECK-NOT: maxPoolBwdGatherNHWC8<
// CHECK-NOT: ctx.workspaceBytes()
// CHECK-LABEL: static void evalStep(
// CHECK: maxPoolNHWC8<__half, false>

// Without fusion the gather writes the pooling gradient for the BN gradient.
// NOFUSE-LABEL: static void trainStep(
// NOFUSE: maxPoolIndexNHWC8<__half, false>
// NOFUSE: maxPoolBwdGatherNHWC8<__half><<<{{[0-9]+}}, 256, 0, s>>>(P<__half>(A, {{[0-9]+}}), P<uint8_t>(A, {{[0-9]+}}), P<__half>(A, {{[0-9]+}}), PoolParams{8, 16, 8, 8, 4, 4, 3, 3, 2, 2, 1, 1, 1, 1, false});
// NOFUSE-NOT: poolBnGrad

// The default (no --pool-bn-grad): the prologue stays, the gradient is its
// own gather.
// APART-LABEL: static void trainStep(
// APART: maxPoolIndexNHWC8<__half, true>
// APART: maxPoolBwdGatherNHWC8<__half><<<
// APART: nhwcPartial8<4, __half>
// APART-NOT: poolBnGrad

// Off: the pooling reads the stored normalization, and its gradient finds
// each window's maximum again in it (the gather form).
// OFF-LABEL: static void trainStep(
// OFF: maxPoolNHWC8<__half, false>
// OFF: maxPoolBwd<__half, true>
// OFF-NOT: maxPoolIndex
func.func @forward(%x: tensor<8x3x16x16xf32> {cnn.input},
                   %w1: tensor<16x3x3x3xf32> {cnn.param = "conv1.weight"},
                   %g: tensor<16xf32> {cnn.param = "bn.weight"},
                   %be: tensor<16xf32> {cnn.param = "bn.bias"},
                   %rm: tensor<16xf32> {cnn.buffer = "bn.running_mean"},
                   %rv: tensor<16xf32> {cnn.buffer = "bn.running_var"},
                   %wf: tensor<10x16xf32> {cnn.param = "fc.weight"}) -> tensor<8x10xf32> {
  %c = cnn.conv2d %x, %w1 {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<8x3x16x16xf32>, tensor<16x3x3x3xf32>) -> tensor<8x16x8x8xf32>
  %n = cnn.batch_norm %c, %g, %be, %rm, %rv {epsilon = 1.0e-5 : f32} : (tensor<8x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<8x16x8x8xf32>
  %r = cnn.relu %n : (tensor<8x16x8x8xf32>) -> tensor<8x16x8x8xf32>
  %p = cnn.max_pool2d %r {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, ceil_mode = false} : (tensor<8x16x8x8xf32>) -> tensor<8x16x4x4xf32>
  %q = cnn.global_avg_pool %p : (tensor<8x16x4x4xf32>) -> tensor<8x16x1x1xf32>
  %f = cnn.flatten %q {axis = 1} : (tensor<8x16x1x1xf32>) -> tensor<8x16xf32>
  %y = cnn.matmul %f, %wf {transpose_rhs = true} : (tensor<8x16xf32>, tensor<10x16xf32>) -> tensor<8x10xf32>
  return %y : tensor<8x10xf32>
}
