// RUN: cnnc %S/Inputs/resize-concat.mlir --train --precision fp32 --layout nchw --emit cuda | FileCheck %s
// RUN: cnnc %S/Inputs/resize-concat.mlir --train --emit cuda | FileCheck %s --check-prefix=NHWC
// RUN: cnnc %S/Inputs/resize-concat.mlir --train --emit cuda --fuse-resize-concat=false | FileCheck %s --check-prefix=OFF
// RUN: cnnc %S/Inputs/resize-concat.mlir --train --precision fp32 --layout nchw --emit cuda -o %t32.cu
// RUN: cnnc %S/Inputs/resize-concat.mlir --train --emit cuda -o %t16.cu
// RUN: %if nvcc %{ %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t32.cu -o %t32.o %}
// RUN: %if nvcc %{ %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t16.cu -o %t16.o %}
// RUN: cnnc %S/Inputs/resize-concat-vec8.mlir --train --emit cuda -o %t8.cu
// RUN: FileCheck %s --check-prefix=VEC8 < %t8.cu
// RUN: %if nvcc %{ %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t8.cu -o %t8.o %}

// cnn-fuse's upsample + concat as launched (kernels/Resize.cuh): each
// concat(resize(x), skip) is one resizeConcatFwd over the 2 x 12 x 16 x 16
// concatenation (24 blocks of 256), with the resized channels' ResizeParams
// (8 of 8 x 8 -> 16 x 16), the skip's 4 channels and where the resized ones
// start (0, or 4 after the skip). The resize gradients read their channel
// range of the concatenation's gradient (resizeSliceBwd: the same counts),
// a thread per input gradient element (2 x 8 x 8 x 8: 4 blocks).
// CHECK: __device__ const ResizeTap [[LIN:tbl[0-9]+]][] = {{[{][{]}}0, 1, 0.0f}, {0, 1, 0.25f},
// CHECK: [[FWD:k[0-9]+]](const float *__restrict__ x, const float *__restrict__ other, float *__restrict__ y) {
// CHECK-NEXT: resizeConcatFwd<float, false, true>(x, other, y, ResizeParams{2, 8, 8, 8, 16, 16}, 4, 0, [[LIN]], [[LIN]]);
// CHECK: __device__ const ResizeTap [[NEAR:tbl[0-9]+]][] = {{[{][{]}}0, 0, 0.0f}, {0, 0, 0.0f}, {1, 1, 0.0f},
// CHECK: [[FWD2:k[0-9]+]](const float *__restrict__ x, const float *__restrict__ other, float *__restrict__ y) {
// CHECK-NEXT: resizeConcatFwd<float, false, false>(x, other, y, ResizeParams{2, 8, 8, 8, 16, 16}, 4, 4, [[NEAR]], [[NEAR]]);
// CHECK: [[BWD2:k[0-9]+]](const float *__restrict__ dy, float *__restrict__ dx) {
// CHECK-NEXT: resizeSliceBwd<float, false, false>(dy, dx, ResizeParams{2, 8, 8, 8, 16, 16}, 4, 4, [[NEAR]], [[NEAR]], {{tbl[0-9]+}}, {{tbl[0-9]+}});
// CHECK: [[BWD:k[0-9]+]](const float *__restrict__ dy, float *__restrict__ dx) {
// CHECK-NEXT: resizeSliceBwd<float, false, true>(dy, dx, ResizeParams{2, 8, 8, 8, 16, 16}, 4, 0, [[LIN]], [[LIN]], {{tbl[0-9]+}}, {{tbl[0-9]+}});
// CHECK-LABEL: static void trainStep(
// CHECK: [[FWD]]<<<24, 256, 0, s>>>(P<float>(A, {{[0-9]+}}), P<float>(A, {{[0-9]+}}), P<float>(A, {{[0-9]+}}));
// CHECK-NEXT: "cnn.fused_resize_concat [[FWD]]"
// CHECK: [[FWD2]]<<<24, 256, 0, s>>>
// CHECK-NEXT: "cnn.fused_resize_concat [[FWD2]]"
// The skip's gradient is still a slice; the resize's is read in place.
// CHECK: "cnn.slice
// CHECK: [[BWD2]]<<<4, 256, 0, s>>>(P<float>(A, [[DY2:[0-9]+]]), P<float>(A, {{[0-9]+}}));
// CHECK-NEXT: "cnn.resize_grad [[BWD2]]"
// CHECK: [[BWD]]<<<4, 256, 0, s>>>
// CHECK-NEXT: "cnn.resize_grad [[BWD]]"
// CHECK-LABEL: static void evalStep(

// The default pipeline: NHWC, f16.
// NHWC: resizeConcatFwd<__half, true, true>(x, other, y, ResizeParams{2, 8, 8, 8, 16, 16}, 4, 0,
// NHWC: resizeConcatFwd<__half, true, false>(x, other, y, ResizeParams{2, 8, 8, 8, 16, 16}, 4, 4,
// NHWC: resizeSliceBwd<__half, true, false>(dy, dx, ResizeParams{2, 8, 8, 8, 16, 16}, 4, 4,
// NHWC: resizeSliceBwd<__half, true, true>(dy, dx, ResizeParams{2, 8, 8, 8, 16, 16}, 4, 0,

// Every channel count (and offset) a multiple of 8, channels last, so
// cnn-select-lowering chooses the "vec8" forms, eight channels a thread (the NHWC template flag
// dropped): the 2 x 16 x 16 x 16 concatenation in 1024 threads (4 blocks),
// the 2 x 8 x 8 x 8 gradient in 128 (1 block).
// VEC8: [[FWD:k[0-9]+]](const __half *__restrict__ x, const __half *__restrict__ other, __half *__restrict__ y) {
// VEC8-NEXT: resizeConcatFwdNHWC8<__half, true>(x, other, y, ResizeParams{2, 8, 8, 8, 16, 16}, 8, 0,
// VEC8: resizeConcatFwdNHWC8<__half, false>(x, other, y, ResizeParams{2, 8, 8, 8, 16, 16}, 8, 8,
// VEC8: [[BWD:k[0-9]+]](const __half *__restrict__ dy, __half *__restrict__ dx) {
// VEC8-NEXT: resizeSliceBwdNHWC8<__half, false>(dy, dx, ResizeParams{2, 8, 8, 8, 16, 16}, 8, 8,
// VEC8: resizeSliceBwdNHWC8<__half, true>(dy, dx, ResizeParams{2, 8, 8, 8, 16, 16}, 8, 0,
// VEC8-LABEL: static void trainStep(
// VEC8: [[FWD]]<<<4, 256, 0, s>>>
// VEC8: [[BWD]]<<<1, 256, 0, s>>>

// --fuse-resize-concat=false: the plain resize kernels.
// OFF-NOT: resizeConcatFwd<__half
// OFF-NOT: resizeSliceBwd<__half
// OFF: resizeFwd<__half, true, true>(x, y, ResizeParams{2, 8, 8, 8, 16, 16},
// OFF: resizeBwd<__half, true, {{true|false}}>(dy, dx, ResizeParams{2, 8, 8, 8, 16, 16},
