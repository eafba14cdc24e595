// RUN: cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=2 micro-batches=4 link-gbps=0 launch-us=0 launch-us=0" | FileCheck %s
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=0 micro-batches=4 device-memory-bytes=20000 print-plan=1 link-gbps=0 launch-us=0 launch-us=0" -o /dev/null | FileCheck %s --check-prefix=AUTO2
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=0 micro-batches=4 device-memory-bytes=15000 print-plan=1 link-gbps=0 launch-us=0 launch-us=0" -o /dev/null | FileCheck %s --check-prefix=AUTO3
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=4 micro-batches=4 print-plan=1 link-gbps=0 launch-us=0 launch-us=0" -o /dev/null | FileCheck %s --check-prefix=FOUR
// RUN: not cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=0 micro-batches=4 device-memory-bytes=13000 link-gbps=0 launch-us=0 launch-us=0" 2>&1 | FileCheck %s --check-prefix=BIG
// RUN: not cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=1 micro-batches=4 device-memory-bytes=20000 link-gbps=0 launch-us=0 launch-us=0" 2>&1 | FileCheck %s --check-prefix=FEW
// RUN: not cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=2 micro-batches=4 link-gbps=0 launch-us=0 launch-us=0" 2>&1 | FileCheck %s --check-prefix=ACC
// RUN: not cnnc-opt %s -cnn-autodiff="accumulate=4 clip-grad-norm=1.0" -cnn-pipeline-partition="stages=2 micro-batches=4 link-gbps=0 launch-us=0 launch-us=0" 2>&1 | FileCheck %s --check-prefix=CLIP
// RUN: not cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=12 micro-batches=4 link-gbps=0 launch-us=0 launch-us=0" 2>&1 | FileCheck %s --check-prefix=MANY
// RUN: not cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=0 micro-batches=4 link-gbps=0 launch-us=0 launch-us=0" 2>&1 | FileCheck %s --check-prefix=NOBUDGET
// The transfers' time (link-gbps, 100 GB/s by default): the 4 KiB crossing
// after the first convolution costs more than the ops it would balance, so
// the cut moves to the 128 bytes crossing after forward op 5; with
// overlap-transfers a stage takes the larger of compute and transfers.
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=2 micro-batches=4 launch-us=0" | FileCheck %s --check-prefix=LINK
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=2 micro-batches=4 overlap-transfers=1 launch-us=0" | FileCheck %s --check-prefix=OVERLAP
// launch-us (default 5): each forward op also costs its launches, so on a
// net this small (its roofline times are nanoseconds) the cut follows the
// op count: forward ops 0-3 on stage 0 and 4-8 on stage 1, 4 x 15 = 60 us
// and 5 x 15 = 75 us (5 us a forward op, tripled with its backward pass).
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=2 micro-batches=4 link-gbps=0" | FileCheck %s --check-prefix=LAUNCH
// RUN: not cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=2 micro-batches=4 link-gbps=-1" 2>&1 | FileCheck %s --check-prefix=NEGLINK
// 1F1B keeps min(M, S - s) micro-batches' activations on stage s (its
// warm-up forwards), not all M: one stage of plain accumulation fits 20,000
// bytes, and the second convolution that alone exceeds 13,000 bytes with 4
// micro-batches (BIG) fits on the last of two stages with 1.
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=1 micro-batches=4 device-memory-bytes=20000 print-plan=1 link-gbps=0 launch-us=0 schedule=1f1b" -o /dev/null | FileCheck %s --check-prefix=F1B1
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=0 micro-batches=4 device-memory-bytes=13000 print-plan=1 link-gbps=0 launch-us=0 schedule=1f1b" -o /dev/null | FileCheck %s --check-prefix=F1B2
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=2 micro-batches=4 link-gbps=0 launch-us=0 schedule=1f1b" | FileCheck %s --check-prefix=F1BATTR
// RUN: not cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=2 micro-batches=4 schedule=interleaved" 2>&1 | FileCheck %s --check-prefix=F1BBAD
// Every stage owns parameters (its step has an optimizer): at most 4 here.
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=4 micro-batches=4 launch-us=0" | FileCheck %s --check-prefix=OWN4
// RUN: not cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=5 micro-batches=4 launch-us=0" 2>&1 | FileCheck %s --check-prefix=OWN5

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

// Two stages, no memory limit: the balance puts the first convolution
// (the most FLOPs) alone on stage 0. The second layer's ReLU gradient runs
// on stage 1 with its ReLU; the first layer's bias and filter gradients go
// to stage 0 with its parameters, so the ReLU's input gradient crosses
// back (one tensor each way: cut_tensors 2).
// CHECK: module attributes {cnn.pipeline = {budget_bytes = 0 : i64, cut_bytes = array<i64: 4096>, cut_tensors = array<i64: 2>, cuts = array<i64: 1>, micro_batches = 4 : i64,
// CHECK-SAME: stages = 2 : i64}}
// CHECK-LABEL: func.func @train_step
// CHECK: %[[C:.*]] = cnn.conv2d %arg0, %arg4 {cnn.stage = 0 : i64
// CHECK-NEXT: %[[CB:.*]] = cnn.bias_add %[[C]], %arg5 {cnn.stage = 0 : i64
// CHECK-NEXT: %[[R:.*]] = cnn.relu %[[CB]] {cnn.stage = 1 : i64}
// CHECK: cnn.softmax_cross_entropy {{.*}}cnn.stage = 1 : i64
// The seed of the backward pass reads nothing staged: copied where used.
// CHECK-NEXT: cnn.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DR:.*]] = cnn.relu_grad %{{.*}}, %[[R]] {cnn.stage = 1 : i64}
// CHECK-NEXT: cnn.bias_grad %[[DR]] {cnn.stage = 0 : i64
// CHECK-NEXT: cnn.conv2d_bwd_filter %arg0, %[[DR]] {cnn.stage = 0 : i64
// CHECK: cnn.accumulation_step %arg3 {every = 4 : i64}
// CHECK: cnn.accumulate_grad %arg9, {{.*}}cnn.stage = 0 : i64
// CHECK: cnn.sgd_update %arg4, {{.*}}cnn.stage = 0 : i64
// CHECK: cnn.sgd_update %arg7, {{.*}}cnn.stage = 1 : i64

