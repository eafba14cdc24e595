// cnn-pipeline-partition counts the gradients a cut carries back: an
// activation read by u forward ops beyond the cut comes back as u
// gradients. Here a residual block's input %a (forward op 5) is read by the
// block's convolution (op 6) and by its skip add (op 7). Twelve forward ops
// (the loss is the twelfth) at launch-us' 15 us each: the cut after op 5
// balances them (90 / 90 us) but sends %a and gets two gradients back
// (3 tensors); the cut after op 4 (75 / 105 us, within time-slack=0.2)
// sends the convolution's output and gets one back (2 tensors). Counting
// the forward activations only, both crossed 512 bytes and the balanced cut
// won; ResNet-50's cut after a block's output ReLU (3 tensors, 154 MB a
// micro-batch at batch 32 in f16) was preferred so to the cut one op
// earlier (2 tensors, 103 MB).
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=2 micro-batches=4 link-gbps=0 time-slack=0.2 print-plan=1" -o /dev/null | FileCheck %s
// CHECK: stage 0: forward ops 0-4,{{.*}} est. 75.{{[0-9]+}} us
// CHECK-NEXT: cut 0|1 after forward op 4: 2 tensor(s), 1024 bytes per micro-batch (both directions)
// CHECK-NEXT: stage 1: forward ops 5-end,{{.*}} est. 105.{{[0-9]+}} us

func.func @forward(%x: tensor<2x4x4x4xf32> {cnn.input},
                   %w0: tensor<4x4x1x1xf32> {cnn.param = "conv0.weight"},
                   %w1: tensor<4x4x1x1xf32> {cnn.param = "conv1.weight"},
                   %w2: tensor<4x4x1x1xf32> {cnn.param = "conv2.weight"},
                   %w3: tensor<4x4x1x1xf32> {cnn.param = "conv3.weight"},
                   %w5: tensor<10x64xf32> {cnn.param = "fc.weight"}) -> tensor<2x10xf32> {
  %c0 = cnn.conv2d %x, %w0 {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x4x4x4xf32>, tensor<4x4x1x1xf32>) -> tensor<2x4x4x4xf32>
  %r0 = cnn.relu %c0 : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %c1 = cnn.conv2d %r0, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x4x4x4xf32>, tensor<4x4x1x1xf32>) -> tensor<2x4x4x4xf32>
  %r1 = cnn.relu %c1 : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %c2 = cnn.conv2d %r1, %w2 {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x4x4x4xf32>, tensor<4x4x1x1xf32>) -> tensor<2x4x4x4xf32>
  %a = cnn.relu %c2 : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %c3 = cnn.conv2d %a, %w3 {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x4x4x4xf32>, tensor<4x4x1x1xf32>) -> tensor<2x4x4x4xf32>
  %s = cnn.add %a, %c3 : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %r = cnn.relu %s : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %f = cnn.flatten %r {axis = 1} : (tensor<2x4x4x4xf32>) -> tensor<2x64xf32>
  %y = cnn.matmul %f, %w5 {transpose_rhs = true} : (tensor<2x64xf32>, tensor<10x64xf32>) -> tensor<2x10xf32>
  return %y : tensor<2x10xf32>
}
