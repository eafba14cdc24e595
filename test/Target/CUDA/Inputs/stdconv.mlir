// timm's weight standardization as torch 1.13 exports it (imported by cnnc):
// ScaledStdConv2d (NF-ResNet: the scale gain * gamma / sqrt(fan_in), a
// computed tensor) in a pre-activation residual, then StdConv2d (BiT: no
// gain, no bias) + GroupNorm. The BatchNormalization on the weight runs on
// 1 x K x L x 1 with running statistics computed from the weight.
module {
  func.func @forward(%arg0: tensor<2x3x8x8xf32> {cnn.input}, %arg1: tensor<8x3x3x3xf32> {cnn.param = "stem.weight"}, %arg2: tensor<8xf32> {cnn.param = "stem.bias"}, %arg3: tensor<8x8x1x1xf32> {cnn.param = "nf.weight"}, %arg4: tensor<8x1x1x1xf32> {cnn.param = "nf.gain"}, %arg5: tensor<8xf32> {cnn.param = "nf.bias"}, %arg6: tensor<8x8x3x3xf32> {cnn.param = "bit.weight"}, %arg7: tensor<8xf32> {cnn.param = "gn.weight"}, %arg8: tensor<8xf32> {cnn.param = "gn.bias"}, %arg9: tensor<4x8xf32> {cnn.param = "fc.weight"}, %arg10: tensor<4xf32> {cnn.param = "fc.bias"}) -> tensor<2x4xf32> {
    %0 = cnn.conv2d %arg0, %arg1 {dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x3x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<2x8x8x8xf32>
    %1 = cnn.bias_add %0, %arg2 : (tensor<2x8x8x8xf32>, tensor<8xf32>) -> tensor<2x8x8x8xf32>
    %2 = cnn.scale %1 {factor = 5.000000e-01 : f32} : (tensor<2x8x8x8xf32>) -> tensor<2x8x8x8xf32>
    %3 = cnn.relu %2 : (tensor<2x8x8x8xf32>) -> tensor<2x8x8x8xf32>
    %4 = cnn.reshape %arg3 : (tensor<8x8x1x1xf32>) -> tensor<1x8x8xf32>
    %5 = cnn.scale %arg4 {factor = 0.601040781 : f32} : (tensor<8x1x1x1xf32>) -> tensor<8x1x1x1xf32>
    %6 = cnn.reshape %5 : (tensor<8x1x1x1xf32>) -> tensor<8xf32>
    %7 = cnn.transpose %4 {permutation = array<i64: 0, 2, 1>} : (tensor<1x8x8xf32>) -> tensor<1x8x8xf32>
    %8 = cnn.reduce_mean %7 {axes = array<i64: 0, 1>} : (tensor<1x8x8xf32>) -> tensor<1x1x8xf32>
    %9 = cnn.reshape %8 : (tensor<1x1x8xf32>) -> tensor<8xf32>
    %10 = cnn.reduce_mean %7 {axes = array<i64: 0, 1>} : (tensor<1x8x8xf32>) -> tensor<1x1x8xf32>
    %11 = cnn.sub %7, %10 : (tensor<1x8x8xf32>, tensor<1x1x8xf32>) -> tensor<1x8x8xf32>
    %12 = cnn.mul %11, %11 : (tensor<1x8x8xf32>, tensor<1x8x8xf32>) -> tensor<1x8x8xf32>
    %13 = cnn.reduce_mean %12 {axes = array<i64: 0, 1>} : (tensor<1x8x8xf32>) -> tensor<1x1x8xf32>
    %14 = cnn.reshape %13 : (tensor<1x1x8xf32>) -> tensor<8xf32>
    %15 = cnn.reshape %4 : (tensor<1x8x8xf32>) -> tensor<1x8x8x1xf32>
    %16 = cnn.constant dense<0.000000e+00> : tensor<8xf32>
    %17 = cnn.batch_norm %15, %6, %16, %9, %14 {epsilon = 9.99999997E-7 : f32, momentum = 0.000000e+00 : f32} : (tensor<1x8x8x1xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<1x8x8x1xf32>
    %18 = cnn.reshape %17 : (tensor<1x8x8x1xf32>) -> tensor<1x8x8xf32>
    %19 = cnn.reshape %18 : (tensor<1x8x8xf32>) -> tensor<8x8x1x1xf32>
    %20 = cnn.conv2d %3, %19 {dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<2x8x8x8xf32>, tensor<8x8x1x1xf32>) -> tensor<2x8x8x8xf32>
    %21 = cnn.bias_add %20, %arg5 : (tensor<2x8x8x8xf32>, tensor<8xf32>) -> tensor<2x8x8x8xf32>
    %22 = cnn.scale %21 {factor = 2.000000e-01 : f32} : (tensor<2x8x8x8xf32>) -> tensor<2x8x8x8xf32>
    %23 = cnn.add %22, %1 : (tensor<2x8x8x8xf32>, tensor<2x8x8x8xf32>) -> tensor<2x8x8x8xf32>
    %24 = cnn.reshape %arg6 : (tensor<8x8x3x3xf32>) -> tensor<1x8x72xf32>
    %25 = cnn.transpose %24 {permutation = array<i64: 0, 2, 1>} : (tensor<1x8x72xf32>) -> tensor<1x72x8xf32>
    %26 = cnn.reduce_mean %25 {axes = array<i64: 0, 1>} : (tensor<1x72x8xf32>) -> tensor<1x1x8xf32>
    %27 = cnn.reshape %26 : (tensor<1x1x8xf32>) -> tensor<8xf32>
    %28 = cnn.reduce_mean %25 {axes = array<i64: 0, 1>} : (tensor<1x72x8xf32>) -> tensor<1x1x8xf32>
    %29 = cnn.sub %25, %28 : (tensor<1x72x8xf32>, tensor<1x1x8xf32>) -> tensor<1x72x8xf32>
    %30 = cnn.mul %29, %29 : (tensor<1x72x8xf32>, tensor<1x72x8xf32>) -> tensor<1x72x8xf32>
    %31 = cnn.reduce_mean %30 {axes = array<i64: 0, 1>} : (tensor<1x72x8xf32>) -> tensor<1x1x8xf32>
    %32 = cnn.reshape %31 : (tensor<1x1x8xf32>) -> tensor<8xf32>
    %33 = cnn.reshape %24 : (tensor<1x8x72xf32>) -> tensor<1x8x72x1xf32>
    %34 = cnn.constant dense<1.000000e+00> : tensor<8xf32>
    %35 = cnn.constant dense<0.000000e+00> : tensor<8xf32>
    %36 = cnn.batch_norm %33, %34, %35, %27, %32 {epsilon = 9.99999997E-7 : f32, momentum = 0.000000e+00 : f32} : (tensor<1x8x72x1xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<1x8x72x1xf32>
    %37 = cnn.reshape %36 : (tensor<1x8x72x1xf32>) -> tensor<1x8x72xf32>
    %38 = cnn.reshape %37 : (tensor<1x8x72xf32>) -> tensor<8x8x3x3xf32>
    %39 = cnn.conv2d %23, %38 {dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x8x8x8xf32>, tensor<8x8x3x3xf32>) -> tensor<2x8x8x8xf32>
    %40 = cnn.reshape %39 : (tensor<2x8x8x8xf32>) -> tensor<2x2x256xf32>
    %41 = cnn.reduce_mean %40 {axes = array<i64: 2>} : (tensor<2x2x256xf32>) -> tensor<2x2x1xf32>
    %42 = cnn.sub %40, %41 : (tensor<2x2x256xf32>, tensor<2x2x1xf32>) -> tensor<2x2x256xf32>
    %43 = cnn.mul %42, %42 : (tensor<2x2x256xf32>, tensor<2x2x256xf32>) -> tensor<2x2x256xf32>
    %44 = cnn.reduce_mean %43 {axes = array<i64: 2>} : (tensor<2x2x256xf32>) -> tensor<2x2x1xf32>
    %45 = cnn.constant dense<9.99999974E-6> : tensor<1x1x1xf32>
    %46 = cnn.add %44, %45 : (tensor<2x2x1xf32>, tensor<1x1x1xf32>) -> tensor<2x2x1xf32>
    %47 = cnn.sqrt %46 : (tensor<2x2x1xf32>) -> tensor<2x2x1xf32>
    %48 = cnn.div %42, %47 : (tensor<2x2x256xf32>, tensor<2x2x1xf32>) -> tensor<2x2x256xf32>
    %49 = cnn.reshape %48 : (tensor<2x2x256xf32>) -> tensor<2x8x8x8xf32>
    %50 = cnn.reshape %arg7 : (tensor<8xf32>) -> tensor<8x1x1xf32>
    %51 = cnn.reshape %50 : (tensor<8x1x1xf32>) -> tensor<1x8x1x1xf32>
    %52 = cnn.mul %49, %51 : (tensor<2x8x8x8xf32>, tensor<1x8x1x1xf32>) -> tensor<2x8x8x8xf32>
    %53 = cnn.reshape %arg8 : (tensor<8xf32>) -> tensor<8x1x1xf32>
    %54 = cnn.reshape %53 : (tensor<8x1x1xf32>) -> tensor<1x8x1x1xf32>
    %55 = cnn.reshape %54 : (tensor<1x8x1x1xf32>) -> tensor<8xf32>
    %56 = cnn.bias_add %52, %55 : (tensor<2x8x8x8xf32>, tensor<8xf32>) -> tensor<2x8x8x8xf32>
    %57 = cnn.relu %56 : (tensor<2x8x8x8xf32>) -> tensor<2x8x8x8xf32>
    %58 = cnn.global_avg_pool %57 : (tensor<2x8x8x8xf32>) -> tensor<2x8x1x1xf32>
    %59 = cnn.reshape %58 : (tensor<2x8x1x1xf32>) -> tensor<2x8xf32>
    %60 = cnn.matmul %59, %arg9 {transpose_rhs = true} : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
    %61 = cnn.bias_add %60, %arg10 : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    return %61 : tensor<2x4xf32>
  }
}
