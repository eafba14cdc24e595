// RUN: cnnc-opt %s --cnn-layout -split-input-file | FileCheck %s
// The pass is idempotent: a second run changes nothing.
// RUN: cnnc-opt %s --cnn-layout --cnn-layout -split-input-file | FileCheck %s

// conv -> bias -> relu -> pool -> BN -> conv stays NHWC in between: one
// transpose of the image, one per filter, none between the ops.
// CHECK-LABEL: func @chain
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x8x8xf32>, %[[W1:.*]]: tensor<4x3x3x3xf32>, %[[B:.*]]: tensor<4xf32>, %[[S:.*]]: tensor<4xf32>, %[[W2:.*]]: tensor<6x4x3x3xf32>)
// CHECK-DAG: %[[XT:.*]] = cnn.transpose %[[X]] {permutation = array<i64: 0, 2, 3, 1>} : (tensor<2x3x8x8xf32>) -> tensor<2x8x8x3xf32>
// CHECK-DAG: %[[W1T:.*]] = cnn.transpose %[[W1]] {permutation = array<i64: 0, 2, 3, 1>} : (tensor<4x3x3x3xf32>) -> tensor<4x3x3x3xf32>
// CHECK: %[[C:.*]] = cnn.conv2d %[[XT]], %[[W1T]] {{.*}}layout = #cnn.layout<NHWC>{{.*}} -> tensor<2x8x8x4xf32>
// CHECK-NEXT: %[[BA:.*]] = cnn.bias_add %[[C]], %[[B]] {layout = #cnn.layout<NHWC>} : (tensor<2x8x8x4xf32>, tensor<4xf32>) -> tensor<2x8x8x4xf32>
// CHECK-NEXT: %[[R:.*]] = cnn.relu %[[BA]] : (tensor<2x8x8x4xf32>) -> tensor<2x8x8x4xf32>
// CHECK-NEXT: %[[P:.*]] = cnn.max_pool2d %[[R]] {{.*}}layout = #cnn.layout<NHWC>{{.*}} -> tensor<2x4x4x4xf32>
// CHECK-NEXT: %[[N:.*]] = cnn.batch_norm %[[P]], %[[S]], %[[S]], %[[S]], %[[S]] {{.*}}layout = #cnn.layout<NHWC>
// CHECK-NOT: cnn.transpose %[[N]]
// CHECK: %[[W2T:.*]] = cnn.transpose %[[W2]] {permutation = array<i64: 0, 2, 3, 1>} : (tensor<6x4x3x3xf32>) -> tensor<6x3x3x4xf32>
// CHECK-NEXT: %[[C2:.*]] = cnn.conv2d %[[N]], %[[W2T]] {{.*}}layout = #cnn.layout<NHWC>{{.*}} -> tensor<2x4x4x6xf32>
// The result leaves NCHW, as the function's type says.
// CHECK-NEXT: %[[OUT:.*]] = cnn.transpose %[[C2]] {permutation = array<i64: 0, 3, 1, 2>} : (tensor<2x4x4x6xf32>) -> tensor<2x6x4x4xf32>
// CHECK-NEXT: return %[[OUT]]
func.func @chain(%x: tensor<2x3x8x8xf32>, %w1: tensor<4x3x3x3xf32>, %b: tensor<4xf32>, %s: tensor<4xf32>, %w2: tensor<6x4x3x3xf32>) -> tensor<2x6x4x4xf32> {
  %c = cnn.conv2d %x, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %cb = cnn.bias_add %c, %b : (tensor<2x4x8x8xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  %r = cnn.relu %cb : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %p = cnn.max_pool2d %r {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, ceil_mode = false} : (tensor<2x4x8x8xf32>) -> tensor<2x4x4x4xf32>
  %n = cnn.batch_norm %p, %s, %s, %s, %s {epsilon = 1.0e-5 : f32} : (tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x4x4xf32>
  %c2 = cnn.conv2d %n, %w2 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x4x4x4xf32>, tensor<6x4x3x3xf32>) -> tensor<2x6x4x4xf32>
  return %c2 : tensor<2x6x4x4xf32>
}

// -----

// Flatten of spatial NHWC data: PyTorch flattens in NCHW order, so the
// transpose back to NCHW stays in front of the flatten. The 2-D bias_add of
// the linear layer is left alone.
// CHECK-LABEL: func @flatten_spatial
// CHECK: %[[P:.*]] = cnn.max_pool2d {{.*}}layout = #cnn.layout<NHWC>{{.*}} -> tensor<2x2x2x4xf32>
// CHECK-NEXT: %[[T:.*]] = cnn.transpose %[[P]] {permutation = array<i64: 0, 3, 1, 2>} : (tensor<2x2x2x4xf32>) -> tensor<2x4x2x2xf32>
// CHECK-NEXT: %[[F:.*]] = cnn.flatten %[[T]] {axis = 1 : i64} : (tensor<2x4x2x2xf32>) -> tensor<2x16xf32>
// CHECK-NEXT: %[[M:.*]] = cnn.matmul %[[F]]
// CHECK-NEXT: cnn.bias_add %[[M]], %{{.*}} : (tensor<2x10xf32>, tensor<10xf32>)
func.func @flatten_spatial(%x: tensor<2x3x4x4xf32>, %w: tensor<4x3x3x3xf32>, %wf: tensor<10x16xf32>, %bf: tensor<10xf32>) -> tensor<2x10xf32> {
  %c = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x3x4x4xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x4x4xf32>
  %p = cnn.max_pool2d %c {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, ceil_mode = false} : (tensor<2x4x4x4xf32>) -> tensor<2x4x2x2xf32>
  %f = cnn.flatten %p {axis = 1} : (tensor<2x4x2x2xf32>) -> tensor<2x16xf32>
  %y = cnn.matmul %f, %wf {transpose_rhs = true} : (tensor<2x16xf32>, tensor<10x16xf32>) -> tensor<2x10xf32>
  %yb = cnn.bias_add %y, %bf : (tensor<2x10xf32>, tensor<10xf32>) -> tensor<2x10xf32>
  return %yb : tensor<2x10xf32>
}

// -----

// global_avg_pool -> flatten: N x 1 x 1 x C is already in NCHW order, so the
// transpose is a reshape and no data moves. A 1x1 filter's transpose is a
// reshape too.
// CHECK-LABEL: func @global_pool_flatten
// CHECK-NOT: cnn.transpose %{{.*}} {permutation = array<i64: 0, 3, 1, 2>}
// CHECK: %[[WR:.*]] = cnn.reshape %{{.*}} : (tensor<8x3x1x1xf32>) -> tensor<8x1x1x3xf32>
// CHECK: cnn.conv2d %{{.*}}, %[[WR]]
// CHECK: %[[G:.*]] = cnn.global_avg_pool %{{.*}} {layout = #cnn.layout<NHWC>} : (tensor<2x4x4x8xf32>) -> tensor<2x1x1x8xf32>
// CHECK-NEXT: %[[F:.*]] = cnn.reshape %[[G]] : (tensor<2x1x1x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: return %[[F]]
func.func @global_pool_flatten(%x: tensor<2x3x4x4xf32>, %w: tensor<8x3x1x1xf32>) -> tensor<2x8xf32> {
  %c = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x3x4x4xf32>, tensor<8x3x1x1xf32>) -> tensor<2x8x4x4xf32>
  %g = cnn.global_avg_pool %c : (tensor<2x8x4x4xf32>) -> tensor<2x8x1x1xf32>
  %f = cnn.flatten %g {axis = 1} : (tensor<2x8x1x1xf32>) -> tensor<2x8xf32>
  return %f : tensor<2x8xf32>
}

