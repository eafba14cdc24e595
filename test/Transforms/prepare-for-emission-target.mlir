// RUN: not cnnc-opt %s -cnn-prepare-for-emission 2>&1 | FileCheck %s

// The kernels are compiled for 256-thread blocks: a target that allows fewer
// cannot run them, and the pass says so instead of deciding a smaller block.
// CHECK: error: cnn-prepare-for-emission: the CUDA target's kernels launch 256 threads per block, #cnn.target allows 128
module attributes {cnn.target = #cnn.target<arch = "sm_90", sms = 132, max_threads = 128, smem_per_block = 232448>} {
func.func @f(%a: tensor<8xf32>) -> tensor<8xf32> {
  %r = cnn.relu %a : (tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}
}
