// REQUIRES: nvcc
// The data-parallel step's CUDA (NCCL calls through cnnrt/Nccl.h) compiles.
// RUN: cnnc %S/Inputs/small_cnn.mlir --train --gpus 1 --emit cuda -o %t.cu
// RUN: %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t.cu -o %t.o
// RUN: test -s %t.o
