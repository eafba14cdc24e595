// REQUIRES: nvcc
// The data-parallel step's CUDA (NCCL calls through cnnrt/Nccl.h) compiles.
// RUN: cnnc %S/Inputs/small_cnn.mlir --train --gpus 1 --emit cuda -o %t.cu
// RUN: %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t.cu -o %t.o
// RUN: test -s %t.o
// An executable: libcnnrt_nccl.a and libnccl are linked only for such a step.
// RUN: cnnc %S/Inputs/small_cnn.mlir --train --gpus 1 -o %t.exe --arch sm_90a 2>&1 | FileCheck %s --check-prefix=EXE
// RUN: test -x %t.exe
// RUN: nm %t.exe | FileCheck %s --check-prefix=SYMS
// EXE: cnnc: built
// SYMS: ncclAllReduce
