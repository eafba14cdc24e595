// RUN: cnnc-opt %S/../Target/CUDA/Inputs/dense_aux.mlir -cnn-autodiff="optimizer=none ignore-index=255 aux-loss-weight=0.5" | FileCheck %s
// RUN: cnnc-opt %S/../Target/CUDA/Inputs/dense_aux.mlir -cnn-autodiff=optimizer=none | FileCheck %s --check-prefix=DEFAULT
// RUN: cnnc-opt %S/../Target/CUDA/Inputs/dense_aux.mlir -cnn-autodiff=optimizer=none --cse -cnn-layout | FileCheck %s --check-prefix=NHWC

// Dense prediction: N x C x H x W logits train against N x H x W labels. Each
// logits tensor becomes (N*H*W) x C rows (transpose to NHWC, reshape) before
// the loss; the gradients go back through the reshape and the transpose.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[L:[a-z0-9]+]]: tensor<2x4x4xi32> {cnn.labels}
// CHECK: %[[Y:.*]] = cnn.conv2d {{.*}} -> tensor<2x5x4x4xf32>
// CHECK: %[[YA:.*]] = cnn.conv2d {{.*}} -> tensor<2x5x4x4xf32>
// CHECK: %[[T:.*]] = cnn.transpose %[[Y]] {permutation = array<i64: 0, 2, 3, 1>} : (tensor<2x5x4x4xf32>) -> tensor<2x4x4x5xf32>
// CHECK: %[[R:.*]] = cnn.reshape %[[T]] : (tensor<2x4x4x5xf32>) -> tensor<32x5xf32>
// CHECK: %[[TA:.*]] = cnn.transpose %[[YA]]
// CHECK: %[[RA:.*]] = cnn.reshape %[[TA]]
// CHECK: %[[LOSS:.*]] = cnn.softmax_cross_entropy %[[R]], %[[L]] {ignore_index = 255 : i64} : (tensor<32x5xf32>, tensor<2x4x4xi32>) -> tensor<f32>
// CHECK: %[[AUX:.*]] = cnn.softmax_cross_entropy %[[RA]], %[[L]] {ignore_index = 255 : i64}
// CHECK: %[[W:.*]] = cnn.scale %[[AUX]] {factor = 5.000000e-01 : f32}
// CHECK: %[[SUM:.*]] = cnn.add %[[LOSS]], %[[W]]
// CHECK: %[[ONE:.*]] = cnn.constant dense<1.000000e+00>
// CHECK: %[[G:.*]] = cnn.softmax_cross_entropy_grad %[[R]], %[[L]], %[[ONE]] {ignore_index = 255 : i64} : (tensor<32x5xf32>, tensor<2x4x4xi32>, tensor<f32>) -> tensor<32x5xf32>
// CHECK: %[[GA:.*]] = cnn.softmax_cross_entropy_grad %[[RA]], %[[L]], %[[ONE]] {ignore_index = 255 : i64}
// CHECK: cnn.scale %[[GA]] {factor = 5.000000e-01 : f32}
// CHECK: %[[GR:.*]] = cnn.reshape %[[G]] : (tensor<32x5xf32>) -> tensor<2x4x4x5xf32>
// CHECK: cnn.transpose %[[GR]] {permutation = array<i64: 0, 3, 1, 2>} : (tensor<2x4x4x5xf32>) -> tensor<2x5x4x4xf32>
// CHECK: return %[[SUM]],

// The default ignore_index is PyTorch's -100 (not printed).
// DEFAULT: cnn.softmax_cross_entropy %{{.*}}, %{{.*}} : (tensor<32x5xf32>, tensor<2x4x4xi32>) -> tensor<f32>

// cnn-layout: the 1x1 classifier writes NHWC, so the loss's transpose cancels
// against the network's last one and no transpose is left around the loss.
// NHWC-LABEL: func.func @train_step
// NHWC: %[[Y:.*]] = cnn.conv2d {{.*}}layout = #cnn.layout<NHWC>{{.*}} -> tensor<2x4x4x5xf32>
// NHWC-NOT: cnn.transpose
// NHWC: cnn.reshape %[[Y]] : (tensor<2x4x4x5xf32>) -> tensor<32x5xf32>
// NHWC-NOT: cnn.transpose %{{.*}} {permutation = array<i64: 0, 3, 1, 2>} : (tensor<2x4x4x5xf32>)
// NHWC: return
