// The CUDA target on its own (cnnc-translate): it prints what the IR says.
// The step that cnnc-opt's GPU pipeline prepared prints byte for byte as the
// cnnc driver's --emit cuda of the same model.
// RUN: cnnc-opt %S/Inputs/small_cnn.mlir --cnn-autodiff --cse --cnn-gpu-pipeline --mlir-print-debuginfo -o %t.step.mlir
// RUN: cnnc-translate --cnn-to-cuda --model-name small_cnn %t.step.mlir -o %t.translate.cu
// RUN: cnnc %S/Inputs/small_cnn.mlir --train --emit cuda -o %t.driver.cu
// RUN: diff %t.translate.cu %t.driver.cu
// RUN: FileCheck %s < %t.translate.cu
// RUN: cnnc-translate --cnn-to-cuda-lib %t.step.mlir | FileCheck %s --check-prefix=LIB
// RUN: cnnc-translate --cnn-memory-plan-text %t.step.mlir | FileCheck %s --check-prefix=PLAN
// RUN: cnnc-translate --cnn-to-cuda %s -split-input-file -verify-diagnostics

// CHECK: int main(
// LIB-NOT: int main(
// LIB: cnnrt_model_spec(void) { return &kModel; }
// PLAN: # buffer plan (cnn-memory-plan, {{.*}})
// PLAN: arena bytes: {{[0-9]+}}

// The lowering choices are cnn-select-lowering's: without them the printer
// refuses the step.
// expected-error@+1 {{CUDA backend: @train_step has no cnn.lowering_selected: run cnn-select-lowering}}
func.func @train_step(%x: tensor<2x4xf32> {cnn.input}, %lr: tensor<f32> {cnn.lr}) -> (tensor<f32> {cnn.loss}) {
  %m = cnn.reduce_mean %x {axes = array<i64: 0, 1>} : (tensor<2x4xf32>) -> tensor<1x1xf32>
  %s = cnn.reshape %m : (tensor<1x1xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// The arena plan is cnn-memory-plan's, the only one: without it, an error.
// expected-error@+1 {{memory plan: the module has no arena plan (run cnn-memory-plan after every other pass)}}
func.func @train_step(%x: tensor<2x4xf32> {cnn.input}, %lr: tensor<f32> {cnn.lr}) -> (tensor<f32> {cnn.loss}) attributes {cnn.lowering_selected} {
  %m = cnn.reduce_mean %x {axes = array<i64: 0, 1>} : (tensor<2x4xf32>) -> tensor<1x1xf32>
  %s = cnn.reshape %m : (tensor<1x1xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
