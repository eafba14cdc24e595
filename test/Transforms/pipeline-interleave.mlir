// RUN: cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=3 chunks=2 micro-batches=2 link-gbps=0 launch-us=0 print-plan=1" -o /dev/null | FileCheck %s --check-prefix=PLAN
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=3 chunks=2 micro-batches=2 link-gbps=0 launch-us=0" -cnn-pipeline-split -cnn-pipeline-schedule | FileCheck %s
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=3 chunks=2 micro-batches=2 link-gbps=0 launch-us=0" -cnn-pipeline-split -cnn-pipeline-schedule -cnn-pipeline-stage="stage=0" | FileCheck %s --check-prefix=STAGE0
// RUN: not cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=1 chunks=2 micro-batches=2" 2>&1 | FileCheck %s --check-prefix=ONE
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=2 chunks=2 micro-batches=2 link-gbps=0 launch-us=0 print-plan=1" -cnn-pipeline-split -cnn-pipeline-schedule 2>&1 | FileCheck %s --check-prefix=TWO
// RUN: not cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=3 chunks=2 micro-batches=2 schedule=1f1b" 2>&1 | FileCheck %s --check-prefix=ONEF
// RUN: not cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=3 chunks=0 micro-batches=2" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=0 chunks=2 micro-batches=2 device-memory-bytes=100000" 2>&1 | FileCheck %s --check-prefix=AUTO
// RUN: not cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=3 launch-us=-1 micro-batches=2" 2>&1 | FileCheck %s --check-prefix=LAUNCH
// RUN: not cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=4 chunks=2 micro-batches=2" 2>&1 | FileCheck %s --check-prefix=MANY
// The links cnn-pipeline-async-transfers gives the transfers (the runtime
// issues each on the stream of its `link`): at S = 2 a link per direction,
// stage 0 -> 1 on the pair's link (stage 0's 1, stage 1's 0), 1 -> 0 on the
// wrap link (2); at S = 3 the wrap link joins stages 0 and 2 only.
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=2 chunks=2 micro-batches=2 link-gbps=0 launch-us=0" -cnn-pipeline-split -cnn-pipeline-schedule -cnn-pipeline-stage="stage=0" -cnn-pipeline-async-transfers | FileCheck %s --check-prefix=LINK20
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=2 chunks=2 micro-batches=2 link-gbps=0 launch-us=0" -cnn-pipeline-split -cnn-pipeline-schedule -cnn-pipeline-stage="stage=1" -cnn-pipeline-async-transfers | FileCheck %s --check-prefix=LINK21
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=3 chunks=2 micro-batches=2 link-gbps=0 launch-us=0" -cnn-pipeline-split -cnn-pipeline-schedule -cnn-pipeline-stage="stage=1" -cnn-pipeline-async-transfers | FileCheck %s --check-prefix=LINK31
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=3 chunks=2 micro-batches=2 link-gbps=0 launch-us=0" -cnn-pipeline-split -cnn-pipeline-schedule -cnn-pipeline-stage="stage=2" -cnn-pipeline-async-transfers | FileCheck %s --check-prefix=LINK32

// Interleaved stages (chunks = 2 on 3 stages): six linear layers cut into
// 3 x 2 = 6 virtual stages, virtual stage v on stage v mod 3, so stage 0
// runs layers 0 and 3, stage 1 layers 1 and 4, stage 2 layers 2 and 5.

func.func @forward(%x: tensor<2x8xf32> {cnn.input},
                   %w0: tensor<8x8xf32> {cnn.param = "l0.weight"},
                   %w1: tensor<8x8xf32> {cnn.param = "l1.weight"},
                   %w2: tensor<8x8xf32> {cnn.param = "l2.weight"},
                   %w3: tensor<8x8xf32> {cnn.param = "l3.weight"},
                   %w4: tensor<8x8xf32> {cnn.param = "l4.weight"},
                   %w5: tensor<10x8xf32> {cnn.param = "l5.weight"}) -> tensor<2x10xf32> {
  %h0 = cnn.matmul %x, %w0 {transpose_rhs = true} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %r0 = cnn.relu %h0 : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %h1 = cnn.matmul %r0, %w1 {transpose_rhs = true} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %r1 = cnn.relu %h1 : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %h2 = cnn.matmul %r1, %w2 {transpose_rhs = true} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %r2 = cnn.relu %h2 : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %h3 = cnn.matmul %r2, %w3 {transpose_rhs = true} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %r3 = cnn.relu %h3 : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %h4 = cnn.matmul %r3, %w4 {transpose_rhs = true} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %r4 = cnn.relu %h4 : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %y = cnn.matmul %r4, %w5 {transpose_rhs = true} : (tensor<2x8xf32>, tensor<10x8xf32>) -> tensor<2x10xf32>
  return %y : tensor<2x10xf32>
}

