// cnn-pipeline-partition's cut choice among cuts that cross the same bytes:
// the smallest slowest stage wins, not the first found. Ten forward ops of
// equal-size activations (each read by the next op only; the loss is the
// tenth): with launch-us
// (5 us a forward op, 15 with its backward pass) the best cut is after op
// 4 (75 us a stage); time-slack=0.25 admits the cuts after ops 3, 4 and 5
// (90, 75, 90 us), which cross the same 2 x 512 bytes. Before this rule the
// DP kept the first of them (after op 3, 90 us): ResNet-50 f16's S=4 plan
// at micro-batch 64 came out 7.6 % slower than its equal-bytes alternative.
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=2 micro-batches=4 link-gbps=0 time-slack=0.25 print-plan=1" -o /dev/null | FileCheck %s
// CHECK: stage 0: forward ops 0-4,{{.*}} est. 75.{{[0-9]+}} us
// CHECK-NEXT: cut 0|1 after forward op 4: 2 tensor(s), 1024 bytes per micro-batch (both directions)
// CHECK-NEXT: stage 1: forward ops 5-end,{{.*}} est. 75.{{[0-9]+}} us

func.func @forward(%x: tensor<2x4x4x4xf32> {cnn.input},
                   %w1: tensor<4x4x1x1xf32> {cnn.param = "conv1.weight"},
                   %w2: tensor<4x4x1x1xf32> {cnn.param = "conv2.weight"},
                   %w3: tensor<4x4x1x1xf32> {cnn.param = "conv3.weight"},
                   %w4: tensor<4x4x1x1xf32> {cnn.param = "conv4.weight"},
                   %w5: tensor<10x64xf32> {cnn.param = "fc.weight"}) -> tensor<2x10xf32> {
  %c1 = cnn.conv2d %x, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x4x4x4xf32>, tensor<4x4x1x1xf32>) -> tensor<2x4x4x4xf32>
  %r1 = cnn.relu %c1 : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %c2 = cnn.conv2d %r1, %w2 {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x4x4x4xf32>, tensor<4x4x1x1xf32>) -> tensor<2x4x4x4xf32>
  %r2 = cnn.relu %c2 : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %c3 = cnn.conv2d %r2, %w3 {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x4x4x4xf32>, tensor<4x4x1x1xf32>) -> tensor<2x4x4x4xf32>
  %r3 = cnn.relu %c3 : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %c4 = cnn.conv2d %r3, %w4 {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x4x4x4xf32>, tensor<4x4x1x1xf32>) -> tensor<2x4x4x4xf32>
  %f = cnn.flatten %c4 {axis = 1} : (tensor<2x4x4x4xf32>) -> tensor<2x64xf32>
  %y = cnn.matmul %f, %w5 {transpose_rhs = true} : (tensor<2x64xf32>, tensor<10x64xf32>) -> tensor<2x10xf32>
  return %y : tensor<2x10xf32>
}
