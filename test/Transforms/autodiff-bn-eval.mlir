// RUN: cnnc-opt %s -cnn-autodiff=optimizer=none | FileCheck %s

// BatchNorm modules in eval mode (cnn.batch_norm {use_running_stats}, what
// the importer makes of an inference-form node): the training step keeps the
// inference form (running statistics), returns the running statistics
// unchanged, and differentiates it with the statistics as constants:
// dx = batch_norm(dy, scale, 0, 0, var), dscale = bias_grad(dy * xhat) with
// xhat = batch_norm(x, 1, 0, mean, var), dbias = bias_grad(dy). A
// BatchNorm without the attribute still trains with batch statistics.
func.func @forward(%x: tensor<2x3x4x4xf32> {cnn.input},
                   %w: tensor<3x3x1x1xf32> {cnn.param = "conv.weight"},
                   %s: tensor<3xf32> {cnn.param = "bn.weight"},
                   %b: tensor<3xf32> {cnn.param = "bn.bias"},
                   %s2: tensor<3xf32> {cnn.param = "bn2.weight"},
                   %b2: tensor<3xf32> {cnn.param = "bn2.bias"},
                   %m: tensor<3xf32> {cnn.buffer = "bn.running_mean"},
                   %v: tensor<3xf32> {cnn.buffer = "bn.running_var"},
                   %m2: tensor<3xf32> {cnn.buffer = "bn2.running_mean"},
                   %v2: tensor<3xf32> {cnn.buffer = "bn2.running_var"}) -> tensor<2x3xf32> {
  %c = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x3x4x4xf32>, tensor<3x3x1x1xf32>) -> tensor<2x3x4x4xf32>
  %n = cnn.batch_norm %c, %s, %b, %m, %v {epsilon = 1.0e-5 : f32, use_running_stats} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  %n2 = cnn.batch_norm %n, %s2, %b2, %m2, %v2 {epsilon = 1.0e-5 : f32} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  %g = cnn.global_avg_pool %n2 : (tensor<2x3x4x4xf32>) -> tensor<2x3x1x1xf32>
  %f = cnn.flatten %g {axis = 1} : (tensor<2x3x1x1xf32>) -> tensor<2x3xf32>
  return %f : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x3x4x4xf32> {cnn.input}
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<3x3x1x1xf32> {cnn.param = "conv.weight"}
// CHECK-SAME: %[[S:[a-z0-9]+]]: tensor<3xf32> {cnn.param = "bn.weight"}
// CHECK-SAME: %[[B:[a-z0-9]+]]: tensor<3xf32> {cnn.param = "bn.bias"}
// CHECK-SAME: %[[M:[a-z0-9]+]]: tensor<3xf32> {cnn.buffer = "bn.running_mean"}
// CHECK-SAME: %[[V:[a-z0-9]+]]: tensor<3xf32> {cnn.buffer = "bn.running_var"}
// CHECK: %[[C:[0-9]+]] = cnn.conv2d %[[X]], %[[W]]
// CHECK-NEXT: %[[N:[0-9]+]] = cnn.batch_norm %[[C]], %[[S]], %[[B]], %[[M]], %[[V]] {epsilon = 9.99999974E-6 : f32, use_running_stats}
// CHECK-NEXT: %{{.*}}, %{{.*}}, %{{.*}}, %[[RM:[a-z_0-9]+]], %[[RV:[a-z_0-9]+]] = cnn.batch_norm_train %[[N]],
// CHECK: %[[DN:[a-z_0-9]+]], %{{.*}}, %{{.*}} = cnn.batch_norm_grad
// The frozen BatchNorm's rule: the bias gradient, then its input's and scale's.
// CHECK-DAG: %[[DB:.*]] = cnn.bias_grad %[[DN]] : (tensor<2x3x4x4xf32>) -> tensor<3xf32>
// CHECK-DAG: %[[ZERO:.*]] = cnn.constant dense<0.000000e+00> : tensor<3xf32>
// CHECK-DAG: %[[DC:.*]] = cnn.batch_norm %[[DN]], %[[S]], %[[ZERO]], %[[ZERO]], %[[V]] {epsilon = 9.99999974E-6 : f32}
// CHECK-DAG: %[[ONE:.*]] = cnn.constant dense<1.000000e+00> : tensor<3xf32>
// CHECK-DAG: %[[XHAT:.*]] = cnn.batch_norm %[[C]], %[[ONE]], %[[ZERO]], %[[M]], %[[V]] {epsilon = 9.99999974E-6 : f32}
// CHECK-DAG: %[[P:.*]] = cnn.mul %[[DN]], %[[XHAT]]
// CHECK-DAG: %[[DS:.*]] = cnn.bias_grad %[[P]]
// CHECK-DAG: cnn.conv2d_bwd_filter %[[X]], %[[DC]]
// The frozen statistics are returned as they came in; bn2's are updated.
// CHECK: return {{.*}}, %[[M]], %[[V]], %[[RM]], %[[RV]] :