// -----

// A transpose pair in the input cancels, and a residual add of two NHWC
// values (and the concat of squeezenet) runs on NHWC data.
// CHECK-LABEL: func @pair_and_residual
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x4x4xf32>
// CHECK: %[[XT:.*]] = cnn.transpose %[[X]] {permutation = array<i64: 0, 2, 3, 1>}
// CHECK-NOT: {permutation = array<i64: 0, 3, 1, 2>}
// CHECK: %[[C:.*]] = cnn.conv2d %[[XT]]
// CHECK-NEXT: %[[A:.*]] = cnn.add %[[C]], %[[XT]] : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
// CHECK-NEXT: %[[K:.*]] = cnn.concat %[[A]], %[[C]] {axis = 3 : i64} : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x8xf32>
// CHECK-NEXT: %[[P:.*]] = cnn.avg_pool2d %[[K]] {{.*}}layout = #cnn.layout<NHWC>{{.*}} -> tensor<2x2x2x8xf32>
// CHECK-NEXT: %[[O:.*]] = cnn.transpose %[[P]] {permutation = array<i64: 0, 3, 1, 2>} : (tensor<2x2x2x8xf32>) -> tensor<2x8x2x2xf32>
// CHECK-NEXT: return %[[O]]
func.func @pair_and_residual(%x: tensor<2x4x4x4xf32>, %w: tensor<4x4x3x3xf32>) -> tensor<2x8x2x2xf32> {
  %t = cnn.transpose %x {permutation = array<i64: 0, 2, 3, 1>} : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %u = cnn.transpose %t {permutation = array<i64: 0, 3, 1, 2>} : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %c = cnn.conv2d %u, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x4x4x4xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x4x4xf32>
  %a = cnn.add %c, %x : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %k = cnn.concat %a, %c {axis = 1} : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x8x4x4xf32>
  %p = cnn.avg_pool2d %k {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, ceil_mode = false, count_include_pad = false} : (tensor<2x8x4x4xf32>) -> tensor<2x8x2x2xf32>
  return %p : tensor<2x8x2x2xf32>
}

