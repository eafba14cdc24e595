#!/usr/bin/env bash
# One device call (GPU machine, repo root, .carry/ from
# scripts/prepare-device-carry.sh): the runtime's GPU tests (ops_check with
# the fused-convolution forms, the tiny model incl. CNNRT_PROFILE), then one
# profiled step of each model and the conv-fusion variants side by side.
#   bash bench/device-session.sh [models]
set -uo pipefail
export CNNC_RUNTIME_DIR=$PWD/.carry/rt PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
MODELS=${1:-simplecnn,resnet18,resnet50}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
rc=0
cmake -S runtime -B /tmp/rt -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES=90a >/tmp/rt-cmake.log 2>&1 &&
  ninja -C /tmp/rt >/tmp/rt-build.log 2>&1 ||
  { tail -30 /tmp/rt-cmake.log /tmp/rt-build.log; rc=1; }
if [ $rc -eq 0 ]; then
  (cd /tmp/rt && ctest -L gpu --output-on-failure) 2>&1 | tee "$OUT/runtime-gpu.log"
  rc=${PIPESTATUS[0]}
fi
python3 bench/bench.py --cnnc "$PWD/.carry/cnnc" --models "$MODELS" --steps 30 --cnnc-only \
  --profile --variants "default=;conv fusion forced split=CNNRT_CONV_FUSION=split" 2>&1 |
  tee "$OUT/profile.log"
exit $rc
