// BatchNorm in eval mode (cnn.batch_norm {use_running_stats}) in the GPU
// training step: the forward normalizes with the running statistics, which
// the step returns unchanged; the backward is two more batch_norm kernels
// (dy's and x's normalized value) and per-channel sums. f16 NHWC, compiled
// with nvcc.
// RUN: cnnc %S/Inputs/bn-eval.mlir --train --optimizer sgd --precision fp16 --layout nhwc --target gpu --emit mlir | FileCheck %s --check-prefix=IR
// RUN: cnnc %S/Inputs/bn-eval.mlir --train --optimizer sgd --precision fp16 --layout nhwc --emit cuda -o %t.cu
// RUN: FileCheck %s < %t.cu
// RUN: %if nvcc %{ %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t.cu -o %t.o %}

// IR-LABEL: func.func @train_step(
// IR-SAME: %[[M:[a-z0-9]+]]: tensor<3xf32> {cnn.buffer = "bn.running_mean"
// IR-SAME: %[[V:[a-z0-9]+]]: tensor<3xf32> {cnn.buffer = "bn.running_var"
// IR: %[[C:[0-9]+]] = cnn.conv2d
// IR-NEXT: cnn.batch_norm %[[C]], %{{.*}}, %{{.*}}, %[[M]], %[[V]] {{{.*}}layout = #cnn.layout<NHWC>, use_running_stats} : (tensor<2x4x4x3xf16>
// IR: cnn.batch_norm_stats
// IR: cnn.batch_norm %grad_input, {{.*}}, %[[V]] {{{.*}}layout = #cnn.layout<NHWC>}
// IR: cnn.batch_norm %[[C]], {{.*}}, %[[M]], %[[V]] {{{.*}}layout = #cnn.layout<NHWC>}
// IR: cnn.bias_grad
// IR: return %{{[0-9]+}}, {{.*}}, %[[M]], %[[V]], %new_running_mean, %new_running_var,

// The inference-form normalization kernel (per channel, running statistics).
// CHECK: r0 = (a0 - a3) * rsqrtf(a4 + 9.99999975e-06f) * a1 + a2;
