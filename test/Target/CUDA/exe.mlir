// REQUIRES: nvcc
// `cnnc model -o train` builds a training executable (--train implied) with
// its weights beside it; without a GPU the executable says so and exits 3.
// RUN: rm -rf %t && mkdir -p %t
// RUN: cnnc %S/Inputs/small_cnn.mlir -o %t/train --arch sm_80 2>&1 | FileCheck %s --check-prefix=BUILD
// RUN: test -x %t/train && test -s %t/train.cu && test -f %t/train.cnnw
// RUN: env CUDA_VISIBLE_DEVICES= %t/train --data synthetic --steps 1 > %t/out.txt 2>&1; test $? -eq 3
// RUN: FileCheck %s --check-prefix=NOGPU < %t/out.txt
// RUN: not cnnc %S/Inputs/small_cnn.mlir -o %t/bad --arch sm_52 2>&1 | FileCheck %s --check-prefix=ARCH
// A step compiled without --gpus cannot be run data parallel (before any
// GPU is looked for), as ./train --gpus 2 or as a rank of a launcher:
// RUN: env CUDA_VISIBLE_DEVICES= %t/train --data synthetic --gpus 2 > %t/dp.txt 2>&1; test $? -eq 1
// RUN: FileCheck %s --check-prefix=NODP < %t/dp.txt
// RUN: env CUDA_VISIBLE_DEVICES= RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_ADDR=h MASTER_PORT=1 %t/train --data synthetic > %t/rank.txt 2>&1; test $? -eq 1
// RUN: FileCheck %s --check-prefix=RANK < %t/rank.txt
// BUILD: cnnc: built '{{.*}}train' (weights '{{.*}}train.cnnw', source '{{.*}}train.cu')
// NOGPU: cnnrt: no CUDA GPU available
// NODP: cnnrt: --gpus 2: this step has no all-reduces; compile it with cnnc --gpus 2 (data parallel)
// RANK: cnnrt: rank 1 of 2 (local rank 1, torchrun): this step has no all-reduces; compile it with cnnc --gpus 2 (data parallel)
// ARCH: error: unsupported --arch 'sm_52' (expected native, sm_80, sm_86, sm_89, sm_90 or sm_90a)
