// REQUIRES: nvcc
// --sync-bn: the BatchNorm collectives (forward mean and variance, backward
// sums) are printed as all-reduce buckets before the gradient buckets, in
// issue order, and the step compiles (NHWC f16, the default pipeline).
// RUN: cnnc %S/Inputs/small_cnn.mlir --train --gpus 2 --sync-bn --emit cuda -o %t.cu
// RUN: FileCheck %s < %t.cu
// RUN: %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t.cu -o %t.o
// RUN: test -s %t.o

// The forward's mean and variance: each is joined at once (the
// normalization needs it).
// Their per-channel means are cnn-select-lowering's "channel_sum_vec8": the
// coalesced two-pass kernels, scaled by 1 / (N*H*W).
// CHECK: nhwcPartial8<0, float>
// CHECK: nhwcScaledSumFinish<float><<<8, 256, 0, s>>>({{.*}}, 8, 1, 1.0 / 64.0)
// CHECK: all-reduce bucket 0: 1 tensors, 32 bytes (avg)
// CHECK: cnnrt::dist::join(ctx, 0);
// CHECK: all-reduce bucket 1: 1 tensors, 32 bytes (avg)
// CHECK: cnnrt::dist::join(ctx, 1);
// The backward: the fc gradients' bucket runs on while the BN's own
// gradients (bucket 3) and global sums (bucket 4, needed at once by dx) go.
// CHECK: all-reduce bucket 2: 2 tensors, 180 bytes (avg)
// CHECK: all-reduce bucket 3: 2 tensors, 64 bytes (avg)
// CHECK: all-reduce bucket 4: 2 tensors, 64 bytes (avg)
// CHECK-NEXT: cnnrt::dist::begin(ctx, 4);
// CHECK-NEXT: cnnrt::dist::allReduce
// CHECK-NEXT: cnnrt::dist::allReduce
// CHECK-NEXT: cnnrt::dist::end(ctx, 4);
// CHECK-NEXT: cnnrt::dist::join(ctx, 4);
// conv1's filter gradient in the stored form (cnn-param-format: 8x3x3x8).
// CHECK: all-reduce bucket 5: 2 tensors, 1168 bytes (avg)
// CHECK: all-reduce bucket 6: 1 tensors, 4 bytes (avg)
// CHECK-NOT: all-reduce bucket 7
