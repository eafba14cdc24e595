// The ops with KernelCallOpInterface (pooling, softmax, resize, the loss,
// the loss scale's update) describe their launches as data next to their
// verifiers (lib/Dialect/CNN/Ops/<Family>.cpp); the printer has one case for
// all of them. Each launch below
// is what the description says: the kernel and its template arguments
// (element type, NHWC, linear), the grid by its rule under #cnn.launch
// (block 256; one thread per element of a value: ceil(elements / 256); one
// block per softmax row; a grid-stride loop over outer x inner), and the
// arguments: arena pointers, int and int64 (`ll`) scalars, records
// (PoolParams, ResizeParams) and resize's constant tap tables, bound in a
// generated kernel that calls the device function.
// RUN: cnnc %s --train --precision fp32 --layout nchw --emit cuda | FileCheck %s
// RUN: cnnc %s --train --emit cuda | FileCheck %s --check-prefix=F16
// RUN: cnnc %s --train --emit cuda --label-smoothing 0.1 --ignore-index 3 | FileCheck %s --check-prefix=XENT

// The generated kernels come first: resize 4x4 -> 8x8 (bilinear,
// half_pixel) has one tap table for both dimensions (source x = (o + 0.5) / 2
// - 0.5: lo, hi, weight of hi), and its kernel takes the buffers and binds
// the rest; resize_grad adds, per input row/column, the outputs reading it.
// CHECK: __device__ const ResizeTap [[TAPS:tbl[0-9]+]][] = {{[{][{]}}0, 1, 0.0f}, {0, 1, 0.25f}, {0, 1, 0.75f}, {1, 2, 0.25f}, {1, 2, 0.75f}, {2, 3, 0.25f}, {2, 3, 0.75f}, {3, 3, 0.25f}};
// CHECK: [[FWD:k[0-9]+]](const float *__restrict__ x, float *__restrict__ y) {
// CHECK-NEXT: resizeFwd<float, false, true>(x, y, ResizeParams{2, 8, 4, 4, 8, 8}, [[TAPS]], [[TAPS]]);
// CHECK: __device__ const int2 [[RANGES:tbl[0-9]+]][] = {{[{][{]}}0, 2}, {0, 4}, {3, 6}, {5, 7}};
// CHECK: [[BWD:k[0-9]+]](const float *__restrict__ dy, float *__restrict__ dx) {
// CHECK-NEXT: resizeBwd<float, false, true>(dy, dx, ResizeParams{2, 8, 4, 4, 8, 8}, [[TAPS]], [[TAPS]], [[RANGES]], [[RANGES]]);

// The training step, f32 NCHW. avg_pool2d: 2 x 8 x 4 x 4 = 256 results,
// one block.
// CHECK: avgPoolFwd<float, false><<<1, 256, 0, s>>>(P<float>(A, {{[0-9]+}}), P<float>(A, {{[0-9]+}}), PoolParams{2, 8, 8, 8, 4, 4, 2, 2, 2, 2, 0, 0, 0, 0, false});
// CHECK-NEXT: "cnn.avg_pool2d avgPoolFwd<float, false>"
// resize: 2 x 8 x 8 x 8 = 1024 results, 4 blocks.
// CHECK: [[FWD]]<<<4, 256, 0, s>>>(P<float>(A, {{[0-9]+}}), P<float>(A, {{[0-9]+}}));
// CHECK-NEXT: "cnn.resize [[FWD]]"
// softmax over the channels of NCHW: outer 2, n 8, inner 64, a thread per
// (outer, inner) pair.
// CHECK: softmaxStrided<float><<<1, 256, 0, s>>>(P<float>(A, {{[0-9]+}}), P<float>(A, {{[0-9]+}}), 2ll, 8, 64ll);
// global_avg_pool: a thread per result (16 rows of 64).
// CHECK: rowMean<float><<<1, 256, 0, s>>>(P<float>(A, {{[0-9]+}}), P<float>(A, {{[0-9]+}}), 16ll, 64ll);
// The loss (kernels/Loss.cuh), two passes on the runtime's reduction
// scratch: 2 rows, a warp each, in one block writing 2 x 1 partials, then
// one block adding them; its gradient counts the labels not ignored in one
// reduce_block (1024) block, then a warp per row.
// CHECK: softmaxXentLossPartial<float, int32_t><<<1, 256, 0, s>>>(ctx.reductionScratch(2), P<float>(A, [[LOGITS:[0-9]+]]), P<int32_t>(A, [[LABELS:[0-9]+]]), 2ll, 10, 0.0f, -100ll);
// CHECK-NEXT: "cnn.softmax_cross_entropy softmaxXentLossPartial<float, int32_t>"
// CHECK-NEXT: softmaxXentLossFinish<<<1, 256, 0, s>>>(ctx.reductionScratch(2), P<float>(A, {{[0-9]+}}), 1);
// CHECK: xentCountValid<int32_t><<<1, 1024, 0, s>>>(ctx.reductionScratch(1), P<int32_t>(A, [[LABELS]]), 2ll, -100ll);
// CHECK: softmaxXentGrad<float, int32_t><<<1, 256, 0, s>>>(ctx.reductionScratch(1), P<float>(A, [[LOGITS]]), P<int32_t>(A, [[LABELS]]), P<float>(A, {{[0-9]+}}), P<float>(A, {{[0-9]+}}), 2ll, 10, 0.0f, -100ll);
// Backward: resize_grad, a thread per input gradient element (256).
// CHECK: [[BWD]]<<<1, 256, 0, s>>>(P<float>(A, {{[0-9]+}}), P<float>(A, {{[0-9]+}}));
// CHECK-NEXT: "cnn.resize_grad [[BWD]]"
// avg_pool2d_grad: 2 x 8 x 8 x 8 = 1024 input gradients, 4 blocks.
// CHECK: avgPoolBwd<float, false><<<4, 256, 0, s>>>(P<float>(A, {{[0-9]+}}), P<float>(A, {{[0-9]+}}), PoolParams{2, 8, 8, 8, 4, 4, 2, 2, 2, 2, 0, 0, 0, 0, false});

