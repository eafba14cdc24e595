// RUN: cnnc-opt %s -cnn-autodiff -cnn-data-parallel | FileCheck %s
// RUN: cnnc-opt %s -cnn-autodiff -cnn-data-parallel=bucket-mb=0.0001 | FileCheck %s --check-prefix=SMALL
// RUN: cnnc-opt %s -cnn-autodiff -cnn-precision -cnn-data-parallel | FileCheck %s --check-prefix=F16
// RUN: cnnc-opt %s -cnn-autodiff=optimizer=none -cnn-data-parallel | FileCheck %s --check-prefix=GRAD
// RUN: not cnnc-opt %s -cnn-autodiff -cnn-data-parallel -cnn-data-parallel 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not cnnc-opt %s -cnn-data-parallel 2>&1 | FileCheck %s --check-prefix=NOSTEP
// RUN: cnnc-opt %s -cnn-autodiff -cnn-data-parallel="sync-bn=true world-size=2" -o %t.nobn.mlir 2>&1 | FileCheck %s --check-prefix=NOBN

// A two-layer net: conv + bias + relu -> global pool -> flatten -> linear.
func.func @forward(%x: tensor<2x3x8x8xf32> {cnn.input},
                   %w1: tensor<4x3x3x3xf32> {cnn.param = "conv.weight"},
                   %b1: tensor<4xf32> {cnn.param = "conv.bias"},
                   %w2: tensor<10x4xf32> {cnn.param = "fc.weight"}) -> tensor<2x10xf32> {
  %c = cnn.conv2d %x, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %cb = cnn.bias_add %c, %b1 : (tensor<2x4x8x8xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  %r = cnn.relu %cb : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %g = cnn.global_avg_pool %r : (tensor<2x4x8x8xf32>) -> tensor<2x4x1x1xf32>
  %f = cnn.flatten %g {axis = 1} : (tensor<2x4x1x1xf32>) -> tensor<2x4xf32>
  %y = cnn.matmul %f, %w2 {transpose_rhs = true} : (tensor<2x4xf32>, tensor<10x4xf32>) -> tensor<2x10xf32>
  return %y : tensor<2x10xf32>
}

// Default 25 MiB: one gradient bucket after the last gradient (the conv
// filter's, final last in the backward schedule), in the order the
// gradients became final (fc.weight, conv.bias, conv.weight); the loss last.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: attributes {cnn.data_parallel = {bucket_mb = 2.500000e+01 : f64, buckets = 1 : i64, collectives = 2 : i64, sync_bn = false}}
// CHECK: %[[DW2:.*]] = cnn.matmul %{{.*}}, %{{.*}} {transpose_lhs = true}
// CHECK: %[[DB1:.*]] = cnn.bias_grad
// CHECK: %[[DW1:.*]] = cnn.conv2d_bwd_filter
// CHECK-NEXT: %[[R:.*]]:3 = cnn.all_reduce %[[DW2]], %[[DB1]], %[[DW1]] {bytes = 608 : i64}
// CHECK-SAME: -> (tensor<10x4xf32>, tensor<4xf32>, tensor<4x3x3x3xf32>)
// CHECK: cnn.sgd_update %{{.*}}, %[[R]]#2,
// CHECK: cnn.sgd_update %{{.*}}, %[[R]]#1,
// CHECK: cnn.sgd_update %{{.*}}, %[[R]]#0,
// CHECK: %[[L:.*]] = cnn.all_reduce %{{.*}} {bucket = 1 : i64, bytes = 4 : i64} : (tensor<f32>) -> tensor<f32>
// CHECK-NEXT: return %[[L]],

// Tiny buckets: each all_reduce right after its gradient, so the first
// bucket can run while the rest of the backward pass does.
// SMALL-LABEL: func.func @train_step(
// SMALL-SAME: attributes {cnn.data_parallel = {bucket_mb = 1.000000e-04 : f64, buckets = 3 : i64, collectives = 4 : i64, sync_bn = false}}
// SMALL: %[[DW2:.*]] = cnn.matmul %{{.*}}, %{{.*}} {transpose_lhs = true}
// SMALL-NEXT: %[[R0:.*]] = cnn.all_reduce %[[DW2]] {bytes = 160 : i64}
// SMALL: %[[DB1:.*]] = cnn.bias_grad
// SMALL-NEXT: %[[R1:.*]] = cnn.all_reduce %[[DB1]] {bucket = 1 : i64, bytes = 16 : i64}
// SMALL-NEXT: %[[DW1:.*]] = cnn.conv2d_bwd_filter
// SMALL-NEXT: %[[R2:.*]] = cnn.all_reduce %[[DW1]] {bucket = 2 : i64, bytes = 432 : i64}
// SMALL-NEXT: cnn.sgd_update %{{.*}}, %[[R2]],
// SMALL-NEXT: cnn.sgd_update %{{.*}}, %[[R1]],
// SMALL-NEXT: cnn.sgd_update %{{.*}}, %[[R0]],
// SMALL: cnn.all_reduce %{{.*}} {bucket = 3 : i64, bytes = 4 : i64}

// Loss scaling: the f16 gradients are reduced (in f16, half the bytes), the
// updates read the reduced values (f16, widened on load), and all_finite
// checks the reduced gradients: one rank's inf reaches every rank's flag.
// F16-LABEL: func.func @train_step(
// F16: %[[R:.*]]:3 = cnn.all_reduce %{{.*}}, %{{.*}}, %{{.*}} {bytes = 304 : i64} : (tensor<10x4xf16>, tensor<4xf16>, tensor<4x3x3x3xf16>)
// F16: %[[OK:.*]] = cnn.all_finite %[[R]]#2, %[[R]]#1, %[[R]]#0
// F16-NOT: cnn.cast
// F16: cnn.sgd_update %{{.*}}, %[[R]]#2, {{.*}}, %[[OK]]
// F16-NEXT: cnn.sgd_update %{{.*}}, %[[R]]#1, {{.*}}, %[[OK]]
// F16-NEXT: cnn.sgd_update %{{.*}}, %[[R]]#0, {{.*}}, %[[OK]]

// Optimizer none: the returned gradients are the averaged ones.
// GRAD-LABEL: func.func @train_step(
// GRAD: %[[R:.*]]:3 = cnn.all_reduce
// GRAD: %[[L:.*]] = cnn.all_reduce %{{.*}} {bucket = 1 : i64
// GRAD: return %[[L]], %[[R]]#2, %[[R]]#1, %[[R]]#0 :

// TWICE: error: cnn-data-parallel: @train_step already has its all-reduces
// NOSTEP: error: cnn-data-parallel: the module has no @train_step (run cnn-autodiff first)
// NOBN: warning: cnn-data-parallel: sync-bn given, but @train_step has no training-mode BatchNorm: nothing to synchronize
