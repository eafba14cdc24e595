// cnn-pipeline-async-transfers with two tensors crossing a cut (%a and %h
// after forward op 2, the cut the time chooses: 6 forward ops with the
// loss, 3 a stage): a send's wait stands before the next send of its tag
// (the same tensor one micro-batch later), so the second tensor's send
// does not wait for the first's. Before, the wait stood before the next
// send to the peer: ResNet-50's interleaved stages (the stem's two outputs
// crossing) waited for every send.
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-pipeline-partition="stages=2 micro-batches=2 link-gbps=0 time-slack=0" -cnn-pipeline-split -cnn-pipeline-schedule -cnn-pipeline-stage="stage=0" -cnn-pipeline-async-transfers | FileCheck %s
// CHECK-LABEL: func.func @train_step
// CHECK: cnn.send %[[A0:.*]] {event = 0 : i64, link = 1 : i64, peer = 1 : i64, tag = 0 : i64}
// CHECK-NOT: cnn.transfer_wait
// CHECK: cnn.send %[[H0:.*]] {event = 1 : i64, link = 1 : i64, peer = 1 : i64, tag = 1 : i64}
// CHECK-NOT: cnn.transfer_wait
// CHECK: cnn.transfer_wait %[[A0]] {event = 0 : i64}
// CHECK-NEXT: cnn.send %[[A1:.*]] {event = 2 : i64, link = 1 : i64, peer = 1 : i64, tag = 0 : i64}
// CHECK-NOT: cnn.transfer_wait
// CHECK: cnn.transfer_wait %[[H0]] {event = 1 : i64}
// CHECK-NEXT: cnn.send %[[H1:.*]] {event = 3 : i64, link = 1 : i64, peer = 1 : i64, tag = 1 : i64}
// The last micro-batch's sends are waited for at the end of the step.
// CHECK: cnn.transfer_wait %[[A1]] {event = 2 : i64}
// CHECK-NEXT: cnn.transfer_wait %[[H1]] {event = 3 : i64}
// CHECK-NEXT: return

func.func @forward(%x: tensor<2x4xf32> {cnn.input},
                   %w1: tensor<4x4xf32> {cnn.param = "fc1.weight"},
                   %w2: tensor<3x4xf32> {cnn.param = "fc2.weight"}) -> tensor<2x3xf32> {
  %p = cnn.relu %x : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %a = cnn.relu %p : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %h = cnn.matmul %a, %w1 {transpose_rhs = true} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %s = cnn.add %a, %h : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %y = cnn.matmul %s, %w2 {transpose_rhs = true} : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}
