// RUN: cnnc %S/Inputs/small_cnn.mlir --train -O0 --optimizer sgd --lr 0.05 --emit cuda | FileCheck %s
// RUN: cnnc %S/Inputs/small_cnn.mlir --train -O0 --dump-plan | FileCheck %s --check-prefix=PLAN

// The step: cuDNN for convolutions, cuBLASLt for the linear layer, generated
// kernels for the rest, the loss through the prelude kernels.
// CHECK: #include "cnnrt/cnnrt.h"
// CHECK-LABEL: // ---- generated kernels ----
// CHECK: __global__ void __launch_bounds__(256) k{{[0-9]+}}(
// CHECK: static const cnnrt::TensorSpec kTensors[] = {
// CHECK-DAG: {"input", cnnrt::DType::F32, 4, {4, 3, 8, 8}, {{[0-9]+}}, 3072, cnnrt::Role::InputImage}
// CHECK-DAG: {"labels", cnnrt::DType::I32, 1, {4, 0, 0, 0}, {{[0-9]+}}, 16, cnnrt::Role::InputLabel}
// CHECK-DAG: {"conv1.weight", cnnrt::DType::F32, 4, {8, 3, 3, 3}, {{[0-9]+}}, 864, cnnrt::Role::Param}
// CHECK-DAG: {"conv1.weight.momentum_buffer", cnnrt::DType::F32, 4, {8, 3, 3, 3}, {{[0-9]+}}, 864, cnnrt::Role::OptState}
// CHECK-DAG: {"bn.running_mean", cnnrt::DType::F32, 1, {8, 0, 0, 0}, {{[0-9]+}}, 32, cnnrt::Role::Buffer}
// CHECK-DAG: {"loss", cnnrt::DType::F32, 0, {0, 0, 0, 0}, {{[0-9]+}}, 4, cnnrt::Role::Loss}
// CHECK-DAG: {"logits", cnnrt::DType::F32, 2, {4, 10, 0, 0}, {{[0-9]+}}, 160, cnnrt::Role::Logits}
// CHECK-LABEL: static void prepareModel(cnnrt::Context &ctx) {
// CHECK: ctx.registerConv(0, cnnrt::ConvDesc{4, 3, 8, 8, 8, 3, 3, 8, 8, 1, 1, 1, 1, 1, 1, 1, 1, 1, cnnrt::DType::F32, cnnrt::Layout::NCHW}, "{{.*}}");
// CHECK: ctx.registerMatmul(0, cnnrt::MatmulDesc{4, 10, 8, false, true, cnnrt::DType::F32}
// CHECK-LABEL: static void trainStep(cnnrt::Context &ctx) {
// CHECK: ctx.convFwd(0,
// CHECK: maxPoolIndex<float, false, false><<<
// CHECK: bnStats<float, float><<<8, 512, 0, s>>>
// CHECK: rowMean<float><<<
// CHECK: ctx.matmul(0,
// The loss: one warp per row, partial sums and counts of the rows whose
// label is not the ignore index (-100), then their mean; the gradient: that
// count, then one warp per row.
// CHECK: softmaxXentLossPartial<float, int32_t><<<1, 256, 0, s>>>({{.*}}, 4ll, 10, 0.0f, -100ll);
// CHECK: softmaxXentLossFinish<<<1, 256, 0, s>>>({{.*}}, 1);
// CHECK: xentCountValid<int32_t><<<1, 1024, 0, s>>>({{.*}}, 4ll, -100ll);
// CHECK: softmaxXentGrad<float, int32_t><<<1, 256, 0, s>>>({{.*}}, 4ll, 10, 0.0f, -100ll);
// CHECK: bnGradReduce<float, float>
// CHECK: maxPoolBwdGather<float, false>
// CHECK: channelSum<float, float>
// CHECK: ctx.convBwdFilter(0,
// CHECK-NOT: ctx.convBwdData
// CHECK-LABEL: static void evalStep(cnnrt::Context &ctx) {
// The learning rate is a variable defined on the last line (the driver
// compiles that line alone: another --lr recompiles nothing else).
// CHECK: extern const float cnncDefaultLR;
// CHECK-NEXT: static const cnnrt::ModelSpec kModel = {"small_cnn", {{[0-9]+}}ull, kTensors, {{.*}}, 4, 3, 8, 8, 10, prepareModel, trainStep, evalStep, cnncDefaultLR, 100, {{[0-9]+}}ull, {{[0-9]+}}ull};
// CHECK: int main(int argc, char **argv) { return cnnrt::trainMain(argc, argv, kModel); }
// CHECK-NEXT: const float cnncDefaultLR = 0.0500000007f;
// CHECK-NOT: {{.}}

