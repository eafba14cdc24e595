// RUN: cnnc-opt %s -split-input-file -verify-diagnostics

// An op with KernelCallOpInterface describes its CUDA launches as data
// (include/cnnc/Dialect/CNN/KernelCall.h); wherever it carries a #cnn.launch
// the dialect checks the description under that launch (verifyKernelCall):
// one error naming the kernel and what the target could not print.

// cnn-select-lowering's "vec8" max pooling moves eight channels a thread:
// its grid, one thread per 8 elements of the result, needs a result of a
// multiple of 8 elements; 1 x 3 x 3 x 3 has 27.
func.func @vec8_grid_not_a_multiple(%x: tensor<1x6x6x3xf16>) -> tensor<1x3x3x3xf16> {
  // expected-error @+1 {{'cnn.launch' on 'cnn.max_pool2d': kernel call 'maxPoolNHWC8': the grid's one thread per 8 elements of result #0 'tensor<1x3x3x3xf16>' needs a multiple of 8 elements, got 27}}
  %y = cnn.max_pool2d %x {ceil_mode = false, kernel = array<i64: 2, 2>, layout = #cnn.layout<NHWC>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>, cnn.lowering = "vec8", cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 1>} : (tensor<1x6x6x3xf16>) -> tensor<1x3x3x3xf16>
  return %y : tensor<1x3x3x3xf16>
}

// -----

// softmaxRows counts a row in int: a row of 3e9 elements cannot be launched.
func.func @softmax_row_beyond_int(%x: tensor<1x3000000000xf32>) -> tensor<1x3000000000xf32> {
  // expected-error @+1 {{'cnn.launch' on 'cnn.softmax': kernel call 'softmaxRows': argument #2 holds 3000000000, which the kernel's 32-bit int cannot}}
  %y = cnn.softmax %x {axis = 1 : i64, cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 1, reduction = "block_per_result">} : (tensor<1x3000000000xf32>) -> tensor<1x3000000000xf32>
  return %y : tensor<1x3000000000xf32>
}

// -----

// The same row with a thread per (outer, inner) pair: softmaxStrided's n is
// an int too.
func.func @softmax_strided_beyond_int(%x: tensor<1x3000000000xf32>) -> tensor<1x3000000000xf32> {
  // expected-error @+1 {{'cnn.launch' on 'cnn.softmax': kernel call 'softmaxStrided': argument #3 holds 3000000000, which the kernel's 32-bit int cannot}}
  %y = cnn.softmax %x {axis = 1 : i64, cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 1, reduction = "thread_per_result">} : (tensor<1x3000000000xf32>) -> tensor<1x3000000000xf32>
  return %y : tensor<1x3000000000xf32>
}

// -----

// The prelude's ResizeParams hold ints: an output width of 2^31 is no
// launch (a record field beyond int32).
func.func @resize_params_beyond_int(%x: tensor<1x1x1x2xf32>) -> tensor<1x1x1x2147483648xf32> {
  // expected-error @+1 {{'cnn.launch' on 'cnn.resize': kernel call 'resizeFwd': argument #2 holds 2147483648, which the kernel's 32-bit int cannot}}
  %y = cnn.resize %x {size = array<i64: 1, 2147483648>, cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 1>} : (tensor<1x1x1x2xf32>) -> tensor<1x1x1x2147483648xf32>
  return %y : tensor<1x1x1x2147483648xf32>
}

// -----

// A valid description passes: the same pooling in f32.
func.func @pool_of_f32(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32> {
  %y = cnn.avg_pool2d %x {ceil_mode = false, count_include_pad = false, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>, cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 1>} : (tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32>
  return %y : tensor<1x2x2x2xf32>
}

// -----

// The loss kernels count a row's classes in int: 3e9 classes cannot be
// launched.
func.func @xent_classes_beyond_int(%l: tensor<1x3000000000xf32>, %y: tensor<1xi32>) -> tensor<f32> {
  // expected-error @+1 {{'cnn.launch' on 'cnn.softmax_cross_entropy': kernel call 'softmaxXentLossPartial': argument #4 holds 3000000000, which the kernel's 32-bit int cannot}}
  %loss = cnn.softmax_cross_entropy %l, %y {cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 1, partial_blocks = 264>} : (tensor<1x3000000000xf32>, tensor<1xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A valid loss and loss-scale update pass (labels i64 are a template
// argument of the loss kernels; lossScaleUpdate is one thread).
func.func @loss_and_scale(%l: tensor<4x10xf16>, %y: tensor<4xi64>, %s: tensor<f32>, %t: tensor<f32>, %f: tensor<f32>) -> (tensor<f32>, tensor<f32>, tensor<f32>) {
  %loss = cnn.softmax_cross_entropy %l, %y {cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 1, partial_blocks = 264>} : (tensor<4x10xf16>, tensor<4xi64>) -> tensor<f32>
  %ns, %nt = cnn.loss_scale_update %s, %t, %f {growth_interval = 2000 : i64, growth_factor = 2.0 : f32, backoff_factor = 0.5 : f32, cnn.launch = #cnn.launch<grid_limit = 4224, block = 256, vector = 1>} : (tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
  return %loss, %ns, %nt : tensor<f32>, tensor<f32>, tensor<f32>
}
