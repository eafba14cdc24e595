#!/usr/bin/env bash
# On the GPU machine (device tool), from the repo root, with .carry/ from
# scripts/prepare-device-carry.sh: the torchvision zoo checks against
# PyTorch (test/gpu/check_zoo.py: 3-step f32 and 30-step AMP loss curve per
# model), then the zoo benchmark (bench/zoo_bench.py, batch 64 at 224x224).
# Arguments go to check_zoo.py (e.g. --models densenet121,googlenet).
# CHECK_S / BENCH_S bound the two parts (seconds) so that one device call
# returns what finished; ZOO_BENCH=0 skips the benchmark, BENCH_ARGS adds
# zoo_bench.py flags (default --no-compile).
set -uo pipefail
export CNNC_RUNTIME_DIR=$PWD/.carry/rt PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
timeout "${CHECK_S:-330}" python3 test/gpu/check_zoo.py --cnnc "$PWD/.carry/cnnc" \
  --work /tmp/zoocheck "$@" 2>&1 | grep -v -e Warning -e "warnings.warn" -e "torch.onnx.export" -e _jit_pass |
  tee "$OUT/zoo-check.log"
rc=${PIPESTATUS[0]}
echo "=== check_zoo exit $rc"
if [ "${ZOO_BENCH:-1}" = 1 ]; then
  timeout "${BENCH_S:-230}" python3 bench/zoo_bench.py --cnnc "$PWD/.carry/cnnc" \
    ${BENCH_ARGS:---no-compile} 2>&1 | grep -v -e Warning -e "warnings.warn" -e "torch.onnx.export" -e _jit_pass |
    tee "$OUT/zoo-bench.log"
  echo "=== zoo_bench exit ${PIPESTATUS[0]}"
fi
exit "$rc"
