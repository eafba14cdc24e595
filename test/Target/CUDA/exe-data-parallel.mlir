// REQUIRES: nvcc
// An executable of a data-parallel step: libcnnrt_nccl.a and libnccl are
// linked only for such a step (it calls ncclAllReduce).
// RUN: cnnc %S/Inputs/small_cnn.mlir --train --gpus 1 -o %t.exe --arch sm_90a 2>&1 | FileCheck %s --check-prefix=EXE
// RUN: test -x %t.exe
// RUN: nm %t.exe | FileCheck %s --check-prefix=SYMS
// RUN: env CUDA_VISIBLE_DEVICES= %t.exe --data synthetic --steps 1 --gpus 2 > %t.out 2>&1; test $? -eq 3
// EXE: cnnc: built
// SYMS: ncclAllReduce
// A rank whose --gpus disagrees with its launcher's world size is refused
// before the GPU is looked for:
// RUN: env CUDA_VISIBLE_DEVICES= CNNC_RANK=0 CNNC_WORLD_SIZE=2 CNNC_DIST_INIT=file://%t.id %t.exe --data synthetic --gpus 3 > %t.mismatch 2>&1; test $? -eq 1
// RUN: FileCheck %s --check-prefix=MISMATCH < %t.mismatch
// MISMATCH: cnnrt: --gpus 3 but the launcher (cnnc) started 2 ranks
