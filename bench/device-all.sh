#!/usr/bin/env bash
# Everything GPU in one device call (GPU machine, repo root, .carry/ from
# scripts/prepare-device-carry.sh): the runtime's GPU tests (ctest -L gpu of
# runtime/), the GPU checks against PyTorch (bench/device-check.sh), then
# cnnc vs PyTorch eager f32 and AMP with one CNNRT_PROFILE report per model.
# Each part has a time limit so the call returns what finished.
set -uo pipefail
export CNNC_RUNTIME_DIR=$PWD/.carry/rt PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
rc=0
{ cmake -S runtime -B /tmp/rt -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES=90a >/tmp/rt-cmake.log 2>&1 &&
  ninja -C /tmp/rt >/tmp/rt-build.log 2>&1 &&
  (cd /tmp/rt && timeout 150 ctest -L gpu --output-on-failure); } >"$OUT/runtime-gpu.log" 2>&1 || rc=1
grep -E "tests passed|Passed|Failed|FAIL|ops_check:" "$OUT/runtime-gpu.log"
CHECK_S=${CHECK_S:-200} BENCH_S=${BENCH_S:-170} bash bench/device-final.sh || rc=1
exit $rc
