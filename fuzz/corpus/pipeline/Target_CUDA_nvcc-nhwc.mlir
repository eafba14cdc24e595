// REQUIRES: nvcc
// The NHWC step (after cnn-layout) compiles for both supported architectures.
// RUN: cnnc-opt %S/Inputs/small_cnn.mlir --cnn-autodiff="optimizer=adamw" --cse --cnn-layout -o %t.mlir
// RUN: cnnc %t.mlir --train --emit cuda -o %t.cu
// RUN: grep -q "cnnrt::Layout::NHWC" %t.cu
// RUN: %nvcc -std=c++17 -arch=sm_80 -I%cnnc_src/runtime/include -c %t.cu -o %t.sm80.o
// RUN: %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t.cu -o %t.sm90a.o
// RUN: test -s %t.sm80.o && test -s %t.sm90a.o
