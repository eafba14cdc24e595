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
  %r = cnn.relu %a {cnn.launch = #cnn.launch<grid_limit = 0>} : (tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

func.func @strategy_name(%x: tensor<8x4xf32>) -> tensor<8x1xf32> {
  // expected-error @+1 {{#cnn.launch: reduction must be "block_per_result" or "thread_per_result", got "warp_per_result"}}
  %s = cnn.reduce_sum %x {axes = array<i64: 1>, cnn.launch = #cnn.launch<grid_limit = 4224, reduction = "warp_per_result">} : (tensor<8x4xf32>) -> tensor<8x1xf32>
  return %s : tensor<8x1xf32>
}

// -----

func.func @chunk(%a: tensor<8xf16>, %b: tensor<8xf16>) -> tensor<f32> {
  // expected-error @+1 {{#cnn.launch: each chunk must be a positive multiple of 256 units, got 100}}
  %ok = cnn.all_finite %a, %b {cnn.launch = #cnn.launch<grid_limit = 4224, chunks = [100]>} : (tensor<8xf16>, tensor<8xf16>) -> tensor<f32>
  return %ok : tensor<f32>
}

// -----

// A reduction without its strategy: the decision is missing.
func.func @missing_strategy(%x: tensor<8x4xf32>) -> tensor<8x1xf32> {
  // expected-error @+1 {{'cnn.launch' on 'cnn.reduce_sum' needs a reduction strategy}}
  %s = cnn.reduce_sum %x {axes = array<i64: 1>, cnn.launch = #cnn.launch<grid_limit = 4224>} : (tensor<8x4xf32>) -> tensor<8x1xf32>
  return %s : tensor<8x1xf32>
}

// -----

// A strategy where nothing reduces.
func.func @stray_strategy(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'cnn.launch' on 'cnn.relu' has a reduction strategy, which only reductions and softmax take}}
  %r = cnn.relu %a {cnn.launch = #cnn.launch<grid_limit = 4224, reduction = "thread_per_result">} : (tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// cnn-select-lowering's channel sums run bias_grad's kernels: no strategy.
func.func @channel_sum_strategy(%x: tensor<2x4x4x16xf32>) -> tensor<1x1x1x16xf32> {
  // expected-error @+1 {{'cnn.launch' on 'cnn.reduce_sum' has a reduction strategy}}
  %s = cnn.reduce_sum %x {axes = array<i64: 0, 1, 2>, cnn.lowering = "channel_sum_vec8", cnn.launch = #cnn.launch<grid_limit = 4224, reduction = "block_per_result", partial_blocks = 2048>} : (tensor<2x4x4x16xf32>) -> tensor<1x1x1x16xf32>
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
  // expected-error @+1 {{'cnn.launch' on 'cnn.reduce_sum' needs partial_blocks (its per-channel sums run as partial sums over row tiles)}}
  %s = cnn.reduce_sum %x {axes = array<i64: 0, 1, 2>, cnn.lowering = "channel_sum_vec8", cnn.launch = #cnn.launch<grid_limit = 4224>} : (tensor<2x4x4x16xf32>) -> tensor<1x1x1x16xf32>
  return %s : tensor<1x1x1x16xf32>
}

// -----

func.func @stray_partial_blocks(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'cnn.launch' on 'cnn.relu' has partial_blocks, which only NHWC per-channel sums take}}
  %r = cnn.relu %a {cnn.launch = #cnn.launch<grid_limit = 4224, partial_blocks = 2048>} : (tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

func.func @negative_partial_blocks(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{#cnn.launch: partial_blocks must be in [1, 2^31 - 1] where given, got -1}}
  %r = cnn.relu %a {cnn.launch = #cnn.launch<grid_limit = 4224, partial_blocks = -1>} : (tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}
