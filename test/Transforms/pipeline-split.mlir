// RUN: cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=2 micro-batches=4 link-gbps=0 launch-us=0 launch-us=0" -cnn-pipeline-split | FileCheck %s
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=2 micro-batches=4 link-gbps=0 launch-us=0 launch-us=0" -cnn-pipeline-split="sends-first=false" | FileCheck %s --check-prefix=AUTODIFF-ORDER
// RUN: not cnnc-opt %s -cnn-pipeline-split 2>&1 | FileCheck %s --check-prefix=NOPLAN

func.func @forward(%x: tensor<2x3x8x8xf32> {cnn.input},
                   %w1: tensor<4x3x3x3xf32> {cnn.param = "conv1.weight"},
                   %b1: tensor<4xf32> {cnn.param = "conv1.bias"},
                   %w2: tensor<8x4x3x3xf32> {cnn.param = "conv2.weight"},
                   %w3: tensor<10x8xf32> {cnn.param = "fc.weight"}) -> tensor<2x10xf32> {
  %c = cnn.conv2d %x, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %cb = cnn.bias_add %c, %b1 : (tensor<2x4x8x8xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  %r = cnn.relu %cb : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %c2 = cnn.conv2d %r, %w2 {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x4x8x8xf32>, tensor<8x4x3x3xf32>) -> tensor<2x8x4x4xf32>
  %r2 = cnn.relu %c2 : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  %g = cnn.global_avg_pool %r2 : (tensor<2x8x4x4xf32>) -> tensor<2x8x1x1xf32>
  %f = cnn.flatten %g {axis = 1} : (tensor<2x8x1x1xf32>) -> tensor<2x8xf32>
  %y = cnn.matmul %f, %w3 {transpose_rhs = true} : (tensor<2x8xf32>, tensor<10x8xf32>) -> tensor<2x10xf32>
  return %y : tensor<2x10xf32>
}

// NOPLAN: error: cnn-pipeline-split: needs @train_step and the cnn.pipeline plan of cnn-pipeline-partition

// @train_step is gone; each stage has a forward and a backward function.
// CHECK-NOT: func.func @train_step
// Stage 0's forward reads the image and its layer's parameters only, and
// sends the biased convolution (the cut) to stage 1.
// CHECK-LABEL: func.func @stage0_forward(
// CHECK-SAME: {cnn.input, cnn.pipeline_arg = 0 : i64}
// CHECK-SAME: {cnn.param = "conv1.weight", cnn.pipeline_arg = 4 : i64}
// CHECK-SAME: {cnn.param = "conv1.bias", cnn.pipeline_arg = 5 : i64})
// CHECK-SAME: attributes {cnn.pipeline_results = array<i64>, cnn.pipeline_stage = 0 : i64}
// CHECK: %[[CB:.*]] = cnn.bias_add
// CHECK-NEXT: cnn.send %[[CB]] {peer = 1 : i64, tag = 0 : i64} : tensor<2x4x8x8xf32>
// CHECK-NEXT: return
// Stage 0's backward receives the gradient of the cut and updates conv1.
// CHECK-LABEL: func.func @stage0_backward(
// CHECK: %[[G:.*]] = cnn.recv {peer = 1 : i64, tag = 1 : i64} : tensor<2x4x8x8xf32>
// CHECK: cnn.bias_grad %[[G]]
// CHECK: cnn.conv2d_bwd_filter %{{.*}}, %[[G]]
// The accumulation step reads only the step number: each stage has a copy.
// CHECK: cnn.accumulation_step
// CHECK: cnn.sgd_update
// CHECK: cnn.sgd_update
// CHECK: return
// Stage 1's forward receives the cut, returns the loss (@train_step's
// result 0) and keeps what its backward reads: the logits, the pooled
// features and both ReLU outputs (not the received tensor: only the ReLU
// reads it).
// CHECK-LABEL: func.func @stage1_forward(
// CHECK-SAME: -> (tensor<f32> {cnn.loss}, tensor<2x10xf32>, tensor<2x8xf32>, tensor<2x8x4x4xf32>, tensor<2x4x8x8xf32>)
// CHECK-SAME: cnn.pipeline_results = array<i64: 0>, cnn.pipeline_stage = 1 : i64
// CHECK: %[[IN:.*]] = cnn.recv {peer = 0 : i64, tag = 0 : i64} : tensor<2x4x8x8xf32>
// CHECK: %[[R:.*]] = cnn.relu %[[IN]]
// CHECK: return {{.*}}, %[[R]] :
// CHECK-LABEL: func.func @stage1_backward(
// CHECK-SAME: tensor<2x10xf32> {cnn.pipeline_saved = 0 : i64}
// CHECK-SAME: cnn.pipeline_results = array<i64: 3, 4, 9, 10, 11, 12>, cnn.pipeline_stage = 1 : i64
// sends-first (the default): the chain the send needs (the data gradients
// down to the cut) comes first, the weight gradients nothing downstream
// waits for after it, each group in its order.
// CHECK-NOT: cnn.conv2d_bwd_filter
// CHECK-NOT: cnn.matmul {{.*}}transpose_lhs = true
// CHECK: cnn.conv2d_bwd_data
// CHECK-NEXT: %[[DR:.*]] = cnn.relu_grad
// CHECK-NEXT: cnn.send %[[DR]] {peer = 0 : i64, tag = 1 : i64} : tensor<2x4x8x8xf32>
// CHECK-NEXT: cnn.matmul {{.*}}transpose_lhs = true
// CHECK-NEXT: cnn.conv2d_bwd_filter
// CHECK: cnn.sgd_update
// CHECK: cnn.sgd_update
// CHECK: return
// With sends-first=false the functions keep cnn-autodiff's order: the
// weight gradients of a layer before the data gradient of the one below.
// AUTODIFF-ORDER-LABEL: func.func @stage1_backward(
// AUTODIFF-ORDER: cnn.conv2d_bwd_filter
// AUTODIFF-ORDER-NEXT: %[[DR:.*]] = cnn.relu_grad
// AUTODIFF-ORDER-NEXT: cnn.send %[[DR]] {peer = 0 : i64, tag = 1 : i64} : tensor<2x4x8x8xf32>
