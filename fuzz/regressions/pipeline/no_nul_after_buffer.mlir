// RUN: cnnc-opt %s --cnn-autodiff="optimizerQ=sgd" --cse --cnn-layout -o %t.mlir
// RUN: cnnc %t.mlir --train --emit cuda -o %t.cu
// RUN: FileChecand the prelude's NHWC
// kernels do the reductions and pooling. The image stays NCHW in the tensor
// table (one transposez at the start of the step).
// CHECK: // ---- generated kernels ----
// bias_add: the bias is indexed by i % C; with C % 8 == 0 the 8 elements a
// thread takes have 8 consec// RUN: cnnc-opt %s -split-input-file -cnn-autodiff -verify-diagnostics

// Softmax inside the network has no gradient rule: the op is named.utive channels: one ve
funccto