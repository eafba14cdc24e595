// RUN: cnnc-opt %s | cnnc-opt | FileCheck %s
// The ops cnn-fuse makes parse, verify and print back.

// CHECK-LABEL: func @fused_conv
// CHECK: cnn.fused_conv2d %arg0, %arg1, %arg2, %arg3 {activation = "relu"
func.func @fused_conv(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>, %r: tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32> {
  %y = cnn.fused_conv2d %x, %w, %b, %r {activation = "relu", strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1, operandSegmentSizes = array<i32: 1, 1, 1, 1>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  return %y : tensor<2x4x8x8xf32>
}

// CHECK-LABEL: func @bn_stats_nhwc
// CHECK: cnn.batch_norm_stats %arg0, %arg1, %arg2, %arg3, %arg4 {epsilon = {{.*}}, layout = #cnn.layout<NHWC>, momentum = {{.*}}}
func.func @bn_stats_nhwc(%x: tensor<2x4x4x8xf16>, %s: tensor<8xf32>, %b: tensor<8xf32>, %rm: tensor<8xf32>, %rv: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %m, %i, %nm, %nv, %a, %be = cnn.batch_norm_stats %x, %s, %b, %rm, %rv {epsilon = 1.0e-5 : f32, momentum = 0.1 : f32, layout = #cnn.layout<NHWC>} : (tensor<2x4x4x8xf16>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %a, %be : tensor<8xf32>, tensor<8xf32>
}

// CHECK-LABEL: func @bn_affine_relu_grad
// CHECK: cnn.fused_batch_norm_affine_relu_grad
func.func @bn_affine_relu_grad(%dy: tensor<2x4x4x8xf16>, %x: tensor<2x4x4x8xf16>, %s: tensor<8xf32>, %m: tensor<8xf32>, %i: tensor<8xf32>, %a: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x4x4x8xf16> {
  %gx, %gs, %gb = cnn.fused_batch_norm_affine_relu_grad %dy, %x, %s, %m, %i, %a, %b {layout = #cnn.layout<NHWC>} : (tensor<2x4x4x8xf16>, tensor<2x4x4x8xf16>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x4x4x8xf16>, tensor<8xf32>, tensor<8xf32>)
  return %gx : tensor<2x4x4x8xf16>
}

// CHECK-LABEL: func @bn_relu_grad
// CHECK: cnn.fused_batch_norm_relu_grad
func.func @bn_relu_grad(%dy: tensor<2x8x4x4xf32>, %y: tensor<2x8x4x4xf32>, %x: tensor<2x8x4x4xf32>, %s: tensor<8xf32>, %m: tensor<8xf32>, %i: tensor<8xf32>) -> tensor<2x8x4x4xf32> {
  %gx, %gs, %gb = cnn.fused_batch_norm_relu_grad %dy, %y, %x, %s, %m, %i : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
  return %gx : tensor<2x8x4x4xf32>
}

// CHECK-LABEL: func @elementwise
// CHECK: cnn.fused_elementwise %arg0, %arg1, %arg2 {broadcast = array<i64: 0, 1, 2>}
// CHECK: arith.mulf
// CHECK: cnn.yield
func.func @elementwise(%x: tensor<2x8x4x4xf16>, %a: tensor<8xf32>, %c: tensor<f32>) -> tensor<2x8x4x4xf16> {
  %y = cnn.fused_elementwise %x, %a, %c {broadcast = array<i64: 0, 1, 2>} : (tensor<2x8x4x4xf16>, tensor<8xf32>, tensor<f32>) -> tensor<2x8x4x4xf16> {
  ^bb0(%v: f32, %s: f32, %k: f32):
    %p = arith.mulf %v, %s : f32
    %q = arith.addf %p, %k : f32
    cnn.yield %q : f32
  }
  return %y : tensor<2x8x4x4xf16>
}

// CHECK-LABEL: func @conv_stats
// CHECK: %{{.*}}, %{{.*}}, %{{.*}} = cnn.fused_conv2d_stats %arg0, %arg1 {dilations = array<i64: 1, 1>, groups = 1 : i64, layout = #cnn.layout<NHWC>, operandSegmentSizes = array<i32: 1, 1, 0, 0>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x4x8xf16>, tensor<16x3x3x8xf16>) -> (tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>)
func.func @conv_stats(%x: tensor<2x4x4x8xf16>, %w: tensor<16x3x3x8xf16>) -> (tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>) {
  %y, %s, %ss = cnn.fused_conv2d_stats %x, %w {dilations = array<i64: 1, 1>, groups = 1 : i64, layout = #cnn.layout<NHWC>, operandSegmentSizes = array<i32: 1, 1, 0, 0>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x4x8xf16>, tensor<16x3x3x8xf16>) -> (tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>)
  return %y, %s, %ss : tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>
}

// CHECK-LABEL: func @bn_finalize
// CHECK: cnn.batch_norm_finalize %arg0, %arg1, %arg2, %arg3, %arg4, %arg5 {count = 32 : i64, epsilon = {{.*}}, momentum = {{.*}}}
func.func @bn_finalize(%s: tensor<16xf32>, %ss: tensor<16xf32>, %g: tensor<16xf32>, %b: tensor<16xf32>, %rm: tensor<16xf32>, %rv: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %m, %i, %nm, %nv, %a, %be = cnn.batch_norm_finalize %s, %ss, %g, %b, %rm, %rv {count = 32 : i64, epsilon = 1.0e-5 : f32, momentum = 0.1 : f32} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
  return %a, %be : tensor<16xf32>, tensor<16xf32>
}

// CHECK-LABEL: func @conv_stats_prologue
// CHECK: cnn.fused_conv2d_stats %arg0, %arg1, %arg2, %arg3 {{{.*}}operandSegmentSizes = array<i32: 1, 1, 1, 1>
func.func @conv_stats_prologue(%x: tensor<2x4x4x8xf16>, %w: tensor<16x3x3x8xf16>, %a: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<16xf32> {
  %y, %s, %ss = cnn.fused_conv2d_stats %x, %w, %a, %b {dilations = array<i64: 1, 1>, groups = 1 : i64, layout = #cnn.layout<NHWC>, operandSegmentSizes = array<i32: 1, 1, 1, 1>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x4x8xf16>, tensor<16x3x3x8xf16>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>)
  return %s : tensor<16xf32>
}

// CHECK-LABEL: func @dgrad_add_relu
// CHECK: cnn.fused_conv2d_bwd_data %arg0, %arg1, %arg2, %arg3 {dilations = array<i64: 1, 1>, groups = 1 : i64, layout = #cnn.layout<NHWC>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x2x2x16xf16>, tensor<16x1x1x8xf16>, tensor<2x4x4x8xf16>, tensor<2x4x4x8xf16>) -> tensor<2x4x4x8xf16>
func.func @dgrad_add_relu(%dy: tensor<2x2x2x16xf16>, %w: tensor<16x1x1x8xf16>, %a: tensor<2x4x4x8xf16>, %y: tensor<2x4x4x8xf16>) -> tensor<2x4x4x8xf16> {
  %g = cnn.fused_conv2d_bwd_data %dy, %w, %a, %y {dilations = array<i64: 1, 1>, groups = 1 : i64, layout = #cnn.layout<NHWC>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x2x2x16xf16>, tensor<16x1x1x8xf16>, tensor<2x4x4x8xf16>, tensor<2x4x4x8xf16>) -> tensor<2x4x4x8xf16>
  return %g : tensor<2x4x4x8xf16>
}

// CHECK-LABEL: func @wgrad_prologue
// CHECK: cnn.fused_conv2d_bwd_filter %arg0, %arg1, %arg2, %arg3 {dilations = array<i64: 1, 1>, groups = 1 : i64, layout = #cnn.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x4x8xf16>, tensor<2x4x4x16xf16>, tensor<8xf32>, tensor<8xf32>) -> tensor<16x3x3x8xf16>
func.func @wgrad_prologue(%x: tensor<2x4x4x8xf16>, %dy: tensor<2x4x4x16xf16>, %a: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<16x3x3x8xf16> {
  %dw = cnn.fused_conv2d_bwd_filter %x, %dy, %a, %b {dilations = array<i64: 1, 1>, groups = 1 : i64, layout = #cnn.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x4x8xf16>, tensor<2x4x4x16xf16>, tensor<8xf32>, tensor<8xf32>) -> tensor<16x3x3x8xf16>
  return %dw : tensor<16x3x3x8xf16>
}

// CHECK-LABEL: func @max_pool_index
// CHECK: %{{.*}}, %[[I:.*]] = cnn.fused_max_pool2d %arg0, %arg1, %arg2 {ceil_mode = false, kernel = array<i64: 3, 3>, layout = #cnn.layout<NHWC>, operandSegmentSizes = array<i32: 1, 1, 1>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x4x4x16xf16>, tensor<2x4x4x16xui8>)
// CHECK: cnn.max_pool2d_index_grad %arg3, %[[I]] {ceil_mode = false, kernel = array<i64: 3, 3>, layout = #cnn.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x4x4x16xf16>, tensor<2x4x4x16xui8>) -> tensor<2x8x8x16xf16>
func.func @max_pool_index(%x: tensor<2x8x8x16xf16>, %a: tensor<16xf32>, %b: tensor<16xf32>, %dy: tensor<2x4x4x16xf16>) -> tensor<2x8x8x16xf16> {
  %y, %i = cnn.fused_max_pool2d %x, %a, %b {ceil_mode = false, kernel = array<i64: 3, 3>, layout = #cnn.layout<NHWC>, operandSegmentSizes = array<i32: 1, 1, 1>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x4x4x16xf16>, tensor<2x4x4x16xui8>)
  %g = cnn.max_pool2d_index_grad %dy, %i {ceil_mode = false, kernel = array<i64: 3, 3>, layout = #cnn.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x4x4x16xf16>, tensor<2x4x4x16xui8>) -> tensor<2x8x8x16xf16>
  return %g : tensor<2x8x8x16xf16>
}

// CHECK-LABEL: func @max_pool_bn_grad
// CHECK: cnn.fused_max_pool2d_batch_norm_relu_grad %arg0, %arg1, %arg2, %arg3, %arg4, %arg5, %arg6, %arg7 {ceil_mode = false, kernel = array<i64: 3, 3>, layout = #cnn.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x4x4x16xf16>, tensor<2x4x4x16xui8>, tensor<2x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>)
func.func @max_pool_bn_grad(%dy: tensor<2x4x4x16xf16>, %i: tensor<2x4x4x16xui8>, %x: tensor<2x8x8x16xf16>, %s: tensor<16xf32>, %m: tensor<16xf32>, %v: tensor<16xf32>, %a: tensor<16xf32>, %b: tensor<16xf32>) -> tensor<2x8x8x16xf16> {
  %dx, %ds, %db = cnn.fused_max_pool2d_batch_norm_relu_grad %dy, %i, %x, %s, %m, %v, %a, %b {ceil_mode = false, kernel = array<i64: 3, 3>, layout = #cnn.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x4x4x16xf16>, tensor<2x4x4x16xui8>, tensor<2x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>)
  return %dx : tensor<2x8x8x16xf16>
}

// CHECK-LABEL: func @max_pool_index_plain
// CHECK: cnn.fused_max_pool2d %arg0 {{{.*}}operandSegmentSizes = array<i32: 1, 0, 0>
func.func @max_pool_index_plain(%x: tensor<2x3x8x8xf32>) -> tensor<2x3x4x4xui8> {
  %y, %i = cnn.fused_max_pool2d %x {ceil_mode = false, kernel = array<i64: 2, 2>, operandSegmentSizes = array<i32: 1, 0, 0>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x3x8x8xf32>) -> (tensor<2x3x4x4xf32>, tensor<2x3x4x4xui8>)
  return %i : tensor<2x3x4x4xui8>
}

// CHECK-LABEL: func @dual_bn_grad
// CHECK: cnn.fused_dual_batch_norm_grad %arg0, %arg1, %arg2, %arg3, %arg4, %arg5, %arg6, %arg7, %arg8 {layout = #cnn.layout<NHWC>} : (tensor<2x4x4x16xf16>, tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>, tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>)
func.func @dual_bn_grad(%dy: tensor<2x4x4x16xf16>, %a: tensor<2x4x4x16xf16>, %sa: tensor<16xf32>, %ma: tensor<16xf32>, %ia: tensor<16xf32>, %b: tensor<2x4x4x16xf16>, %sb: tensor<16xf32>, %mb: tensor<16xf32>, %ib: tensor<16xf32>) -> (tensor<2x4x4x16xf16>, tensor<2x4x4x16xf16>) {
  %da, %dsa, %dba, %db, %dsb, %dbb = cnn.fused_dual_batch_norm_grad %dy, %a, %sa, %ma, %ia, %b, %sb, %mb, %ib {layout = #cnn.layout<NHWC>} : (tensor<2x4x4x16xf16>, tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>, tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>)
  return %da, %db : tensor<2x4x4x16xf16>, tensor<2x4x4x16xf16>
}

// CHECK-LABEL: func @bn_sums
// CHECK: cnn.batch_norm_sums %arg0 {layout = #cnn.layout<NHWC>} : (tensor<2x4x4x16xf16>) -> (tensor<16xf32>, tensor<16xf32>)
// CHECK: cnn.batch_norm_grad_sums %arg1, %arg0, %arg2, %arg3 {layout = #cnn.layout<NHWC>}
func.func @bn_sums(%x: tensor<2x4x4x16xf16>, %dy: tensor<2x4x4x16xf16>, %m: tensor<16xf32>, %i: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %s, %ss = cnn.batch_norm_sums %x {layout = #cnn.layout<NHWC>} : (tensor<2x4x4x16xf16>) -> (tensor<16xf32>, tensor<16xf32>)
  %a, %b = cnn.batch_norm_grad_sums %dy, %x, %m, %i {layout = #cnn.layout<NHWC>} : (tensor<2x4x4x16xf16>, tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>)
  return %s, %ss, %a, %b : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
}

// CHECK-LABEL: func @bn_affine_relu_grad_sums
// CHECK: cnn.fused_batch_norm_affine_relu_grad_sums %arg1, %arg0, %arg2, %arg3, %arg4, %arg5 {layout = #cnn.layout<NHWC>}
func.func @bn_affine_relu_grad_sums(%x: tensor<2x4x4x16xf16>, %dy: tensor<2x4x4x16xf16>, %m: tensor<16xf32>, %i: tensor<16xf32>, %al: tensor<16xf32>, %be: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %a, %b = cnn.fused_batch_norm_affine_relu_grad_sums %dy, %x, %m, %i, %al, %be {layout = #cnn.layout<NHWC>} : (tensor<2x4x4x16xf16>, tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>)
  return %a, %b : tensor<16xf32>, tensor<16xf32>
}
