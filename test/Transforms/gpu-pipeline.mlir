// cnn-gpu-pipeline is the pipeline the cnnc driver runs after cnn-autodiff
// (cnn-train-pipeline's tail, with the same options): cnnc-opt and cnnc
// build it from one function (buildCNNStepPipeline), so both print the same
// IR. train-pipeline.mlir tests the whole pipeline.

// The CUDA target's pipeline (--target gpu; the defaults of the pipeline).
// RUN: cnnc %S/../Target/CUDA/Inputs/small_cnn.mlir --train --target gpu --emit mlir > %t.cnnc.mlir
// RUN: cnnc-opt %S/../Target/CUDA/Inputs/small_cnn.mlir --cnn-autodiff --cse --cnn-gpu-pipeline > %t.opt.mlir
// RUN: FileCheck %s --check-prefix=GPU < %t.cnnc.mlir
// RUN: FileCheck %s --check-prefix=GPU < %t.opt.mlir
// RUN: diff -B %t.cnnc.mlir %t.opt.mlir
// GPU: module attributes {cnn.arena_bytes = {{[0-9]+}} : i64
// GPU-LABEL: func.func @forward(
// GPU: cnn.fused_conv2d {{.*}}layout = #cnn.layout<NHWC>{{.*}} -> tensor<4x8x8x8xf16>
// GPU-LABEL: func.func @train_step(
// GPU-SAME: cnn.loss_scale
// GPU: cnn.fused_conv2d {{.*}}layout = #cnn.layout<NHWC>
// GPU: cnn.fused_elementwise
// GPU: cnn.loss_scale_update
// GPU: cnn.sgd_update {{.*}}cnn.offset

// The reference interpreter's pipeline (cnnc's default for --emit mlir).
// RUN: cnnc %S/../Target/CUDA/Inputs/small_cnn.mlir --train --emit mlir > %t.cpu.cnnc.mlir
// RUN: cnnc-opt %S/../Target/CUDA/Inputs/small_cnn.mlir --cnn-autodiff --cse \
// RUN:   --cnn-gpu-pipeline="target=cpu" > %t.cpu.opt.mlir
// RUN: FileCheck %s --check-prefix=CPU < %t.cpu.cnnc.mlir
// RUN: FileCheck %s --check-prefix=CPU < %t.cpu.opt.mlir
// RUN: diff -B %t.cpu.cnnc.mlir %t.cpu.opt.mlir
// CPU-NOT: cnn.arena_bytes
// CPU-LABEL: func.func @train_step(
// CPU: cnn.conv2d {{.*}} -> tensor<4x8x8x8xf32>
// CPU: cnn.relu
// CPU-NOT: cnn.fused_elementwise

// -O0 with --target gpu: no layout, precision or fusion, and a memory plan
// that shares nothing (every temporary its own range, nothing in place: the
// CUDA target reads its arena from the IR, always), but the elementwise ops
// still get the fused form the CUDA target prints.
// RUN: cnnc %S/../Target/CUDA/Inputs/small_cnn.mlir --train -O0 --target gpu --emit mlir > %t.o0.cnnc.mlir
// RUN: cnnc-opt %S/../Target/CUDA/Inputs/small_cnn.mlir --cnn-autodiff --cse \
// RUN:   --cnn-gpu-pipeline="optimize=false" > %t.o0.opt.mlir
// RUN: FileCheck %s --check-prefix=O0 < %t.o0.cnnc.mlir
// RUN: diff -B %t.o0.cnnc.mlir %t.o0.opt.mlir
// O0: module attributes {cnn.arena_bytes
// O0-LABEL: func.func @train_step(
// O0-NOT: cnn.in_place
// O0: cnn.conv2d {{.*}} -> tensor<4x8x8x8xf32>
// O0-NOT: cnn.in_place
// O0: cnn.fused_elementwise
// O0-NOT: cnn.in_place

// Bad option values are refused by the pipeline / the driver.
// RUN: not cnnc-opt %S/../Target/CUDA/Inputs/small_cnn.mlir --cnn-gpu-pipeline="layout=nchx" 2>&1 | FileCheck %s --check-prefix=BADOPT
// BADOPT: cnn-gpu-pipeline: unknown layout 'nchx' (expected nchw or nhwc)
// RUN: not cnnc %S/../Target/CUDA/Inputs/small_cnn.mlir --train --target tpu --emit mlir 2>&1 | FileCheck %s --check-prefix=BADTARGET
// BADTARGET: cnnc: error: unknown --target 'tpu' (expected gpu or cpu)
// RUN: not cnnc %S/../Target/CUDA/Inputs/small_cnn.mlir --train --target cpu --emit cuda 2>&1 | FileCheck %s --check-prefix=CPUCUDA
// CPUCUDA: cnnc: error: --target cpu cannot emit CUDA