// The plan lists the virtual stages and the interleaved bubble
// (S-1)/(V*M+S-1) = 2/6.
// PLAN: pipeline plan: 3 stage(s) x 2 chunks = 6 virtual stages (virtual stage v on stage v mod 3) x 2 micro-batch(es) (memory as GPipe keeps it), bubble (S-1)/(V*M+S-1) = 0.333
// PLAN: virtual stage 0 (stage 0, chunk 0): forward ops 0-1
// PLAN: virtual stage 3 (stage 0, chunk 1): forward ops 6-7
// PLAN: virtual stage 5 (stage 2, chunk 1): forward ops 10-end
// Per stage, its chunks together (virtual stages 0 and 3 on stage 0).
// PLAN: stage 0 (virtual stages 0, 3): peak {{.*}} with its chunks together, est. {{.*}} us a micro-batch
// PLAN: stage 2 (virtual stages 2, 5): peak
// PLAN: estimated step: {{.*}} (M x the slowest stage's chunks, {{.*}} us, + (S-1) x the slowest virtual stage)

// Stage 0: both micro-batches through chunk 0 (layer 0, sent to stage 1),
// then through chunk 1 (layer 3: received from stage 2 over the wrap,
// sent to stage 1), then the backward passes of chunk 1, then chunk 0.
// Peers are stages (GPUs), not virtual stages.
// CHECK-LABEL: func.func @stage0_step(
// CHECK-SAME: cnn.pipeline_chunks = 2 : i64
// CHECK-SAME: cnn.pipeline_schedule = "gpipe", cnn.pipeline_stage = 0 : i64
// CHECK: cnn.micro_batch {{.*}}index = 0
// CHECK: cnn.send %{{.*}} {peer = 1 : i64, tag = 0 : i64}
// CHECK: cnn.micro_batch {{.*}}index = 1
// CHECK: cnn.send %{{.*}} {peer = 1 : i64, tag = 0 : i64}
// CHECK: cnn.recv {peer = 2 : i64, tag = 2 : i64}
// CHECK: cnn.send %{{.*}} {peer = 1 : i64, tag = 3 : i64}
// CHECK: cnn.recv {peer = 2 : i64, tag = 2 : i64}
// CHECK: cnn.send %{{.*}} {peer = 1 : i64, tag = 3 : i64}
// CHECK: cnn.recv {peer = 1 : i64, tag = 6 : i64}
// CHECK: cnn.send %{{.*}} {peer = 2 : i64, tag = 7 : i64}
// CHECK: cnn.recv {peer = 1 : i64, tag = 6 : i64}
// CHECK: cnn.send %{{.*}} {peer = 2 : i64, tag = 7 : i64}
// CHECK: cnn.recv {peer = 1 : i64, tag = 9 : i64}
// CHECK: cnn.recv {peer = 1 : i64, tag = 9 : i64}
// CHECK-NOT: cnn.send
// CHECK-LABEL: func.func @stage1_step(
// CHECK: cnn.recv {peer = 0 : i64, tag = 0 : i64}
// CHECK: cnn.send %{{.*}} {peer = 2 : i64, tag = 1 : i64}
// CHECK: cnn.recv {peer = 0 : i64, tag = 0 : i64}
// CHECK: cnn.send %{{.*}} {peer = 2 : i64, tag = 1 : i64}
// CHECK: cnn.recv {peer = 0 : i64, tag = 3 : i64}
// CHECK: cnn.send %{{.*}} {peer = 2 : i64, tag = 4 : i64}
// Stage 2 ends chunk 0 on the wrap to stage 0 and holds the loss.
// CHECK-LABEL: func.func @stage2_step(
// CHECK: cnn.recv {peer = 1 : i64, tag = 1 : i64}
// CHECK: cnn.send %{{.*}} {peer = 0 : i64, tag = 2 : i64}
// CHECK: cnn.softmax_cross_entropy

