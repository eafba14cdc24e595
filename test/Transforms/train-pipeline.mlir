// cnn-train-pipeline is the pipeline the cnnc driver runs on a model's
// @forward (buildCNNTrainPipeline): cnn-import-cleanup, cnn-autodiff, CSE,
// then the step's optimization passes (cnn-gpu-pipeline). cnnc-opt with the
// pipeline's textual options prints what cnnc prints with the same flags
// (cnnc derives those flags from the pipeline's options). cnnc runs the
// import clean-up when it imports ONNX, not on a .mlir file: hence
// import-cleanup=false where the input is MLIR.

// The CUDA target's pipeline (the defaults).
// RUN: cnnc %s --train --target gpu --emit mlir > %t.gpu.cnnc.mlir
// RUN: cnnc-opt %s --cnn-train-pipeline="import-cleanup=false" > %t.gpu.opt.mlir
// RUN: diff -B %t.gpu.cnnc.mlir %t.gpu.opt.mlir
// RUN: FileCheck %s --check-prefix=GPU < %t.gpu.opt.mlir
// GPU: module attributes {cnn.arena_bytes = {{[0-9]+}} : i64
// GPU-LABEL: func.func @train_step(
// GPU: cnn.fused_conv2d {{.*}}layout = #cnn.layout<NHWC>
// GPU: cnn.sgd_update

// The reference interpreter's pipeline (cnnc's default for --emit mlir).
// RUN: cnnc %s --train --emit mlir > %t.cpu.cnnc.mlir
// RUN: cnnc-opt %s --cnn-train-pipeline="target=cpu import-cleanup=false" > %t.cpu.opt.mlir
// RUN: diff -B %t.cpu.cnnc.mlir %t.cpu.opt.mlir
// RUN: FileCheck %s --check-prefix=CPU < %t.cpu.opt.mlir
// CPU-NOT: cnn.arena_bytes
// CPU-LABEL: func.func @train_step(
// CPU: cnn.conv2d {{.*}} -> tensor<4x8x8x8xf32>
// CPU-NOT: cnn.fused_elementwise

// Training and tuning options: the flags and the textual options are the
// same options.
// RUN: cnnc %s --train --target gpu --emit mlir --optimizer adam --beta1 0.8 \
// RUN:   --layout nchw --remat --workspace-mb 8 --label-smoothing 0.1 > %t.opt.cnnc.mlir
// RUN: cnnc-opt %s --cnn-train-pipeline="import-cleanup=false optimizer=adam beta1=0.8 layout=nchw remat=true workspace-mb=8 label-smoothing=0.1" > %t.opt.opt.mlir
// RUN: diff -B %t.opt.cnnc.mlir %t.opt.opt.mlir
// RUN: FileCheck %s --check-prefix=OPTS < %t.opt.opt.mlir
// OPTS: cnn.workspace_bytes = 8388608 : i64
// OPTS-LABEL: func.func @train_step(
// OPTS: cnn.adam_update {{.*}}beta1 = 8.000000e-01

// The import clean-up runs first: the broadcasting add of a per-channel
// addend reaches cnn-autodiff as a cnn.bias_add.
// RUN: cnnc-opt %S/Inputs/per-channel-add.mlir --cnn-train-pipeline="target=cpu" | FileCheck %s --check-prefix=CLEANUP
// CLEANUP-LABEL: func.func @forward(
// CLEANUP: cnn.bias_add
// CLEANUP-NOT: cnn.add
// CLEANUP-LABEL: func.func @train_step(

