// RUN: cnnc-opt %s -split-input-file -verify-diagnostics

func.func @peer(%a: tensor<4xf32>) {
  // expected-error @+1 {{'peer' must be >= 0, got -1}}
  cnn.send %a {peer = -1 : i64, tag = 0 : i64} : tensor<4xf32>
  return
}

// -----

func.func @tag() -> tensor<4xf32> {
  // expected-error @+1 {{'tag' must be >= 0, got -2}}
  %r = cnn.recv {peer = 0 : i64, tag = -2 : i64} : tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @self(%a: tensor<4xf32>) attributes {cnn.pipeline_stage = 1 : i64} {
  // expected-error @+1 {{'peer' is 1, the stage of its own function @self (a value used where it is made needs no transfer)}}
  cnn.send %a {peer = 1 : i64, tag = 0 : i64} : tensor<4xf32>
  return
}

// -----

func.func @self_recv() -> tensor<4xf32> attributes {cnn.pipeline_stage = 0 : i64} {
  // expected-error @+1 {{'peer' is 0, the stage of its own function @self_recv}}
  %r = cnn.recv {peer = 0 : i64, tag = 0 : i64} : tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @type(%a: tensor<4xi64>) {
  // expected-error @+1 {{transfers 'tensor<4xi64>': only f32, f16 and i32 tensors cross a cut}}
  cnn.send %a {peer = 1 : i64, tag = 0 : i64} : tensor<4xi64>
  return
}

// -----

func.func @missing(%a: tensor<4xf32>) {
  // expected-error @+1 {{requires attribute 'tag'}}
  cnn.send %a {peer = 1 : i64} : tensor<4xf32>
  return
}

// -----

// The stage attributes are checked like every cnn.* attribute.
// expected-error @+1 {{'cnn.pipeline_results' on}}
func.func @results() attributes {cnn.pipeline_results = array<i64: 0, -1>} {
  return
}

// -----

func.func @micro_index(%x: tensor<8x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{needs 0 <= index < count, got index 4 and count 4}}
  %a = cnn.micro_batch %x {index = 4 : i64, count = 4 : i64} : tensor<8x3xf32> -> tensor<2x3xf32>
  return %a : tensor<2x3xf32>
}

// -----

func.func @micro_split(%x: tensor<6x3xf32>) -> tensor<1x3xf32> {
  // expected-error @+1 {{the batch of 'tensor<6x3xf32>' does not split into 4 micro-batches}}
  %a = cnn.micro_batch %x {index = 0 : i64, count = 4 : i64} : tensor<6x3xf32> -> tensor<1x3xf32>
  return %a : tensor<1x3xf32>
}

// -----

func.func @micro_shape(%x: tensor<8x3xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{result must be 'tensor<2x3xf32>', got 'tensor<4x3xf32>'}}
  %a = cnn.micro_batch %x {index = 0 : i64, count = 4 : i64} : tensor<8x3xf32> -> tensor<4x3xf32>
  return %a : tensor<4x3xf32>
}
