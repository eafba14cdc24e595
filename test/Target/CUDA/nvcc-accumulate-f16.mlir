// REQUIRES: nvcc
// Gradient accumulation under f16 loss scaling: the accumulation kernels read
// the f16 gradients into f32 sums, and the step compiles.
// RUN: cnnc %S/Inputs/small_cnn.mlir --train --accumulate 2 --precision fp16 --emit cuda -o %t.cu
// RUN: FileCheck %s < %t.cu
// RUN: %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t.cu -o %t.o
// RUN: test -s %t.o
// CHECK: cnn.accumulate_grad
// CHECK: cnn.loss_scale_update
