// Data parallelism on the CUDA target: each cnn.all_reduce bucket is one
// NCCL group on the communication stream (cnnrt/Nccl.h), in place in the
// gradients' arena buffers; the compute stream joins a bucket only before
// the first reader of its results (all_finite / the optimizer updates), so
// buckets 0 and 1 overlap the rest of the backward pass. The loss (a
// persistent result, not in place) is joined at once and copied.
// RUN: cnnc %S/Inputs/small_cnn.mlir --train --gpus 1 --bucket-mb 0.001 --emit cuda | FileCheck %s
// RUN: cnnc %S/Inputs/small_cnn.mlir --train --gpus 1 --bucket-mb 0.001 --dump-plan | FileCheck %s --check-prefix=PLAN

// CHECK: #include "cnnrt/Nccl.h"
// CHECK-NEXT: #define CNNC_NUM_BUCKETS 4
// CHECK-LABEL: static void prepareModel(
// CHECK: cnnrt::dist::prepare(ctx, CNNC_NUM_BUCKETS);
// CHECK-LABEL: static void trainStep(
// The BatchNorm's f32 gradients are a bucket of their own (one element
// type a bucket), the f16 ones are packed from the last back: conv1's
// filter gradient (1152 bytes, more than bucket-mb alone) closes the
// backward pass; the fc gradients and conv1's bias go before it.
// CHECK: // all-reduce bucket 0: 2 tensors, 64 bytes (avg)
// CHECK-NEXT: cnnrt::dist::begin(ctx, 0);
// CHECK-NEXT: cnnrt::dist::allReduce(ctx, A + {{[0-9]+}}, 8ull, 0, 0, "all_reduce.bucket0");
// CHECK-NEXT: cnnrt::dist::allReduce(ctx, A + {{[0-9]+}}, 8ull, 0, 0, "all_reduce.bucket0");
// CHECK-NEXT: cnnrt::dist::end(ctx, 0);
// CHECK-NOT: cnnrt::dist::join
// CHECK: // all-reduce bucket 1: 3 tensors, 196 bytes (avg)
// CHECK-NEXT: cnnrt::dist::begin(ctx, 1);
// CHECK-NEXT: cnnrt::dist::allReduce(ctx, A + {{[0-9]+}}, 10ull, 1, 0, "all_reduce.bucket1");
// CHECK-NEXT: cnnrt::dist::allReduce(ctx, A + {{[0-9]+}}, 80ull, 1, 0, "all_reduce.bucket1");
// CHECK-NEXT: cnnrt::dist::allReduce(ctx, A + {{[0-9]+}}, 8ull, 1, 0, "all_reduce.bucket1");
// CHECK-NOT: cnnrt::dist::join
// CHECK: ctx.convBwdFilter(
// conv1's filter gradient as the parameter stores it (cnn-param-format:
// f16 8x3x3x8, the channels padded), reduced in that form:
// CHECK-NEXT: // all-reduce bucket 2: 1 tensors, 1152 bytes (avg)
// CHECK: cnnrt::dist::end(ctx, 2);
// CHECK-NEXT: cnnrt::dist::join(ctx, 0);
// CHECK-NEXT: cnnrt::dist::join(ctx, 1);
// CHECK-NEXT: cnnrt::dist::join(ctx, 2);
// CHECK: cnn.all_finite
// CHECK: // all-reduce bucket 3: 1 tensors, 4 bytes (avg)
// CHECK: cnnrt::dist::end(ctx, 3);
// CHECK-NEXT: cnnrt::dist::join(ctx, 3);
// CHECK-NEXT: ctx.check(cudaMemcpyAsync(A + {{[0-9]+}}, A + {{[0-9]+}}, 4, cudaMemcpyDeviceToDevice, s), "all_reduce.loss");

// The gradients stay live until the join (the reduced value's readers):
// PLAN: (+1 in place)
// The training driver's collectives (initial broadcast, sums over ranks)
// reach it through the model spec:
// CHECK: static const cnnrt::ModelSpec kModel = {{.*}}ull, &cnnrt::dist::kHooks};
