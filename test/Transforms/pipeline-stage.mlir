// RUN: cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=2 micro-batches=2 link-gbps=0 launch-us=0 launch-us=0" -cnn-pipeline-split -cnn-pipeline-schedule -cnn-pipeline-stage="stage=0" | FileCheck %s --check-prefix=S0
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=2 micro-batches=2 link-gbps=0 launch-us=0 launch-us=0" -cnn-pipeline-split -cnn-pipeline-schedule -cnn-pipeline-stage="stage=1" | FileCheck %s --check-prefix=S1
// RUN: not cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-stage 2>&1 | FileCheck %s --check-prefix=NOPLAN
// RUN: not cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=2 micro-batches=2 link-gbps=0 launch-us=0 launch-us=0" -cnn-pipeline-split -cnn-pipeline-schedule -cnn-pipeline-stage="stage=2" 2>&1 | FileCheck %s --check-prefix=RANGE
// RUN: not cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=2 micro-batches=2 link-gbps=0 launch-us=0 launch-us=0" -cnn-pipeline-split -cnn-pipeline-stage="stage=0" 2>&1 | FileCheck %s --check-prefix=NOSCHED
// The CUDA target's step pipeline runs on a stage's step, and the emitter
// prints its micro-batch copies and transfers (here on the compute stream:
// pipeline-async-transfers=0; the asynchronous form is
// pipeline-async-transfers.mlir's).
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=2 micro-batches=2 link-gbps=0 launch-us=0 launch-us=0" -cnn-pipeline-split -cnn-pipeline-schedule -cnn-pipeline-stage="stage=0" -cnn-gpu-pipeline="precision=fp32 pipeline-async-transfers=0" -o %t0.mlir
// RUN: cnnc %t0.mlir --emit cuda | FileCheck %s --check-prefix=CUDA0
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=2 micro-batches=2 link-gbps=0 launch-us=0 launch-us=0" -cnn-pipeline-split -cnn-pipeline-schedule -cnn-pipeline-stage="stage=1" -cnn-gpu-pipeline="precision=fp32 pipeline-async-transfers=0" -o %t1.mlir
// RUN: cnnc %t1.mlir --emit cuda | FileCheck %s --check-prefix=CUDA1

// cnn-train-pipeline with pipeline stages for the CUDA target stops after
// cnn-autodiff (the driver splits the step and runs the step pipeline on
// each stage's), and refuses what the CUDA stages do not run.
// RUN: cnnc-opt %s --cnn-train-pipeline="pipeline-stages=2 micro-batches=2 precision=fp32" | FileCheck %s --check-prefix=TRAIN
// fp16 (the CUDA target's default): every stage scales, checks its own
// gradients and takes the minimum of the finite flags over the stages
// before the scale update and the optimizer.
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=2 micro-batches=2 link-gbps=0 launch-us=0 launch-us=0" -cnn-pipeline-split -cnn-pipeline-schedule -cnn-pipeline-stage="stage=0" -cnn-gpu-pipeline="precision=fp16 layout=nchw fuse=0" | FileCheck %s --check-prefix=F16S0
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=2 micro-batches=2 link-gbps=0 launch-us=0 launch-us=0" -cnn-pipeline-split -cnn-pipeline-schedule -cnn-pipeline-stage="stage=1" -cnn-gpu-pipeline="precision=fp16 layout=nchw fuse=0" | FileCheck %s --check-prefix=F16S1
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=2 micro-batches=2 link-gbps=0 launch-us=0 launch-us=0" -cnn-pipeline-split -cnn-pipeline-schedule -cnn-pipeline-stage="stage=0" -cnn-gpu-pipeline="pipeline-async-transfers=0" -o %t16.mlir
// RUN: cnnc %t16.mlir --emit cuda | FileCheck %s --check-prefix=CUDA16
// Pipeline x data parallel: each stage's step averages its accumulated
// gradients over the replicas (world-size); only the last stage's loss.
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=2 micro-batches=2 link-gbps=0 launch-us=0 launch-us=0" -cnn-pipeline-split -cnn-pipeline-schedule -cnn-pipeline-stage="stage=0" -cnn-gpu-pipeline="precision=fp32 world-size=2" | FileCheck %s --check-prefix=DP0
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=2 micro-batches=2 link-gbps=0 launch-us=0 launch-us=0" -cnn-pipeline-split -cnn-pipeline-schedule -cnn-pipeline-stage="stage=1" -cnn-gpu-pipeline="precision=fp32 world-size=2" | FileCheck %s --check-prefix=DP1
// 1F1B: the transfers of a stage become NCCL groups (cnn.transfers), a run
// of them cut only where a receive is followed by a send after other ops.
// RUN: cnnc-opt %s --cnn-train-pipeline="pipeline-stages=2 micro-batches=2 precision=fp32 pipeline-schedule=1f1b" | FileCheck %s --check-prefix=TRAIN
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=2 micro-batches=4 link-gbps=0 launch-us=0 launch-us=0" -cnn-pipeline-split -cnn-pipeline-schedule="schedule=1f1b" -cnn-pipeline-stage="stage=0" | FileCheck %s --check-prefix=ONEF0
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=2 micro-batches=4 link-gbps=0 launch-us=0 launch-us=0" -cnn-pipeline-split -cnn-pipeline-schedule="schedule=1f1b" -cnn-pipeline-stage="stage=1" | FileCheck %s --check-prefix=ONEF1
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=2 micro-batches=4 link-gbps=0 launch-us=0 launch-us=0" -cnn-pipeline-split -cnn-pipeline-schedule="schedule=1f1b" -cnn-pipeline-stage="stage=0" -cnn-gpu-pipeline -o %t1f1b.mlir
// RUN: cnnc %t1f1b.mlir --emit cuda | FileCheck %s --check-prefix=ONEFCUDA

