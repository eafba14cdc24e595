// Transfers join adjacent stages only: a value read more than one stage
// away is relayed by every stage between (cnn-pipeline-split), so that the
// runtime's links between neighbouring GPUs carry every tensor (a U-Net's
// long skip connection across several cuts).
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=3 micro-batches=2 link-gbps=0 time-slack=0 print-plan=1" -cnn-pipeline-split 2>&1 | FileCheck %s
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=3 micro-batches=2 link-gbps=0 time-slack=0" -cnn-pipeline-split -cnn-pipeline-schedule | FileCheck %s --check-prefix=SCHED
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=3 micro-batches=2 link-gbps=0 time-slack=0" -cnn-pipeline-split -cnn-pipeline-schedule -cnn-pipeline-stage="stage=1" | FileCheck %s --check-prefix=STAGE1

// %r1 (stage 0) is read by the add on stage 2; the add's gradient (stage 2)
// is read by stage 0's gradient sum. The cuts are the time's (launch-us: 15
// us a forward op with its backward pass; 9 forward ops with the loss, 3 a
// stage; time-slack=0): by bytes alone the cost model would rather not relay.
func.func @forward(%x: tensor<2x4xf32> {cnn.input},
                   %w1: tensor<4x4xf32> {cnn.param = "fc1.weight"},
                   %w2: tensor<4x4xf32> {cnn.param = "fc2.weight"},
                   %w3: tensor<4x4xf32> {cnn.param = "fc3.weight"},
                   %w4: tensor<3x4xf32> {cnn.param = "fc4.weight"}) -> tensor<2x3xf32> {
  %x0 = cnn.relu %x : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %h1 = cnn.matmul %x0, %w1 {transpose_rhs = true} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %r1 = cnn.relu %h1 : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %h2 = cnn.matmul %r1, %w2 {transpose_rhs = true} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %r2 = cnn.relu %h2 : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %h3 = cnn.matmul %r2, %w3 {transpose_rhs = true} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %s = cnn.add %h3, %r1 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %y = cnn.matmul %s, %w4 {transpose_rhs = true} : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// The cuts fall after %r1 and %h3: the skip crosses both, once each, as
// the relay sends it (3 tensors a cut: the activation, its gradient, and
// the skip or its gradient).
// CHECK: cut 0|1 after forward op 2: 3 tensor(s), 96 bytes per micro-batch
// CHECK: cut 1|2 after forward op 5: 3 tensor(s), 96 bytes per micro-batch

// Stage 0 sends %r1 to its neighbour only.
// CHECK-LABEL: func.func @stage0_forward(
// CHECK: cnn.send %{{.*}} {peer = 1 : i64, tag = 0 : i64}
// CHECK-NOT: peer = 2
// CHECK: return
// Stage 0's backward takes the add's gradient from stage 1 (the relay).
// CHECK-LABEL: func.func @stage0_backward(
// CHECK-NOT: peer = 2
// CHECK: %[[G:.*]] = cnn.recv {peer = 1 : i64, tag = 3 : i64}
// CHECK-NOT: peer = 2
// CHECK: return
// Stage 1 relays %r1 in its forward pass (received from 0, sent to 2 at
// once) and the gradient in its backward pass (from 2 to 0).
// CHECK-LABEL: func.func @stage1_forward(
// CHECK: %[[R:.*]] = cnn.recv {peer = 0 : i64, tag = 0 : i64}
// CHECK-NEXT: cnn.send %[[R]] {peer = 2 : i64, tag = 1 : i64}
// CHECK-LABEL: func.func @stage1_backward(
// CHECK: %[[D:.*]] = cnn.recv {peer = 2 : i64, tag = 4 : i64}
// CHECK-NEXT: cnn.send %[[D]] {peer = 0 : i64, tag = 3 : i64}
// Stage 2 takes the skip from stage 1 and sends the gradient to stage 1.
// CHECK-LABEL: func.func @stage2_forward(
// CHECK-NOT: peer = 0
// CHECK-DAG: cnn.recv {peer = 1 : i64, tag = 1 : i64}
// CHECK-DAG: cnn.recv {peer = 1 : i64, tag = 2 : i64}
// CHECK-LABEL: func.func @stage2_backward(
// CHECK-NOT: peer = 0
// CHECK: cnn.send %{{.*}} {peer = 1 : i64, tag = 4 : i64}
// CHECK-NOT: peer = 0
// CHECK: return

// The schedule receives on stage 2 in stage 1's sending order (the relay's
// tag 1 before the activation's tag 2), for both micro-batches.
// SCHED-LABEL: func.func @stage2_step(
// SCHED: cnn.recv {peer = 1 : i64, tag = 1 : i64}
// SCHED-NEXT: cnn.recv {peer = 1 : i64, tag = 2 : i64}
// SCHED: cnn.recv {peer = 1 : i64, tag = 1 : i64}
// SCHED-NEXT: cnn.recv {peer = 1 : i64, tag = 2 : i64}

// The middle stage's step compiles for a GPU (its transfers join its
// neighbours; cnn-pipeline-stage refuses any other).
// STAGE1-LABEL: func.func @train_step(
// STAGE1-COUNT-2: cnn.recv {peer = 0 : i64, tag = 0 : i64}
