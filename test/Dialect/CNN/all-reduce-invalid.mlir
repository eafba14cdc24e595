// RUN: cnnc-opt %s -split-input-file -verify-diagnostics

func.func @empty() {
  // expected-error @+1 {{needs at least one operand (a bucket is never empty)}}
  cnn.all_reduce : () -> ()
  return
}

// -----

func.func @reduction(%g: tensor<4xf32>) {
  // expected-error @+1 {{'reduction' must be avg, sum, max or min, got 'prod'}}
  %r = cnn.all_reduce %g {reduction = "prod"} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @bucket(%g: tensor<4xf32>) {
  // expected-error @+1 {{'bucket' must be >= 0, got -1}}
  %r = cnn.all_reduce %g {bucket = -1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @result_type(%g: tensor<4xf32>) {
  // expected-error @+1 {{result #0 is 'tensor<8xf32>' but operand #0 is 'tensor<4xf32>' (must be the same type)}}
  %r = cnn.all_reduce %g : (tensor<4xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @count(%g: tensor<4xf32>) {
  // expected-error @+1 {{has 1 operands but 2 results (one result per operand)}}
  %r:2 = cnn.all_reduce %g : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @mixed(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error @+1 {{operand #1 is 'tensor<4xf16>' but operand #0 has element type 'f32' (one bucket is one element type: one collective call)}}
  %r:2 = cnn.all_reduce %a, %b : (tensor<4xf32>, tensor<4xf16>) -> (tensor<4xf32>, tensor<4xf16>)
  return
}

// -----

func.func @bytes(%a: tensor<4xf16>) {
  // expected-error @+1 {{'bytes' is 16 but the operands hold 8 bytes}}
  %r = cnn.all_reduce %a {bytes = 16 : i64} : (tensor<4xf16>) -> tensor<4xf16>
  return
}
