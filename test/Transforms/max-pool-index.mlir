// cnn-max-pool-index (lib/Transforms/MaxPoolIndex.cpp): a max_pool2d whose
// gradient re-reads its input records each window's argmax instead
// (fused_max_pool2d), the gradient routes by it (max_pool2d_index_grad), and
// a BatchNorm apply + ReLU that only the pooling reads becomes its prologue;
// every case where it must not apply leaves the IR alone. In the backward
// pass, the gradient whose only reader is the BN + ReLU gradient of the
// stem is gathered inside it (fused_max_pool2d_batch_norm_relu_grad).
// RUN: cnnc-opt %s -split-input-file -cnn-max-pool-index | FileCheck %s
// RUN: cnnc-opt %s -split-input-file -cnn-max-pool-index=prologue=false | FileCheck %s --check-prefix=NOPRO
// RUN: cnnc-opt %s -split-input-file -cnn-max-pool-index=grad-fusion=false | FileCheck %s --check-prefix=NOGRAD

// ResNet's stem: relu(c * alpha + beta) (rounded to f16) -> 3x3/2 pool; the
// backward pass's pooling gradient. The normalization is folded into the
// pooling and disappears.
// CHECK-LABEL: func @stem
// CHECK-NEXT: %[[Y:.*]], %[[I:.*]] = cnn.fused_max_pool2d %arg0, %arg1, %arg2 {ceil_mode = false, kernel = array<i64: 3, 3>, layout = #cnn.layout<NHWC>, operandSegmentSizes = array<i32: 1, 1, 1>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x4x4x16xf16>, tensor<2x4x4x16xui8>)
// CHECK-NEXT: %[[G:.*]] = cnn.max_pool2d_index_grad %arg3, %[[I]] {ceil_mode = false, kernel = array<i64: 3, 3>, layout = #cnn.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x4x4x16xf16>, tensor<2x4x4x16xui8>) -> tensor<2x8x8x16xf16>
// CHECK-NEXT: return %[[Y]], %[[G]]
// NOPRO-LABEL: func @stem
// NOPRO-NEXT: %[[X:.*]] = cnn.fused_elementwise
// NOPRO: cnn.fused_max_pool2d %[[X]] {
// NOPRO: cnn.max_pool2d_index_grad
func.func @stem(%c: tensor<2x8x8x16xf16>, %alpha: tensor<16xf32>, %beta: tensor<16xf32>, %dy: tensor<2x4x4x16xf16>) -> (tensor<2x4x4x16xf16>, tensor<2x8x8x16xf16>) {
  %x = cnn.fused_elementwise %c, %alpha, %beta {broadcast = array<i64: 0, 1, 1>, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x8x16xf16> {
  ^bb0(%a: f32, %s: f32, %b: f32):
    %zero = arith.constant 0.000000e+00 : f32
    %m = arith.mulf %a, %s : f32
    %p = arith.addf %m, %b : f32
    %r = arith.maximumf %p, %zero : f32
    %t = arith.truncf %r : f32 to f16
    %e = arith.extf %t : f16 to f32
    cnn.yield %e : f32
  }
  %y = cnn.max_pool2d %x {ceil_mode = false, kernel = array<i64: 3, 3>, layout = #cnn.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x8x8x16xf16>) -> tensor<2x4x4x16xf16>
  %g = cnn.max_pool2d_grad %dy, %x {ceil_mode = false, kernel = array<i64: 3, 3>, layout = #cnn.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x4x4x16xf16>, tensor<2x8x8x16xf16>) -> tensor<2x8x8x16xf16>
  return %y, %g : tensor<2x4x4x16xf16>, tensor<2x8x8x16xf16>
}

// -----

// The pooled input is also a ReLU mask of the backward pass (NCHW f32, as
// without cnn-conv-stats): the pooling records its argmax, the
// normalization stays.
// CHECK-LABEL: func @input_read_again
// CHECK: %[[X:.*]] = cnn.fused_elementwise
// CHECK: %[[Y:.*]], %[[I:.*]] = cnn.fused_max_pool2d %[[X]] {ceil_mode = false, kernel = array<i64: 2, 2>, {{.*}}operandSegmentSizes = array<i32: 1, 0, 0>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x3x4x4xf32>) -> (tensor<2x3x2x2xf32>, tensor<2x3x2x2xui8>)
// CHECK: %[[G:.*]] = cnn.max_pool2d_index_grad %arg3, %[[I]]
// CHECK: cnn.relu_grad %[[G]], %[[X]]
func.func @input_read_again(%c: tensor<2x3x4x4xf32>, %alpha: tensor<3xf32>, %beta: tensor<3xf32>, %dy: tensor<2x3x2x2xf32>) -> (tensor<2x3x2x2xf32>, tensor<2x3x4x4xf32>) {
  %x = cnn.fused_elementwise %c, %alpha, %beta {broadcast = array<i64: 0, 1, 1>} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32> {
  ^bb0(%a: f32, %s: f32, %b: f32):
    %zero = arith.constant 0.000000e+00 : f32
    %m = arith.mulf %a, %s : f32
    %p = arith.addf %m, %b : f32
    %r = arith.maximumf %p, %zero : f32
    cnn.yield %r : f32
  }
  %y = cnn.max_pool2d %x {ceil_mode = false, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x3x4x4xf32>) -> tensor<2x3x2x2xf32>
  %g = cnn.max_pool2d_grad %dy, %x {ceil_mode = false, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x3x2x2xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %m = cnn.relu_grad %g, %x : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  return %y, %m : tensor<2x3x2x2xf32>, tensor<2x3x4x4xf32>
}

// -----

// The input is not a scale-shift-ReLU (a plain ReLU): indexed, no prologue.
// CHECK-LABEL: func @not_a_normalization
// CHECK: %[[X:.*]] = cnn.relu
// CHECK: cnn.fused_max_pool2d %[[X]] {
// CHECK: cnn.max_pool2d_index_grad
func.func @not_a_normalization(%c: tensor<2x3x4x4xf32>, %dy: tensor<2x3x2x2xf32>) -> (tensor<2x3x2x2xf32>, tensor<2x3x4x4xf32>) {
  %x = cnn.relu %c : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %y = cnn.max_pool2d %x {ceil_mode = false, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x3x4x4xf32>) -> tensor<2x3x2x2xf32>
  %g = cnn.max_pool2d_grad %dy, %x {ceil_mode = false, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x3x2x2xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  return %y, %g : tensor<2x3x2x2xf32>, tensor<2x3x4x4xf32>
}

// -----

// A pooling without a gradient (the eval forward) keeps its plain form.
// CHECK-LABEL: func @forward_only
// CHECK: cnn.max_pool2d %arg0
// CHECK-NOT: fused_max_pool2d
func.func @forward_only(%x: tensor<2x3x4x4xf32>) -> tensor<2x3x2x2xf32> {
  %y = cnn.max_pool2d %x {ceil_mode = false, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x3x4x4xf32>) -> tensor<2x3x2x2xf32>
  return %y : tensor<2x3x2x2xf32>
}

// -----

// A gradient whose attributes differ from the pooling's is not its
// gradient: both are left alone.
// CHECK-LABEL: func @other_window
// CHECK: cnn.max_pool2d %arg0
// CHECK: cnn.max_pool2d_grad
// CHECK-NOT: fused_max_pool2d
func.func @other_window(%x: tensor<2x3x4x4xf32>, %dy: tensor<2x3x3x3xf32>) -> (tensor<2x3x2x2xf32>, tensor<2x3x4x4xf32>) {
  %y = cnn.max_pool2d %x {ceil_mode = false, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x3x4x4xf32>) -> tensor<2x3x2x2xf32>
  %g = cnn.max_pool2d_grad %dy, %x {ceil_mode = false, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<2x3x3x3xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  return %y, %g : tensor<2x3x2x2xf32>, tensor<2x3x4x4xf32>
}

// -----

// A 16x16 window has 256 positions, more than one byte indexes: left alone.
// CHECK-LABEL: func @large_window
// CHECK: cnn.max_pool2d %arg0
// CHECK: cnn.max_pool2d_grad
// CHECK-NOT: fused_max_pool2d
func.func @large_window(%x: tensor<1x1x16x16xf32>, %dy: tensor<1x1x1x1xf32>) -> (tensor<1x1x1x1xf32>, tensor<1x1x16x16xf32>) {
  %y = cnn.max_pool2d %x {ceil_mode = false, kernel = array<i64: 16, 16>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x1x16x16xf32>) -> tensor<1x1x1x1xf32>
  %g = cnn.max_pool2d_grad %dy, %x {ceil_mode = false, kernel = array<i64: 16, 16>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x1x1x1xf32>, tensor<1x1x16x16xf32>) -> tensor<1x1x16x16xf32>
  return %y, %g : tensor<1x1x1x1xf32>, tensor<1x1x16x16xf32>
}

// -----

// ResNet's stem with its backward pass: the pooling gradient's only reader is
// the BN + ReLU gradient, and the two become one op (NHWC, 16 channels).
// CHECK-LABEL: func @stem_backward
// CHECK-NEXT: %[[Y:.*]], %[[I:.*]] = cnn.fused_max_pool2d %arg0, %arg1, %arg2
// CHECK-NEXT: %[[DX:[^,]*]], %[[DS:[^,]*]], %[[DB:[^,]*]] = cnn.fused_max_pool2d_batch_norm_relu_grad %arg3, %[[I]], %arg0, %arg4, %arg5, %arg6, %arg1, %arg2 {ceil_mode = false, kernel = array<i64: 3, 3>, layout = #cnn.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x4x4x16xf16>, tensor<2x4x4x16xui8>, tensor<2x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>)
// CHECK-NEXT: return %[[Y]], %[[DX]], %[[DS]], %[[DB]]
// NOGRAD-LABEL: func @stem_backward
// NOGRAD: %[[G:.*]] = cnn.max_pool2d_index_grad
// NOGRAD: cnn.fused_batch_norm_affine_relu_grad %[[G]]
// NOGRAD-NOT: fused_max_pool2d_batch_norm_relu_grad
func.func @stem_backward(%c: tensor<2x8x8x16xf16>, %alpha: tensor<16xf32>, %beta: tensor<16xf32>, %dy: tensor<2x4x4x16xf16>, %scale: tensor<16xf32>, %mean: tensor<16xf32>, %invstd: tensor<16xf32>) -> (tensor<2x4x4x16xf16>, tensor<2x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>) {
  %x = cnn.fused_elementwise %c, %alpha, %beta {broadcast = array<i64: 0, 1, 1>, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x8x16xf16> {
  ^bb0(%a: f32, %s: f32, %b: f32):
    %zero = arith.constant 0.000000e+00 : f32
    %m = arith.mulf %a, %s : f32
    %p = arith.addf %m, %b : f32
    %r = arith.maximumf %p, %zero : f32
    %t = arith.truncf %r : f32 to f16
    %e = arith.extf %t : f16 to f32
    cnn.yield %e : f32
  }
  %y = cnn.max_pool2d %x {ceil_mode = false, kernel = array<i64: 3, 3>, layout = #cnn.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x8x8x16xf16>) -> tensor<2x4x4x16xf16>
  %g = cnn.max_pool2d_grad %dy, %x {ceil_mode = false, kernel = array<i64: 3, 3>, layout = #cnn.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x4x4x16xf16>, tensor<2x8x8x16xf16>) -> tensor<2x8x8x16xf16>
  %dx, %ds, %db = cnn.fused_batch_norm_affine_relu_grad %g, %c, %scale, %mean, %invstd, %alpha, %beta {layout = #cnn.layout<NHWC>} : (tensor<2x8x8x16xf16>, tensor<2x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>)
  return %y, %dx, %ds, %db : tensor<2x4x4x16xf16>, tensor<2x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>
}

// -----

// The pooling gradient has a second reader (here a result): it is stored, and
// the BN gradient reads it as before.
// CHECK-LABEL: func @gradient_read_twice
// CHECK: %[[G:.*]] = cnn.max_pool2d_index_grad
// CHECK: cnn.fused_batch_norm_affine_relu_grad %[[G]]
// CHECK-NOT: fused_max_pool2d_batch_norm_relu_grad
func.func @gradient_read_twice(%c: tensor<2x8x8x16xf16>, %alpha: tensor<16xf32>, %beta: tensor<16xf32>, %dy: tensor<2x4x4x16xf16>, %scale: tensor<16xf32>, %mean: tensor<16xf32>, %invstd: tensor<16xf32>) -> (tensor<2x4x4x16xf16>, tensor<2x8x8x16xf16>, tensor<2x8x8x16xf16>) {
  %x = cnn.fused_elementwise %c, %alpha, %beta {broadcast = array<i64: 0, 1, 1>, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x8x16xf16> {
  ^bb0(%a: f32, %s: f32, %b: f32):
    %zero = arith.constant 0.000000e+00 : f32
    %m = arith.mulf %a, %s : f32
    %p = arith.addf %m, %b : f32
    %r = arith.maximumf %p, %zero : f32
    %t = arith.truncf %r : f32 to f16
    %e = arith.extf %t : f16 to f32
    cnn.yield %e : f32
  }
  %y = cnn.max_pool2d %x {ceil_mode = false, kernel = array<i64: 3, 3>, layout = #cnn.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x8x8x16xf16>) -> tensor<2x4x4x16xf16>
  %g = cnn.max_pool2d_grad %dy, %x {ceil_mode = false, kernel = array<i64: 3, 3>, layout = #cnn.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x4x4x16xf16>, tensor<2x8x8x16xf16>) -> tensor<2x8x8x16xf16>
  %dx, %ds, %db = cnn.fused_batch_norm_affine_relu_grad %g, %c, %scale, %mean, %invstd, %alpha, %beta {layout = #cnn.layout<NHWC>} : (tensor<2x8x8x16xf16>, tensor<2x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>)
  return %y, %dx, %g : tensor<2x4x4x16xf16>, tensor<2x8x8x16xf16>, tensor<2x8x8x16xf16>
}

// -----

// 12 channels: the CUDA target gathers eight channels at a time, so the
// gradient stays its own op.
// CHECK-LABEL: func @channels_not_vec8
// CHECK: %[[G:.*]] = cnn.max_pool2d_index_grad
// CHECK: cnn.fused_batch_norm_affine_relu_grad %[[G]]
// CHECK-NOT: fused_max_pool2d_batch_norm_relu_grad
func.func @channels_not_vec8(%c: tensor<2x8x8x12xf16>, %alpha: tensor<12xf32>, %beta: tensor<12xf32>, %dy: tensor<2x4x4x12xf16>, %scale: tensor<12xf32>, %mean: tensor<12xf32>, %invstd: tensor<12xf32>) -> (tensor<2x4x4x12xf16>, tensor<2x8x8x12xf16>, tensor<12xf32>, tensor<12xf32>) {
  %x = cnn.fused_elementwise %c, %alpha, %beta {broadcast = array<i64: 0, 1, 1>, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x12xf16>, tensor<12xf32>, tensor<12xf32>) -> tensor<2x8x8x12xf16> {
  ^bb0(%a: f32, %s: f32, %b: f32):
    %zero = arith.constant 0.000000e+00 : f32
    %m = arith.mulf %a, %s : f32
    %p = arith.addf %m, %b : f32
    %r = arith.maximumf %p, %zero : f32
    %t = arith.truncf %r : f32 to f16
    %e = arith.extf %t : f16 to f32
    cnn.yield %e : f32
  }
  %y = cnn.max_pool2d %x {ceil_mode = false, kernel = array<i64: 3, 3>, layout = #cnn.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x8x8x12xf16>) -> tensor<2x4x4x12xf16>
  %g = cnn.max_pool2d_grad %dy, %x {ceil_mode = false, kernel = array<i64: 3, 3>, layout = #cnn.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x4x4x12xf16>, tensor<2x8x8x12xf16>) -> tensor<2x8x8x12xf16>
  %dx, %ds, %db = cnn.fused_batch_norm_affine_relu_grad %g, %c, %scale, %mean, %invstd, %alpha, %beta {layout = #cnn.layout<NHWC>} : (tensor<2x8x8x12xf16>, tensor<2x8x8x12xf16>, tensor<12xf32>, tensor<12xf32>, tensor<12xf32>, tensor<12xf32>, tensor<12xf32>) -> (tensor<2x8x8x12xf16>, tensor<12xf32>, tensor<12xf32>)
  return %y, %dx, %ds, %db : tensor<2x4x4x12xf16>, tensor<2x8x8x12xf16>, tensor<12xf32>, tensor<12xf32>
}

// -----

// NCHW: not folded either.
// CHECK-LABEL: func @nchw
// CHECK: %[[G:.*]] = cnn.max_pool2d_index_grad
// CHECK: cnn.fused_batch_norm_affine_relu_grad %[[G]]
// CHECK-NOT: fused_max_pool2d_batch_norm_relu_grad
func.func @nchw(%c: tensor<2x16x8x8xf16>, %alpha: tensor<16xf32>, %beta: tensor<16xf32>, %dy: tensor<2x16x4x4xf16>, %scale: tensor<16xf32>, %mean: tensor<16xf32>, %invstd: tensor<16xf32>) -> (tensor<2x16x4x4xf16>, tensor<2x16x8x8xf16>, tensor<16xf32>, tensor<16xf32>) {
  %x = cnn.fused_elementwise %c, %alpha, %beta {broadcast = array<i64: 0, 1, 1>, layout = #cnn.layout<NCHW>} : (tensor<2x16x8x8xf16>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x16x8x8xf16> {
  ^bb0(%a: f32, %s: f32, %b: f32):
    %zero = arith.constant 0.000000e+00 : f32
    %m = arith.mulf %a, %s : f32
    %p = arith.addf %m, %b : f32
    %r = arith.maximumf %p, %zero : f32
    %t = arith.truncf %r : f32 to f16
    %e = arith.extf %t : f16 to f32
    cnn.yield %e : f32
  }
  %y = cnn.max_pool2d %x {ceil_mode = false, kernel = array<i64: 3, 3>, layout = #cnn.layout<NCHW>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x16x8x8xf16>) -> tensor<2x16x4x4xf16>
  %g = cnn.max_pool2d_grad %dy, %x {ceil_mode = false, kernel = array<i64: 3, 3>, layout = #cnn.layout<NCHW>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x16x4x4xf16>, tensor<2x16x8x8xf16>) -> tensor<2x16x8x8xf16>
  %dx, %ds, %db = cnn.fused_batch_norm_affine_relu_grad %g, %c, %scale, %mean, %invstd, %alpha, %beta {layout = #cnn.layout<NCHW>} : (tensor<2x16x8x8xf16>, tensor<2x16x8x8xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x16x8x8xf16>, tensor<16xf32>, tensor<16xf32>)
  return %y, %dx, %ds, %db : tensor<2x16x4x4xf16>, tensor<2x16x8x8xf16>, tensor<16xf32>, tensor<16xf32>
}
