// RUN: cnnc-opt %s --cnn-layout -split-input-file | FileCheck %s
// The pass is idempotent: a second run changes nothing.
// RUN: cnnc-opt %s --cnn-layout --cnn-layout -split-input-file | FileCheck %s

// GroupNorm(2, 4) between two convolutions, as the importer writes it: the
// normalization on the grouped 2x2x18 view, then the scale (a 1x4x1x1
// multiply) and the shift (bias_add, layout-sensitive) on the channel view.
// Step 1 puts the NCHW->NHWC transpose in front of the bias_add; it moves up
// through the scale (whose 1x4x1x1 operand transposes for free, a reshape)
// to the reshape of the grouped result, where cnn-fuse finds it. The
// second reader of the channel view (a BatchNorm, standing for the
// backward's scale gradient) shares that one transpose.
// CHECK-LABEL: func @group_norm_scale_pulls_the_transpose_up
// CHECK:      %[[N:.*]] = cnn.div {{.*}} -> tensor<2x2x18xf32>
// CHECK-NEXT: %[[V:.*]] = cnn.reshape %[[N]] : (tensor<2x2x18xf32>) -> tensor<2x4x3x3xf32>
// CHECK-NEXT: %[[VT:.*]] = cnn.transpose %[[V]] {permutation = array<i64: 0, 2, 3, 1>} : (tensor<2x4x3x3xf32>) -> tensor<2x3x3x4xf32>
// CHECK-NOT:  cnn.transpose %[[V]]
// CHECK-DAG:  %[[S:.*]] = cnn.reshape %{{.*}} : (tensor<4xf32>) -> tensor<1x1x1x4xf32>
// CHECK-DAG:  %[[M:.*]] = cnn.mul %[[VT]], %[[S]] : (tensor<2x3x3x4xf32>, tensor<1x1x1x4xf32>) -> tensor<2x3x3x4xf32>
// CHECK:      cnn.bias_add %[[M]], %{{.*}} {layout = #cnn.layout<NHWC>}
// CHECK:      cnn.batch_norm %[[VT]]
// CHECK-NOT:  cnn.transpose %[[V]]
// CHECK:      return
func.func @group_norm_scale_pulls_the_transpose_up(
    %x: tensor<2x4x3x3xf32>, %w: tensor<4x4x1x1xf32>, %std: tensor<2x2x1xf32>,
    %scale: tensor<4xf32>, %shift: tensor<4xf32>)
    -> (tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>) {
  %c = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x4x3x3xf32>, tensor<4x4x1x1xf32>) -> tensor<2x4x3x3xf32>
  %g = cnn.reshape %c : (tensor<2x4x3x3xf32>) -> tensor<2x2x18xf32>
  %n = cnn.div %g, %std : (tensor<2x2x18xf32>, tensor<2x2x1xf32>) -> tensor<2x2x18xf32>
  %v = cnn.reshape %n : (tensor<2x2x18xf32>) -> tensor<2x4x3x3xf32>
  %s = cnn.reshape %scale : (tensor<4xf32>) -> tensor<1x4x1x1xf32>
  %m = cnn.mul %v, %s : (tensor<2x4x3x3xf32>, tensor<1x4x1x1xf32>) -> tensor<2x4x3x3xf32>
  %b = cnn.bias_add %m, %shift : (tensor<2x4x3x3xf32>, tensor<4xf32>) -> tensor<2x4x3x3xf32>
  %y = cnn.conv2d %b, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x4x3x3xf32>, tensor<4x4x1x1xf32>) -> tensor<2x4x3x3xf32>
  %bn = cnn.batch_norm %v, %scale, %shift, %scale, %shift {epsilon = 1.0e-5 : f32} : (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x3x3xf32>
  return %y, %bn : tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>
}

// -----

// Not elsewhere: the image's f16 cast in front of the first convolution
// keeps the transpose after it (moving it up would transpose the f32 image,
// and the input-format pass reads cast -> transpose), and a scale of data
// that is not a grouped view stays where step 1 left it.
// CHECK-LABEL: func @cast_then_conv_keeps_the_transpose
// CHECK:      %[[H:.*]] = cnn.cast %{{.*}} : (tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf16>
// CHECK-NEXT: cnn.transpose %[[H]] {permutation = array<i64: 0, 2, 3, 1>}
// CHECK:      %[[M:.*]] = cnn.mul %{{.*}}, %{{.*}} : (tensor<2x4x3x3xf16>, tensor<1x4x1x1xf16>) -> tensor<2x4x3x3xf16>
// CHECK-NEXT: cnn.transpose %[[M]] {permutation = array<i64: 0, 2, 3, 1>}
func.func @cast_then_conv_keeps_the_transpose(
    %x: tensor<2x4x3x3xf32>, %w: tensor<4x4x1x1xf16>, %s: tensor<1x4x1x1xf16>)
    -> tensor<2x4x3x3xf16> {
  %h = cnn.cast %x : (tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf16>
  %c = cnn.conv2d %h, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x4x3x3xf16>, tensor<4x4x1x1xf16>) -> tensor<2x4x3x3xf16>
  %m = cnn.mul %h, %s : (tensor<2x4x3x3xf16>, tensor<1x4x1x1xf16>) -> tensor<2x4x3x3xf16>
  %d = cnn.conv2d %m, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x4x3x3xf16>, tensor<4x4x1x1xf16>) -> tensor<2x4x3x3xf16>
  %r = cnn.add %c, %d : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>) -> tensor<2x4x3x3xf16>
  return %r : tensor<2x4x3x3xf16>
}
