// RUN: cnnc %S/Inputs/pad_aux.mlir --train -O0 --emit cuda | FileCheck %s
// RUN: cnnc %S/Inputs/pad_aux.mlir --train --emit cuda | FileCheck %s --check-prefix=NHWC
// RUN: cnnc %S/Inputs/pad_aux.mlir --train --emit cuda -o %t.cu
// RUN: %if nvcc %{ %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t.cu -o %t.o %}

// f32 NCHW (-O0): cnn.pad is a gather, one generated kernel per mode.
// reflect over H and W of the 4x3x8x8 image:
// CHECK: k = k < 0 ? -k : k >= 8ll ? 14ll - k : k;
// constant (value 0) over H and W:
// CHECK: fill |= k < 0 || k >= 8ll;
// CHECK: out[i] = fill ? float(0.0f) : in[src];
// edge:
// CHECK: k = k < 0 ? 0 : k >= 4ll ? 4ll - 1 : k;
// pad_grad of the edge pad: the border element sums its replicas.
// CHECK: if (k3 == 0) lo3[0] = 0;
// CHECK: if (k3 == 3ll) hi3[0] = 7ll;
// CHECK: acc += (float)dy[base + j3 * 1ll + j2 * 8ll];

// Default pipeline: NHWC f16; the pads of the activations moved with the
// layout (H and W are dimensions 1 and 2).
// NHWC: int64_t lo2[3], hi2[3]; int c2 = 0;
// NHWC: int64_t lo1[3], hi1[3]; int c1 = 0;
// NHWC: out[i] = __half(acc);