// PLAN: input	input	3072
// PLAN: conv1.weight	param	864
// PLAN: bn.running_mean	buffer	32
// PLAN: conv1.weight.momentum_buffer	opt-state	864
// PLAN: loss	loss	4
// PLAN: temp	8192	{{[0-9]+}}	[0, {{[0-9]+}}]	cnn.conv2d
// PLAN: arena bytes:

// The default GPU pipeline: NHWC, f16 with loss scaling, fusion, memory plan.
// RUN: cnnc %S/Inputs/small_cnn.mlir --train --optimizer sgd --emit cuda --stats -o %t.opt.cu 2>&1 | FileCheck %s --check-prefix=STATS
// RUN: FileCheck %s --check-prefix=OPT < %t.opt.cu
// STATS: cnnc: stats: layout nhwc, precision fp16
// STATS: cnnc: stats: fusion conv_epilogue_ops {{[1-9]}}
// STATS: kernel launches and library calls per training step
// The image input arrives f16, NHWC, its 3 channels padded to 8 (the
// runtime converts each batch into that: cnn-input-format); the model spec
// keeps the images' N, C, H, W.
// OPT-DAG: {"input", cnnrt::DType::F16, 4, {4, 8, 8, 8}, 0, 4096, cnnrt::Role::InputImage, cnnrt::Layout::NHWC}
// OPT-DAG: static const cnnrt::ModelSpec kModel = {"small_cnn", {{[0-9]+}}ull, kTensors, (int)(sizeof(kTensors) / sizeof(kTensors[0])), 4, 3, 8, 8, 10,
// conv1's filter is stored as the convolution reads it, 8x3x3x8 (the
// channels padded; cnn-param-format); the table keeps its public shape.
// OPT-DAG: {"conv1.weight", cnnrt::DType::F32, 4, {8, 3, 3, 3}, {{[0-9]+}}, 2304, cnnrt::Role::Param, cnnrt::Layout::NHWC, 8}
// OPT-DAG: {"loss_scale", cnnrt::DType::F32, 0, {0, 0, 0, 0}, {{[0-9]+}}, 4, cnnrt::Role::LossScale}
// OPT-DAG: ctx.registerConv({{[0-9]+}}, cnnrt::ConvDesc{{.*}}cnnrt::DType::F16, cnnrt::Layout::NHWC}
// OPT-DAG: nhwcStatsFinish<__half, float>
// conv + bias + relu: one op the runtime runs as cuDNN's fused call or as the
// convolution + the generated epilogue, whichever it timed faster.
// OPT-DAG: static void [[EPI:convEpilogue[0-9]+]](cnnrt::Context &ctx, void *y, const void *bias,
// OPT-DAG: k{{[0-9]+}}<<<{{.*}}>>>(static_cast<__half *>(y), static_cast<const __half *>(bias), static_cast<__half *>(y));
// OPT-DAG: ctx.registerConvBiasAct([[FID:[0-9]+]], [[CID:[0-9]+]], cnnrt::Activation::Relu, false, [[EPI]], "{{.*}}");
// OPT-DAG: ctx.convBiasActFwd([[FID]], P<__half>(A, {{[0-9]+}}), P<__half>(A, {{[0-9]+}}), P<__half>(A, {{[0-9]+}}), nullptr, P<__half>(A, {{[0-9]+}}));
// All parameter updates run as one multi-tensor kernel (binary search over a
// constant table of tensor starts).
// OPT-DAG: // 6 optimizer updates in one multi-tensor kernel
// The f16 copies of the 4 conv/linear parameters: one kernel, not four.
// OPT-DAG: // 4 parameter casts in one multi-tensor kernel
// Their gradients are f16 (conv, linear) and f32 (BN): a table gives each
// tensor's type and the load picks by it (no cast kernel per gradient).
// OPT-DAG: __device__ const int64_t [[MT:mt[0-9]+]]_ty1[6] = {0ll, 0ll, 1ll, 1ll, 0ll, 0ll};
// OPT-DAG: x[1] = mt::load<__half, float>([[MT]]_ty1[lo], A + [[MT]]_in1[lo], at);
// The loss-scaling finiteness check of the 6 gradients: one multi-tensor
// kernel per gradient element type (4 f32 + 2 f16 here), not one per tensor.
// OPT-DAG: // 4 gradients checked in one multi-tensor kernel
// OPT-DAG: // 2 gradients checked in one multi-tensor kernel
// OPT-DAG: __global__ void __launch_bounds__(256) af{{[0-9]+}}(const char *A, float *flag) {
// OPT-DAG: __device__ const int mt{{[0-9]+}}_chunk[18] = {0, 0,
