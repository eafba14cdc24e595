// RUN: cnnc-opt %s | cnnc-opt | FileCheck %s

// CHECK-LABEL: func.func @bucket
// CHECK: cnn.all_reduce %{{.*}}, %{{.*}} {bucket = 2 : i64, bytes = 1792 : i64} : (tensor<16x3x3x3xf32>, tensor<16xf32>) -> (tensor<16x3x3x3xf32>, tensor<16xf32>)
// CHECK: cnn.all_reduce %{{.*}} {reduction = "min"} : (tensor<f32>) -> tensor<f32>
// CHECK: cnn.all_reduce %{{.*}} {reduction = "max"} : (tensor<8xf16>) -> tensor<8xf16>
func.func @bucket(%w: tensor<16x3x3x3xf32>, %b: tensor<16xf32>, %ok: tensor<f32>, %h: tensor<8xf16>)
    -> (tensor<16x3x3x3xf32>, tensor<16xf32>, tensor<f32>, tensor<8xf16>) {
  %r:2 = cnn.all_reduce %w, %b {bucket = 2 : i64, bytes = 1792 : i64, reduction = "avg"}
      : (tensor<16x3x3x3xf32>, tensor<16xf32>) -> (tensor<16x3x3x3xf32>, tensor<16xf32>)
  %f = cnn.all_reduce %ok {reduction = "min"} : (tensor<f32>) -> tensor<f32>
  %m = cnn.all_reduce %h {reduction = "max"} : (tensor<8xf16>) -> tensor<8xf16>
  return %r#0, %r#1, %f, %m : tensor<16x3x3x3xf32>, tensor<16xf32>, tensor<f32>, tensor<8xf16>
}

// A collective is not pure: CSE keeps both (every rank must issue each one).
// RUN: cnnc-opt %s -cse | FileCheck %s --check-prefix=CSE
// CSE-LABEL: func.func @twice
// CSE: cnn.all_reduce
// CSE: cnn.all_reduce
func.func @twice(%g: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a = cnn.all_reduce %g : (tensor<4xf32>) -> tensor<4xf32>
  %b = cnn.all_reduce %g : (tensor<4xf32>) -> tensor<4xf32>
  return %a, %b : tensor<4xf32>, tensor<4xf32>
}
