// The grids of the generated kernels come from the #cnn.target of --arch
// (cnn-prepare-for-emission): grid-stride kernels take 32 blocks per SM, so
// the 2M-output pooling fills sm_90's 132 SMs with 4224 blocks and an
// A100's 108 with 3456 (the bias epilogue, 8M elements eight at a time: 4096 and
// 3456); the NHWC bias gradient's partial sums take at most 2048 blocks on
// 132 SMs, 1675 on 108 (524288 rows in 1670 tiles of 314). The printer
// prints what the IR says.
// RUN: cnnc %s --train --precision fp32 --layout nchw --emit cuda -o %t.sm90.cu
// RUN: cnnc %s --train --precision fp32 --layout nchw --emit cuda --arch sm_80 -o %t.sm80.cu
// RUN: FileCheck %s --check-prefix=SM90 < %t.sm90.cu
// RUN: FileCheck %s --check-prefix=SM80 < %t.sm80.cu
// SM90: <<<4096, 256, 0, s>>>
// SM90: maxPoolIndex<float, false, false><<<4224, 256, 0, s>>>
// SM80: <<<3456, 256, 0, s>>>
// SM80: maxPoolIndex<float, false, false><<<3456, 256, 0, s>>>
// The one-block reductions and the loss take their sizes from #cnn.launch
// too (reduce_block, partial_blocks; the same on both targets): the loss
// sums a warp per row in at most 1024 blocks of eight rows (128 rows: 16),
// its gradient counts the rows not ignored in one block of 1024 threads,
// the NCHW bias gradient sums each channel in a block of 512.
// SM90: softmaxXentLossPartial<float, int32_t><<<16, 256, 0, s>>>
// SM90: xentCountValid<int32_t><<<1, 1024, 0, s>>>
// SM90: channelSum<float, float><<<16, 512, 0, s>>>
// SM80: softmaxXentLossPartial<float, int32_t><<<16, 256, 0, s>>>
// SM80: xentCountValid<int32_t><<<1, 1024, 0, s>>>
// SM80: channelSum<float, float><<<16, 512, 0, s>>>
// RUN: cnnc %s --train --emit cuda | FileCheck %s --check-prefix=NHWC90
// RUN: cnnc %s --train --emit cuda --arch sm_80 | FileCheck %s --check-prefix=NHWC80
// NHWC90: nhwcPartial8<0, __half><<<dim3(1, 2048), dim3(2, 128), 0, s>>>
// NHWC80: nhwcPartial8<0, __half><<<dim3(1, 1670), dim3(2, 128), 0, s>>>
//
// A step whose decisions were made for another architecture is prepared
// again for the one asked for; an unknown one is an error naming it.
// RUN: cnnc %s --train --precision fp32 --layout nchw --target gpu --emit mlir -o %t.step.mlir
// RUN: FileCheck %s --check-prefix=STEP < %t.step.mlir
// RUN: cnnc %t.step.mlir --train --emit cuda --arch sm_80 -o %t.again.cu
// RUN: FileCheck %s --check-prefix=SM80 < %t.again.cu
// STEP: cnn.target = #cnn.target<arch = "sm_90", sms = 132
// RUN: not cnnc %t.step.mlir --train --emit cuda --arch sm_75 2>&1 | FileCheck %s --check-prefix=ARCH
// ARCH: error: cnn-prepare-for-emission: unknown GPU architecture 'sm_75' (known: sm_80, sm_86, sm_89, sm_90, sm_90a)
//
// The printer refuses a step without its decisions instead of guessing.
// RUN: sed -e 's/, cnn.launch = #cnn.launch<[^>]*>//' -e 's/cnn.launch = #cnn.launch<[^>]*>, //' -e 's/{cnn.launch = #cnn.launch<[^>]*>}//' %t.step.mlir > %t.nolaunch.mlir
// RUN: not cnnc-translate --cnn-to-cuda %t.nolaunch.mlir -o %t.nolaunch.cu 2>&1 | FileCheck %s --check-prefix=NOLAUNCH
// RUN: test ! -e %t.nolaunch.cu
// NOLAUNCH: error: CUDA backend: '{{.*}}' has no cnn.launch: run cnn-prepare-for-emission (the CUDA target's pipeline, cnn-gpu-pipeline) first
// RUN: sed -e 's/cnn.target = #cnn.target<[^>]*>, //' %t.step.mlir > %t.notarget.mlir
// RUN: not cnnc-translate --cnn-to-cuda %t.notarget.mlir 2>&1 | FileCheck %s --check-prefix=NOTARGET
// NOTARGET: error: CUDA backend: the module has no cnn.target: run cnn-prepare-for-emission
func.func @forward(%x: tensor<128x16x64x64xf32> {cnn.input},
                   %w: tensor<16x16x1x1xf32> {cnn.param = "conv.weight"},
                   %b: tensor<16xf32> {cnn.param = "conv.bias"},
                   %wf: tensor<10x16xf32> {cnn.param = "fc.weight"}) -> tensor<128x10xf32> {
  %c = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<128x16x64x64xf32>, tensor<16x16x1x1xf32>) -> tensor<128x16x64x64xf32>
  %cb = cnn.bias_add %c, %b : (tensor<128x16x64x64xf32>, tensor<16xf32>) -> tensor<128x16x64x64xf32>
  %p = cnn.max_pool2d %cb {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, ceil_mode = false} : (tensor<128x16x64x64xf32>) -> tensor<128x16x32x32xf32>
  %q = cnn.global_avg_pool %p : (tensor<128x16x32x32xf32>) -> tensor<128x16x1x1xf32>
  %f = cnn.flatten %q {axis = 1} : (tensor<128x16x1x1xf32>) -> tensor<128x16xf32>
  %y = cnn.matmul %f, %wf {transpose_rhs = true} : (tensor<128x16xf32>, tensor<10x16xf32>) -> tensor<128x10xf32>
  return %y : tensor<128x10xf32>
}
