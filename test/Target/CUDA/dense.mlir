// RUN: cnnc %S/Inputs/dense_aux.mlir --train -O0 --ignore-index 255 --emit cuda | FileCheck %s
// RUN: cnnc %S/Inputs/dense_aux.mlir --train --label-smoothing 0.1 --emit cuda -o %t.cu
// RUN: FileCheck %s --check-prefix=F16 < %t.cu
// RUN: %if nvcc %{ %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t.cu -o %t.o %}

// Dense prediction: the labels are N x H x W; the loss runs on the
// (N*H*W) x C rows, one warp per row, the count of non-ignored rows on the
// device (partials then their mean for the loss; xentCountValid then the
// gradient).
// CHECK-DAG: {"labels", cnnrt::DType::I32, 3, {2, 4, 4, 0}, {{[0-9]+}}, 128, cnnrt::Role::InputLabel}
// CHECK-DAG: {"aux.weight", cnnrt::DType::F32, 4, {5, 8, 1, 1}, [[AUX:[0-9]+]], 160, cnnrt::Role::Param},
// CHECK-DAG: {"logits", cnnrt::DType::F32, 4, {2, 5, 4, 4}, [[LOGITS:[0-9]+]], 640, cnnrt::Role::Logits},
// CHECK-LABEL: static void trainStep(cnnrt::Context &ctx) {
// CHECK: softmaxXentLossPartial<float, int32_t><<<4, 256, 0, s>>>({{.*}}, 32ll, 5, 0.0f, 255ll);
// CHECK: softmaxXentLossFinish<<<1, 256, 0, s>>>({{.*}}, 4);
// CHECK: xentCountValid<int32_t><<<1, 1024, 0, s>>>({{.*}}, 32ll, 255ll);
// CHECK: softmaxXentGrad<float, int32_t><<<4, 256, 0, s>>>({{.*}}, 32ll, 5, 0.0f, 255ll);
// The eval step is @forward without its auxiliary head (cnn-autodiff drops
// it, as torchvision's eval mode returns 'out' alone): the backbone and the
// main classifier write the per-pixel logits N x C x H x W, the runtime's
// Logits tensor for mIoU; the aux head's weight is never read.
// CHECK-LABEL: static void evalStep(cnnrt::Context &ctx) {
// CHECK-NOT: P<float>(A, [[AUX]])
// CHECK: ctx.convFwd(0,
// CHECK-NOT: P<float>(A, [[AUX]])
// CHECK: ctx.convFwd(1, {{.*}}, P<float>(A, [[LOGITS]]));
// CHECK-NEXT: }
// The runtime's label checks and mIoU leave out the same pixels: a
// non-default ignore_index reaches ModelSpec::ignoreIndex.
// CHECK: static const cnnrt::ModelSpec kModel = {{.*}}, trainStep, evalStep, {{.*}}ull, nullptr, 255ll};

// Default pipeline (NHWC f16): f16 logits, the default ignore index -100;
// the eval step gives f32 logits back in N x C x H x W (only the two
// filters it uses cast to f16).
// F16: {"logits", cnnrt::DType::F32, 4, {2, 5, 4, 4}, {{[0-9]+}}, 640, cnnrt::Role::Logits},
// F16: softmaxXentLossPartial<__half, int32_t><<<4, 256, 0, s>>>({{.*}}, 32ll, 5, 0.100000001f, -100ll);
// F16: softmaxXentGrad<__half, int32_t><<<4, 256, 0, s>>>({{.*}}, 32ll, 5, 0.100000001f, -100ll);
// F16-LABEL: static void evalStep(cnnrt::Context &ctx) {
// F16: // 2 parameter casts in one multi-tensor kernel
// F16: kTensors, {{.*}}, trainStep, evalStep, cnncDefaultLR,
