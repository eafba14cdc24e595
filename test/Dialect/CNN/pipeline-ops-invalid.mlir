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

// -----

// cnn.transfer_wait's constraints (CNNPipelineOps.td): one transfer of its
// event in the block, before it, reading what that transfer moves; a
// received value read only after its wait; an asynchronous transfer waited
// for exactly once.
func.func @wait_without_transfer(%a: tensor<4xf32>) {
  // expected-error @+1 {{event 3 needs exactly one cnn.send or cnn.recv with that event in its block, found 0}}
  cnn.transfer_wait %a {event = 3 : i64} : tensor<4xf32>
  return
}

// -----

func.func @send_never_waited(%a: tensor<4xf32>) {
  // expected-error @+1 {{with event 0 needs exactly one cnn.transfer_wait of that event, has 0}}
  cnn.send %a {event = 0 : i64, peer = 1 : i64, tag = 0 : i64} : tensor<4xf32>
  return
}

// -----

func.func @wait_before_recv() {
  %b = cnn.constant dense<0.0> : tensor<4xf32>
  // expected-error @+1 {{waits for event 0 before its transfer is issued}}
  cnn.transfer_wait %r {event = 0 : i64} : tensor<4xf32>
  %r = cnn.recv {event = 0 : i64, peer = 0 : i64, tag = 0 : i64} : tensor<4xf32>
  return
}

// -----

func.func @read_before_wait() -> tensor<4xf32> {
  %r = cnn.recv {event = 0 : i64, peer = 0 : i64, tag = 0 : i64} : tensor<4xf32>
  %y = cnn.relu %r : (tensor<4xf32>) -> tensor<4xf32>
  // expected-error @+1 {{the value received with event 0 is read before this wait}}
  cnn.transfer_wait %r {event = 0 : i64} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @wrong_tensor(%a: tensor<4xf32>, %b: tensor<4xf32>) {
  cnn.send %a {event = 0 : i64, peer = 1 : i64, tag = 0 : i64} : tensor<4xf32>
  // expected-error @+1 {{must read the tensor its cnn.send of event 0 sends}}
  cnn.transfer_wait %b {event = 0 : i64} : tensor<4xf32>
  cnn.transfer_wait %a {event = 0 : i64} : tensor<4xf32>
  return
}

// -----

func.func @negative_event(%a: tensor<4xf32>) {
  // expected-error @+1 {{'event' must be >= 0, got -1}}
  cnn.send %a {event = -1 : i64, peer = 1 : i64, tag = 0 : i64} : tensor<4xf32>
  return
}

// -----

// `link` (the stage's link that carries an asynchronous transfer): only
// with an `event`, and 0, 1 or 2.
func.func @link_without_event(%a: tensor<4xf32>) {
  // expected-error @+1 {{has a 'link' but no 'event': only an asynchronous transfer runs on a link}}
  cnn.send %a {link = 1 : i64, peer = 1 : i64, tag = 0 : i64} : tensor<4xf32>
  return
}

// -----

func.func @link_out_of_range() {
  // expected-error @+1 {{'link' must be 0 (the stage before), 1 (the stage after) or 2 (the first and the last stage), got 3}}
  %r = cnn.recv {event = 0 : i64, link = 3 : i64, peer = 0 : i64, tag = 0 : i64} : tensor<4xf32>
  cnn.transfer_wait %r {event = 0 : i64} : tensor<4xf32>
  return
}
