#!/usr/bin/env bash
# Follow-up device call of a session (GPU machine, repo root, .carry/ from
# scripts/prepare-device-carry.sh), each part time-boxed so that the call
# returns what finished:
#  1. the Python entry on CUDA tensors (bench/device-verify.sh part 3);
#  2. data parallelism on one GPU (bench/device-dp.sh: NCCL world size 1 in
#     the captured step, dead rank, missing GPU, --gpus 1 == plain step,
#     ./train --gpus 2 and cnnc train --gpus 2 on a 1-GPU machine);
#  3. the zoo models not reached before: check_zoo.py for $ZOO_CHECK, then
#     zoo_bench.py (cnnc default vs PyTorch eager f32 and AMP) for $ZOO_BENCH.
set -uo pipefail
export CNNC_RUNTIME_DIR=$PWD/.carry/rt PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
ZOO_CHECK=${ZOO_CHECK:-shufflenet_v2_x1_0,convnext_tiny}
ZOO_BENCH=${ZOO_BENCH:-efficientnet_b0,densenet121,shufflenet_v2_x1_0,convnext_tiny}
quiet() { grep -v -e Warning -e "warnings.warn" -e "torch.onnx.export" -e _jit_pass; }
rc=0
echo "### 1. python-api"
timeout "${API_S:-90}" bash bench/device-verify.sh 3 2>&1 | quiet | tail -30 || rc=1
echo "### 2. data parallel on one GPU"
timeout "${DP_S:-200}" bash bench/device-dp.sh 2>&1 | quiet | tail -40 || rc=1
echo "### 3. zoo check: $ZOO_CHECK"
timeout "${CHECK_S:-130}" python3 test/gpu/check_zoo.py --cnnc "$PWD/.carry/cnnc" \
  --work /tmp/zoocheck --models "$ZOO_CHECK" 2>&1 | quiet | tee "$OUT/zoo-check.log" | tail -20
echo "### 3b. zoo bench: $ZOO_BENCH"
timeout "${BENCH_S:-150}" python3 bench/zoo_bench.py --cnnc "$PWD/.carry/cnnc" --no-compile \
  --models "$ZOO_BENCH" 2>&1 | quiet | tee "$OUT/zoo-bench.log" | tail -30
exit $rc