// Stage 0's step: one update per parameter (chunk 0's l0, chunk 1's l3),
// both after every gradient of the step (cnn-precision's finite check
// needs them all before the first update).
// STAGE0-LABEL: func.func @train_step(
// STAGE0-SAME: cnn.pipeline_chunks = 2 : i64
// STAGE0-SAME: cnn.step_uncaptured = "interleaved pipeline stages (--pipeline-chunks 2) need their transfers to run beside the step's kernels, which a CUDA graph's replay does not promise
// STAGE0-COUNT-4: cnn.accumulate_grad
// STAGE0-NOT: cnn.accumulate_grad
// STAGE0: cnn.sgd_update
// STAGE0-NEXT: cnn.sgd_update
// STAGE0-NEXT: return

// ONE: error: cnn-pipeline-partition: chunks=2 (interleaved stages) needs an explicit stages >= 2 and the gpipe schedule, got stages=1, schedule=gpipe
// Two stages: virtual stages 0 and 2 on GPU 0, 1 and 3 on GPU 1; every
// transfer is between the two (the runtime gives each direction a link).
// TWO: pipeline plan: 2 stage(s) x 2 chunks = 4 virtual stages
// TWO-LABEL: func.func @stage0_step(
// TWO-NOT: peer = 0
// TWO: return
// TWO-LABEL: func.func @stage1_step(
// TWO-NOT: peer = 1
// TWO: return
// ONEF: error: cnn-pipeline-partition: chunks=2 (interleaved stages) needs an explicit stages >= 2 and the gpipe schedule, got stages=3, schedule=1f1b
// ZERO: error: cnn-pipeline-partition: chunks must be >= 1, got 0
// AUTO: error: cnn-pipeline-partition: chunks=2 (interleaved stages) needs an explicit stages >= 2 and the gpipe schedule, got stages=0, schedule=gpipe
// LAUNCH: error: cnn-pipeline-partition: launch-us must be >= 0, got -1.00
// MANY: error: cnn-pipeline-partition: 8 virtual stages (4 stages x 2 chunks) need a layer with parameters each; @train_step has 6

// LINK20-LABEL: func.func @train_step(
// LINK20-NOT: link = 0 : i64
// LINK20-DAG: cnn.send %{{.*}} {event = {{[0-9]+}} : i64, link = 1 : i64, peer = 1 : i64
// LINK20-DAG: cnn.recv {event = {{[0-9]+}} : i64, link = 2 : i64, peer = 1 : i64
// LINK20-NOT: cnn.send %{{.*}} link = 2
// LINK20-NOT: cnn.recv {{.*}} link = 1

// LINK21-LABEL: func.func @train_step(
// LINK21-NOT: link = 1 : i64
// LINK21-DAG: cnn.recv {event = {{[0-9]+}} : i64, link = 0 : i64, peer = 0 : i64
// LINK21-DAG: cnn.send %{{.*}} {event = {{[0-9]+}} : i64, link = 2 : i64, peer = 0 : i64
// LINK21-NOT: link = 1 : i64

// LINK31-LABEL: func.func @train_step(
// LINK31-NOT: link = 2 : i64
// LINK31-DAG: {{.*}}link = 0 : i64, peer = 0 : i64
// LINK31-DAG: {{.*}}link = 1 : i64, peer = 2 : i64
// LINK31-NOT: link = 2 : i64

// LINK32-LABEL: func.func @train_step(
// LINK32-DAG: cnn.send %{{.*}} {event = {{[0-9]+}} : i64, link = 2 : i64, peer = 0 : i64
// LINK32-DAG: cnn.recv {event = {{[0-9]+}} : i64, link = 0 : i64, peer = 1 : i64
// LINK32-NOT: link = 1 : i64
