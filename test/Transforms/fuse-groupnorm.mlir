// RUN: cnnc-opt %s --cnn-fuse | FileCheck %s
// RUN: cnnc-opt %s --cnn-fuse=group-norm-channel-view=false | FileCheck %s --check-prefix=OFF

// GroupNorm(2, 4) + scale, shift and SiLU as the importer writes it: the
// normalization (x - mean) / std on the grouped 2x2x18 view, the rest on the
// 2x4x3x3 channel view. cnn-fuse rebuilds the normalization on the channel
// view (the per-(N, G) std repeated over the group's 2 channels: 2x2x1 ->
// 2x2x2 -> 2x4x1x1; the sqrt, read only there, is recomputed in that small
// repeat) and merges it with the scale, shift and SiLU: one kernel on
// 2x4x3x3.

// With group-norm-channel-view=false (cnnc --fuse-group-norm=false, the A/B
// of docs/benchmarks.md) the division stays on the grouped view and the
// scale, shift and SiLU are a second kernel.
// OFF-LABEL: func.func @group_norm_silu
// OFF:       math.sqrt
// OFF-NEXT:  arith.divf
// OFF-NEXT:  cnn.yield
// OFF:       cnn.reshape %{{.*}} : (tensor<2x2x18xf32>) -> tensor<2x4x3x3xf32>
// OFF-NOT:   tensor<2x2x2xf32>
// OFF-LABEL: func.func @not_a_channel_split

// CHECK-LABEL: func.func @group_norm_silu
// CHECK:      %[[CENTER:[0-9]+]]:2 = cnn.fused_elementwise {{.*}} -> (tensor<2x2x18xf32>, tensor<2x2x18xf32>)
// CHECK:      %[[VIEW:.*]] = cnn.reshape %[[CENTER]]#0 : (tensor<2x2x18xf32>) -> tensor<2x4x3x3xf32>
// CHECK:      %[[REP:.*]] = cnn.fused_elementwise %{{.*}} {broadcast = array<i64: 3>{{.*}}} : (tensor<2x2x1xf32>) -> tensor<2x2x2xf32>
// CHECK-NEXT: ^bb0(%[[A:.*]]: f32):
// CHECK-NEXT:   %[[S:.*]] = math.sqrt %[[A]] : f32
// CHECK-NEXT:   cnn.yield %[[S]] : f32
// CHECK:      %[[STD:.*]] = cnn.reshape %[[REP]] : (tensor<2x2x2xf32>) -> tensor<2x4x1x1xf32>
// CHECK:      %[[Y:.*]] = cnn.fused_elementwise %[[VIEW]], %[[STD]], %{{.*}}, %{{.*}} {broadcast = array<i64: 0, 3, 3, 1>
// CHECK-SAME: -> tensor<2x4x3x3xf32>
// CHECK:        arith.divf
// CHECK:        arith.mulf
// CHECK:        arith.addf
// CHECK:      return %[[Y]]
func.func @group_norm_silu(%x: tensor<2x4x3x3xf32>, %scale: tensor<4xf32>,
                           %shift: tensor<4xf32>) -> tensor<2x4x3x3xf32> {
  %g = cnn.reshape %x : (tensor<2x4x3x3xf32>) -> tensor<2x2x18xf32>
  %mean = cnn.reduce_mean %g {axes = array<i64: 2>} : (tensor<2x2x18xf32>) -> tensor<2x2x1xf32>
  %c = cnn.sub %g, %mean : (tensor<2x2x18xf32>, tensor<2x2x1xf32>) -> tensor<2x2x18xf32>
  %sq = cnn.mul %c, %c : (tensor<2x2x18xf32>, tensor<2x2x18xf32>) -> tensor<2x2x18xf32>
  %var = cnn.reduce_mean %sq {axes = array<i64: 2>} : (tensor<2x2x18xf32>) -> tensor<2x2x1xf32>
  %std = cnn.sqrt %var : (tensor<2x2x1xf32>) -> tensor<2x2x1xf32>
  %n = cnn.div %c, %std : (tensor<2x2x18xf32>, tensor<2x2x1xf32>) -> tensor<2x2x18xf32>
  %v = cnn.reshape %n : (tensor<2x2x18xf32>) -> tensor<2x4x3x3xf32>
  %s0 = cnn.reshape %scale : (tensor<4xf32>) -> tensor<4x1x1xf32>
  %s = cnn.reshape %s0 : (tensor<4x1x1xf32>) -> tensor<1x4x1x1xf32>
  %m = cnn.mul %v, %s : (tensor<2x4x3x3xf32>, tensor<1x4x1x1xf32>) -> tensor<2x4x3x3xf32>
  %b = cnn.bias_add %m, %shift : (tensor<2x4x3x3xf32>, tensor<4xf32>) -> tensor<2x4x3x3xf32>
  %sig = cnn.sigmoid %b : (tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
  %y = cnn.mul %b, %sig : (tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
  return %y : tensor<2x4x3x3xf32>
}

// Negative: 2x2x18 -> 4x2x3x3 merges the batch with the groups (dimension 0
// changes), not a split of the channels: the normalization stays on the
// grouped view, a kernel of its own.
// CHECK-LABEL: func.func @not_a_channel_split
// CHECK:      %[[N:.*]] = cnn.fused_elementwise {{.*}} -> tensor<2x2x18xf32>
// CHECK:      cnn.reshape %[[N]] : (tensor<2x2x18xf32>) -> tensor<4x2x3x3xf32>
// CHECK-NOT:  tensor<2x2x2xf32>
// CHECK:      return
func.func @not_a_channel_split(%x: tensor<2x2x18xf32>, %std: tensor<2x2x1xf32>,
                               %scale: tensor<1x2x1x1xf32>) -> tensor<4x2x3x3xf32> {
  %n = cnn.div %x, %std : (tensor<2x2x18xf32>, tensor<2x2x1xf32>) -> tensor<2x2x18xf32>
  %v = cnn.reshape %n : (tensor<2x2x18xf32>) -> tensor<4x2x3x3xf32>
  %m = cnn.mul %v, %scale : (tensor<4x2x3x3xf32>, tensor<1x2x1x1xf32>) -> tensor<4x2x3x3xf32>
  return %m : tensor<4x2x3x3xf32>
}

// Negative: 2x6x6 -> 2x4x3x3: 4 channels are not a multiple of 6 groups.
// CHECK-LABEL: func.func @channels_not_a_multiple_of_groups
// CHECK:      %[[N6:.*]] = cnn.fused_elementwise {{.*}} -> tensor<2x6x6xf32>
// CHECK:      cnn.reshape %[[N6]] : (tensor<2x6x6xf32>) -> tensor<2x4x3x3xf32>
// CHECK-NOT:  tensor<2x4x1x1xf32>
// CHECK:      return
func.func @channels_not_a_multiple_of_groups(%x: tensor<2x6x6xf32>, %std: tensor<2x6x1xf32>,
                                             %scale: tensor<1x4x1x1xf32>) -> tensor<2x4x3x3xf32> {
  %n = cnn.div %x, %std : (tensor<2x6x6xf32>, tensor<2x6x1xf32>) -> tensor<2x6x6xf32>
  %v = cnn.reshape %n : (tensor<2x6x6xf32>) -> tensor<2x4x3x3xf32>
  %m = cnn.mul %v, %scale : (tensor<2x4x3x3xf32>, tensor<1x4x1x1xf32>) -> tensor<2x4x3x3xf32>
  return %m : tensor<2x4x3x3xf32>
}
