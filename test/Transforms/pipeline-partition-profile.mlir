// cnn-pipeline-partition with a measured step (profile=FILE: the JSON that
// CNNRT_PROFILE_JSON writes, milliseconds by launch location). The roofline
// puts the first convolution and its bias (most FLOPs) on stage 0; the profile
// says the classifier ("fc") takes 20 of the 22 ms its forward ops name, so
// every op with time before it goes to stage 0 (the flatten, which launched
// nothing, goes with the fc: the crossing bytes tie). The optimizer's 3 ms
// (a location no forward op has; once a step, so 3/4 ms per micro-batch)
// go with the parameters, by their bytes: stage 0 = 3 x (1 + 1) ms of
// convolutions' ... see PLAN's estimates.
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=2 micro-batches=4 link-gbps=0 launch-us=0 launch-us=0" | FileCheck %s --check-prefix=ROOF
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=2 micro-batches=4 link-gbps=0 launch-us=0 profile=%S/Inputs/profile-fc-heavy.json" | FileCheck %s --check-prefix=MEASURED
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=2 micro-batches=4 link-gbps=0 launch-us=0 print-plan=1 profile=%S/Inputs/profile-fc-heavy.json" -o /dev/null | FileCheck %s --check-prefix=PLAN
// Bad profiles and options: one error each, naming the file.
// RUN: not cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=2 micro-batches=4 profile=%S/Inputs/no-such-profile.json" 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=2 micro-batches=4 profile=%S/Inputs/profile-truncated.json" 2>&1 | FileCheck %s --check-prefix=TRUNC
// RUN: not cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=2 micro-batches=4 profile=%S/Inputs/profile-wrong-format.json" 2>&1 | FileCheck %s --check-prefix=FORMAT
// RUN: not cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=2 micro-batches=4 profile=%S/Inputs/profile-negative.json" 2>&1 | FileCheck %s --check-prefix=NEG
// RUN: not cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=2 micro-batches=4 profile=%S/Inputs/profile-other-model.json" 2>&1 | FileCheck %s --check-prefix=OTHER
// RUN: not cnnc-opt %s -cnn-autodiff="accumulate=4" -cnn-pipeline-partition="stages=2 micro-batches=4 time-slack=-0.5" 2>&1 | FileCheck %s --check-prefix=SLACK

func.func @forward(%x: tensor<2x3x8x8xf32> {cnn.input},
                   %w1: tensor<4x3x3x3xf32> {cnn.param = "conv1.weight"},
                   %b1: tensor<4xf32> {cnn.param = "conv1.bias"},
                   %w2: tensor<8x4x3x3xf32> {cnn.param = "conv2.weight"},
                   %w3: tensor<10x8xf32> {cnn.param = "fc.weight"}) -> tensor<2x10xf32> {
  %c = cnn.conv2d %x, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32> loc("conv1")
  %cb = cnn.bias_add %c, %b1 : (tensor<2x4x8x8xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32> loc("conv1")
  %r = cnn.relu %cb : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32> loc("relu1")
  %c2 = cnn.conv2d %r, %w2 {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x4x8x8xf32>, tensor<8x4x3x3xf32>) -> tensor<2x8x4x4xf32> loc("conv2")
  %r2 = cnn.relu %c2 : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32> loc("relu2")
  %g = cnn.global_avg_pool %r2 : (tensor<2x8x4x4xf32>) -> tensor<2x8x1x1xf32> loc("pool")
  %f = cnn.flatten %g {axis = 1} : (tensor<2x8x1x1xf32>) -> tensor<2x8xf32> loc("flatten")
  %y = cnn.matmul %f, %w3 {transpose_rhs = true} : (tensor<2x8xf32>, tensor<10x8xf32>) -> tensor<2x10xf32> loc("fc")
  return %y : tensor<2x10xf32>
}

// ROOF:     cnn.pipeline = {{{.*}}cuts = array<i64: 1>
// ROOF-NOT: time_source

// MEASURED: cnn.pipeline = {{{.*}}cuts = array<i64: 5>
// MEASURED-SAME: time_source = "profile profile-fc-heavy.json (the forward ops' locations name 22.000 of its 25.000 ms)"
// MEASURED: cnn.conv2d {{.*}}cnn.stage = 0
// MEASURED: cnn.matmul {{.*}}cnn.stage = 1

// PLAN:      pipeline plan: 2 stage(s) x 4 micro-batch(es)
// PLAN-NEXT: stage times measured: profile profile-fc-heavy.json (the forward ops' locations name 22.000 of its 25.000 ms)
// PLAN-NEXT: stage 0: forward ops 0-5,
// PLAN:      stage 1: forward ops 6-end,

// MISSING: error: cnn-pipeline-partition: profile '{{.*}}no-such-profile.json': No such file or directory
// TRUNC:   error: cnn-pipeline-partition: profile '{{.*}}profile-truncated.json': not JSON:
// FORMAT:  error: cnn-pipeline-partition: profile '{{.*}}profile-wrong-format.json': not a cnnrt profile
// NEG:     error: cnn-pipeline-partition: profile '{{.*}}profile-negative.json': location 'conv1': expected {"ms": a number >= 0, ...}
// OTHER:   error: cnn-pipeline-partition: profile '{{.*}}profile-other-model.json' names none of @train_step's forward ops (1 locations
// SLACK:   error: cnn-pipeline-partition: time-slack must be within [0, 10], got -0.5
