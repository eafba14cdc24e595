// RUN: cnnc-opt %s -canonicalize -split-input-file | FileCheck %s

// CHECK-LABEL: func @transpose_pair
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4x5xf32>)
// CHECK-NEXT: return %[[X]]
func.func @transpose_pair(%x: tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32> {
  %0 = cnn.transpose %x {permutation = array<i64: 0, 2, 3, 1>} : (tensor<2x3x4x5xf32>) -> tensor<2x4x5x3xf32>
  %1 = cnn.transpose %0 {permutation = array<i64: 0, 3, 1, 2>} : (tensor<2x4x5x3xf32>) -> tensor<2x3x4x5xf32>
  return %1 : tensor<2x3x4x5xf32>
}

// -----

// A pair that is not inverse must stay.
// CHECK-LABEL: func @transpose_not_inverse
// CHECK-COUNT-2: cnn.transpose
func.func @transpose_not_inverse(%x: tensor<2x3x4x5xf32>) -> tensor<2x5x3x4xf32> {
  %0 = cnn.transpose %x {permutation = array<i64: 0, 2, 3, 1>} : (tensor<2x3x4x5xf32>) -> tensor<2x4x5x3xf32>
  %1 = cnn.transpose %0 {permutation = array<i64: 0, 2, 3, 1>} : (tensor<2x4x5x3xf32>) -> tensor<2x5x3x4xf32>
  return %1 : tensor<2x5x3x4xf32>
}

// -----

// CHECK-LABEL: func @identity_transpose
// CHECK-NOT: cnn.transpose
func.func @identity_transpose(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = cnn.transpose %x {permutation = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func @reshape_chain
// CHECK-NEXT: %[[R:.*]] = cnn.reshape %arg0 : (tensor<2x12xf32>) -> tensor<24xf32>
// CHECK-NEXT: return %[[R]]
func.func @reshape_chain(%x: tensor<2x12xf32>) -> tensor<24xf32> {
  %0 = cnn.reshape %x : (tensor<2x12xf32>) -> tensor<2x3x4xf32>
  %1 = cnn.reshape %0 : (tensor<2x3x4xf32>) -> tensor<24xf32>
  return %1 : tensor<24xf32>
}

// -----

// CHECK-LABEL: func @noop_cast_dropout
// CHECK-NEXT: return %arg0
func.func @noop_cast_dropout(%x: tensor<2x12xf32>) -> tensor<2x12xf32> {
  %0 = cnn.cast %x : (tensor<2x12xf32>) -> tensor<2x12xf32>
  %1 = cnn.dropout %0 {ratio = 0.5 : f32} : (tensor<2x12xf32>) -> tensor<2x12xf32>
  %2 = cnn.reshape %1 : (tensor<2x12xf32>) -> tensor<2x12xf32>
  return %2 : tensor<2x12xf32>
}

// -----

// Casts that change the element type stay; unused pure ops go.
// CHECK-LABEL: func @real_cast
// CHECK-NEXT: cnn.cast
// CHECK-NEXT: return
func.func @real_cast(%x: tensor<2x12xf32>) -> tensor<2x12xf16> {
  %u = cnn.relu %x : (tensor<2x12xf32>) -> tensor<2x12xf32>
  %0 = cnn.cast %x : (tensor<2x12xf32>) -> tensor<2x12xf16>
  return %0 : tensor<2x12xf16>
}
