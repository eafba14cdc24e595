// RUN: cnnc %S/Inputs/stdconv.mlir --train --optimizer sgd --precision fp16 --layout nhwc --emit cuda -o %t.cu
// RUN: FileCheck %s < %t.cu
// RUN: %if nvcc %{ %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t.cu -o %t.o %}

// Weight standardization (timm's ScaledStdConv2d and StdConv2d) in the
// default GPU pipeline (f16, NHWC): the BatchNormalization on the weight
// reads f16 computed per-channel operands (NF's gain * scale, the running
// statistics torch computes from the weight); cnn-precision casts them to
// f32 like every BatchNorm's scale, bias and statistics, so the statistics
// kernel is instantiated for f32 per-channel operands (nhwcStatsFinish<T, S>
// takes one S for all of them; S = __half failed to compile against its
// float alpha/beta).
// CHECK-LABEL: static void trainStep(cnnrt::Context &ctx) {
// CHECK: nhwcStatsFinish<__half, float><<<8, 256, 0, s>>>({{.*}}, 8ll, 8, {{[0-9]+}}, 9.99999997e-07f, 0.0f);
// CHECK: nhwcStatsFinish<__half, float><<<8, 256, 0, s>>>({{.*}}, 72ll, 8, {{[0-9]+}}, 9.99999997e-07f, 0.0f);
// CHECK-NOT: nhwcStatsFinish<__half, __half>
