#!/usr/bin/env bash
# Session 12's H100 runs (device tool, repo root, .carry/ from
# scripts/prepare-device-carry.sh; outputs in $OUT). PARTS selects:
#   r  bench.py ResNet-50/18: cnnc with cnn-conv-stats (default) and without
#      (--conv-stats=false) in the same run, PyTorch AMP+CL and torch.compile
#      (R_MODELS, R_ARGS, R_S as in device-session10.sh)
#   v  ResNet-50's executable (compiled with the default flags) with CNNRT_VERBOSE=1 for 3 steps: how
#      many fused_conv2d_stats run as cuDNN's conv+GenStats graph, and the
#      timings of the two forms (split = conv + statistics kernels)
#   s  SimpleCNN batch 32 (device-session10.sh's part s)
#   f  ResNet-50's CNNRT_PROFILE report of one step (CNNRT_PROFILE_TOP=40)
#   p  the runtime built there; ops_check with CNNRT_VERBOSE=1: the
#      conv-stats cases and their forms
set -uo pipefail
PARTS=${PARTS:-rv}
source "$(dirname "$0")/device-env.sh"
if [[ $PARTS == *p* ]]; then
  RTB=/tmp/s12rt
  build_runtime $RTB "${P1_S:-200}" cnnrt_ops_check
  OPS=$(find $RTB -name cnnrt_ops_check -type f | head -1)
  if [ -n "$OPS" ]; then
    CNNRT_VERBOSE=1 timeout 150 "$OPS" >"$OUT/ops_check.log" 2>&1
    echo "=== ops_check exit $?"
    grep -E "conv-stats|genstats|FAIL" "$OUT/ops_check.log" | tail -40
    tail -2 "$OUT/ops_check.log"
  fi
fi
if [[ $PARTS == *r* ]]; then
  timeout "${R_S:-560}" python3 bench/bench.py --cnnc "$C" --models "${R_MODELS:-resnet50,resnet18}" \
    --variants "${R_VARIANTS:-default=;no-conv-stats=--conv-stats=false}" \
    ${R_ARGS:-} 2>&1 | filter | tee "$OUT/bench.log" | tail -30
  echo "=== bench exit ${PIPESTATUS[0]}"
fi
if [[ $PARTS == *v* ]]; then
  # Compiled here with the default flags (part r's work directory holds
  # the last variant's executable).
  timeout 150 python3 bench/bench.py --cnnc "$C" --models resnet50 --cnnc-only --steps 5 \
    --work /tmp/s12v --variants "default=" 2>&1 | filter | tail -2
  EXE=/tmp/s12v/resnet50/train
  if [ -x "$EXE" ]; then
    # The cache holds the choices of the bench run: drop them so the two
    # forms are timed again and printed.
    CNNRT_ALGO_CACHE=/tmp/s12-algos.txt CNNRT_VERBOSE=1 timeout 200 "$EXE" \
      --data synthetic --steps 3 >"$OUT/verbose.log" 2>&1
    echo "=== verbose exit $?"
    echo "graph: $(grep -c 'conv+genstats.*-> graph' "$OUT/verbose.log")," \
      "split: $(grep -c 'conv+genstats.*-> split' "$OUT/verbose.log")"
    grep 'conv+genstats' "$OUT/verbose.log" | head -60
  fi
fi
if [[ $PARTS == *f* ]]; then
  CNNRT_PROFILE_TOP=40 timeout 200 python3 bench/bench.py --cnnc "$C" --models resnet50 \
    --cnnc-only --steps 5 --profile --work /tmp/s12f --variants "default=" 2>&1 | filter |
    tee "$OUT/r50-profile.log" | tail -80
fi
if [[ $PARTS == *s* ]]; then
  timeout "${S_S:-120}" python3 bench/bench.py --cnnc "$C" --models simplecnn --steps 500 \
    --no-compile --profile --variants "default=" 2>&1 |
    filter | tee "$OUT/simplecnn.log" | tail -40
  echo "=== simplecnn exit ${PIPESTATUS[0]}"
fi
