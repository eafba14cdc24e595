// cnn-remat with a budget: the largest candidate first, and no more once
// the budget is reached. Two BN-apply + ReLU outputs are each read early and
// late; %yl is 1 MiB, %ys 32 bytes. With budget-mb=1, %yl's clone frees the
// budget's 1 MiB and %ys stays stored; without a budget both are recomputed.
// RUN: cnnc-opt %s -cnn-remat="min-gap=3 budget-mb=1" | FileCheck %s
// RUN: cnnc-opt %s -cnn-remat=min-gap=3 | FileCheck %s --check-prefix=ALL
// RUN: cnnc-opt %s -cnn-remat="min-gap=3 budget-mb=3" | FileCheck %s --check-prefix=MB3
// RUN: cnnc-opt %s -cnn-remat="min-gap=3 convolutions-only=true" | FileCheck %s --check-prefix=CONV

// CHECK-LABEL: func.func @two_candidates
// CHECK-NOT: cnn.remat
// CHECK: %[[YL2:.*]] = cnn.fused_elementwise {{.*}} {broadcast = array<i64: 0, 1, 1>, cnn.remat
// CHECK-SAME: -> tensor<256x1024xf32>
// CHECK-NOT: cnn.remat
// CHECK: cnn.add %[[YL2]],
// CHECK-NOT: cnn.remat
// CHECK: return
// ALL-LABEL: func.func @two_candidates
// ALL-COUNT-2: cnn.remat
func.func @two_candidates(%xl: tensor<256x1024xf32>, %al: tensor<1024xf32>, %bl: tensor<1024xf32>, %wl: tensor<256x1024xf32>,
                          %xs: tensor<2x4xf32>, %as: tensor<4xf32>, %bs: tensor<4xf32>, %ws: tensor<2x4xf32>)
    -> (tensor<256x1024xf32>, tensor<256x1024xf32>, tensor<256x1024xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
  %xl1 = cnn.neg %xl : (tensor<256x1024xf32>) -> tensor<256x1024xf32>
  %yl = cnn.fused_elementwise %xl1, %al, %bl {broadcast = array<i64: 0, 1, 1>, layout = #cnn.layout<NHWC>} : (tensor<256x1024xf32>, tensor<1024xf32>, tensor<1024xf32>) -> tensor<256x1024xf32> {
  ^bb0(%v: f32, %s: f32, %t: f32):
    %m = arith.mulf %v, %s : f32
    %n = arith.addf %m, %t : f32
    %c0 = arith.constant 0.0 : f32
    %r = arith.maximumf %n, %c0 : f32
    cnn.yield %r : f32
  }
  %xs1 = cnn.neg %xs : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %ys = cnn.fused_elementwise %xs1, %as, %bs {broadcast = array<i64: 0, 1, 1>, layout = #cnn.layout<NHWC>} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32> {
  ^bb0(%v: f32, %s: f32, %t: f32):
    %m = arith.mulf %v, %s : f32
    %n = arith.addf %m, %t : f32
    %c0 = arith.constant 0.0 : f32
    %r = arith.maximumf %n, %c0 : f32
    cnn.yield %r : f32
  }
  %zl = cnn.relu %yl : (tensor<256x1024xf32>) -> tensor<256x1024xf32>
  %zs = cnn.relu %ys : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %g1 = cnn.neg %wl : (tensor<256x1024xf32>) -> tensor<256x1024xf32>
  %g2 = cnn.neg %g1 : (tensor<256x1024xf32>) -> tensor<256x1024xf32>
  %g3 = cnn.neg %g2 : (tensor<256x1024xf32>) -> tensor<256x1024xf32>
  %h1 = cnn.neg %ws : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %h2 = cnn.neg %h1 : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %h3 = cnn.neg %h2 : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %latel = cnn.add %yl, %zl : (tensor<256x1024xf32>, tensor<256x1024xf32>) -> tensor<256x1024xf32>
  %lates = cnn.add %ys, %zs : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %keepl = cnn.add %xl1, %g3 : (tensor<256x1024xf32>, tensor<256x1024xf32>) -> tensor<256x1024xf32>
  %keeps = cnn.add %xs1, %h3 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %latel, %keepl, %zl, %lates, %keeps, %zs : tensor<256x1024xf32>, tensor<256x1024xf32>, tensor<256x1024xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
}

