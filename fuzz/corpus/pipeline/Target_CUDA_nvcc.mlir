// REQUIRES: nvcc
// The emitted CUDA compiles for both supported architectures.
// RUN: cnnc %S/Inputs/small_cnn.mlir --train --optimizer adamw --emit cuda -o %t.cu
// RUN: %nvcc -std=c++17 -arch=sm_80 -I%cnnc_src/runtime/include -c %t.cu -o %t.sm80.o
// RUN: %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t.cu -o %t.sm90a.o
// RUN: test -s %t.sm80.o && test -s %t.sm90a.o
// The default-optimized step (NHWC, f16, fused, planned) compiles too.
// RUN: cnnc %S/Inputs/small_cnn.mlir --train --emit cuda -o %t.opt.cu
// RUN: %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t.opt.cu -o %t.opt.o
