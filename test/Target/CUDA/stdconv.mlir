// RUN: cnnc %S/Inputs/stdconv.mlir --train --optimizer sgd --precision fp16 --layout nhwc --emit cuda -o %t.cu
// RUN: FileCheck %s < %t.cu
// RUN: %if nvcc %{ %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t.cu -o %t.o %}

// Weight standardization (timm's ScaledStdConv2d and StdConv2d) in the
// default GPU pipeline (f16, NHWC): the BatchNormalization on the weight is
// parameter arithmetic, which cnn-precision keeps in f32 as torch.autocast
// does (in f16 its gradients overflowed at the loss scale 65536 and every
// first step skipped); the statistics kernel reads the f32 weight with f32
// per-channel operands (nhwcStatsFinish<T, S> takes one S for all of them;
// S = __half failed to compile against its float alpha/beta).
// CHECK-LABEL: static void trainStep(cnnrt::Context &ctx) {
// CHECK: nhwcStatsFinish<float, float><<<8, 256, 0, s>>>({{.*}}, 8ll, 8, {{[0-9]+}}, 9.99999997e-07f, 0.0f);
// CHECK: nhwcStatsFinish<float, float><<<8, 256, 0, s>>>({{.*}}, 72ll, 8, {{[0-9]+}}, 9.99999997e-07f, 0.0f);
// CHECK-NOT: nhwcStatsFinish<__half, __half>
