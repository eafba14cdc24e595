// The multi-tensor kernels of a step (the parameters' f16 copies, the
// gradients' finiteness check, the optimizer updates) move eight elements per
// thread when cnn-select-lowering chose "vec8" (every tensor a multiple of 8
// elements): one table search per eight elements and 16/32-byte accesses, the
// f16 and f32 gradients of one group loaded by their own type.
// RUN: cnnc %s --train --optimizer sgd --emit cuda -o %t.cu
// RUN: FileCheck %s < %t.cu
// RUN: %if nvcc %{ %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t.cu -o %t.o %}
// "vec8" set by hand on a group with a 10-element tensor (small_cnn's
// fc.bias) is one error naming the tensor, and no output:
// RUN: cnnc-opt %S/Inputs/small_cnn.mlir --cnn-autodiff --cse --cnn-gpu-pipeline -o %t.step.mlir
// RUN: sed 's/cnn.update_group = 0/cnn.lowering = "vec8", cnn.update_group = 0/' %t.step.mlir > %t.bad.mlir
// RUN: not cnnc-translate --cnn-to-cuda %t.bad.mlir -o %t.bad.cu 2>&1 | FileCheck %s --check-prefix=ERR
// RUN: test ! -e %t.bad.cu
// ERR: error: CUDA backend: the eight-element multi-tensor form ("vec8") needs every tensor a multiple of 8 elements at a 32-byte aligned offset, got 'tensor<10xf32>'

// The casts: fc.bias, fc.weight and the NHWC filter padded to 8 input
// channels (2, 16 and 72 vectors of 8): a chunk table (tensor, first and
// end vector) that the blocks walk, no search per element.
// CHECK: __device__ const int mt0_chunk[9] = {0, 0, 2, 1, 0, 16, 2, 0, 72};
// CHECK-LABEL: __global__ void __launch_bounds__(256) mt0(char *A)
// CHECK-NEXT: mt::forEachUnit<3>(mt0_chunk, [&](const int lo, const int64_t at) {
// CHECK-NEXT: float x[2][8];
// CHECK-NEXT: mt::load8<float>(0, A + mt0_in0[lo], at * 8, x[0]);
// CHECK-NEXT: mt::eachLane<2>(at * 8, x, [&](const int64_t i, float(&io)[2]) {
// CHECK: mt::store8<__half>(A + mt0_out0[lo], at * 8, x[1]);
// The f16 gradients (convolution, linear) checked eight at a time.
// CHECK-LABEL: __global__ void __launch_bounds__(256) af{{[0-9]+}}(const char *A, float *flag)
// CHECK-NEXT: mt::allFinite<3, __half, 8>(af[[AF:[0-9]+]]_chunk, af[[AF]]_in, A, flag);
// The SGD updates: the step's scalars (lr, step, grad scale, finite flag)
// loaded once per thread; the gradient by its tensor's type, param and
// momentum f32.
// CHECK-LABEL: __global__ void __launch_bounds__(256) mt{{[0-9]+}}(char *A)
// CHECK-NEXT: const float a3 = ld(
// CHECK-NEXT: const float a4 = ld(
// CHECK-NEXT: const float a5 = ld(
// CHECK-NEXT: const float a6 = ld(
// CHECK-NEXT: mt::forEachUnit<5>(mt[[U:[0-9]+]]_chunk, [&](const int lo, const int64_t at) {
// CHECK-NEXT: float x[5][8];
// CHECK-NEXT: mt::load8<float>(0, A + mt[[U]]_in0[lo], at * 8, x[0]);
// CHECK-NEXT: mt::load8<__half, float>(mt[[U]]_ty1[lo], A + mt[[U]]_in1[lo], at * 8, x[1]);
// CHECK-NEXT: mt::load8<float>(0, A + mt[[U]]_in2[lo], at * 8, x[2]);
// CHECK-NEXT: mt::eachLane<5>(at * 8, x, [&](const int64_t i, float(&io)[5]) {
// CHECK: io[3] = r0;
// CHECK-NEXT: io[4] = r1;
// CHECK-NEXT: });
// CHECK-NEXT: mt::store8<float>(A + mt[[U]]_out0[lo], at * 8, x[3]);
// CHECK-NEXT: mt::store8<float>(A + mt[[U]]_out1[lo], at * 8, x[4]);
// CHECK-LABEL: static void trainStep(
// CHECK: // 3 parameter casts in one multi-tensor kernel
// CHECK-NEXT: mt0<<<3, 256, 0, s>>>(A);
// CHECK: // 5 optimizer updates in one multi-tensor kernel

func.func @forward(%x: tensor<4x3x8x8xf32> {cnn.input},
                   %w1: tensor<8x3x3x3xf32> {cnn.param = "conv1.weight"},
                   %g: tensor<8xf32> {cnn.param = "bn.weight"},
                   %be: tensor<8xf32> {cnn.param = "bn.bias"},
                   %rm: tensor<8xf32> {cnn.buffer = "bn.running_mean"},
                   %rv: tensor<8xf32> {cnn.buffer = "bn.running_var"},
                   %wf: tensor<16x8xf32> {cnn.param = "fc.weight"},
                   %bf: tensor<16xf32> {cnn.param = "fc.bias"}) -> tensor<4x16xf32> {
  %c = cnn.conv2d %x, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<4x3x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<4x8x8x8xf32>
  %n = cnn.batch_norm %c, %g, %be, %rm, %rv {epsilon = 1.0e-5 : f32} : (tensor<4x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8x8x8xf32>
  %r = cnn.relu %n : (tensor<4x8x8x8xf32>) -> tensor<4x8x8x8xf32>
  %q = cnn.global_avg_pool %r : (tensor<4x8x8x8xf32>) -> tensor<4x8x1x1xf32>
  %f = cnn.flatten %q {axis = 1} : (tensor<4x8x1x1xf32>) -> tensor<4x8xf32>
  %y = cnn.matmul %f, %wf {transpose_rhs = true} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %z = cnn.bias_add %y, %bf : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return %z : tensor<4x16xf32>
}