// A bad option value is one error that names the pipeline and the option.
// RUN: not cnnc-opt %s --cnn-train-pipeline="optimizer=rmsprop" 2>&1 | FileCheck %s --check-prefix=BADOPT
// BADOPT: cnn-train-pipeline: unknown optimizer 'rmsprop' (expected sgd, adam, adamw or none)
// BADOPT-NOT: error
// RUN: not cnnc-opt %s --cnn-train-pipeline="remat-mb=-5" 2>&1 | FileCheck %s --check-prefix=BADMB
// BADMB: cnn-train-pipeline: remat-mb must be between 0 and 1073741824 MiB, got -5
// RUN: not cnnc-opt %s --cnn-train-pipeline="remat-mb=lots" 2>&1 | FileCheck %s --check-prefix=BADINT
// BADINT: for the --remat-mb option: 'lots' value invalid for long argument
// BADINT-NEXT: error: cnn-train-pipeline: cannot parse the options 'remat-mb=lots'
// RUN: not cnnc-opt %s --cnn-train-pipeline="no-such-option=1" 2>&1 | FileCheck %s --check-prefix=BADNAME
// BADNAME: error: cnn-train-pipeline: cannot parse the options 'no-such-option=1': {{.*}}no-such-option
// RUN: not cnnc %s --train --emit mlir --remat-mb lots 2>&1 | FileCheck %s --check-prefix=CLIINT
// CLIINT: for the --remat-mb option: 'lots' value invalid for long argument
// CLIINT-NEXT: cnnc: error: cannot parse the pipeline options 'remat-mb=lots'
// CLIINT-NOT: error
// RUN: not cnnc %s --train --emit mlir --optimizer rmsprop 2>&1 | FileCheck %s --check-prefix=CLIOPT
// CLIOPT: cnnc: error: unknown --optimizer 'rmsprop' (expected sgd, adam, adamw or none)

// The options as JSON, for the Python package: each flag once, and the
// defaults that depend on the target.
// RUN: cnnc --print-pipeline-options-json | FileCheck %s --check-prefix=JSON
// JSON: "name": "remat-mb"
// JSON: "targets": {
// JSON-NEXT: "cpu": {
// JSON-NEXT: "fuse": false,
// JSON-NEXT: "layout": "nchw",
// JSON-NEXT: "precision": "fp32"
// JSON: "gpu": {
// JSON-NEXT: "fuse": true,
// JSON-NEXT: "layout": "nhwc",
// JSON-NEXT: "precision": "fp16"

func.func @forward(%x: tensor<4x3x8x8xf32> {cnn.input},
                   %w1: tensor<8x3x3x3xf32> {cnn.param = "conv1.weight"},
                   %b1: tensor<8xf32> {cnn.param = "conv1.bias"},
                   %g: tensor<8xf32> {cnn.param = "bn.weight"},
                   %be: tensor<8xf32> {cnn.param = "bn.bias"},
                   %rm: tensor<8xf32> {cnn.buffer = "bn.running_mean"},
                   %rv: tensor<8xf32> {cnn.buffer = "bn.running_var"},
                   %wf: tensor<10x8xf32> {cnn.param = "fc.weight"},
                   %bf: tensor<10xf32> {cnn.param = "fc.bias"}) -> tensor<4x10xf32> {
  %c = cnn.conv2d %x, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<4x3x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<4x8x8x8xf32>
  %cb = cnn.bias_add %c, %b1 : (tensor<4x8x8x8xf32>, tensor<8xf32>) -> tensor<4x8x8x8xf32>
  %r = cnn.relu %cb : (tensor<4x8x8x8xf32>) -> tensor<4x8x8x8xf32>
  %p = cnn.max_pool2d %r {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, ceil_mode = false} : (tensor<4x8x8x8xf32>) -> tensor<4x8x4x4xf32>
  %n = cnn.batch_norm %p, %g, %be, %rm, %rv {epsilon = 1.0e-5 : f32} : (tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8x4x4xf32>
  %a = cnn.add %n, %p : (tensor<4x8x4x4xf32>, tensor<4x8x4x4xf32>) -> tensor<4x8x4x4xf32>
  %q = cnn.global_avg_pool %a : (tensor<4x8x4x4xf32>) -> tensor<4x8x1x1xf32>
  %f = cnn.flatten %q {axis = 1} : (tensor<4x8x1x1xf32>) -> tensor<4x8xf32>
  %y = cnn.matmul %f, %wf {transpose_rhs = true} : (tensor<4x8xf32>, tensor<10x8xf32>) -> tensor<4x10xf32>
  %yb = cnn.bias_add %y, %bf : (tensor<4x10xf32>, tensor<10xf32>) -> tensor<4x10xf32>
  return %yb : tensor<4x10xf32>
}
