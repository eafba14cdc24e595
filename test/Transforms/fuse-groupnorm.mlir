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
// CHECK:      %[[REP:.*]] = cnn.fused_elementwise %{{.*}} {broadcast = array<i64: 3>{{.*}}} : (tensor<2x2x1xf32>) -> tensor<2x2x2xf32>
// CHECK-NEXT: ^bb0(%[[A:.*]]: f32):
// CHECK-NEXT:   %[[S:.*]] = math.sqrt %[[A]] : f32
// CHECK-NEXT:   cnn.yield %[[S]] : f32
// CHECK-DAG:  %[[VIEW:.*]] = cnn.reshape %[[CENTER]]#0 : (tensor<2x2x18xf32>) -> tensor<2x4x3x3xf32>
// CHECK-DAG:  %[[STD:.*]] = cnn.reshape %[[REP]] : (tensor<2x2x2xf32>) -> tensor<2x4x1x1xf32>
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

// The f16 NHWC pipeline (cnn-layout, cnn-precision), GroupNorm(2, 4) + SiLU
// after a convolution's NHWC output %y: cnn-layout transposed it to NCHW for
// the grouped statistics and (Layout.cpp's pull-up) put the one transpose
// back to NHWC right after the reshape of the normalized x, before the
// scale. cnn-fuse rebuilds the normalization on that NHWC view and, since
// the centering x - mean is a grouped-view op of inputs that are free there
// (x is the reshape of the transpose of %y), recomputes it too: the kernel
// reads %y itself, no transpose of the centered x. The mean (with its f16
// cast) and the std are repeated over their groups by one small kernel.
// The normalize, scale, shift and SiLU are then ONE kernel on 2x3x3x4; its
// normalized x is a result (the backward's scale gradient reads it on the
// NHWC view). The backward's reader of the normalized x on the grouped view
// (%bwd) computes the division itself, merged at the centering's place
// (not sunk: a producer with an f16 result is never sunk, see `sinkable`).
// CHECK-LABEL: func.func @group_norm_silu_nhwc
// CHECK-SAME:  (%[[Y:.*]]: tensor<2x3x3x4xf16>
// CHECK:      %[[T:.*]] = cnn.transpose %[[Y]] {permutation = array<i64: 0, 3, 1, 2>}
// CHECK:      %[[BWD:.*]] = cnn.fused_elementwise %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {{.*}} -> tensor<2x2x18xf32>
// CHECK:        arith.divf
// CHECK:        arith.mulf
// CHECK:      %[[REP:.*]]:2 = cnn.fused_elementwise %{{.*}}, %{{.*}} {broadcast = array<i64: 3, 3>{{.*}}} : (tensor<2x2x1xf32>, tensor<2x2x1xf32>) -> (tensor<2x2x2xf16>, tensor<2x2x2xf16>)
// CHECK-DAG:  %[[MEAN:.*]] = cnn.reshape %[[REP]]#0 : (tensor<2x2x2xf16>) -> tensor<2x1x1x4xf16>
// CHECK-DAG:  %[[STD:.*]] = cnn.reshape %[[REP]]#1 : (tensor<2x2x2xf16>) -> tensor<2x1x1x4xf16>
// CHECK-NOT:  cnn.transpose
// CHECK:      %[[OUT:.*]]:2 = cnn.fused_elementwise %[[Y]], %[[MEAN]], %[[STD]], %{{.*}}, %{{.*}} {broadcast = array<i64: 0, 3, 3, 3, 1>{{.*}}layout = #cnn.layout<NHWC>} : {{.*}} -> (tensor<2x3x3x4xf16>, tensor<2x3x3x4xf16>)
// CHECK:        arith.subf
// CHECK:        arith.divf
// CHECK:        arith.mulf
// CHECK:        arith.addf
// CHECK:        math.exp
// CHECK:        cnn.yield
// CHECK-NOT:  cnn.transpose
// The backward's f32 read of the normalized x (the scale gradient's
// product) takes the f16 result: the widening cast sinks into that kernel
// instead of making the forward store the normalized x again in f32.
// CHECK:      %[[SG:.*]] = cnn.fused_elementwise %[[OUT]]#0, %{{.*}} {{.*}} -> tensor<2x3x3x4xf32>
// CHECK:      return %[[OUT]]#1, %[[OUT]]#0, %[[BWD]], %[[SG]]
// The same with the channel view off: the division stays on the grouped
// view, the transpose of the normalized x is a kernel, then scale, shift
// and SiLU.
// OFF-LABEL: func.func @group_norm_silu_nhwc
// OFF:       arith.divf
// OFF:       cnn.transpose %{{.*}} {permutation = array<i64: 0, 2, 3, 1>} : (tensor<2x4x3x3xf16>) -> tensor<2x3x3x4xf16>
func.func @group_norm_silu_nhwc(%y: tensor<2x3x3x4xf16>, %scale: tensor<4xf16>,
                                %shift: tensor<4xf16>, %dn: tensor<2x2x18xf16>,
                                %dy: tensor<2x3x3x4xf32>)
    -> (tensor<2x3x3x4xf16>, tensor<2x3x3x4xf16>, tensor<2x2x18xf32>,
        tensor<2x3x3x4xf32>) {
  %eps = cnn.constant dense<1.0e-5> : tensor<1x1x1xf32>
  %x = cnn.transpose %y {permutation = array<i64: 0, 3, 1, 2>} : (tensor<2x3x3x4xf16>) -> tensor<2x4x3x3xf16>
  %g = cnn.reshape %x : (tensor<2x4x3x3xf16>) -> tensor<2x2x18xf16>
  %mean = cnn.reduce_mean %g {axes = array<i64: 2>} : (tensor<2x2x18xf16>) -> tensor<2x2x1xf32>
  %mean16 = cnn.cast %mean : (tensor<2x2x1xf32>) -> tensor<2x2x1xf16>
  %c = cnn.sub %g, %mean16 : (tensor<2x2x18xf16>, tensor<2x2x1xf16>) -> tensor<2x2x18xf16>
  %c32 = cnn.cast %c : (tensor<2x2x18xf16>) -> tensor<2x2x18xf32>
  %sq = cnn.mul %c32, %c32 : (tensor<2x2x18xf32>, tensor<2x2x18xf32>) -> tensor<2x2x18xf32>
  %var = cnn.reduce_mean %sq {axes = array<i64: 2>} : (tensor<2x2x18xf32>) -> tensor<2x2x1xf32>
  %ve = cnn.add %var, %eps : (tensor<2x2x1xf32>, tensor<1x1x1xf32>) -> tensor<2x2x1xf32>
  %std = cnn.sqrt %ve : (tensor<2x2x1xf32>) -> tensor<2x2x1xf32>
  %std16 = cnn.cast %std : (tensor<2x2x1xf32>) -> tensor<2x2x1xf16>
  %n = cnn.div %c, %std16 : (tensor<2x2x18xf16>, tensor<2x2x1xf16>) -> tensor<2x2x18xf16>
  %v = cnn.reshape %n : (tensor<2x2x18xf16>) -> tensor<2x4x3x3xf16>
  %vt = cnn.transpose %v {permutation = array<i64: 0, 2, 3, 1>} : (tensor<2x4x3x3xf16>) -> tensor<2x3x3x4xf16>
  %vt32 = cnn.cast %vt : (tensor<2x3x3x4xf16>) -> tensor<2x3x3x4xf32>
  %s = cnn.reshape %scale : (tensor<4xf16>) -> tensor<1x1x1x4xf16>
  %m = cnn.mul %vt, %s : (tensor<2x3x3x4xf16>, tensor<1x1x1x4xf16>) -> tensor<2x3x3x4xf16>
  %b = cnn.bias_add %m, %shift {layout = #cnn.layout<NHWC>} : (tensor<2x3x3x4xf16>, tensor<4xf16>) -> tensor<2x3x3x4xf16>
  %sig = cnn.sigmoid %b : (tensor<2x3x3x4xf16>) -> tensor<2x3x3x4xf16>
  %out = cnn.mul %b, %sig : (tensor<2x3x3x4xf16>, tensor<2x3x3x4xf16>) -> tensor<2x3x3x4xf16>
  // A later value (the backward's gradient of the normalized x) times the
  // normalized x on the grouped view.
  %dn2 = cnn.mul %dn, %dn : (tensor<2x2x18xf16>, tensor<2x2x18xf16>) -> tensor<2x2x18xf16>
  %bwd = cnn.fused_elementwise %std, %n, %dn2 {broadcast = array<i64: 3, 0, 0>} : (tensor<2x2x1xf32>, tensor<2x2x18xf16>, tensor<2x2x18xf16>) -> tensor<2x2x18xf32> {
  ^bb0(%a0: f32, %a1: f32, %a2: f32):
    %p = arith.mulf %a2, %a1 : f32
    %q = arith.divf %p, %a0 : f32
    cnn.yield %q : f32
  }
  // The softmax stands for the backward's gradient: not elementwise, so its
  // result comes after the forward kernel.
  %dy2 = cnn.softmax %dy {axis = 3 : i64} : (tensor<2x3x3x4xf32>) -> tensor<2x3x3x4xf32>
  %sg = cnn.mul %dy2, %vt32 : (tensor<2x3x3x4xf32>, tensor<2x3x3x4xf32>) -> tensor<2x3x3x4xf32>
  return %out, %vt, %bwd, %sg : tensor<2x3x3x4xf16>, tensor<2x3x3x4xf16>, tensor<2x2x18xf32>, tensor<2x3x3x4xf32>
}

// A merge reads a producer's f16 result inside the merged body as the f32
// scalar the producer computed: no rounding to f16 in between, where the
// unmerged step stored it as f16 (cnn-precision's gradient bodies yield
// unrounded scalars). That is why an f16 step after cnn-fuse is close to,
// not bit for bit, the unmerged one (session 27's conv.bias.grad one f16
// step off); rounding the read cost accuracy (GRN's f16 filter gradient
// 7.8 % off its f32 step instead of 0.23 %, test_precision_stats.py).
// CHECK-LABEL: func.func @merged_f16_read_keeps_f32
// CHECK:      cnn.fused_elementwise
// CHECK:        %[[P:.*]] = arith.mulf
// CHECK-NEXT:   arith.addf %[[P]]
// CHECK-NOT:  cnn.fused_elementwise
// CHECK:      return
func.func @merged_f16_read_keeps_f32(%a: tensor<8xf16>, %b: tensor<8xf16>) -> tensor<8xf32> {
  %p = cnn.fused_elementwise %a, %b {broadcast = array<i64: 0, 0>} : (tensor<8xf16>, tensor<8xf16>) -> tensor<8xf16> {
  ^bb0(%x: f32, %y: f32):
    %m = arith.mulf %x, %y : f32
    cnn.yield %m : f32
  }
  %q = cnn.fused_elementwise %p, %a {broadcast = array<i64: 0, 0>} : (tensor<8xf16>, tensor<8xf16>) -> tensor<8xf32> {
  ^bb0(%x: f32, %y: f32):
    %s = arith.addf %x, %y : f32
    cnn.yield %s : f32
  }
  return %q : tensor<8xf32>
}
