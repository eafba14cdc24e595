#!/usr/bin/env bash
# Runs the unit, lit and e2e tests and the fuzz regressions against the
# AddressSanitizer + UndefinedBehaviorSanitizer build (build-san/, see
# scripts/sanitizer-build.sh). Part of CI (.ci/run). Any sanitizer report
# aborts the process, so a finding fails the test that triggered it.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${SAN_BUILD_DIR:-build-san}
./scripts/sanitizer-build.sh cnnc cnnc-opt cnnc-translate cnnc-unittests cnnc-reference-run \
  cnnrt_host_tests \
  cnnc-fuzz-{cnnw,npy,cnnt,cifar,image,onnx,onnx-model,pipeline,safetensors,reference,train-step}-replay
B=$(realpath "$B")
# LLVM's static singletons live until exit: no leak checking.
# allow_user_poisoning=0: see scripts/fuzz.sh (LLVM's allocator poisoning
# is unsound when only our half of the program is instrumented).
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=0:halt_on_error=1:allow_user_poisoning=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
"$B/bin/cnnc-unittests"
"$B/bin/cnnrt_host_tests"
for t in cnnw npy cnnt cifar image onnx onnx-model pipeline safetensors reference \
  train-step; do
  CNNC_FUZZ_ONNX_DATA_DIR=fuzz/regressions/onnx \
    "$B/bin/cnnc-fuzz-$t-replay" "fuzz/regressions/$t" "fuzz/corpus/$t"
done
# These need the CUDA runtime (libcnnrt.a), which this build leaves out; the
# C host program links the reference library, a shared object (loaded by an
# uninstrumented Python too), which stays in the release build.
/usr/lib/llvm-22/bin/lit -q "$B/test" \
  --filter-out 'Target/CUDA/exe.mlir|Target/CUDA/exe-data-parallel.mlir|Target/CUDA/lib.mlir|Driver/output-exe.test|Driver/resume-corrupt.test|CAPI/reference-host.test'
CNNC_BUILD_DIR="$B" CNNC="$B/bin/cnnc" PYTHONPATH=python \
  /usr/bin/python3 -m pytest -q -p no:cacheprovider test/e2e \
  --ignore=test/e2e/test_torchvision.py --ignore=test/e2e/test_python_api.py \
  --ignore=test/e2e/test_examples.py --ignore=test/e2e/test_compare.py \
  --ignore=test/e2e/test_finetune_optim.py --ignore=test/e2e/test_finetune_modes.py \
  --ignore=test/e2e/test_cache_limit.py --ignore=test/e2e/test_export_cli.py \
  --ignore=test/e2e/test_export_devices.py --ignore=test/e2e/test_dp_bench.py \
  --ignore=test/e2e/test_runtime_errors.py --ignore=test/e2e/test_nvcc_cache.py \
  --ignore=test/e2e/test_dense_executable.py --ignore=test/e2e/test_bench_scripts.py \
  --ignore=test/e2e/test_new_ops_cuda.py \
  --deselect test/e2e/test_tiled_transpose.py::test_executable_builds_with_nvcc \
  --deselect test/e2e/test_tiled_transpose.py::test_gpu_check_dry_run \
  -k "not torchvision_segmentation and not lraspp and not resnet50_segmentation and not cuda_step_builds and not executable_reads_cpu_checkpoint and not pipeline_cuda_executable_builds"
# (The model zoo, the Python package tests (cnnc.compile: the API, fine-tuning, the cache, the
# export, the data-parallel bench's helpers), compare() on ResNet-18, the torchvision segmentation
# models of test_resize/test_dense and the nvcc builds of test_osa_ese run in
# the release build only: under the sanitizers the zoo's reference-interpreter
# runs alone would take a large part of CI's time; their C++ paths (resize,
# the per-pixel loss, the GPU passes) are taken by the small nets above. The nvcc-built
# executable reading a CPU checkpoint, test_runtime_errors' step library and
# the nvcc builds of test_nvcc_cache, test_dense_executable and test_tiled_transpose
# (its executable and its GPU check's dry run) need libcnnrt.a,
# which this build leaves out; test_bench_scripts is Python only; test_new_ops_cuda
# emits every new-op model's CUDA twice (its passes run under the sanitizers in
# test_new_ops and the lit Target/CUDA tests).)
