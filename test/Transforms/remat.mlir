// RUN: cnnc-opt %s -split-input-file -cnn-remat=min-gap=3 | FileCheck %s

// The BN-apply + ReLU output %y is read early (by %z) and late (by %late).
// %x is stored until the late use anyway (%keep reads it last), so %y is
// recomputed right before %late, which reads the clone.
// CHECK-LABEL: func.func @bn_relu
// CHECK: %[[Y:.*]] = cnn.fused_elementwise %[[X:[^,]*]], %[[A:[^,]*]], %[[B:[^ ]*]] {broadcast
// CHECK-NOT: cnn.remat
// CHECK: %[[Z:.*]] = cnn.relu %[[Y]]
// CHECK: cnn.neg
// CHECK: cnn.neg
// CHECK: cnn.neg
// CHECK: %[[Y2:.*]] = cnn.fused_elementwise %[[X]], %[[A]], %[[B]] {broadcast = array<i64: 0, 1, 1>, cnn.remat
// CHECK: cnn.add %[[Y2]], %[[Z]]
// CHECK: cnn.add %[[X]],
func.func @bn_relu(%x: tensor<2x4xf32>, %a: tensor<4xf32>, %b: tensor<4xf32>, %w: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
  %x1 = cnn.neg %x : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %y = cnn.fused_elementwise %x1, %a, %b {broadcast = array<i64: 0, 1, 1>, layout = #cnn.layout<NHWC>} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32> {
  ^bb0(%v: f32, %s: f32, %t: f32):
    %m = arith.mulf %v, %s : f32
    %n = arith.addf %m, %t : f32
    %c0 = arith.constant 0.0 : f32
    %r = arith.maximumf %n, %c0 : f32
    cnn.yield %r : f32
  }
  %z = cnn.relu %y : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %g1 = cnn.neg %w : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %g2 = cnn.neg %g1 : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %g3 = cnn.neg %g2 : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %late = cnn.add %y, %z : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %keep = cnn.add %x1, %g3 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %late, %keep, %z : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// %x dies at %y in the original schedule: recomputing %y late would keep %x
// alive instead (no gain), and %x's producer, a convolution, is not cheap.
// CHECK-LABEL: func.func @input_not_stored
// CHECK-NOT: cnn.remat
// CHECK: return
func.func @input_not_stored(%i: tensor<1x2x2x4xf32>, %f: tensor<4x1x1x4xf32>, %w: tensor<1x2x2x4xf32>) -> (tensor<1x2x2x4xf32>, tensor<1x2x2x4xf32>) {
  %x = cnn.conv2d %i, %f {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NHWC>} : (tensor<1x2x2x4xf32>, tensor<4x1x1x4xf32>) -> tensor<1x2x2x4xf32>
  %y = cnn.fused_elementwise %x {broadcast = array<i64: 0>, layout = #cnn.layout<NHWC>} : (tensor<1x2x2x4xf32>) -> tensor<1x2x2x4xf32> {
  ^bb0(%v: f32):
    %c0 = arith.constant 0.0 : f32
    %r = arith.maximumf %v, %c0 : f32
    cnn.yield %r : f32
  }
  %z = cnn.relu %y : (tensor<1x2x2x4xf32>) -> tensor<1x2x2x4xf32>
  %g1 = cnn.neg %w : (tensor<1x2x2x4xf32>) -> tensor<1x2x2x4xf32>
  %g2 = cnn.neg %g1 : (tensor<1x2x2x4xf32>) -> tensor<1x2x2x4xf32>
  %g3 = cnn.neg %g2 : (tensor<1x2x2x4xf32>) -> tensor<1x2x2x4xf32>
  %late = cnn.add %y, %g3 : (tensor<1x2x2x4xf32>, tensor<1x2x2x4xf32>) -> tensor<1x2x2x4xf32>
  return %late, %z : tensor<1x2x2x4xf32>, tensor<1x2x2x4xf32>
}

// -----

// The stem: the step's input is cast, transposed and padded to 8 channels;
// the padded tensor's late use (a filter gradient) gets the whole chain
// recomputed from the input and the constant, in order.
// CHECK-LABEL: func.func @stem_chain
// CHECK: cnn.transpose
// CHECK: cnn.concat
// CHECK: cnn.neg
// CHECK: %[[T:.*]] = cnn.transpose %arg0 {cnn.remat
// CHECK: %[[C:.*]] = cnn.concat %[[T]], %{{.*}} {axis = 3 : i64, cnn.remat}
// CHECK: cnn.add %[[C]]
func.func @stem_chain(%in: tensor<1x3x2x2xf32>, %w: tensor<1x2x2x8xf32>) -> (tensor<1x2x2x8xf32>, tensor<1x2x2x8xf32>) {
  %zeros = cnn.constant dense<0.0> : tensor<1x2x2x5xf32>
  %t = cnn.transpose %in {permutation = array<i64: 0, 2, 3, 1>} : (tensor<1x3x2x2xf32>) -> tensor<1x2x2x3xf32>
  %p = cnn.concat %t, %zeros {axis = 3 : i64} : (tensor<1x2x2x3xf32>, tensor<1x2x2x5xf32>) -> tensor<1x2x2x8xf32>
  %z = cnn.relu %p : (tensor<1x2x2x8xf32>) -> tensor<1x2x2x8xf32>
  %g1 = cnn.neg %w : (tensor<1x2x2x8xf32>) -> tensor<1x2x2x8xf32>
  %g2 = cnn.neg %g1 : (tensor<1x2x2x8xf32>) -> tensor<1x2x2x8xf32>
  %g3 = cnn.neg %g2 : (tensor<1x2x2x8xf32>) -> tensor<1x2x2x8xf32>
  %late = cnn.add %p, %g3 : (tensor<1x2x2x8xf32>, tensor<1x2x2x8xf32>) -> tensor<1x2x2x8xf32>
  return %late, %z : tensor<1x2x2x8xf32>, tensor<1x2x2x8xf32>
}

// -----

// A U-Net decoder's fused resize + concat (cnn-fuse phase 5) read early and
// late is recomputed like the concat it replaces.
// CHECK-LABEL: func.func @resize_concat
// CHECK: cnn.fused_resize_concat
// CHECK: cnn.neg
// CHECK: %[[C:.*]] = cnn.fused_resize_concat %arg0, %arg1 {cnn.remat
// CHECK: cnn.add %[[C]]
func.func @resize_concat(%x: tensor<1x2x2x4xf32>, %skip: tensor<1x4x4x4xf32>, %w: tensor<1x4x4x8xf32>) -> (tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>) {
  %p = cnn.fused_resize_concat %x, %skip {layout = #cnn.layout<NHWC>, mode = "nearest", size = array<i64: 4, 4>} : (tensor<1x2x2x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x8xf32>
  %z = cnn.relu %p : (tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  %g1 = cnn.neg %w : (tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  %g2 = cnn.neg %g1 : (tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  %g3 = cnn.neg %g2 : (tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  %late = cnn.add %p, %g3 : (tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  return %late, %z : tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>
}

// -----

// A function of the parameters alone (a weight's f16 copy, read by the
// forward convolution and again by the backward one) is left stored: it is
// small next to the activations, and recomputing it only adds kernels.
// CHECK-LABEL: func.func @weight_copy
// CHECK-NOT: cnn.remat
// CHECK: return
func.func @weight_copy(%w: tensor<2x4xf32> {cnn.param = "w"}, %g: tensor<2x4xf16>) -> (tensor<2x4xf16>, tensor<2x4xf16>) {
  %h = cnn.fused_elementwise %w {broadcast = array<i64: 0>, layout = #cnn.layout<NCHW>} : (tensor<2x4xf32>) -> tensor<2x4xf16> {
  ^bb0(%v: f32):
    cnn.yield %v : f32
  }
  %z = cnn.relu %h : (tensor<2x4xf16>) -> tensor<2x4xf16>
  %g1 = cnn.neg %g : (tensor<2x4xf16>) -> tensor<2x4xf16>
  %g2 = cnn.neg %g1 : (tensor<2x4xf16>) -> tensor<2x4xf16>
  %g3 = cnn.neg %g2 : (tensor<2x4xf16>) -> tensor<2x4xf16>
  %late = cnn.add %h, %g3 : (tensor<2x4xf16>, tensor<2x4xf16>) -> tensor<2x4xf16>
  return %late, %z : tensor<2x4xf16>, tensor<2x4xf16>
}
