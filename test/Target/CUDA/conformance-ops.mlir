// The ops the ONNX conformance cases brought in, through the training step
// and the CUDA target: a transposed convolution (conv2d_bwd_data in the
// forward, so conv2d and conv2d_bwd_filter in its gradient), abs,
// pow_tensor, a batched matmul and reduce_max (of the input: no gradient).
// RUN: cnnc %s --train -O0 --emit cuda | FileCheck %s
// RUN: cnnc %s --train -O0 --emit cuda -o %t.cu
// RUN: %if nvcc %{ %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t.cu -o %t.o %}
// RUN: cnnc %s --train --emit cuda -o %t.opt.cu
// RUN: %if nvcc %{ %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t.opt.cu -o %t.opt.o %}

// reduce_max: a max accumulator from -inf that lets a NaN through.
// CHECK: float acc = -INFINITY;
// CHECK: acc = (v > acc || v != v) ? v : acc;
// The batched matmul (2 x [3x81] x [81x3]) is one product per batch index.
// CHECK: for (int64_t bi = 0; bi < 2ll; ++bi)
// CHECK-NEXT: ctx.matmul({{[0-9]+}}, P<float>(A, {{[0-9]+}}) + bi * 243ll, P<float>(A, {{[0-9]+}}) + bi * 243ll, P<float>(A, {{[0-9]+}}) + bi * 9ll);

func.func @forward(%x: tensor<2x4x5x5xf32> {cnn.input},
                   %w: tensor<4x3x3x3xf32> {cnn.param = "up.weight"},
                   %fc: tensor<10x9xf32> {cnn.param = "fc.weight"}) -> tensor<2x10xf32> {
  %d = cnn.conv2d_bwd_data %x, %w {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x4x5x5xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x9x9xf32>
  %a = cnn.abs %d : (tensor<2x3x9x9xf32>) -> tensor<2x3x9x9xf32>
  %e = cnn.constant dense<1.5> : tensor<1x3x1x1xf32>
  %p = cnn.pow_tensor %a, %e : (tensor<2x3x9x9xf32>, tensor<1x3x1x1xf32>) -> tensor<2x3x9x9xf32>
  %f = cnn.reshape %p : (tensor<2x3x9x9xf32>) -> tensor<2x3x81xf32>
  %g = cnn.matmul %f, %f {transpose_rhs = true} : (tensor<2x3x81xf32>, tensor<2x3x81xf32>) -> tensor<2x3x3xf32>
  %gf = cnn.reshape %g : (tensor<2x3x3xf32>) -> tensor<2x9xf32>
  %y = cnn.matmul %gf, %fc {transpose_rhs = true} : (tensor<2x9xf32>, tensor<10x9xf32>) -> tensor<2x10xf32>
  %m = cnn.reduce_max %x {axes = array<i64: 1, 2, 3>} : (tensor<2x4x5x5xf32>) -> tensor<2x1x1x1xf32>
  %mf = cnn.reshape %m : (tensor<2x1x1x1xf32>) -> tensor<2x1xf32>
  %l = cnn.add %y, %mf : (tensor<2x10xf32>, tensor<2x1xf32>) -> tensor<2x10xf32>
  return %l : tensor<2x10xf32>
}