// -----

// Training: the filter keeps FCHW in the arguments and the optimizer; its
// KRSC transpose is shared by conv2d and conv2d_bwd_data, and the filter
// gradient goes back to FCHW before sgd_update. BN and bias gradients
// (1-D) feed the optimizer directly.
// CHECK-LABEL: func @train_step
// CHECK-SAME: %[[W:[a-z0-9]*]]: tensor<4x3x3x3xf32> {cnn.param = "conv.weight"}
// CHECK: %[[WT:.*]] = cnn.transpose %[[W]] {permutation = array<i64: 0, 2, 3, 1>} : (tensor<4x3x3x3xf32>) -> tensor<4x3x3x3xf32>
// CHECK-NOT: cnn.transpose %[[W]]
// CHECK: cnn.conv2d %{{.*}}, %[[WT]] {{.*}}layout = #cnn.layout<NHWC>
// CHECK: cnn.batch_norm_train {{.*}}layout = #cnn.layout<NHWC>
// The incoming NCHW gradient argument is transposed once; relu_grad runs NHWC.
// CHECK: %[[DY:.*]] = cnn.transpose %{{.*}} {permutation = array<i64: 0, 2, 3, 1>} : (tensor<2x4x8x8xf32>) -> tensor<2x8x8x4xf32>
// CHECK-NEXT: cnn.relu_grad %[[DY]], {{.*}} : (tensor<2x8x8x4xf32>, tensor<2x8x8x4xf32>) -> tensor<2x8x8x4xf32>
// CHECK-NEXT: cnn.batch_norm_grad {{.*}}layout = #cnn.layout<NHWC>
// CHECK: %[[DW:.*]] = cnn.conv2d_bwd_filter {{.*}}layout = #cnn.layout<NHWC>{{.*}} -> tensor<4x3x3x3xf32>
// CHECK-NEXT: %[[DWT:.*]] = cnn.transpose %[[DW]] {permutation = array<i64: 0, 3, 1, 2>}
// CHECK: cnn.conv2d_bwd_data %{{.*}}, %[[WT]] {{.*}}layout = #cnn.layout<NHWC>
// CHECK: cnn.sgd_update %[[W]], %[[DWT]]
func.func @train_step(%x: tensor<2x3x8x8xf32> {cnn.input}, %w: tensor<4x3x3x3xf32> {cnn.param = "conv.weight"},
                      %s: tensor<4xf32>, %lr: tensor<f32>, %step: tensor<f32>, %dy: tensor<2x4x8x8xf32>) -> (tensor<4x3x3x3xf32>, tensor<2x3x8x8xf32>, tensor<4xf32>) {
  %c = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %y, %m, %v, %rm, %rv = cnn.batch_norm_train %c, %s, %s, %s, %s {epsilon = 1.0e-5 : f32, momentum = 0.1 : f32} : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  %r = cnn.relu %y : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %dr = cnn.relu_grad %dy, %r : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %gx, %gs, %gb = cnn.batch_norm_grad %dr, %c, %s, %m, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>)
  %dw = cnn.conv2d_bwd_filter %x, %gx {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x3x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<4x3x3x3xf32>
  %dx = cnn.conv2d_bwd_data %gx, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x4x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x8x8xf32>
  %np, %nb = cnn.sgd_update %w, %dw, %w, %lr, %step {momentum = 0.9 : f32, dampening = 0.0 : f32, weight_decay = 0.0 : f32, nesterov = false} : (tensor<4x3x3x3xf32>, tensor<4x3x3x3xf32>, tensor<4x3x3x3xf32>, tensor<f32>, tensor<f32>) -> (tensor<4x3x3x3xf32>, tensor<4x3x3x3xf32>)
  return %np, %dx, %gs : tensor<4x3x3x3xf32>, tensor<2x3x8x8xf32>, tensor<4xf32>
}

