// RUN: cnnc-opt %s -cnn-precision | FileCheck %s
// RUN: cnnc-opt %s -cnn-precision=f32-statistics=false | FileCheck %s --check-prefix=OFF
// RUN: cnnc-opt %s -cnn-precision -cnn-fuse | FileCheck %s --check-prefix=FUSE

// cnn-precision keeps normalization statistics in f32: the reductions, the
// per-group tensors computed from them, and the square that feeds the
// variance; the big normalized output is f16. (A GroupNorm as the importer
// decomposes it, then GRN's sqrt(reduce_sum(x * x)).)
func.func @forward(%x: tensor<2x4x64xf32> {cnn.input}) -> tensor<2x4x64xf32> {
  %mean = cnn.reduce_mean %x {axes = array<i64: 2>} : (tensor<2x4x64xf32>) -> tensor<2x4x1xf32>
  %d = cnn.sub %x, %mean : (tensor<2x4x64xf32>, tensor<2x4x1xf32>) -> tensor<2x4x64xf32>
  %sq = cnn.mul %d, %d : (tensor<2x4x64xf32>, tensor<2x4x64xf32>) -> tensor<2x4x64xf32>
  %var = cnn.reduce_mean %sq {axes = array<i64: 2>} : (tensor<2x4x64xf32>) -> tensor<2x4x1xf32>
  %eps = cnn.constant dense<1.0e-05> : tensor<1x1x1xf32>
  %ve = cnn.add %var, %eps : (tensor<2x4x1xf32>, tensor<1x1x1xf32>) -> tensor<2x4x1xf32>
  %std = cnn.sqrt %ve : (tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %y = cnn.div %d, %std : (tensor<2x4x64xf32>, tensor<2x4x1xf32>) -> tensor<2x4x64xf32>
  %y2 = cnn.mul %y, %y : (tensor<2x4x64xf32>, tensor<2x4x64xf32>) -> tensor<2x4x64xf32>
  %s = cnn.reduce_sum %y2 {axes = array<i64: 2>} : (tensor<2x4x64xf32>) -> tensor<2x4x1xf32>
  %gx = cnn.sqrt %s : (tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %r = cnn.mul %y, %gx : (tensor<2x4x64xf32>, tensor<2x4x1xf32>) -> tensor<2x4x64xf32>
  return %r : tensor<2x4x64xf32>
}
// CHECK-LABEL: func.func @forward
// CHECK: %[[X:.*]] = cnn.cast %{{.*}} : (tensor<2x4x64xf32>) -> tensor<2x4x64xf16>
// CHECK: %[[MEAN:.*]] = cnn.reduce_mean %[[X]] {{.*}} : (tensor<2x4x64xf16>) -> tensor<2x4x1xf32>
// CHECK: %[[MEANH:.*]] = cnn.cast %[[MEAN]] : (tensor<2x4x1xf32>) -> tensor<2x4x1xf16>
// CHECK: %[[D:.*]] = cnn.sub %[[X]], %[[MEANH]] : {{.*}} -> tensor<2x4x64xf16>
// CHECK: %[[D32:.*]] = cnn.cast %[[D]] : (tensor<2x4x64xf16>) -> tensor<2x4x64xf32>
// CHECK: %[[SQ:.*]] = cnn.mul %[[D32]], %[[D32]] : {{.*}} -> tensor<2x4x64xf32>
// CHECK: %[[VAR:.*]] = cnn.reduce_mean %[[SQ]] {{.*}} : (tensor<2x4x64xf32>) -> tensor<2x4x1xf32>
// CHECK: %[[VE:.*]] = cnn.add %[[VAR]], %{{.*}} : (tensor<2x4x1xf32>, tensor<1x1x1xf32>) -> tensor<2x4x1xf32>
// CHECK: %[[STD:.*]] = cnn.sqrt %[[VE]] : (tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
// CHECK: %[[STDH:.*]] = cnn.cast %[[STD]] : (tensor<2x4x1xf32>) -> tensor<2x4x1xf16>
// CHECK: %[[Y:.*]] = cnn.div %[[D]], %[[STDH]] : {{.*}} -> tensor<2x4x64xf16>
// CHECK: %[[Y32:.*]] = cnn.cast %[[Y]] : (tensor<2x4x64xf16>) -> tensor<2x4x64xf32>
// CHECK: %[[Y2:.*]] = cnn.mul %[[Y32]], %[[Y32]] : {{.*}} -> tensor<2x4x64xf32>
// CHECK: %[[S:.*]] = cnn.reduce_sum %[[Y2]] {{.*}} -> tensor<2x4x1xf32>
// CHECK: %[[GX:.*]] = cnn.sqrt %[[S]] : (tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
// CHECK: %[[GXH:.*]] = cnn.cast %[[GX]] : (tensor<2x4x1xf32>) -> tensor<2x4x1xf16>
// CHECK: cnn.mul %[[Y]], %[[GXH]] : {{.*}} -> tensor<2x4x64xf16>

// OFF-LABEL: func.func @forward
// OFF: cnn.mul {{.*}} -> tensor<2x4x64xf16>
// OFF: cnn.reduce_mean {{.*}} : (tensor<2x4x64xf16>) -> tensor<2x4x1xf16>
// OFF: cnn.sqrt {{.*}} : (tensor<2x4x1xf16>) -> tensor<2x4x1xf16>

// x - mean, its widening and its square are one kernel: it writes d in f16
// and d * d in f32 (no kernel more than in f16).
// FUSE-LABEL: func.func @forward
// FUSE: %[[M:.*]] = cnn.reduce_mean {{.*}} -> tensor<2x4x1xf32>
// FUSE: %[[DS:.*]]:2 = cnn.fused_elementwise %[[M]], {{.*}} : (tensor<2x4x1xf32>, tensor<2x4x64xf16>) -> (tensor<2x4x64xf16>, tensor<2x4x64xf32>)
// FUSE: arith.subf
// FUSE: arith.mulf
// FUSE: cnn.reduce_mean %[[DS]]#1 {{.*}} : (tensor<2x4x64xf32>) -> tensor<2x4x1xf32>
