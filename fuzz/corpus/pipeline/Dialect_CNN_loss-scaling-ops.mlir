// RUN: cnnc-opt %s | FileCheck %s
// RUN: cnnc-opt %s | cnnc-opt | FileCheck %s
// RUN: cnnc-opt %s --mlir-print-op-generic | cnnc-opt | FileCheck %s

// The loss-scaling ops of cnn-precision (CNNAmpOps.td) and the optional
// grad_scale/finite operands of the optimizer updates.

// CHECK-LABEL: func.func @loss_scaling
func.func @loss_scaling(%g16: tensor<8x3x3x3xf16>, %g32: tensor<8xf32>, %p: tensor<8xf32>,
                        %S: tensor<f32>, %t: tensor<f32>, %lr: tensor<f32>, %step: tensor<f32>) {
  // CHECK: %[[OK:.*]] = cnn.all_finite %{{.*}}, %{{.*}} : (tensor<8x3x3x3xf16>, tensor<8xf32>) -> tensor<f32>
  %ok = cnn.all_finite %g16, %g32 : (tensor<8x3x3x3xf16>, tensor<8xf32>) -> tensor<f32>
  // CHECK: cnn.loss_scale_update %{{.*}}, %{{.*}}, %[[OK]] {backoff_factor = 2.500000e-01 : f32, growth_factor = 4.000000e+00 : f32, growth_interval = 3 : i64}
  %s2, %t2 = cnn.loss_scale_update %S, %t, %ok {growth_interval = 3, growth_factor = 4.0 : f32, backoff_factor = 0.25 : f32} : (tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
  // Defaults: GradScaler's 2000 / 2.0 / 0.5.
  // CHECK: cnn.loss_scale_update %{{.*}}, %{{.*}}, %[[OK]] : (
  %s3, %t3 = cnn.loss_scale_update %S, %t, %ok : (tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
  // CHECK: cnn.unscale %{{.*}}, %{{.*}} : (tensor<8x3x3x3xf16>, tensor<f32>) -> tensor<8x3x3x3xf32>
  %u = cnn.unscale %g16, %S : (tensor<8x3x3x3xf16>, tensor<f32>) -> tensor<8x3x3x3xf32>
  // CHECK: cnn.sgd_update %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[OK]] {
  %np, %nb = cnn.sgd_update %p, %g32, %p, %lr, %step, %S, %ok {momentum = 0.9 : f32, dampening = 0.0 : f32, weight_decay = 0.0 : f32, nesterov = false} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>)
  // CHECK: cnn.adam_update %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[OK]] {
  %ap, %am, %av = cnn.adam_update %p, %g32, %p, %p, %lr, %step, %S, %ok {beta1 = 0.9 : f32, beta2 = 0.999 : f32, epsilon = 1.0e-8 : f32, weight_decay = 0.0 : f32, decoupled = false} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  // The existing form (no loss scaling) still parses.
  // CHECK: cnn.sgd_update %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {
  %q, %qb = cnn.sgd_update %p, %g32, %p, %lr, %step {momentum = 0.9 : f32, dampening = 0.0 : f32, weight_decay = 0.0 : f32, nesterov = false} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>)
  return
}
