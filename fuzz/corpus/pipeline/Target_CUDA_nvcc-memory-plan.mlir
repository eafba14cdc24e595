// REQUIRES: nvcc
// The CUDA emitted from a cnn-memory-plan plan (in-place kernels, workspace
// in the arena) compiles for both supported architectures.
// RUN: cnnc %S/Inputs/small_cnn.mlir --train -O0 --optimizer adamw --emit mlir -o %t.step.mlir
// RUN: cnnc-opt %t.step.mlir --cnn-memory-plan -o %t.plan.mlir
// RUN: cnnc %t.plan.mlir --train --emit cuda -o %t.cu
// RUN: grep -q "cnn-memory-plan\|ull, [0-9]*ull};" %t.cu
// RUN: %nvcc -std=c++17 -arch=sm_80 -I%cnnc_src/runtime/include -c %t.cu -o %t.sm80.o
// RUN: %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t.cu -o %t.sm90a.o
// RUN: test -s %t.sm80.o && test -s %t.sm90a.o
