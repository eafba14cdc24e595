// RUN: cnnc-opt %s | FileCheck %s
// RUN: cnnc-opt %s | cnnc-opt | FileCheck %s
// RUN: cnnc-opt %s --mlir-print-op-generic | cnnc-opt | FileCheck %s

// CHECK-LABEL: func @pad_ops
func.func @pad_ops(%x: tensor<2x3x4x5xf32>, %v: tensor<7xf16>) -> tensor<2x3x4x5xf32> {
  // CHECK: cnn.pad %{{.*}} {pads = array<i64: 0, 0, 1, 2, 0, 0, 3, 0>, value = 1.500000e+00 : f32} : (tensor<2x3x4x5xf32>) -> tensor<2x3x8x7xf32>
  %c = cnn.pad %x {pads = array<i64: 0, 0, 1, 2, 0, 0, 3, 0>, mode = "constant", value = 1.5 : f32} : (tensor<2x3x4x5xf32>) -> tensor<2x3x8x7xf32>
  // CHECK: cnn.pad %{{.*}} {mode = "reflect", pads = array<i64: 0, 0, 3, 1, 0, 0, 1, 4>} : (tensor<2x3x4x5xf32>) -> tensor<2x3x8x10xf32>
  %r = cnn.pad %x {pads = array<i64: 0, 0, 3, 1, 0, 0, 1, 4>, mode = "reflect"} : (tensor<2x3x4x5xf32>) -> tensor<2x3x8x10xf32>
  // Edge pads may exceed the dimension; rank 1 and f16 work too.
  // CHECK: cnn.pad %{{.*}} {mode = "edge", pads = array<i64: 9, 1>} : (tensor<7xf16>) -> tensor<17xf16>
  %e = cnn.pad %v {pads = array<i64: 9, 1>, mode = "edge"} : (tensor<7xf16>) -> tensor<17xf16>
  // CHECK: cnn.pad_grad %{{.*}} {mode = "reflect", pads = array<i64: 0, 0, 3, 1, 0, 0, 1, 4>} : (tensor<2x3x8x10xf32>) -> tensor<2x3x4x5xf32>
  %g = cnn.pad_grad %r {pads = array<i64: 0, 0, 3, 1, 0, 0, 1, 4>, mode = "reflect"} : (tensor<2x3x8x10xf32>) -> tensor<2x3x4x5xf32>
  return %g : tensor<2x3x4x5xf32>
}