// cnn-pipeline-stage: one stage's @stage<s>_step as the module's
// @train_step, for the CUDA target to plan and print as a step of its own.

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

// NOPLAN: error: cnn-pipeline-stage: the module has no cnn.pipeline plan
// RANGE: error: cnn-pipeline-stage: stage 2 is not one of the plan's 2 stages
// NOSCHED: error: cnn-pipeline-stage: the module has no @stage0_step (run cnn-pipeline-schedule first)

// Stage 0: only its step is left (no @forward, no other stage), renamed, with
// the class count of the last stage's logits; it has no loss.
// S0-NOT: func.func @forward
// S0-NOT: func.func @stage
// S0: func.func @train_step(%{{.*}}: tensor<4x3x8x8xf32> {cnn.input
// S0-NOT: cnn.loss
// S0-SAME: attributes {cnn.num_classes = 10 : i64
// S0-SAME: cnn.pipeline_stage = 0 : i64, cnn.pipeline_stages = 2 : i64
// S0: cnn.send
// S0: cnn.recv
// S0-NOT: func.func

// Stage 1: the two micro-batch losses become one cnn.loss result, their
// mean: summed in micro-batch order, then scaled by 1/M.
// S1-NOT: func.func @stage
// S1: func.func @train_step({{.*}}) -> (tensor<f32> {cnn.loss}, tensor<
// S1-NOT: cnn.loss
// S1-SAME: attributes {cnn.num_classes = 10 : i64
// S1-SAME: cnn.pipeline_stage = 1 : i64, cnn.pipeline_stages = 2 : i64
// S1: %[[L0:.*]] = cnn.softmax_cross_entropy
// S1: %[[L1:.*]] = cnn.softmax_cross_entropy
// S1: %[[SUM:.*]] = cnn.add %[[L0]], %[[L1]]
// S1: %[[MEAN:.*]] = cnn.scale %[[SUM]] {factor = 5.000000e-01 : f32}
// S1: return %[[MEAN]],

// The emitted stages: micro-batch m of the 4-row batch is a copy of rows
// 2m..2m+1 (its byte range), the transfers go through the stage
// communicator, which prepareModel creates; the spec has the class count
// and the training driver's hooks, but only the last stage a Loss tensor.
// CUDA0: #include "cnnrt/Nccl.h"
// CUDA0-NOT: Role::Loss
// CUDA0: static void prepareModel(cnnrt::Context &ctx) {
// CUDA0: cnnrt::dist::prepare(ctx, 0);
// CUDA0: static void trainStep(
// CUDA0: // micro-batch 0 of 2: rows 0..1 of the batch
// CUDA0-NEXT: ctx.check(cudaMemcpyAsync(A + [[MB0:[0-9]+]], A + 0, 1536, cudaMemcpyDeviceToDevice, s)
// CUDA0: cnnrt::dist::send(ctx, A + {{[0-9]+}}, 2048ull, 1, "tag 0 at
// CUDA0: // micro-batch 1 of 2: rows 2..3 of the batch
// CUDA0-NEXT: ctx.check(cudaMemcpyAsync(A + {{[0-9]+}}, A + 1536, 1536, cudaMemcpyDeviceToDevice, s)
// CUDA0: cnnrt::dist::send(ctx, A + {{[0-9]+}}, 2048ull, 1, "tag 0 at
// CUDA0: cnnrt::dist::recv(ctx, A + {{[0-9]+}}, 2048ull, 1, "tag 1 at
// CUDA0: cnnrt::dist::recv(ctx, A + {{[0-9]+}}, 2048ull, 1, "tag 1 at
// CUDA0: static const cnnrt::ModelSpec kModel = {{.*}}, 4, 3, 8, 8, 10, prepareModel, trainStep, nullptr, {{.*}}, &cnnrt::dist::kHooks};

