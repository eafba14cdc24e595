// RUN: cnnc-opt %s --cnn-autodiff="optimizer=sgd" --cse --cnn-layout -o %t.mlir
// RUN: cnnc %t.mlir --train --emit cuda -o %t.cu
// RUN: FileCheck %s < %t.cu

// After cnn-layout the step runs NHWC: cuDNN with Layout::NHWC, the channel
// of element i is i % C in the per-channel kernels, and the prelude's NHWC
// kernels do the reductions and pooling. The image stays NCHW in the tensor
// table (one transpose at the start of the step).
// CHECK: // ---- generated kernels ----
// bias_add: the bias is indexed by i % C; with C % 8 == 0 the 8 elements a
// thread takes have 8 consecutive channels: one vector load.
// CHECK: ew::elementwiseVec8<256ll, ew::In<float>, ew::ChannelsLast<float, 8ll, ew::ChannelLoad::Vector>, ew::Out<float>>(
// CHECK: static const cnnrt::TensorSpec kTensors[] = {
// CHECK-DAG: {"input", cnnrt::DType::F32, 4, {4, 3, 8, 8}, {{[0-9]+}}, 3072, cnnrt::Role::InputImage}
// CHECK-DAG: {"conv1.weight", cnnrt::DType::F32, 4, {8, 3, 3, 3}, {{[0-9]+}}, 864, cnnrt::Role::Param}
// CHECK-DAG: {"conv2.weight", cnnrt::DType::F32, 4, {16, 8, 1, 1}, {{[0-9]+}}, 512, cnnrt::Role::Param}
// CHECK-LABEL: static void prepareModel(cnnrt::Context &ctx) {
// N, C, H, W, K, R, S, P, Q from the NHWC / KRSC shapes.
// CHECK: ctx.registerConv(0, cnnrt::ConvDesc{4, 3, 8, 8, 8, 3, 3, 8, 8, 1, 1, 1, 1, 1, 1, 1, 1, 1, cnnrt::DType::F32, cnnrt::Layout::NHWC}, "{{.*}}");
// CHECK: ctx.registerConv(1, cnnrt::ConvDesc{4, 8, 4, 4, 16, 1, 1, 2, 2, 0, 0, 0, 0, 2, 2, 1, 1, 1, cnnrt::DType::F32, cnnrt::Layout::NHWC}, "{{.*}}");
// CHECK-NOT: Layout::NCHW
// CHECK-LABEL: static void trainStep(cnnrt::Context &ctx) {
// CHECK: ctx.convFwd(0,
// C % 8 == 0: pooling and the channel reductions take 8 channels per thread;
// the step's pooling records each window's argmax (cnn-max-pool-index, which
// the driver runs on a step given as MLIR before choosing its lowering).
// CHECK: maxPoolIndexNHWC8<float, false><<<{{[0-9]+}}, 256, 0, s>>>({{.*}}, nullptr, nullptr, {{.*}}, PoolParams{4, 8, 8, 8, 4, 4, 2, 2, 2, 2, 0, 0, 0, 0, false});
// CHECK: nhwcPartial8<1, float><<<dim3(1, 1), dim3(1, 256), 0, s>>>({{.*}}, 64ll, 8, 64ll);
// CHECK: nhwcStatsFinish<float, float><<<8, 256, 0, s>>>
// CHECK: ctx.convFwd(1,
// CHECK: avgPoolFwd<float, true><<<{{.*}}PoolParams{4, 16, 2, 2, 1, 1, 2, 2, 2, 2, 0, 0, 0, 0, true});
// CHECK: spatialMeanNHWC<float><<<1, 256, 0, s>>>({{.*}}, 4ll, 1ll, 16ll);
// CHECK: ctx.matmul(0,
// CHECK: softmaxXentGrad<float, int32_t>
// CHECK: avgPoolBwd<float, true>
// CHECK: ctx.convBwdData(1,
// CHECK: ctx.convBwdFilter(1,
// CHECK: nhwcPartial8<2, float>
// CHECK: nhwcBnGradFinish<float><<<8, 256, 0, s>>>
// The pooling gradient: a gather routed by the forward's argmax bytes.
// CHECK: maxPoolBwdGatherNHWC8<float>
// CHECK: nhwcPartial8<0, float><<<dim3(1, 4), dim3(1, 256), 0, s>>>({{.*}}, 256ll, 8, 64ll);
// CHECK: nhwcSumFinish<float><<<8, 256, 0, s>>>({{.*}}, 8, 4);
// CHECK: ctx.convBwdFilter(0,
// CHECK-LABEL: static void evalStep(cnnrt::Context &ctx) {
// CHECK: ctx.convFwd(0,
// CHECK: maxPoolNHWC8<float, false>
// CHECK: avgPoolFwd<float, true>
// CHECK: int main(
// No NCHW kernel is left (channelSum remains for the linear layer's bias).
// CHECK-NOT: bnStats<
// CHECK-NOT: rowMean<

func.func @forward(%x: tensor<4x3x8x8xf32> {cnn.input},
                   %w1: tensor<8x3x3x3xf32> {cnn.param = "conv1.weight"},
                   %b1: tensor<8xf32> {cnn.param = "conv1.bias"},
                   %g: tensor<8xf32> {cnn.param = "bn.weight"},
                   %be: tensor<8xf32> {cnn.param = "bn.bias"},
                   %rm: tensor<8xf32> {cnn.buffer = "bn.running_mean"},
                   %rv: tensor<8xf32> {cnn.buffer = "bn.running_var"},
                   %w2: tensor<16x8x1x1xf32> {cnn.param = "conv2.weight"},
                   %wf: tensor<10x16xf32> {cnn.param = "fc.weight"},
                   %bf: tensor<10xf32> {cnn.param = "fc.bias"}) -> tensor<4x10xf32> {
  %c = cnn.conv2d %x, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<4x3x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<4x8x8x8xf32>
  %cb = cnn.bias_add %c, %b1 : (tensor<4x8x8x8xf32>, tensor<8xf32>) -> tensor<4x8x8x8xf32>
  %r = cnn.relu %cb : (tensor<4x8x8x8xf32>) -> tensor<4x8x8x8xf32>
  %p = cnn.max_pool2d %r {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, ceil_mode = false} : (tensor<4x8x8x8xf32>) -> tensor<4x8x4x4xf32>
  %n = cnn.batch_norm %p, %g, %be, %rm, %rv {epsilon = 1.0e-5 : f32} : (tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8x4x4xf32>
  %c2 = cnn.conv2d %n, %w2 {strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<4x8x4x4xf32>, tensor<16x8x1x1xf32>) -> tensor<4x16x2x2xf32>
  %a = cnn.avg_pool2d %c2 {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, ceil_mode = false, count_include_pad = true} : (tensor<4x16x2x2xf32>) -> tensor<4x16x1x1xf32>
  %q = cnn.global_avg_pool %a : (tensor<4x16x1x1xf32>) -> tensor<4x16x1x1xf32>
  %f = cnn.flatten %q {axis = 1} : (tensor<4x16x1x1xf32>) -> tensor<4x16xf32>
  %y = cnn.matmul %f, %wf {transpose_rhs = true} : (tensor<4x16xf32>, tensor<10x16xf32>) -> tensor<4x10xf32>
  %yb = cnn.bias_add %y, %bf : (tensor<4x10xf32>, tensor<10xf32>) -> tensor<4x10xf32>
  return %yb : tensor<4x10xf32>
}
