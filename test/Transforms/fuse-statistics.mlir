// cnn-fuse reports its counts as pass Statistics. They print only where LLVM
// Statistics count (LLVM_ENABLE_STATS); Release builds against Debian's LLVM
// compile them to no-ops, and `cnnc --stats` (fuse-stats-driver.test) reads
// the same counts through cnnc::getFusionCounts instead.
// REQUIRES: mlir-pass-statistics
// RUN: cnnc-opt %s -cnn-fuse --mlir-pass-statistics -o /dev/null 2>&1 | FileCheck %s
// CHECK: ... Pass statistics report ...
// CHECK: CNNFuse
// CHECK-DAG: (S) 2 bn-relu-grad-ops
// CHECK-DAG: (S) 1 bn-splits
// CHECK-DAG: (S) 4 conv-epilogue-ops
// CHECK-DAG: (S) {{[0-9]+}} elementwise-merges
// CHECK-DAG: (S) {{[0-9]+}} elementwise-ops

func.func @step(%x: tensor<2x4x8x8xf32>, %w: tensor<4x4x3x3xf32>, %b: tensor<4xf32>, %res: tensor<2x4x8x8xf32>, %s: tensor<4xf32>, %rm: tensor<4xf32>, %rv: tensor<4xf32>, %dy: tensor<2x4x8x8xf32>) -> (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<2x4x8x8xf32>) {
  %c = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x8x8xf32>
  %cb = cnn.bias_add %c, %b : (tensor<2x4x8x8xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  %a = cnn.add %cb, %res : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %r = cnn.relu %a : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %y, %m, %i, %nm, %nv = cnn.batch_norm_train %r, %s, %b, %rm, %rv {epsilon = 1.0e-5 : f32, momentum = 0.1 : f32} : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  %yr = cnn.relu %y : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %g = cnn.relu_grad %dy, %yr : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %gx, %gs, %gb = cnn.batch_norm_grad %g, %r, %s, %m, %i : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>)
  return %yr, %nm, %gx : tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<2x4x8x8xf32>
}
