#!/usr/bin/env bash
# Session 16's device runs, and later sessions' through their thin wrappers
# (TAG names the scratch paths: s16 unless set) (device tool, repo root, .carry/ from
# scripts/prepare-device-carry.sh; outputs in $OUT). PARTS selects:
#   a  check_vs_torch.py's f16 curves (ResNet-18 at lr 0.01, ResNet-50 at
#      lr 0.002: the non-chaotic setting) for the cnnc variants A_VARIANTS
#      (default: the default flags and --max-pool-index=false)
#   d  runtime/test/dgrad_stats_check.cu at batch 128 (cuDNN's dgrad + dReLU
#      + dBN-weight graph: supported, faster, equal?)
#   f  ResNet-50's CNNRT_PROFILE report of one uncaptured step (top 45)
#   g  the runtime's GPU tests (device-verify.sh part 1)
#   c  check_vs_torch.py with the default flags (all checks)
#   p  the Python entry on CUDA tensors (device-verify.sh part 3)
#   r  bench.py ResNet-50/18 side by side with PyTorch AMP+CL and
#      torch.compile (R_VARIANTS, R_MODELS, R_ARGS, R_S)
#   s  SimpleCNN batch 32 (S_STEPS steps, default 2000)
#   v  ResNet-50's executable with CNNRT_VERBOSE=1 and a fresh algorithm
#      cache for 3 steps: the choices and timings of the lines matching
#      V_GREP (default: the dgrad lines)
set -uo pipefail
TAG=${TAG:-s16}
PARTS=${PARTS:-af}
source "$(dirname "$0")/device-env.sh"
if [[ $PARTS == *a* ]]; then
  timeout "${A_S:-240}" python3 test/gpu/check_vs_torch.py --cnnc "$C" --work /tmp/${TAG}a \
    --models simplecnn --skip-digits \
    --amp-variants "${A_VARIANTS:-default=;no-max-pool-index=--max-pool-index=false}" 2>&1 |
    filter >"$OUT/check-amp.log"
  echo "=== check_vs_torch (f16 curves) exit ${PIPESTATUS[0]}"
  grep -E "^amp|ok$|FAIL|PASSED" "$OUT/check-amp.log" | tail -24
fi
if [[ $PARTS == *d* ]]; then
  build_runtime /tmp/${TAG}rt "${D_BUILD_S:-300}" cnnrt_dgrad_stats_check
  timeout "${D_S:-200}" "$(find /tmp/${TAG}rt -name cnnrt_dgrad_stats_check -type f | head -1)" \
    "${D_BATCH:-128}" 2>&1 | tee "$OUT/dgrad-stats.log" | tail -20
  echo "=== dgrad_stats_check exit ${PIPESTATUS[0]}"
fi
if [[ $PARTS == *f* ]]; then
  CNNRT_PROFILE_TOP=45 timeout "${F_S:-200}" python3 bench/bench.py --cnnc "$C" --models resnet50 \
    --cnnc-only --steps 5 --profile --work /tmp/${TAG}f --variants "default=${F_FLAGS:-}" 2>&1 |
    filter | tee "$OUT/r50-profile.log" | tail -70
fi
if [[ $PARTS == *g* ]]; then
  TAIL=12 bash bench/device-verify.sh 1 | grep -v "^ *[0-9]*/[0-9]* Test" | tail -14
fi
if [[ $PARTS == *c* ]]; then
  timeout "${C_S:-300}" python3 test/gpu/check_vs_torch.py --cnnc "$C" --work /tmp/${TAG}c \
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
    --work /tmp/${TAG}v --variants "default=${V_FLAGS:-}" 2>&1 | filter | tail -2
  EXE=/tmp/${TAG}v/resnet50/train
  if [ -x "$EXE" ]; then
    CNNRT_ALGO_CACHE=/tmp/${TAG}-algos.txt CNNRT_VERBOSE=1 timeout 200 "$EXE" \
      --data synthetic --steps 3 >"$OUT/verbose.log" 2>&1
    echo "=== verbose exit $?"
    grep -E "${V_GREP:-dgrad}" "$OUT/verbose.log" | head -60
  fi
fi
