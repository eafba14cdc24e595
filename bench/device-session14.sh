#!/usr/bin/env bash
# Session 14's device runs (device tool, repo root, .carry/ from
# scripts/prepare-device-carry.sh; outputs in $OUT). PARTS selects:
#   a  check_vs_torch.py's f16 curves (ResNet-18 at lr 0.01, ResNet-50 at
#      lr 0.002: the non-chaotic setting) for the cnnc variants A_VARIANTS
#      (default: the default flags and --conv-prologue=false)
#   f  ResNet-50's CNNRT_PROFILE report of one uncaptured step (top 45)
#   g  the runtime's GPU tests (device-verify.sh part 1)
#   c  check_vs_torch.py with the default flags (all checks)
#   p  the Python entry on CUDA tensors (device-verify.sh part 3)
#   r  bench.py ResNet-50/18 side by side with PyTorch AMP+CL and
#      torch.compile (R_VARIANTS, R_MODELS, R_ARGS, R_S)
#   s  SimpleCNN batch 32 (S_STEPS steps, default 2000)
#   d  diagnosis of the Python entry's f16 DataLoader check: ops_check's
#      lines for the 4-channel cases, then check_python_api.py with graph
#      plans off (CNNRT_CONV_GRAPH=0) and on (verbose), fresh caches
#   e  ops_check (built there) with CNNRT_GRAPH_PLANS=8, then
#      check_python_api.py with the default 4 plans and with 8
#   h  check_python_api.py with .carry/cnnc-pad8 (a cnnc built with the stem
#      padded to 8 channels, as before session 14) and with .carry/cnnc,
#      CNNRT_VERBOSE=1 logs; then ops_check (runtime built there)
#   v  ResNet-50's executable with CNNRT_VERBOSE=1 and a fresh algorithm
#      cache for 3 steps: the stem's choices and timings (V_GREP)
set -uo pipefail
PARTS=${PARTS:-af}
source "$(dirname "$0")/device-env.sh"
if [[ $PARTS == *a* ]]; then
  timeout "${A_S:-240}" python3 test/gpu/check_vs_torch.py --cnnc "$C" --work /tmp/s14a \
    --models simplecnn --skip-digits \
    --amp-variants "${A_VARIANTS:-default=;no-prologue=--conv-prologue=false}" 2>&1 |
    filter >"$OUT/check-amp.log"
  echo "=== check_vs_torch (f16 curves) exit ${PIPESTATUS[0]}"
  grep -E "^amp|ok$|FAIL|PASSED" "$OUT/check-amp.log" | tail -24
fi
if [[ $PARTS == *f* ]]; then
  CNNRT_PROFILE_TOP=45 timeout "${F_S:-200}" python3 bench/bench.py --cnnc "$C" --models resnet50 \
    --cnnc-only --steps 5 --profile --work /tmp/s14f --variants "default=${F_FLAGS:-}" 2>&1 |
    filter | tee "$OUT/r50-profile.log" | tail -70
fi
if [[ $PARTS == *g* ]]; then
  TAIL=12 bash bench/device-verify.sh 1 | grep -v "^ *[0-9]*/[0-9]* Test" | tail -14
fi
if [[ $PARTS == *c* ]]; then
  timeout "${C_S:-300}" python3 test/gpu/check_vs_torch.py --cnnc "$C" --work /tmp/s14c \
    --digits "$PWD/.carry/digits" 2>&1 | filter >"$OUT/check.log"
  echo "=== check_vs_torch exit ${PIPESTATUS[0]}"
  grep -E "ok$|FAIL|PASSED|deviation" "$OUT/check.log" | tail -20
fi
if [[ $PARTS == *p* ]]; then
  TAIL=8 bash bench/device-verify.sh 3 | tail -10
fi
if [[ $PARTS == *r* ]]; then
  timeout "${R_S:-560}" python3 bench/bench.py --cnnc "$C" --models "${R_MODELS:-resnet50,resnet18}" \
    --variants "${R_VARIANTS:-default=}" ${R_ARGS:-} 2>&1 | filter | tee "$OUT/bench.log" | tail -40
  echo "=== bench exit ${PIPESTATUS[0]}"
