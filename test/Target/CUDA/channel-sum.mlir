// Per-channel sums and means over N, H, W of an NHWC tensor print as
// cnn-select-lowering chose them: with 8 channels "channel_sum_vec8", eight
// channels per thread (nhwcPartial8); the same step with the choice changed
// by hand to "channel_sum" prints the one-channel-per-thread kernels
// (nhwcPartial): the printer decides nothing.
// RUN: cnnc-opt %s --cnn-autodiff --cse --cnn-gpu-pipeline -o %t.step.mlir
// RUN: FileCheck %s --check-prefix=IR < %t.step.mlir
// RUN: cnnc-translate --cnn-to-cuda %t.step.mlir -o %t.cu
// RUN: FileCheck %s --check-prefix=VEC < %t.cu
// RUN: sed 's/"channel_sum_vec8"/"channel_sum"/' %t.step.mlir > %t.scalar.mlir
// RUN: cnnc-translate --cnn-to-cuda %t.scalar.mlir -o %t.scalar.cu
// RUN: FileCheck %s --check-prefix=SCALAR < %t.scalar.cu

// IR-COUNT-3: cnn.lowering = "channel_sum_vec8"
// IR-NOT: cnn.lowering = "channel_sum"}
// VEC-LABEL: static void trainStep(
// VEC: nhwcPartial8<0, __half>
// VEC: nhwcPartial8<0, float>
// VEC-NOT: nhwcPartial<0,
// SCALAR-LABEL: static void trainStep(
// SCALAR: nhwcPartial<0, __half>
// SCALAR: nhwcPartial<0, float>
// SCALAR-NOT: nhwcPartial8<0,

// output scaled by its channel means), whose gradient is a per-channel sum.
func.func @forward(%x: tensor<4x3x8x8xf32> {cnn.input},
                   %w1: tensor<8x3x3x3xf32> {cnn.param = "conv.weight"},
                   %wf: tensor<10x8xf32> {cnn.param = "fc.weight"}) -> tensor<4x10xf32> {
  %c = cnn.conv2d %x, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<4x3x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<4x8x8x8xf32>
  %m = cnn.reduce_mean %c {axes = array<i64: 0, 2, 3>} : (tensor<4x8x8x8xf32>) -> tensor<1x8x1x1xf32>
  %y = cnn.mul %c, %m : (tensor<4x8x8x8xf32>, tensor<1x8x1x1xf32>) -> tensor<4x8x8x8xf32>
  %q = cnn.global_avg_pool %y : (tensor<4x8x8x8xf32>) -> tensor<4x8x1x1xf32>
  %f = cnn.flatten %q {axis = 1} : (tensor<4x8x1x1xf32>) -> tensor<4x8xf32>
  %o = cnn.matmul %f, %wf {transpose_rhs = true} : (tensor<4x8xf32>, tensor<10x8xf32>) -> tensor<4x10xf32>
  return %o : tensor<4x10xf32>
}
