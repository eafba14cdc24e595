// RUN: cnnc-opt %s -split-input-file -cnn-prepare-for-emission | FileCheck %s
// RUN: cnnc-opt %s -split-input-file -cnn-prepare-for-emission="arch=sm_80" | FileCheck %s --check-prefix=SM80
// RUN: cnnc-opt %S/../Target/CUDA/Inputs/small_cnn.mlir -cnn-autodiff -cnn-gpu-pipeline | FileCheck %s --check-prefix=STEP
// RUN: not cnnc-opt %s -split-input-file -cnn-prepare-for-emission="arch=sm_75" 2>&1 | FileCheck %s --check-prefix=ARCH

// Without an arch option or a cnn.target: sm_90, 132 SMs, 32 blocks each.
// Each result of a reduction over 8*56*56 elements (32 times more than the
// 96 results or more): a block per result; 16 elements each for 128
// results: a thread per result. cnn-select-lowering's channel sums run
// bias_grad's two-pass kernels: no reduction strategy, a block budget for
// the partial sums (2048 on 132 SMs, 1675 on 108). Softmax over the last axis is
// a row per block, over an inner one a thread per (outer, inner) pair.
// Library calls and views get no launch decision.
// CHECK: module attributes {cnn.target = #cnn.target<arch = "sm_90", sms = 132, max_threads = 1024, smem_per_block = 232448>}
// CHECK-LABEL: func.func @decisions
// CHECK: cnn.reduce_sum {{.*}}cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 8, reduction = "block_per_result">
// CHECK: cnn.reduce_max {{.*}}cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 8, reduction = "thread_per_result">
// CHECK: cnn.reduce_mean {{.*}}cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 8, partial_blocks = 2048>
// CHECK: cnn.softmax {{.*}}cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 8, reduction = "block_per_result">
// CHECK: cnn.softmax {{.*}}cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 8, reduction = "thread_per_result">
// CHECK: cnn.matmul
// CHECK-NOT: cnn.launch
// CHECK-SAME: -> tensor<8x10xf32>
// CHECK: cnn.reshape
// CHECK-NOT: cnn.launch
// CHECK-SAME: -> tensor<80xf32>
// CHECK: return
// sm_80 (an A100's 108 SMs): a smaller grid ceiling, the same strategies.
// SM80: module attributes {cnn.target = #cnn.target<arch = "sm_80", sms = 108, max_threads = 1024, smem_per_block = 166912>}
// SM80: cnn.reduce_sum {{.*}}cnn.launch = #cnn.launch<grid_limit = 3456, block = 256, vector = 8, reduction = "block_per_result">
// SM80: cnn.reduce_max {{.*}}cnn.launch = #cnn.launch<grid_limit = 3456, block = 256, vector = 8, reduction = "thread_per_result">
// SM80: cnn.reduce_mean {{.*}}cnn.launch = #cnn.launch<grid_limit = 3456, block = 256, vector = 8, partial_blocks = 1675>
// ARCH: error: cnn-prepare-for-emission: unknown GPU architecture 'sm_75' (known: sm_80, sm_86, sm_89, sm_90, sm_90a)
func.func @decisions(%x: tensor<8x56x56x96xf32>, %y: tensor<8x4x4x96xf32>, %w: tensor<10x96xf32>, %z: tensor<8x96xf32>) -> (tensor<1x1x1x96xf32>, tensor<8x4x4x1xf32>, tensor<1x1x1x96xf32>, tensor<8x96xf32>, tensor<8x4x4x96xf32>, tensor<80xf32>) {
  %s = cnn.reduce_sum %x {axes = array<i64: 0, 1, 2>} : (tensor<8x56x56x96xf32>) -> tensor<1x1x1x96xf32>
  %m = cnn.reduce_max %y {axes = array<i64: 3>} : (tensor<8x4x4x96xf32>) -> tensor<8x4x4x1xf32>
  %c = cnn.reduce_mean %x {axes = array<i64: 0, 1, 2>, cnn.lowering = "channel_sum_vec8"} : (tensor<8x56x56x96xf32>) -> tensor<1x1x1x96xf32>
  %p = cnn.softmax %z {axis = 1} : (tensor<8x96xf32>) -> tensor<8x96xf32>
  %q = cnn.softmax %y {axis = 1} : (tensor<8x4x4x96xf32>) -> tensor<8x4x4x96xf32>
  %l = cnn.matmul %z, %w {transpose_rhs = true} : (tensor<8x96xf32>, tensor<10x96xf32>) -> tensor<8x10xf32>
  %r = cnn.reshape %l : (tensor<8x10xf32>) -> tensor<80xf32>
  return %s, %m, %c, %p, %q, %r : tensor<1x1x1x96xf32>, tensor<8x4x4x1xf32>, tensor<1x1x1x96xf32>, tensor<8x96xf32>, tensor<8x4x4x96xf32>, tensor<80xf32>
}

// -----