// f16 NHWC: the channel is the last axis, so softmax is a block per row of
// 8 (2 x 8 x 8 rows), and the spatial mean reads rows of channels. The
// element type is the op's values' as cnn-precision left them (resize_grad
// may stay f32).
// F16: resizeFwd<__half, true, true>(x, y, ResizeParams{2, 8, 4, 4, 8, 8}, [[TAPS:tbl[0-9]+]], [[TAPS]]);
// F16: resizeBwd<{{float|__half}}, true, true>(dy, dx, ResizeParams{2, 8, 4, 4, 8, 8}
// F16: avgPoolFwd<__half, true><<<1, 256, 0, s>>>({{.*}}, PoolParams{2, 8, 8, 8, 4, 4, 2, 2, 2, 2, 0, 0, 0, 0, false});
// F16: softmaxRows<__half><<<128, 256, 0, s>>>(P<__half>(A, {{[0-9]+}}), P<__half>(A, {{[0-9]+}}), 8);
// The NHWC spatial mean: a block per image (one chunk of 8 channels, 64
// pixels: no split; spatial-mean.mlir has the other forms).
// F16: spatialSumTiles<__half, __half, true><<<2, 256, 0, s>>>({{.*}}, 2, 64, 8, 1, 1, 64.0f);
// F16: avgPoolBwd<{{float|__half}}, true><<<4, 256, 0, s>>>
// The loss scale's update: one block of one thread.
// F16: lossScaleUpdate<<<1, 1, 0, s>>>(P<float>(A, {{[0-9]+}}), P<float>(A, {{[0-9]+}}), P<float>(A, {{[0-9]+}}), P<float>(A, {{[0-9]+}}), P<float>(A, {{[0-9]+}}), 2000ll, 2.0f, 0.5f);

// The loss's smoothing and ignored label are the kernels' arguments.
// XENT: softmaxXentLossPartial<__half, int32_t><<<1, 256, 0, s>>>(ctx.reductionScratch(2), {{.*}}, 2ll, 10, 0.100000001f, 3ll);
// XENT: xentCountValid<int32_t><<<1, 1024, 0, s>>>(ctx.reductionScratch(1), P<int32_t>(A, {{[0-9]+}}), 2ll, 3ll);
// XENT: softmaxXentGrad<__half, int32_t><<<1, 256, 0, s>>>({{.*}}, 2ll, 10, 0.100000001f, 3ll);

func.func @forward(%x: tensor<2x8x8x8xf32> {cnn.input},
                   %s: tensor<8xf32> {cnn.param = "scale"},
                   %fc: tensor<10x8xf32> {cnn.param = "fc.weight"}) -> tensor<2x10xf32> {
  %sr = cnn.reshape %s : (tensor<8xf32>) -> tensor<1x8x1x1xf32>
  %m = cnn.mul %x, %sr : (tensor<2x8x8x8xf32>, tensor<1x8x1x1xf32>) -> tensor<2x8x8x8xf32>
  %a = cnn.avg_pool2d %m {ceil_mode = false, count_include_pad = false, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x8x8x8xf32>) -> tensor<2x8x4x4xf32>
  %u = cnn.resize %a {size = array<i64: 8, 8>, mode = "linear"} : (tensor<2x8x4x4xf32>) -> tensor<2x8x8x8xf32>
  %p = cnn.softmax %u {axis = 1 : i64} : (tensor<2x8x8x8xf32>) -> tensor<2x8x8x8xf32>
  %g = cnn.global_avg_pool %p : (tensor<2x8x8x8xf32>) -> tensor<2x8x1x1xf32>
  %f = cnn.reshape %g : (tensor<2x8x1x1xf32>) -> tensor<2x8xf32>
  %y = cnn.matmul %f, %fc {transpose_rhs = true} : (tensor<2x8xf32>, tensor<10x8xf32>) -> tensor<2x10xf32>
  return %y : tensor<2x10xf32>
}
