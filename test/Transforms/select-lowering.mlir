// RUN: cnnc-opt %s -split-input-file -cnn-select-lowering | FileCheck %s
// RUN: cnnc-opt %S/../Target/CUDA/Inputs/small_cnn.mlir -cnn-autodiff -cnn-gpu-pipeline="memory-plan=false" | FileCheck %s --check-prefix=STEP

// NHWC 1x1, stride 1, unpadded, one group: a cuBLASLt product; a 3x3 stays
// a convolution; NHWC max pooling with C % 8 == 0 takes eight channels per
// thread, NCHW pooling does not.
// CHECK-LABEL: func.func @choices
// CHECK-SAME: attributes {cnn.lowering_selected}
// CHECK: cnn.conv2d {{.*}}cnn.lowering = "gemm"
// CHECK: cnn.conv2d
// CHECK-NOT: cnn.lowering
// CHECK-SAME: tensor<2x6x6x32xf16>
// CHECK: cnn.max_pool2d {{.*}}cnn.lowering = "vec8"
// CHECK: cnn.max_pool2d
// CHECK-NOT: cnn.lowering
// CHECK-SAME: tensor<2x16x4x4xf32>
func.func @choices(%x: tensor<2x8x8x16xf16>, %w1: tensor<32x1x1x16xf16>, %w3: tensor<32x3x3x16xf16>, %y: tensor<2x16x8x8xf32>) -> (tensor<2x8x8x32xf16>, tensor<2x6x6x32xf16>, tensor<2x4x4x16xf16>, tensor<2x16x4x4xf32>) {
  %a = cnn.conv2d %x, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x16xf16>, tensor<32x1x1x16xf16>) -> tensor<2x8x8x32xf16>
  %b = cnn.conv2d %x, %w3 {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x16xf16>, tensor<32x3x3x16xf16>) -> tensor<2x6x6x32xf16>
  %p = cnn.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, ceil_mode = false, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x16xf16>) -> tensor<2x4x4x16xf16>
  %q = cnn.max_pool2d %y {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, ceil_mode = false} : (tensor<2x16x8x8xf32>) -> tensor<2x16x4x4xf32>
  return %a, %b, %p, %q : tensor<2x8x8x32xf16>, tensor<2x6x6x32xf16>, tensor<2x4x4x16xf16>, tensor<2x16x4x4xf32>
}

// -----

// A stale choice is withdrawn when the op no longer qualifies (here: a
// stride of 2).
// CHECK-LABEL: func.func @stale
// CHECK: cnn.conv2d
// CHECK-NOT: cnn.lowering
// CHECK-SAME: -> tensor<2x4x4x32xf16>
func.func @stale(%x: tensor<2x8x8x16xf16>, %w1: tensor<32x1x1x16xf16>) -> tensor<2x4x4x32xf16> {
  %a = cnn.conv2d %x, %w1 {strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NHWC>, cnn.lowering = "gemm"} : (tensor<2x8x8x16xf16>, tensor<32x1x1x16xf16>) -> tensor<2x4x4x32xf16>
  return %a : tensor<2x4x4x32xf16>
}

// The GPU pipeline chooses after fusion: the conv + bias + ReLU epilogue is
// offered to cuDNN's bias-activation form, and the SGD updates of one kind
// (f32 parameters, f16 gradients, the same lr/step/scale/flag) share group
// 0; every update is in a group.
// STEP-LABEL: func.func @train_step
// STEP-SAME: cnn.lowering_selected
// STEP: cnn.fused_conv2d {{.*}}cnn.lowering = "cudnn_bias_act"
// STEP: cnn.sgd_update {{.*}}cnn.update_group = 0 : i64
// STEP-NOT: cnn.update_group = 1
// STEP: return

// -----

