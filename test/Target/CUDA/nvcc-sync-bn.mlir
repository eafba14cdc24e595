// REQUIRES: nvcc
// --sync-bn: the BatchNorm collectives (forward sums, backward sums) are
// printed as all-reduce buckets in issue order, and the step compiles (NHWC
// f16, the default pipeline).
// RUN: cnnc %S/Inputs/small_cnn.mlir --train --gpus 2 --sync-bn --emit cuda -o %t.cu
// RUN: FileCheck %s < %t.cu
// RUN: %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t.cu -o %t.o
// RUN: test -s %t.o

// The forward: the rank's per-channel sums (the BN reads a max pool's
// output here, so they are a kernel: nhwcPartial8's shifted sums, then the
// plain sums), one collective adding them up, joined at once (the
// statistics need it), the statistics of the global batch (128 = 2 ranks x
// 4 x 4 x 4 per channel).
// CHECK: nhwcPartial8<1, __half>
// CHECK: nhwcSumsFinish<__half><<<8, 256, 0, s>>>
// CHECK: all-reduce bucket 0: 2 tensors, 64 bytes (sum)
// CHECK: cnnrt::dist::join(ctx, 0);
// CHECK-NEXT: bnFinalize<float><<<1, 256, 0, s>>>({{.*}}, 128ll, 8,
// The backward: the rank's sums of dy and dy * xhat, then one collective
// adding them up, joined at once (dx needs it); the gradients (the BN's
// own are already averaged from those sums) in one bucket, then the loss.
// CHECK: nhwcPartial8<2, __half>
// CHECK: nhwcBnGradFinish<float><<<8, 256, 0, s>>>
// CHECK: all-reduce bucket 1: 2 tensors, 64 bytes (sum)
// CHECK-NEXT: cnnrt::dist::begin(ctx, 1);
// CHECK-NEXT: cnnrt::dist::allReduce
// CHECK-NEXT: cnnrt::dist::allReduce
// CHECK-NEXT: cnnrt::dist::end(ctx, 1);
// CHECK-NEXT: cnnrt::dist::join(ctx, 1);
// CHECK: all-reduce bucket 2: 4 tensors, 1348 bytes (avg)
// CHECK: all-reduce bucket 3: 1 tensors, 4 bytes (avg)
// CHECK-NOT: all-reduce bucket 4
