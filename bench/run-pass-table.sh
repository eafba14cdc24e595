#!/usr/bin/env bash
# On the GPU machine (device tool), from the repo root, with .carry/ from
# scripts/prepare-device-carry.sh: cnnc with the optimization passes switched
# on one at a time, next to PyTorch eager, AMP + channels_last and
# torch.compile, in one run (docs/benchmarks.md).
set -uo pipefail
export CNNC_RUNTIME_DIR=$PWD/.carry/rt PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
V="none (-O0)=-O0"
V+=";+fuse=--layout nchw --precision fp32 --memory-plan=false"
V+=";+layout nhwc=--layout nhwc --precision fp32 --memory-plan=false"
V+=";+fp16=--layout nhwc --precision fp16 --memory-plan=false"
V+=";+memory plan (default)="
python3 bench/bench.py --cnnc "$PWD/.carry/cnnc" --steps "${STEPS:-30}" --variants "$V" "$@" 2>&1 \
  | grep -v -i "warn\|_C._jit" | tee "$OUT/bench.log"
