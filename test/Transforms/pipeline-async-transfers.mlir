// RUN: cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=2 micro-batches=2 link-gbps=0 launch-us=0 launch-us=0" -cnn-pipeline-split -cnn-pipeline-schedule -cnn-pipeline-stage="stage=0" -cnn-pipeline-async-transfers | FileCheck %s --check-prefix=S0
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=2 micro-batches=2 link-gbps=0 launch-us=0 launch-us=0" -cnn-pipeline-split -cnn-pipeline-schedule -cnn-pipeline-stage="stage=1" -cnn-pipeline-async-transfers | FileCheck %s --check-prefix=S1
// The CUDA target's step pipeline runs it (pipeline-async-transfers, on by
// default) and the emitter prints the transfers on the links' streams.
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=2 micro-batches=2 link-gbps=0 launch-us=0 launch-us=0" -cnn-pipeline-split -cnn-pipeline-schedule -cnn-pipeline-stage="stage=1" -cnn-gpu-pipeline="precision=fp32" -o %t1.mlir
// RUN: cnnc %t1.mlir --emit cuda | FileCheck %s --check-prefix=CUDA1
// The emitter prints the link the pass chose; a transfer without one (the
// same step, its links removed) is refused, not given a link.
// RUN: sed -e 's/link = [0-9] : i64, //' %t1.mlir > %t1-nolink.mlir
// RUN: not cnnc %t1-nolink.mlir --emit cuda 2>&1 | FileCheck %s --check-prefix=NOLINK
// 1F1B's grouped transfers stay on the compute stream; a step of no
// pipeline is left alone.
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=2 micro-batches=4 link-gbps=0 launch-us=0 launch-us=0" -cnn-pipeline-split -cnn-pipeline-schedule="schedule=1f1b" -cnn-pipeline-stage="stage=0" -cnn-pipeline-async-transfers | FileCheck %s --check-prefix=ONEF
// RUN: cnnc-opt %s -cnn-autodiff -cnn-pipeline-async-transfers | FileCheck %s --check-prefix=NONE

// cnn-pipeline-async-transfers on the stages of a two-stage GPipe step.

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

// Stage 0 sends micro-batch 0's activation and goes on to micro-batch 1;
// it waits for that send only before sending micro-batch 1's. The first
// gradient's receive comes after the last send to the same stage (a link
// keeps its order), the second rises to just after the first's wait.
// S0: func.func @train_step(
// S0-SAME: cnn.transfer_events = 4 : i64
// S0: cnn.micro_batch %{{.*}} {count = 2 : i64, index = 0 : i64}
// S0: cnn.send %[[A0:.*]] {event = 0 : i64, link = 1 : i64, peer = 1 : i64, tag = 0 : i64}
// S0-NEXT: cnn.micro_batch %{{.*}} {count = 2 : i64, index = 1 : i64}
// S0: cnn.transfer_wait %[[A0]] {event = 0 : i64}
// S0-NEXT: cnn.send %[[A1:.*]] {event = 1 : i64, link = 1 : i64, peer = 1 : i64, tag = 0 : i64}
// S0-NEXT: %[[G0:.*]] = cnn.recv {event = 2 : i64, link = 1 : i64, peer = 1 : i64, tag = 1 : i64}
// S0: cnn.transfer_wait %[[G0]] {event = 2 : i64}
// S0-NEXT: %[[G1:.*]] = cnn.recv {event = 3 : i64, link = 1 : i64, peer = 1 : i64, tag = 1 : i64}
// S0-NEXT: cnn.bias_grad %[[G0]]
// S0: cnn.transfer_wait %[[G1]] {event = 3 : i64}
// S0-NEXT: cnn.bias_grad %[[G1]]
// S0: cnn.transfer_wait %[[A1]] {event = 1 : i64}
// S0-NEXT: return

// Stage 1 posts micro-batch 0's receive at the top and micro-batch 1's just
// after waiting for micro-batch 0's, before micro-batch 0's forward pass
// reads it; micro-batch 1's wait stands where its receive was.
// S1: func.func @train_step(
// S1-SAME: cnn.transfer_events = 4 : i64
// S1-NEXT: %[[X0:.*]] = cnn.recv {event = 0 : i64, link = 0 : i64, peer = 0 : i64, tag = 0 : i64}
// S1: cnn.transfer_wait %[[X0]] {event = 0 : i64}
// S1-NEXT: %[[X1:.*]] = cnn.recv {event = 1 : i64, link = 0 : i64, peer = 0 : i64, tag = 0 : i64}
// S1-NEXT: cnn.relu %[[X0]]
// S1: cnn.softmax_cross_entropy
// S1: cnn.transfer_wait %[[X1]] {event = 1 : i64}
// S1-NEXT: cnn.relu %[[X1]]
// S1: cnn.send %[[D0:.*]] {event = 2 : i64, link = 0 : i64, peer = 0 : i64, tag = 1 : i64}
// S1: cnn.transfer_wait %[[D0]] {event = 2 : i64}
// S1-NEXT: cnn.send %[[D1:.*]] {event = 3 : i64, link = 0 : i64, peer = 0 : i64, tag = 1 : i64}
// S1: cnn.transfer_wait %[[D1]] {event = 3 : i64}
// S1-NEXT: return

// CUDA1: cnnrt::dist::prepare(ctx, 0); // the stages
// CUDA1-NEXT: cnnrt::dist::prepareTransfers(ctx, 4);
// CUDA1: cnnrt::dist::recvAsync(ctx, A + {{[0-9]+}}, 2048ull, 0, 0, 0, "tag 0 at
// CUDA1: cnnrt::dist::transferWait(ctx, 0);
// CUDA1-NEXT: cnnrt::dist::recvAsync(ctx, A + {{[0-9]+}}, 2048ull, 0, 1, 0, "tag 0 at
// CUDA1: cnnrt::dist::transferWait(ctx, 1);
// CUDA1: cnnrt::dist::sendAsync(ctx, A + {{[0-9]+}}, 2048ull, 0, 2, 0, "tag 1 at
// CUDA1: cnnrt::dist::transferWait(ctx, 2);
// CUDA1-NEXT: cnnrt::dist::sendAsync(ctx, A + {{[0-9]+}}, 2048ull, 0, 3, 0, "tag 1 at
// CUDA1: cnnrt::dist::transferWait(ctx, 3);
// CUDA1-NOT: cnnrt::dist::send(
// CUDA1-NOT: cnnrt::dist::recv(

// ONEF-NOT: transfer_wait
// ONEF-NOT: event =
// ONEF: cnn.transfers
// ONEF-NOT: transfer_events

// NONE-NOT: transfer_wait
// NONE-NOT: transfer_events

// NOLINK: CUDA backend: an asynchronous transfer without its 'link' (cnn-pipeline-async-transfers sets it)
