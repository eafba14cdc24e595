#!/usr/bin/env bash
# On the GPU machine (device tool), from the repo root, with .carry/ from
# scripts/prepare-device-carry.sh: the CUDA backend's correctness checks
# against PyTorch (test/gpu/check_vs_torch.py).
set -uo pipefail
export CNNC_RUNTIME_DIR=$PWD/.carry/rt PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 test/gpu/check_vs_torch.py --cnnc "$PWD/.carry/cnnc" --work /tmp/gpucheck --digits "$PWD/.carry/digits" "$@" 2>&1 | tee "$OUT/gpu-check.log"
exit "${PIPESTATUS[0]}"