// With a budget, the least traffic per byte freed comes first: the expanding
// 1x1 convolution %c1 (reads 0.5 MiB, writes 2 MiB: 1.25 bytes per byte
// freed) before the BN-apply + ReLU %e (reads and writes 2 MiB: 2 per byte),
// whatever their order. The 3x3 convolution %c3 is no candidate (its taps
// make it compute-bound). A budget of 1 MiB takes %c1 alone; 3 MiB both.
// CHECK-LABEL: func.func @conv_first
// CHECK-NOT: cnn.remat
// CHECK: %[[C1R:.*]] = cnn.conv2d {{.*}}cnn.remat
// CHECK-SAME: (tensor<8x32x32x16xf32>, tensor<64x1x1x16xf32>)
// CHECK-NOT: cnn.remat
// CHECK: cnn.add %[[C1R]],
// CHECK-NOT: cnn.remat
// CHECK: return
// ALL-LABEL: func.func @conv_first
// ALL-COUNT-2: cnn.remat
// ALL-NOT: cnn.remat
// MB3-LABEL: func.func @conv_first
// MB3: cnn.conv2d {{.*}}cnn.remat
// MB3: cnn.fused_elementwise {{.*}}cnn.remat
// MB3-NOT: cnn.remat
// convolutions-only (the GPU pipeline's default, --remat-convs): no
// elementwise clone, in either function.
// CONV-LABEL: func.func @two_candidates
// CONV-NOT: cnn.remat
// CONV-LABEL: func.func @conv_first
// CONV: cnn.conv2d {{.*}}cnn.remat
// CONV-NOT: cnn.remat
func.func @conv_first(%x: tensor<8x32x32x16xf32>, %w1: tensor<64x1x1x16xf32>, %w3: tensor<64x3x3x16xf32>,
                      %a: tensor<64xf32>, %b: tensor<64xf32>)
    -> (tensor<8x32x32x64xf32>, tensor<8x32x32x64xf32>, tensor<8x32x32x64xf32>, tensor<8x32x32x64xf32>, tensor<8x32x32x16xf32>) {
  %xi = cnn.neg %x : (tensor<8x32x32x16xf32>) -> tensor<8x32x32x16xf32>
  %c3 = cnn.conv2d %xi, %w3 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NHWC>} : (tensor<8x32x32x16xf32>, tensor<64x3x3x16xf32>) -> tensor<8x32x32x64xf32>
  %e = cnn.fused_elementwise %c3, %a, %b {broadcast = array<i64: 0, 1, 1>, layout = #cnn.layout<NHWC>} : (tensor<8x32x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<8x32x32x64xf32> {
  ^bb0(%v: f32, %s: f32, %t: f32):
    %m = arith.mulf %v, %s : f32
    %n = arith.addf %m, %t : f32
    %c0 = arith.constant 0.0 : f32
    %r = arith.maximumf %n, %c0 : f32
    cnn.yield %r : f32
  }
  %c1 = cnn.conv2d %xi, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NHWC>} : (tensor<8x32x32x16xf32>, tensor<64x1x1x16xf32>) -> tensor<8x32x32x64xf32>
  %r1 = cnn.relu %c1 : (tensor<8x32x32x64xf32>) -> tensor<8x32x32x64xf32>
  %re = cnn.relu %e : (tensor<8x32x32x64xf32>) -> tensor<8x32x32x64xf32>
  %g1 = cnn.neg %r1 : (tensor<8x32x32x64xf32>) -> tensor<8x32x32x64xf32>
  %g2 = cnn.neg %g1 : (tensor<8x32x32x64xf32>) -> tensor<8x32x32x64xf32>
  %g3 = cnn.neg %g2 : (tensor<8x32x32x64xf32>) -> tensor<8x32x32x64xf32>
  %late1 = cnn.add %c1, %g3 : (tensor<8x32x32x64xf32>, tensor<8x32x32x64xf32>) -> tensor<8x32x32x64xf32>
  %latee = cnn.add %e, %re : (tensor<8x32x32x64xf32>, tensor<8x32x32x64xf32>) -> tensor<8x32x32x64xf32>
  %late3 = cnn.neg %c3 : (tensor<8x32x32x64xf32>) -> tensor<8x32x32x64xf32>
  %latex = cnn.neg %xi : (tensor<8x32x32x16xf32>) -> tensor<8x32x32x16xf32>
  return %late1, %latee, %late3, %re, %latex : tensor<8x32x32x64xf32>, tensor<8x32x32x64xf32>, tensor<8x32x32x64xf32>, tensor<8x32x32x64xf32>, tensor<8x32x32x16xf32>
}