// -----

// Ops without 4-D operands keep NCHW: BatchNorm1d and a linear bias.
// CHECK-LABEL: func @rank2
// CHECK-NOT: layout
// CHECK-NOT: cnn.transpose
func.func @rank2(%x: tensor<2x8xf32>, %s: tensor<8xf32>) -> tensor<2x8xf32> {
  %n = cnn.batch_norm %x, %s, %s, %s, %s {epsilon = 1.0e-5 : f32} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %b = cnn.bias_add %n, %s : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %b : tensor<2x8xf32>
}

// -----

// Fused ops carry a layout too (cnn-fuse may run first): fused_elementwise
// keeps its body and indexes the per-channel bias by the NHWC channel.
// CHECK-LABEL: func @fused
// CHECK: %[[C:.*]] = cnn.conv2d {{.*}}layout = #cnn.layout<NHWC>
// CHECK-NEXT: %[[F:.*]] = cnn.fused_elementwise %[[C]], %{{.*}} {broadcast = array<i64: 0, 1>, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x4xf32>, tensor<4xf32>) -> tensor<2x8x8x4xf32> {
// CHECK-NEXT: ^bb0(%[[A0:.*]]: f32, %[[A1:.*]]: f32):
// CHECK-NEXT: arith.addf %[[A0]], %[[A1]] : f32
// CHECK: cnn.transpose %[[F]] {permutation = array<i64: 0, 3, 1, 2>}
func.func @fused(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>) -> tensor<2x4x8x8xf32> {
  %c = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %y = cnn.fused_elementwise %c, %b {broadcast = array<i64: 0, 1>} : (tensor<2x4x8x8xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32> {
  ^bb0(%a0: f32, %a1: f32):
    %s = arith.addf %a0, %a1 : f32
    cnn.yield %s : f32
  }
  return %y : tensor<2x4x8x8xf32>
}

// -----

// A fused_elementwise without per-channel inputs (numpy broadcast, kind 3;
// scalar, kind 2) does not depend on the layout: on tensors that are not
// NCHW activations (ConvNeXt's LayerNorm on N x H x W x C) it stays as it is,
// with no transposes; after an NHWC conv the conv's transpose moves past it
// (the scalar operand is not permuted).
// CHECK-LABEL: func @channel_free
// CHECK-NOT: cnn.transpose
// CHECK: %[[D:.*]] = cnn.fused_elementwise %arg0, %arg1 {broadcast = array<i64: 0, 3>} : (tensor<2x4x4x8xf32>, tensor<2x4x4x1xf32>) -> tensor<2x4x4x8xf32>
// CHECK-NOT: cnn.transpose
// CHECK: return %[[D]]
func.func @channel_free(%x: tensor<2x4x4x8xf32>, %r: tensor<2x4x4x1xf32>) -> tensor<2x4x4x8xf32> {
  %y = cnn.fused_elementwise %x, %r {broadcast = array<i64: 0, 3>} : (tensor<2x4x4x8xf32>, tensor<2x4x4x1xf32>) -> tensor<2x4x4x8xf32> {
  ^bb0(%a0: f32, %a1: f32):
    %s = arith.divf %a0, %a1 : f32
    cnn.yield %s : f32
  }
  return %y : tensor<2x4x4x8xf32>
}

// CHECK-LABEL: func @channel_free_after_conv
// CHECK: %[[C:.*]] = cnn.conv2d {{.*}}layout = #cnn.layout<NHWC>{{.*}} -> tensor<2x8x8x4xf32>
// CHECK-NEXT: %[[F:.*]] = cnn.fused_elementwise %[[C]], %arg2 {broadcast = array<i64: 0, 2>} : (tensor<2x8x8x4xf32>, tensor<1xf32>) -> tensor<2x8x8x4xf32>
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.mulf
// CHECK-NEXT: cnn.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[T:.*]] = cnn.transpose %[[F]] {permutation = array<i64: 0, 3, 1, 2>}
// CHECK-NEXT: return %[[T]]
func.func @channel_free_after_conv(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %k: tensor<1xf32>) -> tensor<2x4x8x8xf32> {
  %c = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %y = cnn.fused_elementwise %c, %k {broadcast = array<i64: 0, 2>} : (tensor<2x4x8x8xf32>, tensor<1xf32>) -> tensor<2x4x8x8xf32> {
  ^bb0(%a0: f32, %a1: f32):
    %s = arith.mulf %a0, %a1 : f32
    cnn.yield %s : f32
  }
  return %y : tensor<2x4x8x8xf32>
}

// -----

// A softmax over the channels of a convolution's output (split attention,
// selective kernels) runs on the NHWC data over its last dimension: no
// transpose in front of it, the one back to NCHW after it.
// CHECK-LABEL: func @softmax_channels
// CHECK: %[[C:.*]] = cnn.conv2d {{.*}}layout = #cnn.layout<NHWC>{{.*}} -> tensor<2x4x4x6xf32>
// CHECK-NEXT: %[[S:.*]] = cnn.softmax %[[C]] {axis = 3 : i64} : (tensor<2x4x4x6xf32>) -> tensor<2x4x4x6xf32>
// CHECK-NEXT: %[[H:.*]] = cnn.softmax %[[S]] {axis = 1 : i64} : (tensor<2x4x4x6xf32>) -> tensor<2x4x4x6xf32>
// CHECK-NEXT: %[[OUT:.*]] = cnn.transpose %[[H]] {permutation = array<i64: 0, 3, 1, 2>} : (tensor<2x4x4x6xf32>) -> tensor<2x6x4x4xf32>
// CHECK-NEXT: return %[[OUT]]
func.func @softmax_channels(%x: tensor<2x3x4x4xf32>, %w: tensor<6x3x3x3xf32>) -> tensor<2x6x4x4xf32> {
  %c = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x3x4x4xf32>, tensor<6x3x3x3xf32>) -> tensor<2x6x4x4xf32>
  %s = cnn.softmax %c {axis = 1 : i64} : (tensor<2x6x4x4xf32>) -> tensor<2x6x4x4xf32>
  %h = cnn.softmax %s {axis = 2 : i64} : (tensor<2x6x4x4xf32>) -> tensor<2x6x4x4xf32>
  return %h : tensor<2x6x4x4xf32>
}

