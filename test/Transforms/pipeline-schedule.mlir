// RUN: cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=2 micro-batches=2 link-gbps=0 launch-us=0 launch-us=0" -cnn-pipeline-split -cnn-pipeline-schedule | FileCheck %s --check-prefixes=CHECK,GPIPE
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=2 micro-batches=2 link-gbps=0 launch-us=0 launch-us=0" -cnn-pipeline-split -cnn-pipeline-schedule="schedule=1f1b" | FileCheck %s --check-prefixes=CHECK,ONEF
// RUN: not cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-schedule 2>&1 | FileCheck %s --check-prefix=NOPLAN
// RUN: not cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=2 micro-batches=2 link-gbps=0 launch-us=0 launch-us=0" -cnn-pipeline-split -cnn-pipeline-schedule="schedule=zb" 2>&1 | FileCheck %s --check-prefix=BADSCHED
// RUN: not cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=2 micro-batches=2 link-gbps=0 launch-us=0 launch-us=0" -cnn-pipeline-schedule 2>&1 | FileCheck %s --check-prefix=NOSPLIT

// cnn-pipeline-schedule: each stage's M = 2 micro-batches unrolled into one
// @stage<s>_step, the sends and receives in the schedule's order.

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

// NOPLAN: error: cnn-pipeline-schedule: needs the cnn.pipeline plan (stages, micro_batches) of cnn-pipeline-partition
// BADSCHED: error: cnn-pipeline-schedule: schedule 'zb' is not one of gpipe, 1f1b
// NOSPLIT: error: cnn-pipeline-schedule: stage 0 has no @stage0_forward or @stage0_backward (run cnn-pipeline-split first)

// The per-stage forward and backward functions are gone.
// CHECK-NOT: func.func @stage{{[0-9]}}_forward
// CHECK-NOT: func.func @stage{{[0-9]}}_backward
// Every stage takes the image and labels of both micro-batches (4 rows),
// the shared parameters once and the pipeline step k.
// CHECK-LABEL: func.func @stage0_step(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<4x3x8x8xf32> {cnn.input, cnn.pipeline_arg = 0 : i64}
// CHECK-SAME: tensor<4xi32> {cnn.labels, cnn.pipeline_arg = 1 : i64}
// CHECK-SAME: %[[K:[a-z0-9]+]]: tensor<f32> {cnn.pipeline_arg = 3 : i64, cnn.step}
// CHECK-SAME: cnn.pipeline_results = array<i64: 1, 2, 5, 6, 7, 8>
// GPIPE-SAME: cnn.pipeline_schedule = "gpipe", cnn.pipeline_stage = 0 : i64
// ONEF-SAME: cnn.pipeline_schedule = "1f1b", cnn.pipeline_stage = 0 : i64
// Micro-batch 1 (the last) is micro-step k * M, micro-batch 0 k * M - 1.
// CHECK: %[[KM:.*]] = cnn.scale %[[K]] {factor = 2.000000e+00 : f32}
// CHECK: %[[X0:.*]] = cnn.micro_batch %[[X]] {count = 2 : i64, index = 0 : i64} : tensor<4x3x8x8xf32> -> tensor<2x3x8x8xf32>
// CHECK: cnn.conv2d %[[X0]]
// CHECK: cnn.send %{{.*}} {peer = 1 : i64, tag = 0 : i64}
// CHECK: %[[X1:.*]] = cnn.micro_batch %[[X]] {count = 2 : i64, index = 1 : i64}
// CHECK: cnn.conv2d %[[X1]]
// CHECK: cnn.send %{{.*}} {peer = 1 : i64, tag = 0 : i64}
// CHECK: %[[ONE:.*]] = cnn.constant dense<1.000000e+00>
// CHECK: %[[S0:.*]] = cnn.sub %[[KM]], %[[ONE]]
// CHECK: cnn.recv {peer = 1 : i64, tag = 1 : i64}
// CHECK: %{{.*}}, %[[ACC0:.*]] = cnn.accumulate_grad %{{.*}}, %{{.*}}, %[[S0]] {every = 2 : i64}
// CHECK: cnn.accumulation_step %[[S0]]
// CHECK: cnn.recv {peer = 1 : i64, tag = 1 : i64}
// The accumulator threads from micro-batch 0 into micro-batch 1.
// CHECK: cnn.accumulate_grad %[[ACC0]], %{{.*}}, %[[KM]] {every = 2 : i64}
// CHECK: cnn.accumulation_step %[[KM]]
// CHECK-NOT: cnn.send
// CHECK-NOT: cnn.recv
// CHECK: return

// Stage 1 cuts each micro-batch's labels from the batch and returns both
// losses first.
// CHECK-LABEL: func.func @stage1_step(
// CHECK-SAME: tensor<4x3x8x8xf32> {cnn.input, cnn.pipeline_arg = 0 : i64}
// CHECK-SAME: %[[L:[a-z0-9]+]]: tensor<4xi32> {cnn.labels, cnn.pipeline_arg = 1 : i64}
// CHECK-SAME: -> (tensor<f32> {cnn.loss, cnn.micro_batch = 0 : i64}, tensor<f32> {cnn.loss, cnn.micro_batch = 1 : i64},
// CHECK-SAME: cnn.pipeline_results = array<i64: 3, 4, 9, 10, 11, 12>
// CHECK: cnn.micro_batch %[[L]] {count = 2 : i64, index = 0 : i64} : tensor<4xi32> -> tensor<2xi32>
// GPipe: both forwards (receive, loss), then both backwards (send).
// GPIPE: cnn.recv {peer = 0 : i64, tag = 0 : i64}
// GPIPE: cnn.softmax_cross_entropy
// GPIPE: cnn.recv {peer = 0 : i64, tag = 0 : i64}
// GPIPE: cnn.softmax_cross_entropy
// GPIPE: cnn.send %{{.*}} {peer = 0 : i64, tag = 1 : i64}
// GPIPE: cnn.send %{{.*}} {peer = 0 : i64, tag = 1 : i64}
// 1F1B on the last stage: one forward, one backward, alternating.
// ONEF: cnn.recv {peer = 0 : i64, tag = 0 : i64}
// ONEF: cnn.softmax_cross_entropy
// ONEF: cnn.send %{{.*}} {peer = 0 : i64, tag = 1 : i64}
// ONEF: cnn.recv {peer = 0 : i64, tag = 0 : i64}
// ONEF: cnn.softmax_cross_entropy
// ONEF: cnn.send %{{.*}} {peer = 0 : i64, tag = 1 : i64}
// CHECK: return
