// RUN: cnnc-opt %s -cnn-autodiff -cnn-data-parallel="sync-bn=true world-size=2" | FileCheck %s
// RUN: cnnc-opt %s -cnn-autodiff -cnn-precision -cnn-data-parallel="sync-bn=true world-size=2" | FileCheck %s --check-prefix=F16
// RUN: cnnc-opt %s -cnn-autodiff -cnn-data-parallel | FileCheck %s --check-prefix=LOCAL
// RUN: not cnnc-opt %s -cnn-autodiff -cnn-data-parallel=sync-bn=true 2>&1 | FileCheck %s --check-prefix=NOWORLD

// conv -> batch_norm -> relu -> global pool -> linear.
func.func @forward(%x: tensor<2x3x4x4xf32> {cnn.input},
                   %w1: tensor<4x3x3x3xf32> {cnn.param = "conv.weight"},
                   %s: tensor<4xf32> {cnn.param = "bn.weight"},
                   %b: tensor<4xf32> {cnn.param = "bn.bias"},
                   %rm: tensor<4xf32> {cnn.buffer = "bn.running_mean"},
                   %rv: tensor<4xf32> {cnn.buffer = "bn.running_var"},
                   %w2: tensor<10x4xf32> {cnn.param = "fc.weight"}) -> tensor<2x10xf32> {
  %c = cnn.conv2d %x, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x3x4x4xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x4x4xf32>
  %y, %m, %i, %nm, %nv = cnn.batch_norm_train %c, %s, %b, %rm, %rv {epsilon = 1.0e-5 : f32, momentum = 0.1 : f32} : (tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  %r = cnn.relu %y : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %g = cnn.global_avg_pool %r : (tensor<2x4x4x4xf32>) -> tensor<2x4x1x1xf32>
  %f = cnn.flatten %g {axis = 1} : (tensor<2x4x1x1xf32>) -> tensor<2x4xf32>
  %o = cnn.matmul %f, %w2 {transpose_rhs = true} : (tensor<2x4xf32>, tensor<10x4xf32>) -> tensor<2x10xf32>
  return %o : tensor<2x10xf32>
}

// The forward: the global mean, then the centered global variance (two
// collectives), the normalization with them; the running variance is
// unbiased over the global count 2 ranks x 2 x 4 x 4 = 64 (64/63).
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: cnn.data_parallel = {bucket_mb = 2.500000e+01 : f64, buckets = 1 : i64, collectives = 5 : i64, sync_bn = true}
// CHECK-NOT: cnn.batch_norm_train
// CHECK: %[[C:.*]] = cnn.conv2d
// CHECK: %[[MU:.*]] = cnn.reduce_mean %[[C]] {axes = array<i64: 0, 2, 3>}
// CHECK: %[[MV:.*]] = cnn.reshape %[[MU]] : (tensor<1x4x1x1xf32>) -> tensor<4xf32>
// CHECK: %[[M:.*]] = cnn.all_reduce %[[MV]] {bytes = 16 : i64} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK: %[[SQ:.*]] = cnn.fused_elementwise %[[C]], %[[M]] {broadcast = array<i64: 0, 1>}
// CHECK: %[[VM:.*]] = cnn.reduce_mean %[[SQ]] {axes = array<i64: 0, 2, 3>}
// CHECK: %[[VV:.*]] = cnn.reshape %[[VM]]
// CHECK: %[[V:.*]] = cnn.all_reduce %[[VV]] {bucket = 1 : i64, bytes = 16 : i64}
// CHECK: arith.constant 1.015873
// The backward: the global means of dy and dy * xhat in one bucket, then
// the gradient bucket, then the loss.
// CHECK-NOT: cnn.batch_norm_grad
// CHECK: cnn.all_reduce %{{.*}}, %{{.*}} {bucket = 2 : i64, bytes = 32 : i64} : (tensor<4xf32>, tensor<4xf32>)
// CHECK: cnn.all_reduce {{.*}} {bucket = 3 : i64
// CHECK: cnn.all_reduce {{.*}} {bucket = 4 : i64, bytes = 4 : i64} : (tensor<f32>) -> tensor<f32>
// CHECK-NOT: cnn.batch_norm_grad

// f16 activations: the statistics are computed from an f32 cast and stay f32.
// F16-LABEL: func.func @train_step(
// F16: %[[XF:.*]] = cnn.cast %{{.*}} : (tensor<2x4x4x4xf16>) -> tensor<2x4x4x4xf32>
// F16: cnn.reduce_mean %[[XF]]
// F16: cnn.all_reduce %{{.*}} {bytes = 16 : i64} : (tensor<4xf32>) -> tensor<4xf32>

// Without sync-bn the statistics stay per rank (DDP's default).
// LOCAL-LABEL: func.func @train_step(
// LOCAL: cnn.batch_norm_train
// LOCAL: cnn.batch_norm_grad

// NOWORLD: error: cnn-data-parallel: sync-bn needs world-size >= 1