// The fewest stages within 20,000 bytes (one stage needs 22.2 KiB with 4
// micro-batches' activations in flight).
// AUTO2: pipeline plan: 2 stage(s) x 4 micro-batch(es) (memory as GPipe keeps it), bubble (S-1)/(M+S-1) = 0.200, device memory 19.5 KiB
// AUTO2-NEXT: stage 0: forward ops 0-3, peak 16.7 KiB (parameters and state 4.7 KiB, 4 x 2.0 KiB kept for the backward pass)
// AUTO2-NEXT: cut 0|1 after forward op 3: 2 tensor(s), 2048 bytes per micro-batch (both directions)
// AUTO2-NEXT: stage 1: forward ops 4-end, peak 7.5 KiB

// AUTO3: pipeline plan: 3 stage(s)
// AUTO3: stage 0: forward ops 0-2, peak 13.3 KiB
// AUTO3: stage 1: forward ops 3-3, peak 14.4 KiB
// AUTO3: stage 2: forward ops 4-end

// FOUR: pipeline plan: 4 stage(s) x 4 micro-batch(es) (memory as GPipe keeps it), bubble (S-1)/(M+S-1) = 0.429
// FOUR-COUNT-3: cut {{[0-2]}}|{{[1-3]}} after forward op
// FOUR: stage 3: forward ops {{[0-9]}}-end

// The second convolution alone (its filter, momentum and accumulated
// gradient, four micro-batches of its input) exceeds 13,000 bytes.
// BIG: pipeline-partition.mlir:{{[0-9]+}}:9: error: cnn-pipeline-partition: this layer alone needs 14720 bytes on one stage (3456 of parameters and state, 4 x 2048 of activations kept for the backward pass, 3072 working set), over device-memory-bytes 13000: no cut can fit it

// FEW: error: cnn-pipeline-partition: 1 stages cannot hold @train_step within device-memory-bytes 20000 with 4 micro-batches in flight; the fewest stages that fit: 2

// ACC: error: cnn-pipeline-partition: micro-batches=4 needs @train_step built with gradient accumulation over 4 micro-steps (cnn-autodiff accumulate=4); it accumulates over 2

// CLIP: error: cnn-pipeline-partition: pipeline stages do not support clip-grad-norm (the global norm needs the gradients of every stage) yet

// MANY: error: cnn-pipeline-partition: 12 stages but @train_step has 9 forward ops

// NOBUDGET: error: cnn-pipeline-partition: stages=0 (the fewest stages that fit) needs device-memory-bytes

// LAUNCH: cuts = array<i64: 3>
// LAUNCH-SAME: stage_time_us = array<f64: 60.01{{[0-9]*}}, 75.00{{[0-9]*}}>

// LINK: cuts = array<i64: 5>
// LINK-SAME: stage_time_us = array<f64: 2.086400e-02, 0.0019640000000000005>
// OVERLAP: cuts = array<i64: 5>
// OVERLAP-SAME: stage_time_us = array<f64: 1.958400e-02, 1.280000e-03>
// NEGLINK: error: cnn-pipeline-partition: link-gbps must be >= 0 (0: transfers cost nothing), got -1
// OWN4: cuts = array<i64: 0, 1, 5>
// OWN4-SAME: stage_param_bytes = array<i64: {{[1-9][0-9]*}}, {{[1-9][0-9]*}}, {{[1-9][0-9]*}}, {{[1-9][0-9]*}}>
// OWN5: error: cnn-pipeline-partition: 5 stages need a layer with parameters each; @train_step has 4

// F1B1: pipeline plan: 1 stage(s) x 4 micro-batch(es) (memory as 1F1B (min(M, S - s) on stage s) keeps it), bubble (S-1)/(M+S-1) = 0.000, device memory 19.5 KiB
// F1B1-NEXT: stage 0: forward ops 0-end, peak 12.8 KiB (parameters and state 5.6 KiB, 1 x 3.1 KiB kept for the backward pass)
// F1B2: pipeline plan: 2 stage(s) x 4 micro-batch(es) (memory as 1F1B (min(M, S - s) on stage s) keeps it)
// F1B2-NEXT: stage 0: forward ops 0-1, peak 5.3 KiB (parameters and state 1.3 KiB, 2 x 0 B kept for the backward pass)
// F1B2: stage 1: forward ops 2-end, peak 11.5 KiB (parameters and state 4.3 KiB, 1 x 3.1 KiB kept for the backward pass)
// F1BATTR: schedule = "1f1b", stage_in_flight = array<i64: 2, 1>
// F1BBAD: error: cnn-pipeline-partition: schedule must be gpipe or 1f1b, got 'interleaved'
