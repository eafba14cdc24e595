// The CUDA target reads the plan of cnn-memory-plan: offsets from the IR,
// the workspace region in the ModelSpec, in-place kernels without
// __restrict__, and a checked plan (a corrupted or stale one is rejected).
// RUN: cnnc %S/Inputs/small_cnn.mlir --train -O0 --optimizer sgd --lr 0.05 --emit mlir -o %t.step.mlir
// RUN: cnnc-opt %t.step.mlir --cnn-memory-plan=workspace-mb=4 -o %t.plan.mlir
// RUN: cnnc %t.plan.mlir --train --lr 0.05 --emit cuda | FileCheck %s
// RUN: cnnc %t.plan.mlir --train --dump-plan | FileCheck %s --check-prefix=PLAN

// Persistent tensors [0, 9984), a 4 MiB workspace, then the temporaries.
// CHECK: arena 4224000 bytes.
// bias_add + ReLU written in place into the convolution's output.
// CHECK: __global__ void __launch_bounds__(256) k0(const float * in0, const float * in1, float * out0)
// CHECK: __global__ void __launch_bounds__(256) k1(const float * in0, float * out0)
// CHECK-LABEL: static void trainStep(cnnrt::Context &ctx) {
// CHECK: ctx.convFwd(0, P<float>(A, 0), P<float>(A, 3840), P<float>(A, [[CONV:[0-9]+]]));
// CHECK-NEXT: k0<<<{{[0-9]+}}, 256, 0, s>>>(P<float>(A, [[CONV]]), P<float>(A, 4864), P<float>(A, [[CONV]]));
// CHECK: k1<<<{{[0-9]+}}, 256, 0, s>>>(P<float>(A, [[CONV]]), P<float>(A, [[CONV]]));
// CHECK: static const cnnrt::ModelSpec kModel = {{.*}}, cnncDefaultLR, 100, 9984ull, 4194304ull, nullptr, -100ll, true};
// CHECK: const float cnncDefaultLR = 0.0500000007f;

// PLAN: # buffer plan (cnn-memory-plan, {{.*}})
// PLAN: temp	8192	4204288	[0, {{[0-9]+}}]	cnn.conv2d (+2 in place)
// PLAN: persistent bytes: 9984
// PLAN: workspace bytes: 4194304 (4.0 MiB) at offset 9984
// PLAN: temporaries start at: 4204288
// PLAN: train temporaries peak: {{[0-9]+}} (0.0 MiB), lower bound {{[0-9]+}}
// PLAN: eval temporaries peak: {{[0-9]+}} (0.0 MiB), lower bound {{[0-9]+}}
// PLAN: arena bytes: 4224000 (4.0 MiB), workspace included

// Two live temporaries on the same bytes: the ReLU's result moved onto the
// max-pool output's buffer while the convolution output is still read.
// RUN: sed -e '0,/cnn.relu %1 {cnn.in_place = array<i64: 0>, cnn.offset = array<i64: 4204288>}/s//cnn.relu %1 {cnn.offset = array<i64: 4212480>}/' %t.plan.mlir > %t.overlap.mlir
// RUN: not cnnc %t.overlap.mlir --train --emit cuda 2>&1 | FileCheck %s --check-prefix=OVERLAP
// OVERLAP: error: memory plan: buffers {{.*}} overlap

// An op without an offset (a pass ran after cnn-memory-plan).
// RUN: sed -e 's/cnn.offset = array<i64: 9472>//' %t.plan.mlir > %t.stale.mlir
// RUN: not cnnc %t.stale.mlir --train --emit cuda 2>&1 | FileCheck %s --check-prefix=STALE
// STALE: error: memory plan: tensor 'loss' has no cnn.offset (run cnn-memory-plan after every other pass)
