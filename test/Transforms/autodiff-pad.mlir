// RUN: cnnc-opt %S/../Target/CUDA/Inputs/pad_aux.mlir -cnn-autodiff=optimizer=none | FileCheck %s
// RUN: cnnc-opt %S/../Target/CUDA/Inputs/pad_aux.mlir -cnn-autodiff="optimizer=none aux-loss-weight=0.25" | FileCheck %s --check-prefix=W

// @forward (evaluation) keeps the main logits only; the auxiliary head is gone.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> tensor<4x10xf32>
// CHECK-NOT: cnn.slice
// CHECK: return %{{.*}} : tensor<4x10xf32>

// loss = CE(main) + 0.4 * CE(aux); each logits gradient is seeded by the same
// constant 1.0, the auxiliary one scaled by the weight.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[L0:.*]] = cnn.softmax_cross_entropy %[[Y:[0-9a-z_]+]],
// CHECK: %[[L1:.*]] = cnn.softmax_cross_entropy %[[YA:[0-9a-z_]+]],
// CHECK: %[[LA:.*]] = cnn.scale %[[L1]] {factor = 4.000000e-01 : f32}
// CHECK: %[[LOSS:.*]] = cnn.add %[[L0]], %[[LA]] : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK: %[[ONE:.*]] = cnn.constant dense<1.000000e+00> : tensor<f32>
// CHECK: cnn.softmax_cross_entropy_grad %[[Y]], %{{.*}}, %[[ONE]]
// CHECK: %[[GA:.*]] = cnn.softmax_cross_entropy_grad %[[YA]], %{{.*}}, %[[ONE]]
// CHECK: cnn.scale %[[GA]] {factor = 4.000000e-01 : f32}
// slice -> zeros around the gradient (a constant pad).
// CHECK: cnn.pad %{{.*}} {pads = array<i64: 0, 2, 0, 2>} : (tensor<4x4xf32>) -> tensor<4x8xf32>
// edge -> pad_grad; constant -> slice of the gradient; reflect -> pad_grad.
// CHECK: cnn.pad_grad %{{.*}} {mode = "edge", pads = array<i64: 0, 0, 2, 2, 0, 0, 2, 2>} : (tensor<4x8x8x8xf32>) -> tensor<4x8x4x4xf32>
// CHECK: cnn.slice %{{.*}} {offsets = array<i64: 0, 0, 1, 0>, sizes = array<i64: 4, 8, 8, 8>} : (tensor<4x8x9x9xf32>) -> tensor<4x8x8x8xf32>
// The reflect pad reads the image only: no parameter behind it, no gradient.
// CHECK-NOT: cnn.pad_grad
// CHECK: return %[[LOSS]],

// W: cnn.scale %{{.*}} {factor = 2.500000e-01 : f32} : (tensor<f32>) -> tensor<f32>
