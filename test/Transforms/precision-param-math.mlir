// RUN: cnnc-opt %s -cnn-autodiff -cnn-precision | FileCheck %s

// Parameter arithmetic stays f32, as under torch.autocast: a weight
// standardization (timm's ScaledStdConv2d: batch_norm_train over the
// reshaped weight, its scale gain * fan_in^-1/2) computes on the f32 master
// weight and is cast to f16 once, at the convolution's input; its backward
// (batch_norm_grad over the weight, the gain's scale, the reshapes) reads
// the conv's f16 filter gradient through one widening cast and gives the
// updates f32 gradients. In f16 the gain's gradient, a sum over the filter
// at the loss scale, overflowed (nf_resnet's first step skipped).
// The bias_grad of an affine shift (a bias_add after a mul: GroupNorm's
// beta) returns f32; the conv's own bias gradient, whose dy the conv's
// backward also reads, stays f16 as autocast computes it.
func.func @forward(%x: tensor<2x3x6x6xf32> {cnn.input},
                   %w: tensor<4x3x3x3xf32> {cnn.param = "conv.weight"},
                   %gain: tensor<4x1x1x1xf32> {cnn.param = "conv.gain"},
                   %cb: tensor<4xf32> {cnn.param = "conv.bias"},
                   %gamma: tensor<1x4x1x1xf32> {cnn.param = "norm.weight"},
                   %beta: tensor<4xf32> {cnn.param = "norm.bias"},
                   %fw: tensor<5x4xf32> {cnn.param = "fc.weight"}) -> tensor<2x5xf32> {
  %zero = cnn.constant dense<0.0> : tensor<4xf32>
  %one = cnn.constant dense<1.0> : tensor<4xf32>
  %wr = cnn.reshape %w : (tensor<4x3x3x3xf32>) -> tensor<1x4x27x1xf32>
  %gs = cnn.scale %gain {factor = 0.19245 : f32} : (tensor<4x1x1x1xf32>) -> tensor<4x1x1x1xf32>
  %s = cnn.reshape %gs : (tensor<4x1x1x1xf32>) -> tensor<4xf32>
  %n:5 = cnn.batch_norm_train %wr, %s, %zero, %zero, %one {epsilon = 1.0e-5 : f32, momentum = 0.0 : f32} : (tensor<1x4x27x1xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<1x4x27x1xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  %ws = cnn.reshape %n#0 : (tensor<1x4x27x1xf32>) -> tensor<4x3x3x3xf32>
  %c = cnn.conv2d %x, %ws {dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
  %cbias = cnn.bias_add %c, %cb : (tensor<2x4x6x6xf32>, tensor<4xf32>) -> tensor<2x4x6x6xf32>
  %a = cnn.mul %cbias, %gamma : (tensor<2x4x6x6xf32>, tensor<1x4x1x1xf32>) -> tensor<2x4x6x6xf32>
  %b = cnn.bias_add %a, %beta : (tensor<2x4x6x6xf32>, tensor<4xf32>) -> tensor<2x4x6x6xf32>
  %r = cnn.relu %b : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %p = cnn.global_avg_pool %r : (tensor<2x4x6x6xf32>) -> tensor<2x4x1x1xf32>
  %f = cnn.flatten %p {axis = 1 : i64} : (tensor<2x4x1x1xf32>) -> tensor<2x4xf32>
  %o = cnn.matmul %f, %fw {transpose_rhs = true} : (tensor<2x4xf32>, tensor<5x4xf32>) -> tensor<2x5xf32>
  return %o : tensor<2x5xf32>
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[W:arg4]]: tensor<4x3x3x3xf32> {cnn.param = "conv.weight"}
// CHECK-SAME: %[[GAIN:arg5]]: tensor<4x1x1x1xf32> {cnn.param = "conv.gain"}
// Forward: the standardization in f32, one cast to f16 of its result.
// CHECK: %[[WR:.*]] = cnn.reshape %[[W]] : (tensor<4x3x3x3xf32>) -> tensor<1x4x27x1xf32>
// CHECK: %[[GS:.*]] = cnn.scale %[[GAIN]] {{.*}} : (tensor<4x1x1x1xf32>) -> tensor<4x1x1x1xf32>
// CHECK: %[[S:.*]] = cnn.reshape %[[GS]] : (tensor<4x1x1x1xf32>) -> tensor<4xf32>
// CHECK: %[[N:.*]], %[[MEAN:.*]], %[[INVSTD:.*]], %{{.*}}, %{{.*}} = cnn.batch_norm_train %[[WR]], %[[S]], {{.*}} : (tensor<1x4x27x1xf32>, {{.*}}) -> (tensor<1x4x27x1xf32>,
// CHECK: %[[N16:.*]] = cnn.cast %[[N]] : (tensor<1x4x27x1xf32>) -> tensor<1x4x27x1xf16>
// CHECK: %[[WS:.*]] = cnn.reshape %[[N16]] : (tensor<1x4x27x1xf16>) -> tensor<4x3x3x3xf16>
// CHECK: cnn.conv2d %{{.*}}, %{{.*}} {{.*}} -> tensor<2x4x6x6xf16>
// Backward: the affine shift's bias gradient in f32, the conv's in f16.
// CHECK: %[[DBETA:.*]] = cnn.bias_grad %{{.*}} : (tensor<2x4x6x6xf16>) -> tensor<4xf32>
// CHECK: %[[DCB:.*]] = cnn.bias_grad %{{.*}} : (tensor<2x4x6x6xf16>) -> tensor<4xf16>
// CHECK: %[[DW16:.*]] = cnn.conv2d_bwd_filter {{.*}} -> tensor<4x8x3x3xf16>
// CHECK: %[[DWR:.*]] = cnn.reshape %{{.*}} : (tensor<4x3x3x3xf16>) -> tensor<1x4x27x1xf16>
// CHECK: %[[DW32:.*]] = cnn.cast %[[DWR]] : (tensor<1x4x27x1xf16>) -> tensor<1x4x27x1xf32>
// CHECK: %[[DX:.*]], %[[DSCALE:.*]], %{{.*}} = cnn.batch_norm_grad %[[DW32]], %[[WR]], %[[S]], %[[MEAN]], %[[INVSTD]] : (tensor<1x4x27x1xf32>, tensor<1x4x27x1xf32>, {{.*}}) -> (tensor<1x4x27x1xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK: %[[DG1:.*]] = cnn.reshape %[[DSCALE]] : (tensor<4xf32>) -> tensor<4x1x1x1xf32>
// CHECK: %[[DGAIN:.*]] = cnn.scale %[[DG1]] {{.*}} : (tensor<4x1x1x1xf32>) -> tensor<4x1x1x1xf32>
// CHECK: %[[DW:.*]] = cnn.reshape %[[DX]] : (tensor<1x4x27x1xf32>) -> tensor<4x3x3x3xf32>
// CHECK: cnn.all_finite %[[DW]], %[[DGAIN]], %[[DCB]], %{{.*}}, %[[DBETA]],
// CHECK: cnn.sgd_update %[[W]], %[[DW]], {{.*}} : (tensor<4x3x3x3xf32>, tensor<4x3x3x3xf32>,
// CHECK: cnn.sgd_update %[[GAIN]], %[[DGAIN]], {{.*}} : (tensor<4x1x1x1xf32>, tensor<4x1x1x1xf32>,