// Sums and means over every dimension but the innermost (an NHWC tensor's
// per-channel statistics) take bias_grad's coalesced two-pass kernels,
// eight channels per thread when C % 8 == 0 ("channel_sum_vec8": 16 channels here, 12 in @channel_sums_12); a
// reduction that keeps another dimension sums one run of dimensions in
// global_avg_pool's blocks ("spatial_sum"; select-lowering-spatial-sum.mlir),
// and a maximum keeps the generic kernel.
// CHECK-LABEL: func.func @channel_sums
// CHECK: cnn.reduce_mean {{.*}}cnn.lowering = "channel_sum_vec8"
// CHECK: cnn.reduce_sum {{.*}}cnn.lowering = "channel_sum_vec8"
// CHECK: cnn.reduce_sum {{.*}}cnn.lowering = "spatial_sum"
// CHECK-SAME: -> tensor<2x1x1x1xf32>
// CHECK: cnn.reduce_max
// CHECK-NOT: cnn.lowering
// CHECK-SAME: -> tensor<1x1x1x16xf32>
func.func @channel_sums(%x: tensor<2x4x4x16xf32>) -> (tensor<1x1x1x16xf32>, tensor<1x1x1x16xf32>, tensor<2x1x1x1xf32>, tensor<1x1x1x16xf32>) {
  %m = cnn.reduce_mean %x {axes = array<i64: 0, 1, 2>} : (tensor<2x4x4x16xf32>) -> tensor<1x1x1x16xf32>
  %s = cnn.reduce_sum %x {axes = array<i64: 2, 0, 1>} : (tensor<2x4x4x16xf32>) -> tensor<1x1x1x16xf32>
  %r = cnn.reduce_sum %x {axes = array<i64: 1, 2, 3>} : (tensor<2x4x4x16xf32>) -> tensor<2x1x1x1xf32>
  %q = cnn.reduce_max %x {axes = array<i64: 0, 1, 2>} : (tensor<2x4x4x16xf32>) -> tensor<1x1x1x16xf32>
  return %m, %s, %r, %q : tensor<1x1x1x16xf32>, tensor<1x1x1x16xf32>, tensor<2x1x1x1xf32>, tensor<1x1x1x16xf32>
}

// CHECK-LABEL: func.func @channel_sums_12
// CHECK: cnn.reduce_sum {{.*}}cnn.lowering = "channel_sum"}
func.func @channel_sums_12(%x: tensor<2x4x4x12xf32>) -> tensor<1x1x1x12xf32> {
  %s = cnn.reduce_sum %x {axes = array<i64: 0, 1, 2>} : (tensor<2x4x4x12xf32>) -> tensor<1x1x1x12xf32>
  return %s : tensor<1x1x1x12xf32>
}

// -----

// The f16 copies of the parameters at the start of a step: a contiguous run
// of one-input fused_elementwise ops with one body and types on parameters
// shares a multi-tensor kernel (cnn.cast_group); the image (not a
// parameter), a different body, and a cast after another op start or end
// runs; a run of one is no group.
// CHECK-LABEL: func.func @param_casts
// CHECK: cnn.fused_elementwise %arg0 {
// CHECK-NOT: cnn.cast_group
// CHECK-SAME: (tensor<2x3xf32>) -> tensor<2x3xf16>
// CHECK: cnn.fused_elementwise %arg1 {{{.*}}cnn.cast_group = 0 : i64
// CHECK: cnn.fused_elementwise %arg2 {{{.*}}cnn.cast_group = 0 : i64
// CHECK-NOT: vec8
// CHECK: cnn.fused_elementwise %arg3 {
// CHECK-NOT: cnn.cast_group
// CHECK-SAME: -> tensor<5xf32>
// CHECK: cnn.add
// CHECK: cnn.fused_elementwise %arg4 {
// CHECK-NOT: cnn.cast_group
// CHECK-SAME: -> tensor<6xf16>
func.func @param_casts(%x: tensor<2x3xf32> {cnn.input}, %w: tensor<4x3xf32> {cnn.param = "w"}, %b: tensor<4xf32> {cnn.param = "b"}, %s: tensor<5xf32> {cnn.param = "s"}, %v: tensor<6xf32> {cnn.param = "v"}) -> (tensor<2x3xf16>, tensor<4x3xf16>, tensor<4xf16>, tensor<5xf32>, tensor<6xf16>) {
  %0 = cnn.fused_elementwise %x {broadcast = array<i64: 0>} : (tensor<2x3xf32>) -> tensor<2x3xf16> {
  ^bb0(%a: f32):
    cnn.yield %a : f32
  }
  %1 = cnn.fused_elementwise %w {broadcast = array<i64: 0>} : (tensor<4x3xf32>) -> tensor<4x3xf16> {
  ^bb0(%a: f32):
    cnn.yield %a : f32
  }
  %2 = cnn.fused_elementwise %b {broadcast = array<i64: 0>} : (tensor<4xf32>) -> tensor<4xf16> {
  ^bb0(%a: f32):
    cnn.yield %a : f32
  }
  %3 = cnn.fused_elementwise %s {broadcast = array<i64: 0>} : (tensor<5xf32>) -> tensor<5xf32> {
  ^bb0(%a: f32):
    %n = arith.negf %a : f32
    cnn.yield %n : f32
  }
  %4 = cnn.add %3, %3 : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  %5 = cnn.fused_elementwise %v {broadcast = array<i64: 0>} : (tensor<6xf32>) -> tensor<6xf16> {
  ^bb0(%a: f32):
    cnn.yield %a : f32
  }
  return %0, %1, %2, %4, %5 : tensor<2x3xf16>, tensor<4x3xf16>, tensor<4xf16>, tensor<5xf32>, tensor<6xf16>
}

