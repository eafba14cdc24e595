// The per-channel sums of --sync-bn (reduce_mean / reduce_sum over N, H, W
// of an NHWC tensor) print as cnn-select-lowering chose them: with 8
// channels "channel_sum_vec8", eight channels per thread (nhwcPartial8);
// the same step with the choice changed by hand to "channel_sum" prints the
// one-channel-per-thread kernels (nhwcPartial): the printer decides nothing.
// RUN: cnnc-opt %S/Inputs/small_cnn.mlir --cnn-autodiff --cse --cnn-gpu-pipeline="data-parallel=true sync-bn=true world-size=2" -o %t.step.mlir
// RUN: FileCheck %s --check-prefix=IR < %t.step.mlir
// RUN: cnnc-translate --cnn-to-cuda %t.step.mlir -o %t.cu
// RUN: FileCheck %s --check-prefix=VEC < %t.cu
// RUN: sed 's/"channel_sum_vec8"/"channel_sum"/' %t.step.mlir > %t.scalar.mlir
// RUN: cnnc-translate --cnn-to-cuda %t.scalar.mlir -o %t.scalar.cu
// RUN: FileCheck %s --check-prefix=SCALAR < %t.scalar.cu

// IR-COUNT-4: cnn.lowering = "channel_sum_vec8"
// IR-NOT: cnn.lowering = "channel_sum"}
// VEC-LABEL: static void trainStep(
// VEC: nhwcPartial8<0, float>
// VEC-NOT: nhwcPartial<0, float>
// SCALAR-LABEL: static void trainStep(
// SCALAR: nhwcPartial<0, float>
// SCALAR-NOT: nhwcPartial8<0, float>