// CUDA1: cnnrt::Role::Loss
// CUDA1: cnnrt::dist::prepare(ctx, 0);
// CUDA1: cnnrt::dist::recv(ctx, A + {{[0-9]+}}, 2048ull, 0, "tag 0 at
// CUDA1: cnnrt::dist::recv(ctx, A + {{[0-9]+}}, 2048ull, 0, "tag 0 at
// CUDA1: cnnrt::dist::send(ctx, A + {{[0-9]+}}, 2048ull, 0, "tag 1 at
// CUDA1: cnnrt::dist::send(ctx, A + {{[0-9]+}}, 2048ull, 0, "tag 1 at
// CUDA1: static const cnnrt::ModelSpec kModel = {{.*}}, 4, 3, 8, 8, 10, prepareModel, trainStep, nullptr, {{.*}}, &cnnrt::dist::kHooks};

// TRAIN: func.func @train_step(
// TRAIN-NOT: cnn.offset
// TRAIN-NOT: cnn.transpose
// TRAIN-NOT: cnn.lowering_selected
// TRAIN: cnn.accumulate_grad {{.*}} {every = 2 : i64}

// Only the last micro-batch's optimizer updates are left (micro-batch m runs
// as micro-step k*M - (M-1-m), which applies only for m = M-1): one per
// parameter, after every micro-batch's gradient.
// S0-NOT: cnn.sgd_update
// S0: cnn.accumulate_grad
// S0: cnn.accumulate_grad
// S0: cnn.accumulate_grad
// S0: cnn.accumulate_grad
// S0: cnn.accumulation_step
// S0-NOT: cnn.accumulation_step
// S0: cnn.sgd_update
// S0: cnn.sgd_update
// S0-NOT: cnn.sgd_update
// S0: return

// Stage 0 has no loss: its loss scale is a state argument its received
// gradients were seeded with (on stage 1); both stages reduce their finite
// flag with min over the stages before the updates read it.
// F16S0: func.func @train_step(
// F16S0-SAME: %[[S:[a-z0-9]+]]: tensor<f32> {cnn.init = 6.553600e+04 : f32, cnn.loss_scale, {{.*}}cnn.state = "loss_scale"}
// F16S0-NOT: cnn.softmax_cross_entropy_grad
// F16S0: cnn.recv {{{.*}}peer = 1 : i64, tag = 1 : i64} : tensor<2x4x8x8xf16>
// F16S0: %[[OWN:.*]] = cnn.all_finite
// F16S0-NEXT: %[[ALL:.*]] = cnn.all_reduce %[[OWN]] {bytes = 4 : i64, {{.*}}reduction = "min"} : (tensor<f32>) -> tensor<f32>
// F16S0: cnn.loss_scale_update %[[S]], %{{.*}}, %[[ALL]]
// F16S0: cnn.sgd_update {{.*}}, %[[S]], %{{.*}} {
// F16S0: cnn.sgd_update {{.*}}, %[[S]], %{{.*}} {
// F16S0-NOT: cnn.sgd_update
// F16S1: func.func @train_step(
// F16S1-SAME: %[[S:[a-z0-9]+]]: tensor<f32> {cnn.init = 6.553600e+04 : f32, cnn.loss_scale, {{.*}}cnn.state = "loss_scale"}
// F16S1: cnn.softmax_cross_entropy_grad {{.*}}, %[[S]]
// F16S1: cnn.softmax_cross_entropy_grad {{.*}}, %[[S]]
// F16S1: cnn.send {{.*}}peer = 0 : i64, tag = 1 : i64} : tensor<2x4x8x8xf16>
// F16S1: %[[OWN:.*]] = cnn.all_finite
// F16S1-NEXT: %[[ALL:.*]] = cnn.all_reduce %[[OWN]] {{.*}}reduction = "min"
// F16S1: cnn.loss_scale_update %[[S]], %{{.*}}, %[[ALL]]