// -----

// The per-channel sums of BatchNorm gradients and bias_grad (NHWC: rows of
// C contiguous channels) take eight channels per thread where C % 8 == 0,
// in any rank; 12 channels or NCHW do not.
// CHECK-LABEL: func.func @channel_sums
// CHECK: cnn.batch_norm_grad {{.*}}cnn.lowering = "vec8"
// CHECK: cnn.batch_norm_grad
// CHECK-NOT: cnn.lowering
// CHECK-SAME: tensor<2x4x4x12xf16>
// CHECK: cnn.batch_norm_grad
// CHECK-NOT: cnn.lowering
// CHECK-SAME: tensor<2x16x4x4xf32>
// CHECK: cnn.bias_grad {{.*}}cnn.lowering = "vec8"
func.func @channel_sums(%dy: tensor<2x4x4x16xf16>, %x: tensor<2x4x4x16xf16>, %s: tensor<16xf32>, %m: tensor<16xf32>, %i: tensor<16xf32>,
                        %dy12: tensor<2x4x4x12xf16>, %s12: tensor<12xf32>,
                        %dyc: tensor<2x16x4x4xf32>, %g: tensor<4x16xf32>) -> (tensor<2x4x4x16xf16>, tensor<2x4x4x12xf16>, tensor<2x16x4x4xf32>, tensor<16xf32>) {
  %a, %as, %ab = cnn.batch_norm_grad %dy, %x, %s, %m, %i {layout = #cnn.layout<NHWC>} : (tensor<2x4x4x16xf16>, tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>)
  %b, %bs, %bb = cnn.batch_norm_grad %dy12, %dy12, %s12, %s12, %s12 {layout = #cnn.layout<NHWC>} : (tensor<2x4x4x12xf16>, tensor<2x4x4x12xf16>, tensor<12xf32>, tensor<12xf32>, tensor<12xf32>) -> (tensor<2x4x4x12xf16>, tensor<12xf32>, tensor<12xf32>)
  %c, %cs, %cb = cnn.batch_norm_grad %dyc, %dyc, %s, %m, %i : (tensor<2x16x4x4xf32>, tensor<2x16x4x4xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x16x4x4xf32>, tensor<16xf32>, tensor<16xf32>)
  %d = cnn.bias_grad %g {layout = #cnn.layout<NHWC>} : (tensor<4x16xf32>) -> tensor<16xf32>
  return %a, %b, %c, %d : tensor<2x4x4x16xf16>, tensor<2x4x4x12xf16>, tensor<2x16x4x4xf32>, tensor<16xf32>
}

// -----

// Multi-tensor kernels move eight elements per thread ("vec8") when every
// tensor of the group (every input of all_finite) has a multiple of 8
// elements: the updates of %w8/%b8 and their finiteness check take it; a
// group with a 5-element tensor, and the check that reads it, do not.
// CHECK-LABEL: func.func @multi_tensor_vec8
// CHECK: cnn.all_finite {{.*}}cnn.lowering = "vec8"
// CHECK-SAME: (tensor<4x4xf16>, tensor<8xf32>) -> tensor<f32>
// CHECK: cnn.all_finite
// CHECK-NOT: cnn.lowering
// CHECK-SAME: (tensor<4x4xf16>, tensor<5xf32>) -> tensor<f32>
// CHECK: cnn.sgd_update {{.*}}cnn.lowering = "vec8", cnn.update_group = 0
// CHECK: cnn.sgd_update {{.*}}cnn.lowering = "vec8", cnn.update_group = 0
// CHECK: cnn.sgd_update
// CHECK-NOT: cnn.lowering
// CHECK-SAME: cnn.update_group = 1
// CHECK: cnn.sgd_update
// CHECK-NOT: cnn.lowering
// CHECK-SAME: cnn.update_group = 1
func.func @multi_tensor_vec8(%w8: tensor<4x4xf32>, %g8: tensor<4x4xf16>, %b8: tensor<8xf32>, %gb8: tensor<8xf32>,
                             %w5: tensor<5xf32>, %g5: tensor<5xf32>, %lr: tensor<f32>, %step: tensor<f32>, %S: tensor<f32>)
    -> (tensor<f32>, tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<8xf32>, tensor<8xf32>,
        tensor<4x4xf32>, tensor<4x4xf32>, tensor<5xf32>, tensor<5xf32>) {
  %ok = cnn.all_finite %g8, %gb8 : (tensor<4x4xf16>, tensor<8xf32>) -> tensor<f32>
  %ok5 = cnn.all_finite %g8, %g5 : (tensor<4x4xf16>, tensor<5xf32>) -> tensor<f32>
  %p1, %m1 = cnn.sgd_update %w8, %g8, %w8, %lr, %step, %S, %ok {momentum = 0.9 : f32, dampening = 0.0 : f32, weight_decay = 0.0 : f32, nesterov = false} : (tensor<4x4xf32>, tensor<4x4xf16>, tensor<4x4xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4x4xf32>, tensor<4x4xf32>)
  %p2, %m2 = cnn.sgd_update %b8, %gb8, %b8, %lr, %step, %S, %ok {momentum = 0.9 : f32, dampening = 0.0 : f32, weight_decay = 0.0 : f32, nesterov = false} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>)
  %p3, %m3 = cnn.sgd_update %w8, %g8, %w8, %lr, %step, %S, %ok5 {momentum = 0.9 : f32, dampening = 0.0 : f32, weight_decay = 0.0 : f32, nesterov = false} : (tensor<4x4xf32>, tensor<4x4xf16>, tensor<4x4xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4x4xf32>, tensor<4x4xf32>)
  %p4, %m4 = cnn.sgd_update %w5, %g5, %w5, %lr, %step, %S, %ok5 {momentum = 0.9 : f32, dampening = 0.0 : f32, weight_decay = 0.0 : f32, nesterov = false} : (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<5xf32>, tensor<5xf32>)
  return %ok, %ok5, %p1, %m1, %p2, %m2, %p3, %m3, %p4, %m4 : tensor<f32>, tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<5xf32>, tensor<5xf32>
}

// -----

// A run of parameter casts of 8-element multiples is a "vec8" cast group.
// CHECK-LABEL: func.func @param_casts_vec8
// CHECK: cnn.fused_elementwise %arg0 {{{.*}}cnn.cast_group = 0 : i64, cnn.lowering = "vec8"
// CHECK: cnn.fused_elementwise %arg1 {{{.*}}cnn.cast_group = 0 : i64, cnn.lowering = "vec8"
func.func @param_casts_vec8(%w: tensor<4x2xf32> {cnn.param = "w"}, %b: tensor<16xf32> {cnn.param = "b"}) -> (tensor<4x2xf16>, tensor<16xf16>) {
  %1 = cnn.fused_elementwise %w {broadcast = array<i64: 0>} : (tensor<4x2xf32>) -> tensor<4x2xf16> {
  ^bb0(%a: f32):
    cnn.yield %a : f32
  }
  %2 = cnn.fused_elementwise %b {broadcast = array<i64: 0>} : (tensor<16xf32>) -> tensor<16xf16> {
  ^bb0(%a: f32):
    cnn.yield %a : f32
  }
  return %1, %2 : tensor<4x2xf16>, tensor<16xf16>
}
