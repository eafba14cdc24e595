// RUN: cnnc-opt %s -cnn-autodiff -cnn-precision | FileCheck %s
// RUN: cnnc-opt %s -cnn-autodiff=optimizer=adam -cnn-precision="init-scale=1024 growth-interval=7 pad-channels=false" | FileCheck %s --check-prefix=ADAM
// RUN: cnnc-opt %s -cnn-autodiff=optimizer=none -cnn-precision | FileCheck %s --check-prefix=GRAD
// RUN: not cnnc-opt %s -cnn-autodiff -cnn-precision -cnn-precision 2>&1 | FileCheck %s --check-prefix=TWICE

// conv (3 input channels, 3x3: padded to 8) + bias + BN + relu -> pool -> linear.
func.func @forward(%x: tensor<2x3x8x8xf32> {cnn.input},
                   %w1: tensor<4x3x3x3xf32> {cnn.param = "conv.weight"},
                   %b1: tensor<4xf32> {cnn.param = "conv.bias"},
                   %g: tensor<4xf32> {cnn.param = "bn.weight"},
                   %be: tensor<4xf32> {cnn.param = "bn.bias"},
                   %rm: tensor<4xf32> {cnn.buffer = "bn.running_mean"},
                   %rv: tensor<4xf32> {cnn.buffer = "bn.running_var"},
                   %w2: tensor<10x4xf32> {cnn.param = "fc.weight"}) -> tensor<2x10xf32> {
  %c = cnn.conv2d %x, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %cb = cnn.bias_add %c, %b1 : (tensor<2x4x8x8xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  %n = cnn.batch_norm %cb, %g, %be, %rm, %rv {epsilon = 1.0e-5 : f32} : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  %r = cnn.relu %n : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %p = cnn.global_avg_pool %r : (tensor<2x4x8x8xf32>) -> tensor<2x4x1x1xf32>
  %f = cnn.flatten %p {axis = 1} : (tensor<2x4x1x1xf32>) -> tensor<2x4xf32>
  %y = cnn.matmul %f, %w2 {transpose_rhs = true} : (tensor<2x4xf32>, tensor<10x4xf32>) -> tensor<2x10xf32>
  return %y : tensor<2x10xf32>
}

// @forward: f16 inside, f32 interface, logits cast back.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[FX:[a-z0-9]+]]: tensor<2x3x8x8xf32> {cnn.input}
// CHECK-SAME: -> tensor<2x10xf32>
// CHECK-DAG: %[[FXH:.*]] = cnn.cast %[[FX]] : (tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf16>
// CHECK: cnn.conv2d {{.*}} : (tensor<2x8x8x8xf16>, tensor<4x8x3x3xf16>) -> tensor<2x4x8x8xf16>
// BN keeps f32 scale/bias/statistics.
// CHECK: cnn.batch_norm {{.*}} : (tensor<2x4x8x8xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf16>
// CHECK: %[[FY:.*]] = cnn.matmul {{.*}} -> tensor<2x10xf16>
// CHECK: %[[FYF:.*]] = cnn.cast %[[FY]] : (tensor<2x10xf16>) -> tensor<2x10xf32>
// CHECK: return %[[FYF]] : tensor<2x10xf32>

// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x3x8x8xf32> {cnn.input}
// CHECK-SAME: %[[LR:[a-z0-9]+]]: tensor<f32> {cnn.lr}
// Master weights stay f32 arguments.
// CHECK-SAME: %[[W1:[a-z0-9]+]]: tensor<4x3x3x3xf32> {cnn.param = "conv.weight"}
// CHECK-SAME: %[[B1:[a-z0-9]+]]: tensor<4xf32> {cnn.param = "conv.bias"}
// CHECK-SAME: %[[G:[a-z0-9]+]]: tensor<4xf32> {cnn.param = "bn.weight"}
// CHECK-SAME: %[[W2:[a-z0-9]+]]: tensor<10x4xf32> {cnn.param = "fc.weight"}
// CHECK-SAME: %[[S:[a-z0-9]+]]: tensor<f32> {cnn.init = 6.553600e+04 : f32, cnn.loss_scale, cnn.state = "loss_scale"}
// CHECK-SAME: %[[T:[a-z0-9]+]]: tensor<f32> {cnn.state = "loss_scale.growth_tracker"}
// The count of applied (not skipped) optimizer steps: torch.optim's step
// number under GradScaler.
// CHECK-SAME: %[[C:[a-z0-9]+]]: tensor<f32> {cnn.state = "optimizer.applied_steps"}
// CHECK-SAME: -> (tensor<f32> {cnn.loss}, tensor<4x3x3x3xf32> {cnn.param = "conv.weight"}
// CHECK-SAME: tensor<4xf32> {cnn.buffer = "bn.running_mean"}
// CHECK-SAME: tensor<f32> {cnn.state = "loss_scale"}, tensor<f32> {cnn.state = "loss_scale.growth_tracker"}, tensor<f32> {cnn.state = "optimizer.applied_steps"})
// One f16 copy per parameter that needs one (not BN's scale/bias).
// CHECK-DAG: %[[W2H:.*]] = cnn.cast %[[W2]] : (tensor<10x4xf32>) -> tensor<10x4xf16>
// CHECK-DAG: %[[B1H:.*]] = cnn.cast %[[B1]] : (tensor<4xf32>) -> tensor<4xf16>
// CHECK-DAG: %[[W1H:.*]] = cnn.cast %[[W1]] : (tensor<4x3x3x3xf32>) -> tensor<4x3x3x3xf16>
// CHECK-NOT: cnn.cast %[[G]]
// Channel padding 3 -> 8 of the filter copy and of the image (cast right
// after the argument): one zero pad each, at the end of the channels.
// CHECK: %[[W1P:.*]] = cnn.pad %[[W1H]] {pads = array<i64: 0, 0, 0, 0, 0, 5, 0, 0>} : (tensor<4x3x3x3xf16>) -> tensor<4x8x3x3xf16>
// CHECK: %[[XH:.*]] = cnn.cast %[[X]] : (tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf16>
// CHECK: %[[XP:.*]] = cnn.pad %[[XH]] {pads = array<i64: 0, 0, 0, 0, 0, 5, 0, 0>} : (tensor<2x3x8x8xf16>) -> tensor<2x8x8x8xf16>
// CHECK: cnn.conv2d %[[XP]], %[[W1P]] {{.*}} : (tensor<2x8x8x8xf16>, tensor<4x8x3x3xf16>) -> tensor<2x4x8x8xf16>
// CHECK: cnn.bias_add {{.*}}, %[[B1H]] : (tensor<2x4x8x8xf16>, tensor<4xf16>) -> tensor<2x4x8x8xf16>
// BN statistics f32; the loss f32 from f16 logits.
// CHECK: cnn.batch_norm_train {{.*}} -> (tensor<2x4x8x8xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK: %[[Y:.*]] = cnn.matmul {{.*}}, %[[W2H]] {transpose_rhs = true} : (tensor<2x4xf16>, tensor<10x4xf16>) -> tensor<2x10xf16>
// CHECK: %[[LOSS:.*]] = cnn.softmax_cross_entropy %[[Y]], {{.*}} : (tensor<2x10xf16>, tensor<2xi32>) -> tensor<f32>
// The seed is the loss scale, not the constant 1.0.
// CHECK-NOT: cnn.constant dense<1.000000e+00>
// CHECK: cnn.softmax_cross_entropy_grad %[[Y]], {{.*}}, %[[S]] : (tensor<2x10xf16>, tensor<2xi32>, tensor<f32>) -> tensor<2x10xf16>
// CHECK: %[[DW2:.*]] = cnn.matmul {{.*}} {transpose_lhs = true} : (tensor<2x10xf16>, tensor<2x4xf16>) -> tensor<10x4xf16>
// The optimizer takes the f16 gradients as they are: no cast per parameter.
// CHECK-NOT: cnn.cast %[[DW2]]
// CHECK: %{{.*}}, %[[DNS:[a-z_0-9]+]], %[[DNB:[a-z_0-9]+]] = cnn.batch_norm_grad {{.*}} -> (tensor<2x4x8x8xf16>, tensor<4xf32>, tensor<4xf32>)
// The filter gradient of the padded conv is sliced back to 3 channels.
// CHECK: %[[DWP:.*]] = cnn.conv2d_bwd_filter %[[XP]], {{.*}} -> tensor<4x8x3x3xf16>
// CHECK: %[[DW1:.*]] = cnn.slice %[[DWP]] {offsets = array<i64: 0, 0, 0, 0>, sizes = array<i64: 4, 3, 3, 3>}
// CHECK-NOT: cnn.cast %[[DW1]]
// CHECK: %[[OK:.*]] = cnn.all_finite %[[DW1]], {{.*}}, %[[DNS]], %[[DNB]], %[[DW2]] :
// CHECK: %[[NS:.*]], %[[NT:.*]] = cnn.loss_scale_update %[[S]], %[[T]], %[[OK]] :
// CHECK: %[[N:.*]] = cnn.add %[[C]], %[[OK]] : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK: cnn.sgd_update %[[W1]], %[[DW1]], {{.*}}, %[[LR]], %[[N]], %[[S]], %[[OK]] {
// CHECK: cnn.sgd_update %[[G]], %[[DNS]], {{.*}}, %[[N]], %[[S]], %[[OK]] {
// CHECK: cnn.sgd_update %[[W2]], %[[DW2]], {{.*}}, %[[N]], %[[S]], %[[OK]] {
// CHECK-SAME: (tensor<10x4xf32>, tensor<10x4xf16>, tensor<10x4xf32>
// CHECK: return %[[LOSS]], {{.*}}, %[[NS]], %[[NT]], %[[N]] :
// No f16 tensor crosses the function boundary of the step.
// CHECK-NOT: xf16> {cnn

// ADAM-LABEL: func.func @forward
// ADAM-NOT: cnn.pad
// ADAM-LABEL: func.func @train_step
// ADAM-SAME: {cnn.init = 1.024000e+03 : f32, cnn.loss_scale, cnn.state = "loss_scale"}
// ADAM-NOT: cnn.pad
// ADAM: cnn.conv2d {{.*}} : (tensor<2x3x8x8xf16>, tensor<4x3x3x3xf16>) -> tensor<2x4x8x8xf16>
// ADAM: cnn.loss_scale_update {{.*}} {growth_interval = 7 : i64}
// ADAM: %[[AN:.*]] = cnn.add
// ADAM-COUNT-5: cnn.adam_update {{.*}}, %[[AN]], %{{.*}}, %{{.*}} {beta1

// With optimizer none the gradients are returned unscaled, in f32.
// GRAD-LABEL: func.func @train_step
// GRAD-SAME: -> (tensor<f32> {cnn.loss}, tensor<4x3x3x3xf32> {cnn.grad = "conv.weight"}
// GRAD: %[[OK:.*]] = cnn.all_finite
// GRAD: cnn.loss_scale_update %{{.*}}, %{{.*}}, %[[OK]]
// GRAD-NOT: cnn.sgd_update
// GRAD-NOT: applied_steps
// GRAD: cnn.unscale %{{.*}}, %{{.*}} : (tensor<4x3x3x3xf16>, tensor<f32>) -> tensor<4x3x3x3xf32>
// GRAD: return

// TWICE: already has a loss scale (the pass ran twice?)