// The flag's all-reduce on the stages' communicator, joined before the
// scale update reads it.
// CUDA16: cnnrt::dist::prepare(ctx, 0); // the stages
// CUDA16: cnnrt::dist::send(ctx, A + {{[0-9]+}}, 1024ull, 1, "tag 0 at
// CUDA16: cnnrt::dist::recv(ctx, A + {{[0-9]+}}, 1024ull, 1, "tag 1 at
// CUDA16: cnnrt::dist::begin(ctx, 0);
// CUDA16-NEXT: cnnrt::dist::allReduceAcrossStages(ctx, A + {{[0-9]+}}, 1ull, 0, 3,
// CUDA16-NEXT: cnnrt::dist::end(ctx, 0);
// CUDA16-NEXT: cnnrt::dist::join(ctx, 0);
// CUDA16: lossScaleUpdate<<<

// Stage 0 of 2, M = 4, 1F1B: F0 F1 B0 F2 B1 F3 B2 B3. a0 sent alone; {a1
// sent, g0 received}; {a2, g1}; {a3, g2}; g3 received alone.
// Stage 0 mirrors stage 1 group for group (NCCL splits a group's transfers
// to a peer by what else it holds for that peer): a send alone, three
// send+recv pairs, a recv alone.
// ONEF0: cnn.send %{{.*}} {peer = 1 : i64, tag = 0 : i64}
// ONEF0: cnn.transfers %{{.*}} {recv_peers = array<i64: 1>, recv_tags = array<i64: 1>, send_peers = array<i64: 1>, send_tags = array<i64: 0>}
// ONEF0: cnn.transfers %{{.*}} {recv_peers = array<i64: 1>, recv_tags = array<i64: 1>, send_peers = array<i64: 1>, send_tags = array<i64: 0>}
// ONEF0: cnn.transfers %{{.*}} {recv_peers = array<i64: 1>, recv_tags = array<i64: 1>, send_peers = array<i64: 1>, send_tags = array<i64: 0>}
// ONEF0: cnn.recv {peer = 1 : i64, tag = 1 : i64}
// ONEF0-NOT: cnn.send
// ONEF0-NOT: cnn.recv
// ONEF0-NOT: cnn.transfers
// ONEF1: cnn.recv {peer = 0 : i64, tag = 0 : i64}
// ONEF1: cnn.transfers %{{.*}} {recv_peers = array<i64: 0>, recv_tags = array<i64: 0>, send_peers = array<i64: 0>, send_tags = array<i64: 1>}
// ONEF1: cnn.transfers %{{.*}} {recv_peers = array<i64: 0>, recv_tags = array<i64: 0>, send_peers = array<i64: 0>, send_tags = array<i64: 1>}
// ONEF1: cnn.transfers %{{.*}} {recv_peers = array<i64: 0>, recv_tags = array<i64: 0>, send_peers = array<i64: 0>, send_tags = array<i64: 1>}
// ONEF1: cnn.send %{{.*}} {peer = 0 : i64, tag = 1 : i64}
// ONEF1-NOT: cnn.transfers
// ONEFCUDA: cnnrt::dist::groupStart(ctx);
// ONEFCUDA-NEXT: cnnrt::dist::send(ctx, A + {{[0-9]+}}, 1024ull, 1, "tag 0 at
// ONEFCUDA-NEXT: cnnrt::dist::recv(ctx, A + {{[0-9]+}}, 1024ull, 1, "tag 1 at
// ONEFCUDA-NEXT: cnnrt::dist::groupEnd(ctx);

// DP0: cnn.data_parallel = {bucket_mb = {{.*}}, buckets = 1 : i64, collectives = 1 : i64
// DP0: cnn.accumulate_grad
// DP0: cnn.accumulate_grad
// DP0: %[[W:[a-z0-9_]+]], %{{.*}} = cnn.accumulate_grad
// DP0: %[[B:[a-z0-9_]+]], %{{.*}} = cnn.accumulate_grad
// DP0: %[[RW:.*]]:2 = cnn.all_reduce %[[W]], %[[B]] {bytes = 448 : i64
// DP0-NOT: cnn.all_reduce
// DP0: cnn.sgd_update %{{.*}}, %[[RW]]#0
// DP0-NOT: cnn.all_reduce
// DP1: cnn.data_parallel = {bucket_mb = {{.*}}, buckets = 1 : i64, collectives = 2 : i64
// DP1: cnn.all_reduce %{{.*}}, %{{.*}} {bytes = 1472 : i64
// DP1: %[[LOSS:.*]] = cnn.all_reduce %{{.*}} {bucket = 1 : i64, bytes = 4 : i64
// DP1: return %[[LOSS]],
