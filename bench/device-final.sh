#!/usr/bin/env bash
# One device call (GPU machine, repo root, .carry/ from
# scripts/prepare-device-carry.sh): the GPU correctness checks
# (bench/device-check.sh), then cnnc vs PyTorch eager f32 and AMP side by side
# with one CNNRT_PROFILE report per model. Each part has its own time limit so
# the call returns what finished.
set -uo pipefail
export CNNC_RUNTIME_DIR=$PWD/.carry/rt PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
timeout "${CHECK_S:-360}" bash bench/device-check.sh >"$OUT/gpu-check.log" 2>&1
echo "device-check exit $?" | tee -a "$OUT/gpu-check.log"
grep -v -e UserWarning -e _jit_pass "$OUT/gpu-check.log" | tail -40
timeout "${BENCH_S:-220}" python3 bench/bench.py --cnnc "$PWD/.carry/cnnc" \
  --models "${MODELS:-simplecnn,resnet18,resnet50}" --steps 30 --no-compile --profile \
  >"$OUT/bench.log" 2>&1
echo "bench exit $?" | tee -a "$OUT/bench.log"
grep -v -e UserWarning -e _jit_pass "$OUT/bench.log" | grep -v "^  *[0-9.]* ms  " | tail -60
