// RUN: cnnc-opt %s --cnn-memory-plan=workspace-mb=1 | FileCheck %s
// RUN: cnnc-opt %s --cnn-memory-plan="workspace-mb=0 in-place=false" | FileCheck %s --check-prefix=NOREUSE
// RUN: cnnc-opt %s --cnn-memory-plan="workspace-mb=0 reuse=false" | FileCheck %s --check-prefix=NOSHARE
// RUN: cnnc-opt %s --cnn-memory-plan=workspace-mb=1 -o %t.mlir
// RUN: cnnc %t.mlir --train --dump-plan | FileCheck %s --check-prefix=PLAN

// A linear layer, ReLU, loss and its backward, SGD: 128-byte activations,
// 256-byte alignment.

// Arena: persistent tensors [0, 1792), the workspace (1 MiB) at 1792, the
// temporaries from 1050368 on.
// CHECK: module attributes {cnn.arena_bytes = 1051392 : i64
// CHECK-SAME: cnn.persistent_bytes = 1792 : i64
// CHECK-SAME: cnn.temp_offset = 1050368 : i64
// CHECK-SAME: cnn.train_lower_bound_bytes = 388 : i64, cnn.train_peak_bytes = 772 : i64
// CHECK-SAME: cnn.workspace_bytes = 1048576 : i64, cnn.workspace_is_cap, cnn.workspace_offset = 1792 : i64

// Persistent tensors in argument order.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: {cnn.input, cnn.offset = 0 : i64}
// CHECK-SAME: {cnn.labels, cnn.offset = 256 : i64}
// CHECK-SAME: {cnn.lr, cnn.offset = 512 : i64}
// CHECK-SAME: {cnn.offset = 768 : i64, cnn.step}
// CHECK-SAME: {cnn.offset = 1024 : i64, cnn.param = "w"}
// CHECK-SAME: {cnn.offset = 1280 : i64, cnn.state = "w.momentum_buffer"}

// CHECK: %[[H:.*]] = cnn.matmul {{.*}}{cnn.offset = array<i64: 1050368>
// In place: the ReLU overwrites %h, whose last use it is.
// CHECK-NEXT: %[[R:.*]] = cnn.relu %[[H]] {cnn.in_place = array<i64: 0>, cnn.offset = array<i64: 1050368>}
// Must not: %r is read again by relu_grad, so the scale gets its own buffer.
// CHECK-NEXT: cnn.scale %[[R]] {cnn.offset = array<i64: 1050624>, factor
// Views share their source's buffer (and keep it alive while they are used).
// CHECK-NEXT: cnn.reshape {{.*}} {cnn.offset = array<i64: 1050624>}
// CHECK-NEXT: %[[F:.*]] = cnn.reshape {{.*}} {cnn.offset = array<i64: 1050624>}
// The loss has a persistent slot after the arguments.
// CHECK-NEXT: cnn.softmax_cross_entropy %[[F]], {{.*}} {cnn.offset = array<i64: 1536>}
// CHECK-NEXT: cnn.constant {cnn.offset = array<i64: [[ONE:[0-9]+]]>}
// CHECK-NEXT: %[[DS:.*]] = cnn.softmax_cross_entropy_grad {{.*}} {cnn.offset = array<i64: [[DSOFF:[0-9]+]]>}
// CHECK-NEXT: %[[DR:.*]] = cnn.scale %[[DS]] {cnn.in_place = array<i64: 0>, cnn.offset = array<i64: [[DSOFF]]>
// relu_grad reuses its first operand (both die here).
// CHECK-NEXT: %[[DH:.*]] = cnn.relu_grad %[[DR]], %[[R]] {cnn.in_place = array<i64: 0>, cnn.offset = array<i64: [[DSOFF]]>}
// %h/%r's buffer is free again for the weight gradient.
// CHECK-NEXT: cnn.matmul %[[DH]], {{.*}} {cnn.offset = array<i64: 1050368>
// The optimizer writes the parameter and its momentum in place.
// CHECK-NEXT: cnn.sgd_update {{.*}} {cnn.offset = array<i64: 1024, 1280>

// Without reuse (-O0, --no-memory-plan) every temporary has its own range:
// the peak is their sum (1796 bytes against 772 shared), nothing in place.
// NOSHARE: cnn.train_peak_bytes = 1796 : i64
// NOSHARE-NOT: cnn.in_place

// NOREUSE: module attributes {cnn.arena_bytes = {{[0-9]+}} : i64
// NOREUSE-SAME: cnn.workspace_bytes = 0 : i64
// NOREUSE-NOT: cnn.in_place

// PLAN: # buffer plan (cnn-memory-plan, {{.*}}): name, role, bytes, offset, live range (op indices), defining op
// PLAN: input	input	128	0
// PLAN: w	param	256	1024
// PLAN: loss	loss	4	1536
// PLAN: %{{[0-9]+}}	temp	128	1050368	[0, 9]	cnn.matmul (+1 in place)
// PLAN: %{{[0-9]+}}	temp	128	1050624	[2, 7]	cnn.scale
// PLAN: %{{[0-9]+}}	temp	128	{{[0-9]+}}	[7, 10]	cnn.softmax_cross_entropy_grad (+2 in place)
// PLAN: %{{[0-9]+}}	temp	256	1050368	[10, 11]	cnn.matmul
// PLAN: workspace bytes: 1048576 (1.0 MiB) at offset 1792
// PLAN: train temporaries peak: 772 (0.0 MiB), lower bound 388 (0.0 MiB)
// PLAN: results written in place: 3
// PLAN: arena bytes: 1051392 (1.0 MiB), workspace included

func.func @train_step(%x: tensor<4x8xf32> {cnn.input}, %labels: tensor<4xi32> {cnn.labels},
                      %lr: tensor<f32> {cnn.lr}, %step: tensor<f32> {cnn.step},
                      %w: tensor<8x8xf32> {cnn.param = "w"},
                      %mom: tensor<8x8xf32> {cnn.state = "w.momentum_buffer"})
    -> (tensor<f32> {cnn.loss}, tensor<8x8xf32> {cnn.param = "w"},
        tensor<8x8xf32> {cnn.state = "w.momentum_buffer"}) {
  %h = cnn.matmul %x, %w {transpose_rhs = true} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r = cnn.relu %h : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = cnn.scale %r {factor = 5.0e-01 : f32} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %v = cnn.reshape %s : (tensor<4x8xf32>) -> tensor<4x2x4xf32>
  %f = cnn.reshape %v : (tensor<4x2x4xf32>) -> tensor<4x8xf32>
  %loss = cnn.softmax_cross_entropy %f, %labels : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  %one = cnn.constant dense<1.0> : tensor<f32>
  %ds = cnn.softmax_cross_entropy_grad %f, %labels, %one : (tensor<4x8xf32>, tensor<4xi32>, tensor<f32>) -> tensor<4x8xf32>
  %dr = cnn.scale %ds {factor = 5.0e-01 : f32} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %dh = cnn.relu_grad %dr, %r : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %dw = cnn.matmul %dh, %x {transpose_lhs = true} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %w2, %m2 = cnn.sgd_update %w, %dw, %mom, %lr, %step {momentum = 0.9 : f32, dampening = 0.0 : f32, weight_decay = 0.0 : f32, nesterov = false} : (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<f32>, tensor<f32>) -> (tensor<8x8xf32>, tensor<8x8xf32>)
  return %loss, %w2, %m2 : tensor<f32>, tensor<8x8xf32>, tensor<8x8xf32>
}
