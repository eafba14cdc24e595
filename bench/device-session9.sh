#!/usr/bin/env bash
# Session 9's H100 runs (device tool, repo root, .carry/ from
# scripts/prepare-device-carry.sh; outputs in $OUT). PARTS selects:
#   p  the runtime built there; runtime/test's ops_check with CNNRT_VERBOSE=1
#      (f16 convolutions through cuDNN graph-API plans where faster: the
#      same numbers?), then cudnn_fusion_check at batch 128 (PROBE=0 skips)
#   s  SimpleCNN batch 32 (issue 13's launch-bound target): bench.py rows
#      f32/default and one step's CNNRT_PROFILE report
#   b  python_path.py with torch.compile in the same run (issue 10: the
#      loss now stays on the GPU as a 0-d tensor)
#   r  bench.py ResNet-50/18: cnnc variants vs torch.compile (issue 13);
#      BENCH_VARIANTS="default=;legacy=CNNRT_CONV_GRAPH=0" by default
#   c  check_zoo.py on ZOO_MODELS (issue 9)
# Each part is bounded by `timeout` so that one call returns what finished.
set -uo pipefail
PARTS=${PARTS:-psb}
source "$(dirname "$0")/device-env.sh"
if [[ $PARTS == *p* ]]; then
  RTB=/tmp/s9rt
  build_runtime $RTB "${P1_S:-300}" cnnrt_cudnn_fusion_check cnnrt_ops_check
  OPS=$(find $RTB -name cnnrt_ops_check -type f | head -1)
  if [ -n "$OPS" ]; then
    CNNRT_VERBOSE=1 CNNRT_ALGO_CACHE=$RTB/ops_algos.txt timeout 150 "$OPS" >"$OUT/ops_check.log" 2>&1
    echo "=== ops_check exit $?"
    grep -c "graph" "$OUT/ops_check.log"
    grep -E "graph|FAIL|mismatch|fail|error" "$OUT/ops_check.log" | tail -30
    tail -5 "$OUT/ops_check.log"
  fi
  PROBE_BIN=$(find $RTB -name cnnrt_cudnn_fusion_check -type f | head -1)
  if [ "${PROBE:-1}" = 1 ] && [ -n "$PROBE_BIN" ]; then
    timeout "${P2_S:-200}" "$PROBE_BIN" "${PROBE_BATCH:-128}" >"$OUT/fusion_check.log" 2>&1
    echo "=== fusion_check exit $?"; cat "$OUT/fusion_check.log" | tail -60
  fi
fi
if [[ $PARTS == *s* ]]; then
  timeout "${S_S:-120}" python3 bench/bench.py --cnnc "$C" --models simplecnn --steps 500 \
    --no-compile --profile --variants "f32=--precision fp32 --layout nchw;default=" 2>&1 |
    filter | tee "$OUT/simplecnn.log" | tail -80
  echo "=== simplecnn exit ${PIPESTATUS[0]}"
fi
if [[ $PARTS == *b* ]]; then
  timeout "${B_S:-330}" python3 bench/python_path.py --cnnc "$C" 2>&1 | filter |
    tee "$OUT/python_path.log"
  echo "=== python_path exit ${PIPESTATUS[0]}"
fi
if [[ $PARTS == *r* ]]; then
  timeout "${R_S:-540}" python3 bench/bench.py --cnnc "$C" --models "${R_MODELS:-resnet50,resnet18}" \
    --variants "${BENCH_VARIANTS:-default=;legacy=CNNRT_CONV_GRAPH=0}" ${R_ARGS:-} 2>&1 | filter |
    tee "$OUT/bench.log"
  echo "=== bench exit ${PIPESTATUS[0]}"
fi
if [[ $PARTS == *c* ]]; then
  CHECK_S=${CHECK_S:-500} ZOO_BENCH=0 bash bench/device-zoo.sh \
    --models "${ZOO_MODELS:-vgg11_bn,alexnet,resnet18,squeezenet1_0,mnasnet1_0,regnet_y_400mf}" 2>&1 |
    tee "$OUT/zoo.log" | tail -60
fi