// -----

// Pipeline transfers carry their 4-D tensors in NHWC: every stage is
// compiled on its own and both ends of a cut apply this rule, so no
// transpose stands between a transfer and the NHWC ops beside it (a cut
// between ResNet-50's blocks had four 51 MB transposes per micro-batch).
// The converted transfer is marked, so a second run leaves it alone; a
// transfer of a 2-D tensor is not touched.
// CHECK-LABEL: func @stage_transfers
// CHECK: %[[R:.*]] = cnn.recv {cnn.transfer_layout = #cnn.layout<NHWC>, peer = 0 : i64, tag = 0 : i64} : tensor<2x8x8x4xf32>
// CHECK-NOT: cnn.transpose %[[R]]
// CHECK: %[[C:.*]] = cnn.conv2d %[[R]], %{{.*}} {{.*}}layout = #cnn.layout<NHWC>{{.*}} -> tensor<2x8x8x6xf32>
// CHECK-NEXT: %[[A:.*]] = cnn.relu %[[C]] : (tensor<2x8x8x6xf32>) -> tensor<2x8x8x6xf32>
// CHECK-NEXT: cnn.send %[[A]] {cnn.transfer_layout = #cnn.layout<NHWC>, peer = 2 : i64, tag = 1 : i64} : tensor<2x8x8x6xf32>
// CHECK-NEXT: cnn.send %{{.*}} {peer = 2 : i64, tag = 2 : i64} : tensor<2x10xf32>
// CHECK-NEXT: %[[G:.*]] = cnn.transfers %[[A]] {cnn.transfer_layout = #cnn.layout<NHWC>{{.*}}} : (tensor<2x8x8x6xf32>) -> tensor<2x8x8x6xf32>
// CHECK-NEXT: %[[S:.*]] = cnn.add %[[G]], %[[A]] : (tensor<2x8x8x6xf32>, tensor<2x8x8x6xf32>) -> tensor<2x8x8x6xf32>
// CHECK-NEXT: %[[OUT:.*]] = cnn.transpose %[[S]] {permutation = array<i64: 0, 3, 1, 2>}
// CHECK-NEXT: return %[[OUT]]
func.func @stage_transfers(%w: tensor<6x4x3x3xf32>, %v: tensor<2x10xf32>) -> tensor<2x6x8x8xf32> attributes {cnn.pipeline_stage = 1 : i64} {
  %r = cnn.recv {peer = 0 : i64, tag = 0 : i64} : tensor<2x4x8x8xf32>
  %c = cnn.conv2d %r, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<2x6x8x8xf32>
  %a = cnn.relu %c : (tensor<2x6x8x8xf32>) -> tensor<2x6x8x8xf32>
  cnn.send %a {peer = 2 : i64, tag = 1 : i64} : tensor<2x6x8x8xf32>
  cnn.send %v {peer = 2 : i64, tag = 2 : i64} : tensor<2x10xf32>
  %g = cnn.transfers %a {send_peers = array<i64: 2>, send_tags = array<i64: 3>, recv_peers = array<i64: 2>, recv_tags = array<i64: 4>} : (tensor<2x6x8x8xf32>) -> tensor<2x6x8x8xf32>
  %s = cnn.add %g, %a : (tensor<2x6x8x8xf32>, tensor<2x6x8x8xf32>) -> tensor<2x6x8x8xf32>
  return %s : tensor<2x6x8x8xf32>
}
