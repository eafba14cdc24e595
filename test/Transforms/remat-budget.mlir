// cnn-remat with a budget: the largest candidate first, and no more once
// the budget is reached. Two BN-apply + ReLU outputs are each read early and
// late; %yl is 1 MiB, %ys 32 bytes. With budget-mb=1, %yl's clone frees the
// budget's 1 MiB and %ys stays stored; without a budget both are recomputed.
// RUN: cnnc-opt %s -cnn-remat="min-gap=3 budget-mb=1" | FileCheck %s
// RUN: cnnc-opt %s -cnn-remat=min-gap=3 | FileCheck %s --check-prefix=ALL

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
