#!/usr/bin/env bash
# Session 10's H100 runs (device tool, repo root, .carry/ from
# scripts/prepare-device-carry.sh; outputs in $OUT). PARTS selects:
#   p  the runtime built there; ops_check with CNNRT_VERBOSE=1 (grouped and
#      depthwise f16 convolutions now also time cuDNN graph-API plans: the
#      same numbers? which plan wins?)
#   z  check_zoo.py on ZOO_MODELS (default: the depthwise/grouped/LayerNorm
#      models convnext_tiny, mobilenet_v3_large, efficientnet_b0), f32 + AMP
#   b  zoo_bench.py on BENCH_MODELS at batch 64, 224x224, --no-compile
#      (BENCH_EXTRA adds flags, e.g. --profile)
#   s  SimpleCNN batch 32 (issue 13's launch-bound target): bench.py rows
#      f32/default and one step's CNNRT_PROFILE report
#   r  bench.py ResNet-50/18: cnnc default vs PyTorch AMP and torch.compile
# Each part is bounded by `timeout` so that one call returns what finished.
set -uo pipefail
PARTS=${PARTS:-pz}
source "$(dirname "$0")/device-env.sh"
if [[ $PARTS == *p* ]]; then
  RTB=/tmp/s10rt
  build_runtime $RTB "${P1_S:-300}" cnnrt_ops_check
  OPS=$(find $RTB -name cnnrt_ops_check -type f | head -1)
  if [ -n "$OPS" ]; then
    CNNRT_VERBOSE=1 timeout 150 "$OPS" >"$OUT/ops_check.log" 2>&1
    echo "=== ops_check exit $?"
    grep -E "depthwise|groups4|FAIL|mismatch|fail|error" "$OUT/ops_check.log" | tail -30
    tail -5 "$OUT/ops_check.log"
  fi
fi
if [[ $PARTS == *z* ]]; then
  timeout "${Z_S:-400}" python3 test/gpu/check_zoo.py --cnnc "$C" --work /tmp/zoocheck \
    --models "${ZOO_MODELS:-convnext_tiny,mobilenet_v3_large,efficientnet_b0}" 2>&1 | filter |
    tee "$OUT/zoo-check.log" | grep -E "^f32|^amp|FAIL|ERROR|PASSED|bound"
  echo "=== check_zoo exit ${PIPESTATUS[0]}"
fi
if [[ $PARTS == *b* ]]; then
  timeout "${B_S:-540}" python3 bench/zoo_bench.py --cnnc "$C" --no-compile \
    --models "${BENCH_MODELS:-convnext_tiny,efficientnet_b0,mobilenet_v3_large,regnet_y_400mf,shufflenet_v2_x1_0}" \
    ${BENCH_EXTRA:-} 2>&1 | filter | tee "$OUT/zoo-bench.log" | tail -60
  echo "=== zoo_bench exit ${PIPESTATUS[0]}"
fi
if [[ $PARTS == *s* ]]; then
  timeout "${S_S:-120}" python3 bench/bench.py --cnnc "$C" --models simplecnn --steps 500 \
    --no-compile --profile --variants "f32=--precision fp32 --layout nchw;default=" 2>&1 |
    filter | tee "$OUT/simplecnn.log" | tail -40
  echo "=== simplecnn exit ${PIPESTATUS[0]}"
fi
if [[ $PARTS == *r* ]]; then
  timeout "${R_S:-540}" python3 bench/bench.py --cnnc "$C" --models "${R_MODELS:-resnet50,resnet18}" \
    ${R_ARGS:-} 2>&1 | filter | tee "$OUT/bench.log" | tail -30
  echo "=== bench exit ${PIPESTATUS[0]}"
fi
