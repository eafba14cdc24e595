// RUN: cnnc-opt %s | cnnc-opt | FileCheck %s
// Every discardable cnn.* attribute the passes write verifies and
// round-trips (the invalid forms: attributes-invalid.mlir).

// CHECK: module attributes {cnn.arena_bytes = 4096 : i64
module attributes {cnn.arena_bytes = 4096 : i64, cnn.persistent_bytes = 1024 : i64,
    cnn.workspace_offset = 1024 : i64, cnn.workspace_bytes = 1024 : i64,
    cnn.temp_offset = 2048 : i64, cnn.train_peak_bytes = 512 : i64,
    cnn.train_lower_bound_bytes = 256 : i64, cnn.eval_peak_bytes = 512 : i64,
    cnn.eval_lower_bound_bytes = 256 : i64, cnn.plan_strategy = "best-fit/size",
    cnn.weights = "model.mlir.cnnw"} {
  // CHECK: func.func @train_step
  func.func @train_step(%x: tensor<4xf32> {cnn.input, cnn.offset = 0 : i64},
      %labels: tensor<4xi32> {cnn.labels}, %lr: tensor<f32> {cnn.lr},
      %step: tensor<f32> {cnn.step}, %w: tensor<4xf32> {cnn.param = "w"},
      %m: tensor<4xf32> {cnn.state = "w.momentum_buffer"},
      %rm: tensor<4xf32> {cnn.buffer = "bn.running_mean"},
      %s: tensor<f32> {cnn.init = 6.553600e+04 : f32, cnn.loss_scale, cnn.state = "loss_scale"})
      -> (tensor<f32> {cnn.loss}, tensor<4xf32> {cnn.grad = "w"}, tensor<4xf32> {cnn.param = "w"}) {
    // CHECK: cnn.relu %{{.*}} {cnn.in_place = array<i64: 0>, cnn.offset = array<i64: 2048>}
    %y = cnn.relu %x {cnn.in_place = array<i64: 0>, cnn.offset = array<i64: 2048>} : (tensor<4xf32>) -> tensor<4xf32>
    return %s, %y, %w : tensor<f32>, tensor<4xf32>, tensor<4xf32>
  }

  // What cnn-data-parallel records on the step.
  // CHECK-LABEL: func.func @data_parallel_step
  // CHECK-SAME: cnn.data_parallel = {bucket_mb = 2.500000e+01 : f64, buckets = 3 : i64, collectives = 4 : i64, sync_bn = true}
  func.func @data_parallel_step() attributes {cnn.data_parallel = {buckets = 3 : i64, bucket_mb = 25.0 : f64, collectives = 4 : i64, sync_bn = true}} {
    return
  }
}