fi
if [[ $PARTS == *s* ]]; then
  timeout "${S_S:-150}" python3 bench/bench.py --cnnc "$C" --models simplecnn --steps "${S_STEPS:-2000}" \
    --no-compile --variants "default=" 2>&1 | filter | tee "$OUT/simplecnn.log" | tail -20
  echo "=== simplecnn exit ${PIPESTATUS[0]}"
fi
if [[ $PARTS == *v* ]]; then
  timeout 150 python3 bench/bench.py --cnnc "$C" --models resnet50 --cnnc-only --steps 5 \
    --work /tmp/s14v --variants "default=${V_FLAGS:-}" 2>&1 | filter | tail -2
  EXE=/tmp/s14v/resnet50/train
  if [ -x "$EXE" ]; then
    CNNRT_ALGO_CACHE=/tmp/s14-algos.txt CNNRT_VERBOSE=1 timeout 200 "$EXE" \
      --data synthetic --steps 3 >"$OUT/verbose.log" 2>&1
    echo "=== verbose exit $?"
    grep -E "${V_GREP:-/conv1/Conv }" "$OUT/verbose.log" | head -30
  fi
fi
if [[ $PARTS == *d* ]]; then
  TAIL=12 bash bench/device-verify.sh 1 | grep -v "^ *[0-9]*/[0-9]* Test" | tail -8
  OPS=$(find /tmp/rt -name cnnrt_ops_check -type f | head -1)
  [ -n "$OPS" ] && CNNRT_VERBOSE=1 CNNRT_ALGO_CACHE=/tmp/d0.txt timeout 120 "$OPS" >"$OUT/ops.log" 2>&1
  grep -E "C=4|FAIL|all ok" "$OUT/ops.log" | head -30
  CNNRT_CONV_GRAPH=0 CNNRT_ALGO_CACHE=/tmp/d1.txt timeout 120 python3 test/gpu/check_python_api.py \
    --cnnc "$C" 2>&1 | grep -E "FAIL|passed|failed|DataLoader|accuracy" | sed 's/^/[graph off] /'
  CNNRT_VERBOSE=1 CNNRT_ALGO_CACHE=/tmp/d2.txt timeout 120 python3 test/gpu/check_python_api.py \
    --cnnc "$C" >"$OUT/py-verbose.log" 2>&1
  grep -E "FAIL|passed|failed" "$OUT/py-verbose.log" | sed 's/^/[graph on] /'
fi
if [[ $PARTS == *e* ]]; then
  TAIL=12 bash bench/device-verify.sh 1 | grep -v "^ *[0-9]*/[0-9]* Test" | tail -6
  OPS=$(find /tmp/rt -name cnnrt_ops_check -type f | head -1)
  [ -n "$OPS" ] && CNNRT_GRAPH_PLANS=8 CNNRT_VERBOSE=1 CNNRT_ALGO_CACHE=/tmp/e0.txt timeout 150 "$OPS" \
    >"$OUT/ops8.log" 2>&1
  echo "=== ops_check with 8 plans: exit $?"
  grep -E "FAIL|all ok|graph plan #[4-7]" "$OUT/ops8.log" | grep -v "(cached)" | head -30
  for n in 4 8; do
    CNNRT_GRAPH_PLANS=$n CNNRT_ALGO_CACHE=/tmp/e$n.txt timeout 120 python3 test/gpu/check_python_api.py \
      --cnnc "$C" 2>&1 | grep -E "FAIL|passed|failed|DataLoader|accuracy" | sed "s/^/[$n plans] /"
  done
fi
if [[ $PARTS == *h* ]]; then
  for b in ${H_BINS:-cnnc-pad8 cnnc}; do
    CNNRT_VERBOSE=1 CNNRT_ALGO_CACHE=$(mktemp -u /tmp/h-XXXX.txt) timeout 120 python3 test/gpu/check_python_api.py \
      --cnnc "$PWD/.carry/$b" >"$OUT/py-$b-$SECONDS.log" 2>&1
    grep -E "FAIL|passed|failed|DataLoader|accuracy" "$OUT"/py-$b-*.log | tail -3 | sed "s/^/[$b] /"
  done
  TAIL=12 bash bench/device-verify.sh 1 | grep -v "^ *[0-9]*/[0-9]* Test" | tail -6
  grep -E "FAIL" -A1 /tmp/out/runtime-gpu.log "$OUT/runtime-gpu.log" 2>/dev/null | head -10
fi
