// RUN: cnnc-opt %s --cnn-import-cleanup -split-input-file | FileCheck %s

// The erf form of GELU as PyTorch's TorchScript exporter writes it (opset
// < 20): Div by sqrt 2, Erf, Add 1, Mul by x, Mul by 0.5. The constant
// factors become cnn.scale first; the whole form becomes one cnn.gelu.
// CHECK-LABEL: func @torchscript_form
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x4x4xf32>)
// CHECK-NEXT: %[[G:.*]] = cnn.gelu %[[X]] : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
// CHECK-NEXT: return %[[G]]
func.func @torchscript_form(%x: tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32> {
  %sqrt2 = cnn.constant dense<1.41421354> : tensor<1x1x1x1xf32>
  %one = cnn.constant dense<1.0> : tensor<1x1x1x1xf32>
  %half = cnn.constant dense<0.5> : tensor<1x1x1x1xf32>
  %0 = cnn.div %x, %sqrt2 : (tensor<2x8x4x4xf32>, tensor<1x1x1x1xf32>) -> tensor<2x8x4x4xf32>
  %1 = cnn.erf %0 : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  %2 = cnn.add %1, %one : (tensor<2x8x4x4xf32>, tensor<1x1x1x1xf32>) -> tensor<2x8x4x4xf32>
  %3 = cnn.mul %x, %2 : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  %4 = cnn.mul %3, %half : (tensor<2x8x4x4xf32>, tensor<1x1x1x1xf32>) -> tensor<2x8x4x4xf32>
  return %4 : tensor<2x8x4x4xf32>
}

// -----

// (0.5 x) (1 + erf(x 0.70710677)), the constant 1 first.
// CHECK-LABEL: func @half_first
// CHECK-NEXT: cnn.gelu %arg0
// CHECK-NEXT: return
func.func @half_first(%x: tensor<16x8xf32>) -> tensor<16x8xf32> {
  %one = cnn.constant dense<1.0> : tensor<1x1xf32>
  %0 = cnn.scale %x {factor = 0.707106769 : f32} : (tensor<16x8xf32>) -> tensor<16x8xf32>
  %1 = cnn.erf %0 : (tensor<16x8xf32>) -> tensor<16x8xf32>
  %2 = cnn.add %one, %1 : (tensor<1x1xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  %3 = cnn.scale %x {factor = 0.5 : f32} : (tensor<16x8xf32>) -> tensor<16x8xf32>
  %4 = cnn.mul %3, %2 : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  return %4 : tensor<16x8xf32>
}

// -----

// x (0.5 (1 + erf(x / sqrt 2))), x second. An intermediate with another
// use stays for that use; the product still becomes cnn.gelu.
// CHECK-LABEL: func @half_of_cdf
// CHECK: %[[E:.*]] = cnn.erf
// CHECK: %[[G:.*]] = cnn.gelu %arg0
// CHECK: return %[[G]], %[[E]]
func.func @half_of_cdf(%x: tensor<16x8xf32>) -> (tensor<16x8xf32>, tensor<16x8xf32>) {
  %one = cnn.constant dense<1.0> : tensor<1x1xf32>
  %0 = cnn.scale %x {factor = 0.707106769 : f32} : (tensor<16x8xf32>) -> tensor<16x8xf32>
  %1 = cnn.erf %0 : (tensor<16x8xf32>) -> tensor<16x8xf32>
  %2 = cnn.add %1, %one : (tensor<16x8xf32>, tensor<1x1xf32>) -> tensor<16x8xf32>
  %3 = cnn.scale %2 {factor = 0.5 : f32} : (tensor<16x8xf32>) -> tensor<16x8xf32>
  %4 = cnn.mul %3, %x : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  return %4, %1 : tensor<16x8xf32>, tensor<16x8xf32>
}

// -----

// Not GELU: erf of another tensor than the one multiplied.
// CHECK-LABEL: func @other_tensor
// CHECK-NOT: cnn.gelu
// CHECK: cnn.erf
func.func @other_tensor(%x: tensor<16x8xf32>, %y: tensor<16x8xf32>) -> tensor<16x8xf32> {
  %one = cnn.constant dense<1.0> : tensor<1x1xf32>
  %0 = cnn.scale %y {factor = 0.707106769 : f32} : (tensor<16x8xf32>) -> tensor<16x8xf32>
  %1 = cnn.erf %0 : (tensor<16x8xf32>) -> tensor<16x8xf32>
  %2 = cnn.add %1, %one : (tensor<16x8xf32>, tensor<1x1xf32>) -> tensor<16x8xf32>
  %3 = cnn.mul %x, %2 : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  %4 = cnn.scale %3 {factor = 0.5 : f32} : (tensor<16x8xf32>) -> tensor<16x8xf32>
  return %4 : tensor<16x8xf32>
}

// -----

// Not GELU: erf's argument scaled by 0.6, not 1/sqrt 2; then a final
// factor of 0.25, not 0.5; then 2 added, not 1.
// CHECK-LABEL: func @wrong_constants
// CHECK-NOT: cnn.gelu
// CHECK: return
func.func @wrong_constants(%x: tensor<16x8xf32>) -> (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>) {
  %one = cnn.constant dense<1.0> : tensor<1x1xf32>
  %two = cnn.constant dense<2.0> : tensor<1x1xf32>
  %a0 = cnn.scale %x {factor = 0.6 : f32} : (tensor<16x8xf32>) -> tensor<16x8xf32>
  %a1 = cnn.erf %a0 : (tensor<16x8xf32>) -> tensor<16x8xf32>
  %a2 = cnn.add %a1, %one : (tensor<16x8xf32>, tensor<1x1xf32>) -> tensor<16x8xf32>
  %a3 = cnn.mul %x, %a2 : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  %a4 = cnn.scale %a3 {factor = 0.5 : f32} : (tensor<16x8xf32>) -> tensor<16x8xf32>
  %b0 = cnn.scale %x {factor = 0.707106769 : f32} : (tensor<16x8xf32>) -> tensor<16x8xf32>
  %b1 = cnn.erf %b0 : (tensor<16x8xf32>) -> tensor<16x8xf32>
  %b2 = cnn.add %b1, %one : (tensor<16x8xf32>, tensor<1x1xf32>) -> tensor<16x8xf32>
  %b3 = cnn.mul %x, %b2 : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  %b4 = cnn.scale %b3 {factor = 0.25 : f32} : (tensor<16x8xf32>) -> tensor<16x8xf32>
  %c2 = cnn.add %b1, %two : (tensor<16x8xf32>, tensor<1x1xf32>) -> tensor<16x8xf32>
  %c3 = cnn.mul %x, %c2 : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  %c4 = cnn.scale %c3 {factor = 0.5 : f32} : (tensor<16x8xf32>) -> tensor<16x8xf32>
  return %a4, %b4, %c4 : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>
}

// -----

// SiLU as exporters write it: x * sigmoid(x), either order.
// CHECK-LABEL: func @silu
// CHECK-NEXT: %[[A:.*]] = cnn.silu %arg0
// CHECK-NEXT: %[[B:.*]] = cnn.silu %arg0
// CHECK-NEXT: return %[[A]], %[[B]]
func.func @silu(%x: tensor<2x8x4x4xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) {
  %0 = cnn.sigmoid %x : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  %1 = cnn.mul %x, %0 : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  %2 = cnn.mul %0, %x : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  return %1, %2 : tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>
}

// -----

// Not SiLU: the sigmoid of another tensor (an SE gate's product).
// CHECK-LABEL: func @gate
// CHECK-NOT: cnn.silu
// CHECK: cnn.mul
func.func @gate(%x: tensor<2x8x4x4xf32>, %y: tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32> {
  %0 = cnn.sigmoid %y : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  %1 = cnn.mul %x, %0 : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  return %1 : tensor<2x8x4x4xf32>
}

// -----

// Mish as exporters before opset 18 write it: x * tanh(softplus(x)).
// CHECK-LABEL: func @mish
// CHECK-NEXT: %[[M:.*]] = cnn.mish %arg0
// CHECK-NEXT: return %[[M]]
func.func @mish(%x: tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32> {
  %0 = cnn.softplus %x : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  %1 = cnn.tanh %0 : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  %2 = cnn.mul %1, %x : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  return %2 : tensor<2x8x4x4xf32>
}

// -----

// Not Mish: tanh without softplus, softplus of another tensor.
// CHECK-LABEL: func @not_mish
// CHECK-NOT: cnn.mish
// CHECK: return
func.func @not_mish(%x: tensor<2x8x4x4xf32>, %y: tensor<2x8x4x4xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) {
  %0 = cnn.tanh %x : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  %1 = cnn.mul %x, %0 : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  %2 = cnn.softplus %y : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  %3 = cnn.tanh %2 : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  %4 = cnn.mul %x, %3 : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  return %1, %4 : tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>
}

// -----

// GELU's tanh approximation as the TorchScript exporter writes it:
// 0.5 * (x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x * (x * x))))).
// CHECK-LABEL: func @gelu_tanh
// CHECK-NEXT: %[[G:.*]] = cnn.gelu %arg0 {approximate = "tanh"}
// CHECK-NEXT: return %[[G]]
func.func @gelu_tanh(%x: tensor<16x8xf32>) -> tensor<16x8xf32> {
  %one = cnn.constant dense<1.0> : tensor<1x1xf32>
  %beta = cnn.constant dense<0.797884583> : tensor<1x1xf32>
  %kappa = cnn.constant dense<0.044715> : tensor<1x1xf32>
  %half = cnn.constant dense<0.5> : tensor<1x1xf32>
  %sq = cnn.mul %x, %x : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  %cube = cnn.mul %x, %sq : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  %k = cnn.mul %kappa, %cube : (tensor<1x1xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  %s = cnn.add %x, %k : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  %in = cnn.mul %beta, %s : (tensor<1x1xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  %t = cnn.tanh %in : (tensor<16x8xf32>) -> tensor<16x8xf32>
  %a = cnn.add %one, %t : (tensor<1x1xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  %p = cnn.mul %x, %a : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  %r = cnn.mul %half, %p : (tensor<1x1xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  return %r : tensor<16x8xf32>
}

// -----

// Not the tanh approximation: 0.05 for 0.044715, and a square for the cube.
// CHECK-LABEL: func @not_gelu_tanh
// CHECK-NOT: cnn.gelu
// CHECK: return
func.func @not_gelu_tanh(%x: tensor<16x8xf32>) -> (tensor<16x8xf32>, tensor<16x8xf32>) {
  %one = cnn.constant dense<1.0> : tensor<1x1xf32>
  %sq = cnn.mul %x, %x : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  %cube = cnn.mul %x, %sq : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  %k = cnn.scale %cube {factor = 0.05 : f32} : (tensor<16x8xf32>) -> tensor<16x8xf32>
  %s = cnn.add %x, %k : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  %in = cnn.scale %s {factor = 0.797884583 : f32} : (tensor<16x8xf32>) -> tensor<16x8xf32>
  %t = cnn.tanh %in : (tensor<16x8xf32>) -> tensor<16x8xf32>
  %a = cnn.add %t, %one : (tensor<16x8xf32>, tensor<1x1xf32>) -> tensor<16x8xf32>
  %p = cnn.mul %x, %a : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  %r = cnn.scale %p {factor = 0.5 : f32} : (tensor<16x8xf32>) -> tensor<16x8xf32>
  %k2 = cnn.scale %sq {factor = 0.044715 : f32} : (tensor<16x8xf32>) -> tensor<16x8xf32>
  %s2 = cnn.add %x, %k2 : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  %in2 = cnn.scale %s2 {factor = 0.797884583 : f32} : (tensor<16x8xf32>) -> tensor<16x8xf32>
  %t2 = cnn.tanh %in2 : (tensor<16x8xf32>) -> tensor<16x8xf32>
  %a2 = cnn.add %t2, %one : (tensor<16x8xf32>, tensor<1x1xf32>) -> tensor<16x8xf32>
  %p2 = cnn.mul %x, %a2 : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  %r2 = cnn.scale %p2 {factor = 0.5 : f32} : (tensor<16x8xf32>) -> tensor<16x8xf32>
  return %r, %r2 : tensor<16x8xf32>, tensor<16x8xf32>
}
