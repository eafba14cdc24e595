// RUN: cnnc-opt %s | cnnc-opt | FileCheck %s

// CHECK-LABEL: func.func @stage0
// CHECK: cnn.send %{{.*}} {peer = 1 : i64, tag = 0 : i64} : tensor<2x4xf32>
// CHECK: cnn.recv {peer = 1 : i64, tag = 1 : i64} : tensor<2x4xf32>
func.func @stage0(%a: tensor<2x4xf32>) -> tensor<2x4xf32> attributes {cnn.pipeline_stage = 0 : i64} {
  cnn.send %a {peer = 1 : i64, tag = 0 : i64} : tensor<2x4xf32>
  %g = cnn.recv {peer = 1 : i64, tag = 1 : i64} : tensor<2x4xf32>
  return %g : tensor<2x4xf32>
}

// Labels (i32) and f16 activations may cross a cut too.
// CHECK-LABEL: func.func @types
// CHECK: cnn.send %{{.*}} {peer = 3 : i64, tag = 7 : i64} : tensor<8xi32>
// CHECK: cnn.recv {peer = 0 : i64, tag = 2 : i64} : tensor<2x4xf16>
func.func @types(%l: tensor<8xi32>) -> tensor<2x4xf16> {
  cnn.send %l {peer = 3 : i64, tag = 7 : i64} : tensor<8xi32>
  %h = cnn.recv {peer = 0 : i64, tag = 2 : i64} : tensor<2x4xf16>
  return %h : tensor<2x4xf16>
}

// Transfers are not pure: CSE keeps both receives and DCE keeps a send.
// RUN: cnnc-opt %s -cse -canonicalize | FileCheck %s --check-prefix=CSE
// CSE-LABEL: func.func @twice
// CSE: cnn.send
// CSE: cnn.recv
// CSE: cnn.recv
func.func @twice(%a: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  cnn.send %a {peer = 1 : i64, tag = 0 : i64} : tensor<4xf32>
  %x = cnn.recv {peer = 1 : i64, tag = 1 : i64} : tensor<4xf32>
  %y = cnn.recv {peer = 1 : i64, tag = 1 : i64} : tensor<4xf32>
  return %x, %y : tensor<4xf32>, tensor<4xf32>
}

// cnn.micro_batch: rows of the batch, any element type.
// CHECK-LABEL: func.func @micro
// CHECK: cnn.micro_batch %{{.*}} {count = 4 : i64, index = 3 : i64} : tensor<8x3x2x2xf32> -> tensor<2x3x2x2xf32>
// CHECK: cnn.micro_batch %{{.*}} {count = 2 : i64, index = 0 : i64} : tensor<8xi32> -> tensor<4xi32>
func.func @micro(%x: tensor<8x3x2x2xf32>, %l: tensor<8xi32>) -> (tensor<2x3x2x2xf32>, tensor<4xi32>) {
  %a = cnn.micro_batch %x {index = 3 : i64, count = 4 : i64} : tensor<8x3x2x2xf32> -> tensor<2x3x2x2xf32>
  %b = cnn.micro_batch %l {index = 0 : i64, count = 2 : i64} : tensor<8xi32> -> tensor<4xi32>
  return %a, %b : tensor<2x3x2x2xf32>, tensor<4xi32>
}

// Asynchronous transfers (cnn-pipeline-async-transfers): an event on the
// send and the receive (and the link that carries it), and the compute
// stream's wait for each.
// CHECK-LABEL: func.func @async
// CHECK: %[[R:.*]] = cnn.recv {event = 0 : i64, link = 0 : i64, peer = 0 : i64, tag = 0 : i64} : tensor<2x4xf16>
// CHECK: cnn.transfer_wait %[[R]] {event = 0 : i64} : tensor<2x4xf16>
// CHECK: cnn.send %[[R]] {event = 1 : i64, link = 1 : i64, peer = 2 : i64, tag = 1 : i64} : tensor<2x4xf16>
// CHECK: cnn.transfer_wait %[[R]] {event = 1 : i64} : tensor<2x4xf16>
func.func @async() attributes {cnn.pipeline_stage = 1 : i64} {
  %r = cnn.recv {event = 0 : i64, link = 0 : i64, peer = 0 : i64, tag = 0 : i64} : tensor<2x4xf16>
  cnn.transfer_wait %r {event = 0 : i64} : tensor<2x4xf16>
  cnn.send %r {event = 1 : i64, link = 1 : i64, peer = 2 : i64, tag = 1 : i64} : tensor<2x4xf16>
  cnn.transfer_wait %r {event = 1 : i64} : tensor<2x4xf16>
  return
}
