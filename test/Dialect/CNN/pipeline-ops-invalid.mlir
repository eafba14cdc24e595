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
