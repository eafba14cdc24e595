// RUN: cnnc-opt %s -cnn-autodiff -cnn-data-parallel="sync-bn=true world-size=2" | FileCheck %s
// RUN: cnnc-opt %s -cnn-autodiff -cnn-precision -cnn-data-parallel="sync-bn=true world-size=2" | FileCheck %s --check-prefix=F16
// RUN: cnnc-opt %s -cnn-autodiff -cnn-data-parallel | FileCheck %s --check-prefix=LOCAL
// RUN: not cnnc-opt %s -cnn-autodiff -cnn-data-parallel=sync-bn=true 2>&1 | FileCheck %s --check-prefix=NOWORLD
// RUN: cnnc-opt %s -cnn-autodiff -cnn-data-parallel="sync-bn=true world-size=2" -cnn-fuse | FileCheck %s --check-prefix=RMASK

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

// The forward: the rank's per-channel sums, one collective adding them up
// over the ranks, the statistics of the global batch from them
// (batch_norm_finalize over the global count 2 ranks x 2 x 4 x 4 = 64, so
// the running variance is unbiased with 64/63), the normalization with
// its alpha, beta.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: cnn.data_parallel = {bucket_mb = 2.500000e+01 : f64, buckets = 1 : i64, collectives = 4 : i64, sync_bn = true}
// CHECK-NOT: cnn.batch_norm_train
// CHECK: %[[C:.*]] = cnn.conv2d
// CHECK: %[[S:.*]], %[[SS:.*]] = cnn.batch_norm_sums %[[C]] : (tensor<2x4x4x4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
// CHECK: %[[G:.*]]:2 = cnn.all_reduce %[[S]], %[[SS]] {bytes = 32 : i64, reduction = "sum"} : (tensor<4xf32>, tensor<4xf32>)
// CHECK: %[[M:.*]], %[[I:.*]], %{{.*}}, %{{.*}}, %[[A:.*]], %[[B:.*]] = cnn.batch_norm_finalize %[[G]]#0, %[[G]]#1, {{.*}} {count = 64 : i64
// CHECK: cnn.fused_elementwise %[[C]], %[[A]], %[[B]] {broadcast = array<i64: 0, 1, 1>}
// The backward: the rank's sums of dy and dy * xhat, one collective adding
// them up, the input gradient from the global sums (1/64 each); the
// BatchNorm parameters' gradients are the global sums / 2 ranks, already
// equal on every rank, so the gradient bucket holds only the two weights.
// CHECK-NOT: cnn.batch_norm_grad
// CHECK: %[[D:.*]], %[[DX:.*]] = cnn.batch_norm_grad_sums %{{.*}}, %[[C]], %[[M]], %[[I]] : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
// CHECK: %[[GG:.*]]:2 = cnn.all_reduce %[[D]], %[[DX]] {bucket = 1 : i64, bytes = 32 : i64, reduction = "sum"}
// CHECK: cnn.fused_elementwise %{{.*}}, %[[C]], %[[M]], %[[I]], %{{.*}}, %[[GG]]#0, %[[GG]]#1
// CHECK: arith.constant 1.562500e-02
// CHECK: arith.constant 5.000000e-01
// CHECK: cnn.all_reduce {{.*}} {bucket = 2 : i64, bytes = 592 : i64} : (tensor<10x4xf32>, tensor<4x3x3x3xf32>)
// CHECK: cnn.all_reduce {{.*}} {bucket = 3 : i64, bytes = 4 : i64} : (tensor<f32>) -> tensor<f32>
// CHECK-NOT: cnn.batch_norm_grad

// f16 activations: the sums of the f16 tensor are f32, and so is the
// collective.
// F16-LABEL: func.func @train_step(
// F16: cnn.batch_norm_sums %{{.*}} : (tensor<2x4x4x4xf16>) -> (tensor<4xf32>, tensor<4xf32>)
// F16: cnn.all_reduce %{{.*}}, %{{.*}} {bytes = 32 : i64, reduction = "sum"} : (tensor<4xf32>, tensor<4xf32>)
// F16: cnn.batch_norm_grad_sums %{{.*}} : (tensor<2x4x4x4xf16>, tensor<2x4x4x4xf16>, tensor<4xf32>, tensor<4xf32>)

// Without sync-bn the statistics stay per rank (DDP's default).
// LOCAL-LABEL: func.func @train_step(
// LOCAL: cnn.batch_norm_train
// LOCAL: cnn.batch_norm_grad

// NOWORLD: error: cnn-data-parallel: sync-bn needs world-size >= 1

// cnn-fuse: the ReLU's gradient is not stored. The sums read the unmasked
// gradient and recompute the mask from x with the normalization's alpha,
// beta (fused_batch_norm_affine_relu_grad_sums); the input gradient's
// kernel recomputes it too (the select) from the all-reduced sums; the
// weight gradient of the convolution comes after the collective.
// RMASK-LABEL: func.func @train_step(
// RMASK: %[[C:.*]] = cnn.conv2d
// RMASK: %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[A:.*]], %[[B:.*]] = cnn.batch_norm_finalize
// RMASK: %[[DY:.*]] = cnn.global_avg_pool_grad
// RMASK-NOT: cnn.relu_grad
// RMASK: %[[S:.*]], %[[SX:.*]] = cnn.fused_batch_norm_affine_relu_grad_sums %[[DY]], %[[C]], %{{.*}}, %{{.*}}, %[[A]], %[[B]]
// RMASK-NEXT: %[[R:.*]]:2 = cnn.all_reduce %[[S]], %[[SX]] {bucket = 1 : i64, bytes = 32 : i64, reduction = "sum"}
// RMASK-NEXT: cnn.fused_elementwise %[[DY]], %[[C]], %[[A]], %[[B]], {{.*}}, %[[R]]#0, %[[R]]#1
// RMASK: arith.cmpf ogt
// RMASK: arith.select
// RMASK: cnn.conv2d_bwd_filter
