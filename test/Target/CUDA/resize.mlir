// RUN: cnnc %S/Inputs/resize.mlir --train -O0 --emit cuda | FileCheck %s
// RUN: cnnc %S/Inputs/resize.mlir --train --emit cuda | FileCheck %s --check-prefix=NHWC
// RUN: cnnc %S/Inputs/resize.mlir --train -O0 --emit cuda -o %t0.cu
// RUN: cnnc %S/Inputs/resize.mlir --train --emit cuda -o %t.cu
// RUN: %if nvcc %{ %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t0.cu -o %t0.o %}
// RUN: %if nvcc %{ %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t.cu -o %t.o %}

// f32 NCHW (-O0): the taps of each dimension are a __device__ table that the
// generated kernel passes to the prelude's resizeFwd / resizeBwd. Bilinear
// 8 -> 16 (half_pixel, scale 2): source (o + 0.5) / 2 - 0.5, clamped at 0.
// CHECK: __device__ const ResizeTap [[LIN:tbl[0-9]+]][] = {{[{][{]}}0, 1, 0.0f}, {0, 1, 0.25f}, {0, 1, 0.75f}, {1, 2, 0.25f},
// CHECK-SAME: {6, 7, 0.75f}, {7, 7, 0.25f}};
// CHECK: resizeFwd<float, false, true>(x, y, ResizeParams{4, 8, 8, 8, 16, 16}, [[LIN]], [[LIN]]);
// PyTorch's nearest 8 -> 16: o / 2.
// CHECK: __device__ const ResizeTap [[NEAR:tbl[0-9]+]][] = {{[{][{]}}0, 0, 0.0f}, {0, 0, 0.0f}, {1, 1, 0.0f},
// CHECK: resizeFwd<float, false, false>(x, y, ResizeParams{4, 8, 8, 8, 16, 16}, [[NEAR]], [[NEAR]]);
// The gradients gather: input k of the nearest one reads outputs 2k, 2k + 1;
// of the bilinear one, the outputs whose two taps include k.
// CHECK: __device__ const int2 [[NR:tbl[0-9]+]][] = {{[{][{]}}0, 1}, {2, 3}, {4, 5},
// CHECK: resizeBwd<float, false, false>(dy, dx, ResizeParams{4, 8, 8, 8, 16, 16}, [[NEAR]], [[NEAR]], [[NR]], [[NR]]);
// CHECK: __device__ const int2 [[LR:tbl[0-9]+]][] = {{[{][{]}}0, 2}, {0, 4}, {3, 6},
// CHECK: resizeBwd<float, false, true>(dy, dx, ResizeParams{4, 8, 8, 8, 16, 16}, [[LIN]], [[LIN]], [[LR]], [[LR]]);

// Default pipeline: NHWC (cnn-layout) and f16 storage (cnn-precision).
// NHWC: resizeFwd<__half, true, true>(x, y, ResizeParams{4, 8, 8, 8, 16, 16},
// NHWC: resizeFwd<__half, true, false>(x, y, ResizeParams{4, 8, 8, 8, 16, 16},
// NHWC: resizeBwd<__half, true, false>(dy, dx, ResizeParams{4, 8, 8, 8, 16, 16},
// NHWC: resizeBwd<__half, true, true>(dy, dx, ResizeParams{4, 8, 8, 8, 16, 16},
