#!/usr/bin/env bash
# On the GPU machine (device tool), from the repo root, with .carry/ from
# scripts/prepare-device-carry.sh: the torchvision zoo checks against
# PyTorch (test/gpu/check_zoo.py: 3-step f32 and 30-step AMP loss curve per
# model), then the zoo benchmark (bench/zoo_bench.py, batch 64 at 224x224).
# Arguments go to check_zoo.py (e.g. --models densenet121,googlenet).
set -uo pipefail
export CNNC_RUNTIME_DIR=$PWD/.carry/rt PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 test/gpu/check_zoo.py --cnnc "$PWD/.carry/cnnc" --work /tmp/zoocheck "$@" 2>&1 | tee "$OUT/zoo-check.log"
rc=${PIPESTATUS[0]}
if [ "${ZOO_BENCH:-1}" = 1 ]; then
  python3 bench/zoo_bench.py --cnnc "$PWD/.carry/cnnc" --no-compile 2>&1 | tee "$OUT/zoo-bench.log"
fi
exit "$rc"
