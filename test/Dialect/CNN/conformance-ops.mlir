// RUN: cnnc-opt %s | FileCheck %s
// RUN: cnnc-opt %s | cnnc-opt | FileCheck %s
// RUN: cnnc-opt %s --mlir-print-op-generic | cnnc-opt | FileCheck %s
// The ops of the ONNX conformance set's losses and heads round-trip with
// their attributes: cnn.nll_loss and its gradient, the index ops
// cnn.arg_max / cnn.arg_min, cnn.reduce_prod, cnn.gather_elements and its
// gradient, cnn.select, cnn.thresholded_relu.

// CHECK-LABEL: func @nll_loss_forms
func.func @nll_loss_forms(%x: tensor<2x3x4xf32>, %y: tensor<2x4xi64>, %w: tensor<3xf32>, %g: tensor<2x4xf32>, %s: tensor<f32>) -> (tensor<f32>, tensor<2x4xf32>, tensor<f16>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  // CHECK: cnn.nll_loss %{{.*}}, %{{.*}} : (tensor<2x3x4xf32>, tensor<2x4xi64>) -> tensor<f32>
  %mean = cnn.nll_loss %x, %y : (tensor<2x3x4xf32>, tensor<2x4xi64>) -> tensor<f32>
  // CHECK: cnn.nll_loss %{{.*}}, %{{.*}}, %{{.*}} {ignore_index = -1 : i64, reduction = #cnn.loss_reduction<none>} : (tensor<2x3x4xf32>, tensor<2x4xi64>, tensor<3xf32>) -> tensor<2x4xf32>
  %none = cnn.nll_loss %x, %y, %w {reduction = #cnn.loss_reduction<none>, ignore_index = -1} : (tensor<2x3x4xf32>, tensor<2x4xi64>, tensor<3xf32>) -> tensor<2x4xf32>
  %xh = cnn.cast %x : (tensor<2x3x4xf32>) -> tensor<2x3x4xf16>
  // CHECK: cnn.nll_loss {{.*}} {reduction = #cnn.loss_reduction<sum>} : (tensor<2x3x4xf16>, tensor<2x4xi64>) -> tensor<f16>
  %sum = cnn.nll_loss %xh, %y {reduction = #cnn.loss_reduction<sum>} : (tensor<2x3x4xf16>, tensor<2x4xi64>) -> tensor<f16>
  // CHECK: cnn.nll_loss_grad %{{.*}}, %{{.*}}, %{{.*}} {ignore_index = -1 : i64, reduction = #cnn.loss_reduction<none>} : (tensor<2x4xf32>, tensor<2x4xi64>, tensor<3xf32>) -> tensor<2x3x4xf32>
  %dnone = cnn.nll_loss_grad %g, %y, %w {reduction = #cnn.loss_reduction<none>, ignore_index = -1} : (tensor<2x4xf32>, tensor<2x4xi64>, tensor<3xf32>) -> tensor<2x3x4xf32>
  // CHECK: cnn.nll_loss_grad %{{.*}}, %{{.*}} : (tensor<f32>, tensor<2x4xi64>) -> tensor<2x3x4xf32>
  %dmean = cnn.nll_loss_grad %s, %y : (tensor<f32>, tensor<2x4xi64>) -> tensor<2x3x4xf32>
  return %mean, %none, %sum, %dnone, %dmean : tensor<f32>, tensor<2x4xf32>, tensor<f16>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
}

// CHECK-LABEL: func @arg_extremes
func.func @arg_extremes(%x: tensor<2x3x4xf32>) -> (tensor<2x3x1xi64>, tensor<2x4xi64>) {
  // CHECK: cnn.arg_max %{{.*}} {axis = 2 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x1xi64>
  %a = cnn.arg_max %x {axis = 2} : (tensor<2x3x4xf32>) -> tensor<2x3x1xi64>
  // CHECK: cnn.arg_min %{{.*}} {axis = 1 : i64, keepdims = false, select_last_index = true} : (tensor<2x3x4xf32>) -> tensor<2x4xi64>
  %b = cnn.arg_min %x {axis = 1, keepdims = false, select_last_index = true} : (tensor<2x3x4xf32>) -> tensor<2x4xi64>
  return %a, %b : tensor<2x3x1xi64>, tensor<2x4xi64>
}

// CHECK-LABEL: func @reduce_prod
func.func @reduce_prod(%x: tensor<2x3x4xf32>) -> tensor<2x1x1xf32> {
  // CHECK: cnn.reduce_prod %{{.*}} {axes = array<i64: 1, 2>} : (tensor<2x3x4xf32>) -> tensor<2x1x1xf32>
  %p = cnn.reduce_prod %x {axes = array<i64: 1, 2>} : (tensor<2x3x4xf32>) -> tensor<2x1x1xf32>
  return %p : tensor<2x1x1xf32>
}

// CHECK-LABEL: func @gather_select_threshold
func.func @gather_select_threshold(%x: tensor<2x3x4xf32>, %i: tensor<2x1x4xi64>, %g: tensor<2x1x4xf32>, %c: tensor<2x1x1xf32>, %z: tensor<1x1x1xf32>) -> (tensor<2x1x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  // CHECK: cnn.gather_elements %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x1x4xi64>) -> tensor<2x1x4xf32>
  %a = cnn.gather_elements %x, %i {axis = 1} : (tensor<2x3x4xf32>, tensor<2x1x4xi64>) -> tensor<2x1x4xf32>
  // CHECK: cnn.gather_elements_grad %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<2x1x4xf32>, tensor<2x1x4xi64>) -> tensor<2x3x4xf32>
  %da = cnn.gather_elements_grad %g, %i {axis = 1} : (tensor<2x1x4xf32>, tensor<2x1x4xi64>) -> tensor<2x3x4xf32>
  // CHECK: cnn.select %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x1x1xf32>, tensor<1x1x1xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %s = cnn.select %c, %z, %x : (tensor<2x1x1xf32>, tensor<1x1x1xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  // CHECK: cnn.thresholded_relu %{{.*}} {alpha = 5.000000e-01 : f32} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %t = cnn.thresholded_relu %x {alpha = 0.5 : f32} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %a, %da, %s, %t : tensor<2x1x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
}
