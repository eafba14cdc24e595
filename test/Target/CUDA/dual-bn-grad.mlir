// A residual block whose shortcut has its own BatchNorm (ResNet's
// downsampling blocks): both BatchNorm gradients read one gradient, the
// output ReLU's. cnn-fuse makes them one fused_dual_batch_norm_grad; on the
// default pipeline (NHWC, f16, 32 channels: cnn-select-lowering's "vec8") it
// is one sums pass that reads that gradient once (three sums per channel),
// one finishing kernel and one apply kernel writing both input gradients.
// In NCHW (no "vec8") it prints as the two batch_norm_grads.
// RUN: cnnc %s --train --optimizer sgd --emit cuda -o %t.cu --stats --mlir-print-ir-after=cnn-select-lowering 2>%t.ir
// RUN: FileCheck %s < %t.cu
// RUN: FileCheck %s --check-prefix=IR < %t.ir
// RUN: cnnc %s --train --optimizer sgd --emit cuda -o %t.nchw.cu --layout nchw --precision fp32
// RUN: FileCheck %s --check-prefix=NCHW < %t.nchw.cu
// REQUIRES: nvcc
// RUN: %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t.cu -o %t.o
// RUN: %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t.nchw.cu -o %t.nchw.o
// Without cnn-select-lowering's "vec8" (removed by hand here) the printer
// gives the op as its two batch_norm_grads, in NHWC too (their sums with one
// channel per thread: the op's lowering says no "vec8"):
// RUN: cnnc-opt %s --cnn-autodiff --cse --cnn-gpu-pipeline -o %t.step.mlir
// RUN: sed '/fused_dual_batch_norm_grad/s/cnn.lowering = "vec8", //' %t.step.mlir > %t.split.mlir
// RUN: cnnc-translate --cnn-to-cuda %t.split.mlir -o %t.split.cu
// RUN: FileCheck %s --check-prefix=SPLIT < %t.split.cu
// SPLIT-LABEL: static void trainStep(
// SPLIT-NOT: dualBnGrad
// SPLIT: nhwcPartial<2, __half>
// SPLIT: nhwcPartial<2, __half>
// SPLIT-NOT: dualBnGrad
// SPLIT-LABEL: static void evalStep(

// IR: cnn.fused_dual_batch_norm_grad
// IR-SAME: cnn.lowering = "vec8"
// IR-SAME: (tensor<8x8x8x32xf16>, tensor<8x8x8x32xf16>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<8x8x8x32xf16>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>) -> (tensor<8x8x8x32xf16>, tensor<32xf32>, tensor<32xf32>, tensor<8x8x8x32xf16>, tensor<32xf32>, tensor<32xf32>)
// IR-NOT: cnn.batch_norm_grad
// IR: cnnc: stats: fusion bn_grad_pairs 1

// CHECK-LABEL: static void trainStep(
// CHECK-NOT: nhwcPartial8<2,
// CHECK: dualBnGradPartial8<__half><<<dim3(1, {{[0-9]+}}), dim3(4, 64), 0, s>>>([[SCRATCH:ctx.reductionScratch\([0-9]+\)]], P<__half>(A, [[DY:[0-9]+]]), P<__half>(A, {{[0-9]+}}), P<__half>(A, {{[0-9]+}}), {{.*}}, 512ll, 32, {{[0-9]+}}ll);
// CHECK: dualBnGradFinish<float><<<32, 256, 0, s>>>([[SCRATCH]],
// CHECK: <<<{{[0-9]+}}, 256, 0, s>>>(P<__half>(A, [[DY]]), {{.*}}, P<__half>(A, {{[0-9]+}}), P<__half>(A, {{[0-9]+}}));
// CHECK-NOT: nhwcPartial8<2,
// CHECK-LABEL: static void evalStep(

// NCHW-LABEL: static void trainStep(
// NCHW-NOT: dualBnGrad
// NCHW: bnGradReduce<float, float>
// NCHW: bnGradReduce<float, float>
// NCHW-NOT: dualBnGrad
func.func @forward(%x: tensor<8x16x8x8xf32> {cnn.input},
                   %w1: tensor<32x16x3x3xf32> {cnn.param = "conv1.weight"},
                   %g1: tensor<32xf32> {cnn.param = "bn1.weight"},
                   %b1: tensor<32xf32> {cnn.param = "bn1.bias"},
                   %rm1: tensor<32xf32> {cnn.buffer = "bn1.running_mean"},
                   %rv1: tensor<32xf32> {cnn.buffer = "bn1.running_var"},
                   %w2: tensor<32x16x1x1xf32> {cnn.param = "down.weight"},
                   %g2: tensor<32xf32> {cnn.param = "bn2.weight"},
                   %b2: tensor<32xf32> {cnn.param = "bn2.bias"},
                   %rm2: tensor<32xf32> {cnn.buffer = "bn2.running_mean"},
                   %rv2: tensor<32xf32> {cnn.buffer = "bn2.running_var"},
                   %wf: tensor<10x32xf32> {cnn.param = "fc.weight"}) -> tensor<8x10xf32> {
  %c1 = cnn.conv2d %x, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<8x16x8x8xf32>, tensor<32x16x3x3xf32>) -> tensor<8x32x8x8xf32>
  %n1 = cnn.batch_norm %c1, %g1, %b1, %rm1, %rv1 {epsilon = 1.0e-5 : f32} : (tensor<8x32x8x8xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<8x32x8x8xf32>
  %c2 = cnn.conv2d %x, %w2 {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<8x16x8x8xf32>, tensor<32x16x1x1xf32>) -> tensor<8x32x8x8xf32>
  %n2 = cnn.batch_norm %c2, %g2, %b2, %rm2, %rv2 {epsilon = 1.0e-5 : f32} : (tensor<8x32x8x8xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<8x32x8x8xf32>
  %s = cnn.add %n1, %n2 : (tensor<8x32x8x8xf32>, tensor<8x32x8x8xf32>) -> tensor<8x32x8x8xf32>
  %r = cnn.relu %s : (tensor<8x32x8x8xf32>) -> tensor<8x32x8x8xf32>
  %q = cnn.global_avg_pool %r : (tensor<8x32x8x8xf32>) -> tensor<8x32x1x1xf32>
  %f = cnn.flatten %q {axis = 1} : (tensor<8x32x1x1xf32>) -> tensor<8x32xf32>
  %y = cnn.matmul %f, %wf {transpose_rhs = true} : (tensor<8x32xf32>, tensor<10x32xf32>) -> tensor<8x10xf32>
  return %y : tensor<8x10xf32>
}