// The module's own target stands without an arch option (and the option
// replaces it); an elementwise op gets the fused form the printer knows,
// with its decision. all_finite launches one multi-tensor kernel per
// element type of two or more tensors: here f16 (2 x 4096 elements, eight
// per thread: 1024 units, too few for 8 blocks per SM of 256-unit chunks)
// and not f32 (one tensor: its own kernel).
// CHECK: module attributes {cnn.target = #cnn.target<arch = "sm_86", sms = 84, max_threads = 1024, smem_per_block = 101376>}
// CHECK-LABEL: func.func @kept_target
// CHECK: cnn.fused_elementwise {{.*}}cnn.launch = #cnn.launch<grid_limit = 2688, block = 256, vector = 8>
// CHECK: cnn.all_finite {{.*}}cnn.launch = #cnn.launch<grid_limit = 2688, block = 256, vector = 8, chunks = [256]>
// SM80: module attributes {cnn.target = #cnn.target<arch = "sm_80"
// SM80: cnn.all_finite {{.*}}cnn.launch = #cnn.launch<grid_limit = 3456, block = 256, vector = 8, chunks = [256]>
module attributes {cnn.target = #cnn.target<arch = "sm_86", sms = 84, max_threads = 1024, smem_per_block = 101376>} {
func.func @kept_target(%a: tensor<64x64xf16>, %b: tensor<64x64xf16>, %c: tensor<8xf32>) -> (tensor<64x64xf16>, tensor<f32>) {
  %r = cnn.relu %a : (tensor<64x64xf16>) -> tensor<64x64xf16>
  %ok = cnn.all_finite %a, %b, %c {cnn.lowering = "vec8"} : (tensor<64x64xf16>, tensor<64x64xf16>, tensor<8xf32>) -> tensor<f32>
  return %r, %ok : tensor<64x64xf16>, tensor<f32>
}
}

// -----

// The block sizes of the one-block reductions and the cross-entropy loss's
// block budget: an NCHW bias gradient sums a channel in a block of 512
// threads; the loss sums rows (a warp each) in at most 1024 blocks, the
// prelude's scratch; the loss gradient counts the rows not ignored in one
// block as wide as the target allows. The NHWC bias gradient runs partial
// sums instead. Every launching op gets the 256-thread block and the
// elementwise kernels' 16-byte form (vector = 8).
// CHECK-LABEL: func.func @reductions
// CHECK: cnn.bias_grad {{.*}}cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 8, reduce_block = 512>
// CHECK: cnn.bias_grad {{.*}}cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 8, partial_blocks = 2048>
// CHECK: cnn.softmax_cross_entropy {{.*}}cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 8, partial_blocks = 1024>
// CHECK: cnn.softmax_cross_entropy_grad {{.*}}cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 8, reduce_block = 1024>
// SM80-LABEL: func.func @reductions
// SM80: cnn.bias_grad {{.*}}cnn.launch = #cnn.launch<grid_limit = 3456, block = 256, vector = 8, reduce_block = 512>
// SM80: cnn.bias_grad {{.*}}cnn.launch = #cnn.launch<grid_limit = 3456, block = 256, vector = 8, partial_blocks = 1675>
// SM80: cnn.softmax_cross_entropy {{.*}}cnn.launch = #cnn.launch<grid_limit = 3456, block = 256, vector = 8, partial_blocks = 1024>
func.func @reductions(%g: tensor<8x16x4x4xf32>, %h: tensor<8x4x4x16xf32>, %f: tensor<4x8xf32>, %l: tensor<4xi32>, %one: tensor<f32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<f32>, tensor<4x8xf32>) {
  %d = cnn.bias_grad %g : (tensor<8x16x4x4xf32>) -> tensor<16xf32>
  %e = cnn.bias_grad %h {layout = #cnn.layout<NHWC>} : (tensor<8x4x4x16xf32>) -> tensor<16xf32>
  %loss = cnn.softmax_cross_entropy %f, %l : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  %df = cnn.softmax_cross_entropy_grad %f, %l, %one : (tensor<4x8xf32>, tensor<4xi32>, tensor<f32>) -> tensor<4x8xf32>
  return %d, %e, %loss, %df : tensor<16xf32>, tensor<16xf32>, tensor<f32>, tensor<4x8xf32>
}

// -----

// A GPU of at most 512 threads a block: the one-block reductions take that
// many, the loss gradient's count too.
// CHECK: module attributes {cnn.target = #cnn.target<arch = "sm_90", sms = 132, max_threads = 512, smem_per_block = 232448>}
// CHECK-LABEL: func.func @narrow_blocks
// CHECK: cnn.bias_grad {{.*}}cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 8, reduce_block = 512>
// CHECK: cnn.softmax_cross_entropy_grad {{.*}}cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 8, reduce_block = 512>
module attributes {cnn.target = #cnn.target<arch = "sm_90", sms = 132, max_threads = 512, smem_per_block = 232448>} {
func.func @narrow_blocks(%g: tensor<8x16x4x4xf32>, %f: tensor<4x8xf32>, %l: tensor<4xi32>, %one: tensor<f32>) -> (tensor<16xf32>, tensor<4x8xf32>) {
  %d = cnn.bias_grad %g : (tensor<8x16x4x4xf32>) -> tensor<16xf32>
  %df = cnn.softmax_cross_entropy_grad %f, %l, %one : (tensor<4x8xf32>, tensor<4xi32>, tensor<f32>) -> tensor<4x8xf32>
  return %d, %df : tensor<16xf32>, tensor<4x8xf32>
}
}

// The pipeline runs the pass last (after the memory plan): SimpleCNN's step
// for the default sm_90. The NHWC bias gradient sums per channel in partial
// sums; all_finite checks the f16 and the f32 gradients in
// a kernel each; the SGD updates are one multi-tensor kernel, whose chunk
// the group's last member carries.
// STEP: module attributes {{{.*}}cnn.target = #cnn.target<arch = "sm_90", sms = 132
// STEP-LABEL: func.func @train_step
// STEP: cnn.bias_grad {{.*}}cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 8, partial_blocks = 2048>
// STEP: cnn.all_finite {{.*}}cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 8, chunks = [256, 256]>
// STEP: cnn.sgd_update {{.*}}cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 8>
// STEP: cnn.sgd_update {{.*}}cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 8, chunks = [256]>
// STEP-NEXT: return
