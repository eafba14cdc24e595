// RUN: cnnc-opt %s -split-input-file -verify-diagnostics

// The target and launch decisions are verified wherever they appear (the
// CUDA printer trusts them).

// expected-error @+1 {{#cnn.target: sms must be in [1, 4096], got 0}}
module attributes {cnn.target = #cnn.target<arch = "sm_90", sms = 0, max_threads = 1024, smem_per_block = 232448>} {}

// -----

// expected-error @+1 {{#cnn.target: max_threads must be a multiple of 32 in [32, 1024], got 1000}}
module attributes {cnn.target = #cnn.target<arch = "sm_90", sms = 132, max_threads = 1000, smem_per_block = 232448>} {}

// -----

// expected-error @+1 {{#cnn.target needs an architecture}}
module attributes {cnn.target = #cnn.target<arch = "", sms = 132, max_threads = 1024, smem_per_block = 232448>} {}

// -----

// expected-error @+1 {{'cnn.target' on a module must be a #cnn.target, got "sm_90"}}
module attributes {cnn.target = "sm_90"} {}

// -----

func.func @grid(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{#cnn.launch: grid_limit must be in [1, 2^31 - 1], got 0}}
  %r = cnn.relu %a {cnn.launch = #cnn.launch<grid_limit = 0, block = 256, vector = 8>} : (tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

func.func @strategy_name(%x: tensor<8x4xf32>) -> tensor<8x1xf32> {
  // expected-error @+1 {{#cnn.launch: reduction must be "block_per_result" or "thread_per_result", got "warp_per_result"}}
  %s = cnn.reduce_sum %x {axes = array<i64: 1>, cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 8, reduction = "warp_per_result">} : (tensor<8x4xf32>) -> tensor<8x1xf32>
  return %s : tensor<8x1xf32>
}

// -----

func.func @chunk(%a: tensor<8xf16>, %b: tensor<8xf16>) -> tensor<f32> {
  // expected-error @+1 {{#cnn.launch: each chunk must be a positive multiple of 256 units, got 100}}
  %ok = cnn.all_finite %a, %b {cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 8, chunks = [100]>} : (tensor<8xf16>, tensor<8xf16>) -> tensor<f32>
  return %ok : tensor<f32>
}

// -----

// A reduction without its strategy: the decision is missing.
func.func @missing_strategy(%x: tensor<8x4xf32>) -> tensor<8x1xf32> {
  // expected-error @+1 {{'cnn.launch' on 'cnn.reduce_sum' needs a reduction strategy}}
  %s = cnn.reduce_sum %x {axes = array<i64: 1>, cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 8>} : (tensor<8x4xf32>) -> tensor<8x1xf32>
  return %s : tensor<8x1xf32>
}

// -----

// A strategy where nothing reduces.
func.func @stray_strategy(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'cnn.launch' on 'cnn.relu' has a reduction strategy, which only reductions and softmax take}}
  %r = cnn.relu %a {cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 8, reduction = "thread_per_result">} : (tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// cnn-select-lowering's channel sums run bias_grad's kernels: no strategy.
func.func @channel_sum_strategy(%x: tensor<2x4x4x16xf32>) -> tensor<1x1x1x16xf32> {
  // expected-error @+1 {{'cnn.launch' on 'cnn.reduce_sum' has a reduction strategy}}
  %s = cnn.reduce_sum %x {axes = array<i64: 0, 1, 2>, cnn.lowering = "channel_sum_vec8", cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 8, reduction = "block_per_result", partial_blocks = 2048>} : (tensor<2x4x4x16xf32>) -> tensor<1x1x1x16xf32>
  return %s : tensor<1x1x1x16xf32>
}

// -----

func.func @not_launch(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'cnn.launch' on an operation must be a #cnn.launch, got 4224}}
  %r = cnn.relu %a {cnn.launch = 4224} : (tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// NHWC per-channel sums without their block budget.
func.func @missing_partial_blocks(%x: tensor<2x4x4x16xf32>) -> tensor<1x1x1x16xf32> {
  // expected-error @+1 {{'cnn.launch' on 'cnn.reduce_sum' needs partial_blocks (it sums in per-block partial sums first)}}
  %s = cnn.reduce_sum %x {axes = array<i64: 0, 1, 2>, cnn.lowering = "channel_sum_vec8", cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 8>} : (tensor<2x4x4x16xf32>) -> tensor<1x1x1x16xf32>
  return %s : tensor<1x1x1x16xf32>
}

// -----

func.func @stray_partial_blocks(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'cnn.launch' on 'cnn.relu' has partial_blocks, which only NHWC per-channel sums and softmax_cross_entropy take}}
  %r = cnn.relu %a {cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 8, partial_blocks = 2048>} : (tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

func.func @negative_partial_blocks(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{#cnn.launch: partial_blocks must be in [1, 2^31 - 1] where given, got -1}}
  %r = cnn.relu %a {cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 8, partial_blocks = -1>} : (tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// The kernels are compiled for 256-thread blocks: another size is refused,
// not launched wrong.
func.func @block(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{#cnn.launch: block must be 256 (the threads the kernels are compiled for), got 512}}
  %r = cnn.relu %a {cnn.launch = #cnn.launch<grid_limit = 4224, block = 512, vector = 8>} : (tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// A launch without its block size is not a #cnn.launch.
func.func @missing_block(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{struct is missing required parameter: block}}
  %r = cnn.relu %a {cnn.launch = #cnn.launch<grid_limit = 4224, vector = 8>} : (tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

func.func @vector(%a: tensor<8xf16>) -> tensor<8xf16> {
  // expected-error @+1 {{#cnn.launch: vector must be 1 or 8 (16-byte accesses of eight elements), got 4}}
  %r = cnn.relu %a {cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 4>} : (tensor<8xf16>) -> tensor<8xf16>
  return %r : tensor<8xf16>
}

// -----

func.func @reduce_block_size(%g: tensor<8x16x4x4xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{#cnn.launch: reduce_block must be a multiple of 32 in [32, 1024] where given, got 48}}
  %d = cnn.bias_grad %g {cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 8, reduce_block = 48>} : (tensor<8x16x4x4xf32>) -> tensor<16xf32>
  return %d : tensor<16xf32>
}

// -----

// NCHW per-channel sums run a block per channel: its size is a decision.
func.func @missing_reduce_block(%g: tensor<8x16x4x4xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{'cnn.launch' on 'cnn.bias_grad' needs reduce_block (it reduces with a block per result)}}
  %d = cnn.bias_grad %g {cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 8>} : (tensor<8x16x4x4xf32>) -> tensor<16xf32>
  return %d : tensor<16xf32>
}

// -----

func.func @stray_reduce_block(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'cnn.launch' on 'cnn.relu' has reduce_block, which only the NCHW per-channel sums and softmax_cross_entropy_grad take}}
  %r = cnn.relu %a {cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 8, reduce_block = 512>} : (tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// The cross-entropy gradient counts the rows not ignored in one block.
func.func @xent_grad_reduce_block(%f: tensor<4x8xf32>, %l: tensor<4xi32>, %one: tensor<f32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'cnn.launch' on 'cnn.softmax_cross_entropy_grad' needs reduce_block}}
  %d = cnn.softmax_cross_entropy_grad %f, %l, %one {cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 8>} : (tensor<4x8xf32>, tensor<4xi32>, tensor<f32>) -> tensor<4x8xf32>
  return %d : tensor<4x8xf32>
}

// -----

// The cross-entropy loss sums per block first: its block budget is required
// and bounded by the prelude's scratch.
func.func @xent_missing_partial_blocks(%f: tensor<4x8xf32>, %l: tensor<4xi32>) -> tensor<f32> {
  // expected-error @+1 {{'cnn.launch' on 'cnn.softmax_cross_entropy' needs partial_blocks (it sums in per-block partial sums first)}}
  %loss = cnn.softmax_cross_entropy %f, %l {cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 8>} : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

func.func @xent_partial_blocks(%f: tensor<4x8xf32>, %l: tensor<4xi32>) -> tensor<f32> {
  // expected-error @+1 {{'cnn.launch' on 'cnn.softmax_cross_entropy': partial_blocks must be at most 1024 (the blocks the prelude's xentScratch holds), got 2048}}
  %loss = cnn.softmax_cross_entropy %f, %l {cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 8, partial_blocks = 2048>} : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
