// REQUIRES: nvcc
// An executable of a data-parallel step: libcnnrt_nccl.a and libnccl are
// linked only for such a step (it calls ncclAllReduce).
// RUN: cnnc %S/Inputs/small_cnn.mlir --train --gpus 1 -o %t.exe --arch sm_90a 2>&1 | FileCheck %s --check-prefix=EXE
// RUN: test -x %t.exe
// RUN: nm %t.exe | FileCheck %s --check-prefix=SYMS
// RUN: env CUDA_VISIBLE_DEVICES= %t.exe --data synthetic --steps 1 --gpus 2 > %t.out 2>&1; test $? -eq 3
// EXE: cnnc: built
// SYMS: ncclAllReduce
