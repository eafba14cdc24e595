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

// -----

// Multiplying by a splat constant (either side) or dividing by one is a
// cnn.scale; a constant that broadcasts the other operand up is not.
// CHECK-LABEL: func @mul_div_by_scalar
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4x4xf32>)
// CHECK-NEXT: %[[A:.*]] = cnn.scale %[[X]] {factor = 2.000000e+00 : f32}
// CHECK-NEXT: %[[B:.*]] = cnn.scale %[[A]] {factor = 3.000000e+00 : f32}
// CHECK-NEXT: %[[C:.*]] = cnn.scale %[[B]] {factor = 2.500000e-01 : f32}
// CHECK-NEXT: return %[[C]]
func.func @mul_div_by_scalar(%x: tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32> {
  %two = cnn.constant dense<2.0> : tensor<1x1x1x1xf32>
  %three = cnn.constant dense<3.0> : tensor<2x3x4x4xf32>
  %four = cnn.constant dense<4.0> : tensor<1x1x1x1xf32>
  %0 = cnn.mul %x, %two : (tensor<2x3x4x4xf32>, tensor<1x1x1x1xf32>) -> tensor<2x3x4x4xf32>
  %1 = cnn.mul %three, %0 : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %2 = cnn.div %1, %four : (tensor<2x3x4x4xf32>, tensor<1x1x1x1xf32>) -> tensor<2x3x4x4xf32>
  return %2 : tensor<2x3x4x4xf32>
}

// -----

// CHECK-LABEL: func @mul_not_scalar
// CHECK: cnn.mul
// CHECK: cnn.div
// CHECK: cnn.mul
// CHECK-NOT: cnn.scale
func.func @mul_not_scalar(%x: tensor<2x3xf32>, %y: tensor<1x1xf32>) -> tensor<2x3xf32> {
  %c = cnn.constant dense<[[1.0, 2.0, 3.0]]> : tensor<1x3xf32>
  %zero = cnn.constant dense<0.0> : tensor<1x1xf32>
  // not a splat
  %0 = cnn.mul %x, %c : (tensor<2x3xf32>, tensor<1x3xf32>) -> tensor<2x3xf32>
  // division by zero stays what it is
  %1 = cnn.div %0, %zero : (tensor<2x3xf32>, tensor<1x1xf32>) -> tensor<2x3xf32>
  // the splat is the broadcast operand's partner, not a constant
  %2 = cnn.mul %y, %1 : (tensor<1x1xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %2 : tensor<2x3xf32>
}

// -----

// A per-channel addend (1 x C x 1 x 1) is a cnn.bias_add of the channel
// vector behind it: the reshaped parameter, or the constant's values.
// CHECK-LABEL: func @per_channel_add
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4x4xf32>, %[[P:.*]]: tensor<3xf32>)
// CHECK-DAG: %[[K:.*]] = cnn.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>
// CHECK-DAG: %[[A:.*]] = cnn.bias_add %[[X]], %[[P]]
// CHECK: %[[B:.*]] = cnn.bias_add %[[A]], %[[K]]
// CHECK-NEXT: return %[[B]]
func.func @per_channel_add(%x: tensor<2x3x4x4xf32>, %p: tensor<3xf32>) -> tensor<2x3x4x4xf32> {
  %pb = cnn.reshape %p : (tensor<3xf32>) -> tensor<1x3x1x1xf32>
  %0 = cnn.add %pb, %x : (tensor<1x3x1x1xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %k = cnn.constant dense<[[[[1.0]], [[2.0]], [[3.0]]]]> : tensor<1x3x1x1xf32>
  %1 = cnn.add %0, %k : (tensor<2x3x4x4xf32>, tensor<1x3x1x1xf32>) -> tensor<2x3x4x4xf32>
  return %1 : tensor<2x3x4x4xf32>
}

// -----

// Addends that are not per channel stay broadcasting adds.
// CHECK-LABEL: func @add_not_per_channel
// CHECK-COUNT-3: cnn.add
// CHECK-NOT: cnn.bias_add
func.func @add_not_per_channel(%x: tensor<2x3x4x4xf32>, %r: tensor<1x1x1x4xf32>, %y: tensor<2x3x4x4xf32>, %s: tensor<1x3x1x1xf32>) -> tensor<2x3x4x4xf32> {
  %0 = cnn.add %x, %r : (tensor<2x3x4x4xf32>, tensor<1x1x1x4xf32>) -> tensor<2x3x4x4xf32>
  %1 = cnn.add %0, %y : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %2 = cnn.add %s, %s : (tensor<1x3x1x1xf32>, tensor<1x3x1x1xf32>) -> tensor<1x3x1x1xf32>
  %3 = cnn.mul %1, %2 : (tensor<2x3x4x4xf32>, tensor<1x3x1x1xf32>) -> tensor<2x3x4x4xf32>
  return %3 : tensor<2x3x4x4xf32>
}

// -----

// A mean over H and W of a 4-D tensor is a global average pool.
// CHECK-LABEL: func @spatial_mean
// CHECK-NEXT: %[[G:.*]] = cnn.global_avg_pool %arg0 : (tensor<2x3x4x5xf32>) -> tensor<2x3x1x1xf32>
// CHECK-NEXT: %[[M:.*]] = cnn.reduce_mean %arg0 {axes = array<i64: 1, 2, 3>}
// CHECK-NEXT: return %[[G]], %[[M]]
func.func @spatial_mean(%x: tensor<2x3x4x5xf32>) -> (tensor<2x3x1x1xf32>, tensor<2x1x1x1xf32>) {
  %0 = cnn.reduce_mean %x {axes = array<i64: 2, 3>} : (tensor<2x3x4x5xf32>) -> tensor<2x3x1x1xf32>
  %1 = cnn.reduce_mean %x {axes = array<i64: 1, 2, 3>} : (tensor<2x3x4x5xf32>) -> tensor<2x1x1x1xf32>
  return %0, %1 : tensor<2x3x1x1xf32>, tensor<2x1x1x1xf32>
}
