// RUN: cnnc-opt %s | FileCheck %s
// RUN: cnnc-opt %s | cnnc-opt | FileCheck %s
// RUN: cnnc-opt %s --mlir-print-op-generic | cnnc-opt | FileCheck %s

// CHECK-LABEL: func @forward_ops
func.func @forward_ops(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>,
                       %mean: tensor<4xf32>, %var: tensor<4xf32>, %fc: tensor<10x16xf32>) -> tensor<2x10xf32> {
  // CHECK: cnn.conv2d %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %c = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: cnn.bias_add
  %cb = cnn.bias_add %c, %b : (tensor<2x4x8x8xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: cnn.batch_norm {{.*}} {epsilon = 9.99999974E-6 : f32}
  %bn = cnn.batch_norm %cb, %b, %b, %mean, %var {epsilon = 1.0e-5 : f32} : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: cnn.relu
  %r = cnn.relu %bn : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: cnn.clip {{.*}} {max = 6.000000e+00 : f32, min = 0.000000e+00 : f32}
  %r6 = cnn.clip %r {min = 0.0 : f32, max = 6.0 : f32} : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: cnn.add
  %a = cnn.add %r6, %r : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: cnn.mul
  %m = cnn.mul %a, %r : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: cnn.max_pool2d {{.*}} -> tensor<2x4x4x4xf32>
  %mp = cnn.max_pool2d %m {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, ceil_mode = false} : (tensor<2x4x8x8xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: cnn.avg_pool2d {{.*}} -> tensor<2x4x2x2xf32>
  %ap = cnn.avg_pool2d %mp {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, ceil_mode = false, count_include_pad = true} : (tensor<2x4x4x4xf32>) -> tensor<2x4x2x2xf32>
  // CHECK: cnn.global_avg_pool {{.*}} -> tensor<2x4x1x1xf32>
  %g = cnn.global_avg_pool %ap : (tensor<2x4x2x2xf32>) -> tensor<2x4x1x1xf32>
  // CHECK: cnn.concat {{.*}} {axis = 1 : i64} {{.*}} -> tensor<2x8x2x2xf32>
  %cat = cnn.concat %ap, %ap {axis = 1} : (tensor<2x4x2x2xf32>, tensor<2x4x2x2xf32>) -> tensor<2x8x2x2xf32>
  // CHECK: cnn.slice
  %sl = cnn.slice %cat {offsets = array<i64: 0, 0, 0, 0>, sizes = array<i64: 2, 4, 2, 2>} : (tensor<2x8x2x2xf32>) -> tensor<2x4x2x2xf32>
  // CHECK: cnn.transpose {{.*}} -> tensor<2x2x2x4xf32>
  %t = cnn.transpose %sl {permutation = array<i64: 0, 2, 3, 1>} : (tensor<2x4x2x2xf32>) -> tensor<2x2x2x4xf32>
  // CHECK: cnn.flatten {{.*}} -> tensor<2x16xf32>
  %f = cnn.flatten %t {axis = 1} : (tensor<2x2x2x4xf32>) -> tensor<2x16xf32>
  // CHECK: cnn.dropout
  %d = cnn.dropout %f {ratio = 0.5 : f32} : (tensor<2x16xf32>) -> tensor<2x16xf32>
  // CHECK: cnn.matmul {{.*}} {transpose_rhs = true} {{.*}} -> tensor<2x10xf32>
  %y = cnn.matmul %d, %fc {transpose_rhs = true} : (tensor<2x16xf32>, tensor<10x16xf32>) -> tensor<2x10xf32>
  // CHECK: cnn.softmax
  %s = cnn.softmax %y {axis = 1} : (tensor<2x10xf32>) -> tensor<2x10xf32>
  // CHECK: cnn.cast {{.*}} -> tensor<2x10xf16>
  %h = cnn.cast %s : (tensor<2x10xf32>) -> tensor<2x10xf16>
  // CHECK: cnn.reshape {{.*}} -> tensor<20xf16>
  %rs = cnn.reshape %h : (tensor<2x10xf16>) -> tensor<20xf16>
  // CHECK: cnn.scale
  %sc = cnn.scale %y {factor = 2.0 : f32} : (tensor<2x10xf32>) -> tensor<2x10xf32>
  return %sc : tensor<2x10xf32>
}

// CHECK-LABEL: func @training_ops
func.func @training_ops(%x: tensor<2x4x8x8xf32>, %s: tensor<4xf32>, %rm: tensor<4xf32>, %rv: tensor<4xf32>,
                        %logits: tensor<2x10xf32>, %labels: tensor<2xi32>, %step: tensor<f32>) -> tensor<f32> {
  // CHECK: cnn.batch_norm_train
  %y, %sm, %si, %nm, %nv = cnn.batch_norm_train %x, %s, %s, %rm, %rv {epsilon = 1.0e-5 : f32, momentum = 0.1 : f32} : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  // CHECK: cnn.softmax_cross_entropy {{.*}} {label_smoothing = 1.000000e-01 : f32}
  %loss = cnn.softmax_cross_entropy %logits, %labels {label_smoothing = 0.1 : f32} : (tensor<2x10xf32>, tensor<2xi32>) -> tensor<f32>
  // CHECK: cnn.dropout_mask
  %mask = cnn.dropout_mask %step {ratio = 0.2 : f32, seed = 7} : (tensor<f32>) -> tensor<2x10xf32>
  // CHECK: cnn.constant dense<1.000000e+00> : tensor<f32>
  %one = cnn.constant dense<1.0> : tensor<f32>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func @backward_ops
func.func @backward_ops(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %dy: tensor<2x4x4x4xf32>,
                        %p: tensor<2x4x8x8xf32>, %dp: tensor<2x4x4x4xf32>, %s: tensor<4xf32>,
                        %logits: tensor<2x10xf32>, %labels: tensor<2xi64>, %one: tensor<f32>) {
  // CHECK: cnn.conv2d_bwd_data {{.*}} -> tensor<2x3x8x8xf32>
  %dx = cnn.conv2d_bwd_data %dy, %w {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x4x4x4xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x8x8xf32>
  // CHECK: cnn.conv2d_bwd_filter {{.*}} -> tensor<4x3x3x3xf32>
  %dw = cnn.conv2d_bwd_filter %x, %dy {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x3x8x8xf32>, tensor<2x4x4x4xf32>) -> tensor<4x3x3x3xf32>
  // CHECK: cnn.bias_grad {{.*}} -> tensor<4xf32>
  %db = cnn.bias_grad %dy : (tensor<2x4x4x4xf32>) -> tensor<4xf32>
  // CHECK: cnn.relu_grad
  %dr = cnn.relu_grad %dy, %dy : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: cnn.clip_grad
  %dc = cnn.clip_grad %dy, %dy {min = 0.0 : f32, max = 6.0 : f32} : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: cnn.max_pool2d_grad
  %dm = cnn.max_pool2d_grad %dp, %p {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, ceil_mode = false} : (tensor<2x4x4x4xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: cnn.avg_pool2d_grad
  %da = cnn.avg_pool2d_grad %dp {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, ceil_mode = false, count_include_pad = false} : (tensor<2x4x4x4xf32>) -> tensor<2x4x8x8xf32>
  %g = cnn.global_avg_pool %p : (tensor<2x4x8x8xf32>) -> tensor<2x4x1x1xf32>
  // CHECK: cnn.global_avg_pool_grad
  %dg = cnn.global_avg_pool_grad %g : (tensor<2x4x1x1xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: cnn.batch_norm_grad
  %gx, %gs, %gb = cnn.batch_norm_grad %p, %p, %s, %s, %s : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>)
  // CHECK: cnn.softmax_cross_entropy_grad
  %dl = cnn.softmax_cross_entropy_grad %logits, %labels, %one : (tensor<2x10xf32>, tensor<2xi64>, tensor<f32>) -> tensor<2x10xf32>
  // CHECK: cnn.sgd_update
  %np, %nb = cnn.sgd_update %s, %s, %s, %one, %one {momentum = 0.9 : f32, dampening = 0.0 : f32, weight_decay = 0.0 : f32, nesterov = false} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
  // CHECK: cnn.adam_update
  %ap, %am, %av = cnn.adam_update %s, %s, %s, %s, %one, %one {beta1 = 0.9 : f32, beta2 = 0.999 : f32, epsilon = 1.0e-8 : f32, weight_decay = 0.01 : f32, decoupled = true} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// NHWC: activations N x H x W x C, filters K x R x S x C/groups (KRSC); the
// default layout NCHW is not printed.
// CHECK-LABEL: func @nhwc_ops
func.func @nhwc_ops(%x: tensor<2x8x8x3xf32>, %w: tensor<4x3x3x3xf32>, %dy: tensor<2x4x4x4xf32>,
                    %p: tensor<2x8x8x4xf32>, %dp: tensor<2x4x4x4xf32>, %s: tensor<4xf32>,
                    %xc: tensor<2x3x8x8xf32>, %wc: tensor<4x3x3x3xf32>) {
  // CHECK: cnn.conv2d {{.*}}layout = #cnn.layout<NHWC>{{.*}} -> tensor<2x4x4x4xf32>
  %y = cnn.conv2d %x, %w {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x3xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: cnn.conv2d %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} :
  %yc = cnn.conv2d %xc, %wc {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NCHW>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: cnn.conv2d_bwd_data {{.*}}layout = #cnn.layout<NHWC>{{.*}} -> tensor<2x8x8x3xf32>
  %dx = cnn.conv2d_bwd_data %dy, %w {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NHWC>} : (tensor<2x4x4x4xf32>, tensor<4x3x3x3xf32>) -> tensor<2x8x8x3xf32>
  // CHECK: cnn.conv2d_bwd_filter {{.*}}layout = #cnn.layout<NHWC>{{.*}} -> tensor<4x3x3x3xf32>
  %dw = cnn.conv2d_bwd_filter %x, %dy {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x3xf32>, tensor<2x4x4x4xf32>) -> tensor<4x3x3x3xf32>
  // CHECK: cnn.bias_add {{.*}}layout = #cnn.layout<NHWC>
  %b = cnn.bias_add %p, %s {layout = #cnn.layout<NHWC>} : (tensor<2x8x8x4xf32>, tensor<4xf32>) -> tensor<2x8x8x4xf32>
  // CHECK: cnn.bias_grad {{.*}}layout = #cnn.layout<NHWC>{{.*}} -> tensor<4xf32>
  %db = cnn.bias_grad %p {layout = #cnn.layout<NHWC>} : (tensor<2x8x8x4xf32>) -> tensor<4xf32>
  // CHECK: cnn.batch_norm {{.*}}layout = #cnn.layout<NHWC>
  %n = cnn.batch_norm %p, %s, %s, %s, %s {epsilon = 1.0e-5 : f32, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x8x8x4xf32>
  // CHECK: cnn.batch_norm_train {{.*}}layout = #cnn.layout<NHWC>
  %t:5 = cnn.batch_norm_train %p, %s, %s, %s, %s {epsilon = 1.0e-5 : f32, momentum = 0.1 : f32, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x8x8x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  // CHECK: cnn.batch_norm_grad {{.*}}layout = #cnn.layout<NHWC>
  %gx, %gs, %gb = cnn.batch_norm_grad %p, %p, %s, %s, %s {layout = #cnn.layout<NHWC>} : (tensor<2x8x8x4xf32>, tensor<2x8x8x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x8x8x4xf32>, tensor<4xf32>, tensor<4xf32>)
  // CHECK: cnn.max_pool2d {{.*}}layout = #cnn.layout<NHWC>{{.*}} -> tensor<2x4x4x4xf32>
  %m = cnn.max_pool2d %p {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, ceil_mode = false, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: cnn.max_pool2d_grad {{.*}}layout = #cnn.layout<NHWC>
  %dm = cnn.max_pool2d_grad %dp, %p {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, ceil_mode = false, layout = #cnn.layout<NHWC>} : (tensor<2x4x4x4xf32>, tensor<2x8x8x4xf32>) -> tensor<2x8x8x4xf32>
  // CHECK: cnn.avg_pool2d {{.*}}layout = #cnn.layout<NHWC>{{.*}} -> tensor<2x3x3x4xf32>
  %a = cnn.avg_pool2d %p {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, ceil_mode = false, count_include_pad = true, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x4xf32>) -> tensor<2x3x3x4xf32>
  // CHECK: cnn.avg_pool2d_grad {{.*}}layout = #cnn.layout<NHWC>
  %da = cnn.avg_pool2d_grad %dp {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, ceil_mode = false, count_include_pad = false, layout = #cnn.layout<NHWC>} : (tensor<2x4x4x4xf32>) -> tensor<2x8x8x4xf32>
  // CHECK: cnn.global_avg_pool {{.*}}layout = #cnn.layout<NHWC>{{.*}} -> tensor<2x1x1x4xf32>
  %g = cnn.global_avg_pool %p {layout = #cnn.layout<NHWC>} : (tensor<2x8x8x4xf32>) -> tensor<2x1x1x4xf32>
  // CHECK: cnn.global_avg_pool_grad {{.*}}layout = #cnn.layout<NHWC>{{.*}} -> tensor<2x8x8x4xf32>
  %dg = cnn.global_avg_pool_grad %g {layout = #cnn.layout<NHWC>} : (tensor<2x1x1x4xf32>) -> tensor<2x8x8x4xf32>
  return
}

// -----

// CHECK-LABEL: func @activations
func.func @activations(%x: tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16> {
  // CHECK: cnn.sigmoid
  %0 = cnn.sigmoid %x : (tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  // CHECK: cnn.hard_sigmoid {{.*}}alpha = 0.166666672 : f32, beta = 5.000000e-01 : f32
  %1 = cnn.hard_sigmoid %0 {alpha = 0.166666672 : f32, beta = 0.5 : f32} : (tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  // CHECK: cnn.hard_swish
  %2 = cnn.hard_swish %1 : (tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  // CHECK: cnn.silu
  %sl = cnn.silu %2 : (tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  // CHECK: cnn.mish
  %s = cnn.mish %sl : (tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  // CHECK: cnn.leaky_relu {{.*}}alpha = 0.00999999977
  %3 = cnn.leaky_relu %s {alpha = 0.01 : f32} : (tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  // CHECK: cnn.gelu {{.*}}approximate = "tanh"
  %4 = cnn.gelu %3 {approximate = "tanh"} : (tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  // CHECK: cnn.tanh
  %5 = cnn.tanh %4 : (tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  // CHECK: cnn.erf
  %6 = cnn.erf %5 : (tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  // CHECK: cnn.pow {{.*}}exponent = 2.000000e+00
  %7 = cnn.pow %6 {exponent = 2.0 : f32} : (tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  // CHECK: cnn.abs
  %8 = cnn.abs %7 : (tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  // CHECK: cnn.elu {{.*}}alpha = 1.000000e+00 : f32
  %9 = cnn.elu %8 {alpha = 1.0 : f32} : (tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  // CHECK: cnn.selu {{.*}}alpha = 1.67326319 : f32, gamma = 1.05070102 : f32
  %10 = cnn.selu %9 {alpha = 1.67326319 : f32, gamma = 1.05070102 : f32} : (tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  // CHECK: cnn.celu {{.*}}alpha = 5.000000e-01 : f32
  %11 = cnn.celu %10 {alpha = 0.5 : f32} : (tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  // CHECK: cnn.softplus
  %12 = cnn.softplus %11 : (tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  // CHECK: cnn.log
  %13 = cnn.log %12 : (tensor<2x8x4x4xf16>) -> tensor<2x8x4x4xf16>
  return %13 : tensor<2x8x4x4xf16>
}

// -----

// Squeeze-excitation: a per-(sample, channel) scale broadcast over H and W.
// CHECK-LABEL: func @broadcast
func.func @broadcast(%x: tensor<2x8x4x4xf32>, %s: tensor<2x8x1x1xf32>) -> tensor<2x8x1x1xf32> {
  // CHECK: cnn.mul {{.*}} : (tensor<2x8x4x4xf32>, tensor<2x8x1x1xf32>) -> tensor<2x8x4x4xf32>
  %0 = cnn.mul %x, %s : (tensor<2x8x4x4xf32>, tensor<2x8x1x1xf32>) -> tensor<2x8x4x4xf32>
  // CHECK: cnn.reduce_sum {{.*}}axes = array<i64: 2, 3>
  %1 = cnn.reduce_sum %0 {axes = array<i64: 2, 3>} : (tensor<2x8x4x4xf32>) -> tensor<2x8x1x1xf32>
  // CHECK: cnn.div
  %2 = cnn.div %1, %s : (tensor<2x8x1x1xf32>, tensor<2x8x1x1xf32>) -> tensor<2x8x1x1xf32>
  // CHECK: cnn.pow_tensor {{.*}} : (tensor<2x8x1x1xf32>, tensor<2x8x1x1xf32>) -> tensor<2x8x1x1xf32>
  %3 = cnn.pow_tensor %2, %s : (tensor<2x8x1x1xf32>, tensor<2x8x1x1xf32>) -> tensor<2x8x1x1xf32>
  // CHECK: cnn.reduce_max {{.*}}axes = array<i64: 1>
  %4 = cnn.reduce_max %3 {axes = array<i64: 1>} : (tensor<2x8x1x1xf32>) -> tensor<2x1x1x1xf32>
  // CHECK: cnn.prelu {{.*}} : (tensor<2x8x4x4xf32>, tensor<1x8x1x1xf32>) -> tensor<2x8x4x4xf32>
  %slope = cnn.constant dense<0.25> : tensor<1x8x1x1xf32>
  %5 = cnn.prelu %x, %slope : (tensor<2x8x4x4xf32>, tensor<1x8x1x1xf32>) -> tensor<2x8x4x4xf32>
  // CHECK: cnn.maximum {{.*}} : (tensor<2x8x4x4xf32>, tensor<2x8x1x1xf32>) -> tensor<2x8x4x4xf32>
  %6 = cnn.maximum %5, %s : (tensor<2x8x4x4xf32>, tensor<2x8x1x1xf32>) -> tensor<2x8x4x4xf32>
  // CHECK: cnn.minimum {{.*}} : (tensor<2x8x1x1xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  %7 = cnn.minimum %s, %6 : (tensor<2x8x1x1xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  return %2 : tensor<2x8x1x1xf32>
}

// -----

// A batched product: one matmul per index of the leading dimensions.
// CHECK-LABEL: func @batched_matmul
func.func @batched_matmul(%a: tensor<2x3x4x5xf32>, %b: tensor<2x3x6x5xf32>) -> tensor<2x3x4x6xf32> {
  // CHECK: cnn.matmul {{.*}} -> tensor<2x3x4x6xf32>
  %0 = cnn.matmul %a, %b {transpose_rhs = true} : (tensor<2x3x4x5xf32>, tensor<2x3x6x5xf32>) -> tensor<2x3x4x6xf32>
  return %0 : tensor<2x3x4x6xf32>
}

// The f16 step's gradients go to the optimizer as they are (cnn-precision):
// an f16 grad for an f32 parameter of the same shape.
// CHECK-LABEL: func @f16_grad_update
// CHECK: cnn.sgd_update %{{.*}}, %{{.*}} {{.*}} : (tensor<4xf32>, tensor<4xf16>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
// CHECK: cnn.adam_update %{{.*}}, %{{.*}} {{.*}} : (tensor<4xf32>, tensor<4xf16>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
func.func @f16_grad_update(%p: tensor<4xf32>, %g: tensor<4xf16>, %s: tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %np, %nb = cnn.sgd_update %p, %g, %p, %s, %s {momentum = 0.9 : f32, dampening = 0.0 : f32, weight_decay = 0.0 : f32, nesterov = false} : (tensor<4xf32>, tensor<4xf16>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
  %ap, %am, %av = cnn.adam_update %np, %g, %nb, %nb, %s, %s {beta1 = 0.9 : f32, beta2 = 0.999 : f32, epsilon = 1.0e-8 : f32, weight_decay = 0.0 : f32, decoupled = false} : (tensor<4xf32>, tensor<4xf16>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return %ap, %am : tensor<4xf32>, tensor<4xf32>
}

// Per-pixel labels (N x H x W) read in row order by the loss of the logits
// flattened to (N*H*W) x C; ignore_index defaults to -100 (not printed).
// CHECK-LABEL: func @dense_cross_entropy
func.func @dense_cross_entropy(%logits: tensor<8x5xf32>, %labels: tensor<2x2x2xi32>, %g: tensor<f32>) -> (tensor<f32>, tensor<8x5xf32>, tensor<f32>) {
  // CHECK: cnn.softmax_cross_entropy %{{.*}}, %{{.*}} {ignore_index = 255 : i64, label_smoothing = 1.000000e-01 : f32} : (tensor<8x5xf32>, tensor<2x2x2xi32>) -> tensor<f32>
  %loss = cnn.softmax_cross_entropy %logits, %labels {ignore_index = 255, label_smoothing = 0.1 : f32} : (tensor<8x5xf32>, tensor<2x2x2xi32>) -> tensor<f32>
  // CHECK: cnn.softmax_cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} {ignore_index = 255 : i64}
  %dl = cnn.softmax_cross_entropy_grad %logits, %labels, %g {ignore_index = 255} : (tensor<8x5xf32>, tensor<2x2x2xi32>, tensor<f32>) -> tensor<8x5xf32>
  // CHECK: cnn.softmax_cross_entropy %{{.*}}, %{{.*}} : (tensor<8x5xf32>, tensor<2x2x2xi32>) -> tensor<f32>
  %plain = cnn.softmax_cross_entropy %logits, %labels : (tensor<8x5xf32>, tensor<2x2x2xi32>) -> tensor<f32>
  return %loss, %dl, %plain : tensor<f32>, tensor<8x5xf32>, tensor<f32>
}
