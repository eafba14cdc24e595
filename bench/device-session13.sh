#!/usr/bin/env bash
# Session 13's H100 runs (device tool, repo root, .carry/ from
# scripts/prepare-device-carry.sh; outputs in $OUT). PARTS selects:
#   g  the runtime's GPU tests (device-verify.sh part 1: ops_check's
#      conv-stats cases with and without the prologue, both forms)
#   c  check_vs_torch.py with the default flags (f32 checks, digits, f16
#      curves of ResNet-18/50 against PyTorch AMP)
#   a  check_vs_torch.py's f16 curves again with --conv-prologue
#   p  the Python entry on CUDA tensors (device-verify.sh part 3)
#   r  bench.py ResNet-50/18: cnnc default, --conv-prologue, --remat and
#      --conv-stats=false in one run with PyTorch AMP+CL and torch.compile
#      (R_VARIANTS, R_MODELS, R_ARGS, R_S)
#   s  SimpleCNN batch 32 (S_STEPS steps, default 2000)
set -uo pipefail
PARTS=${PARTS:-gca}
source "$(dirname "$0")/device-env.sh"
if [[ $PARTS == *g* ]]; then
  TAIL=12 bash bench/device-verify.sh 1 | grep -v "^ *[0-9]*/[0-9]* Test" | tail -14
fi
if [[ $PARTS == *c* ]]; then
  timeout "${C_S:-240}" python3 test/gpu/check_vs_torch.py --cnnc "$C" --work /tmp/s13c \
    --digits "$PWD/.carry/digits" 2>&1 | filter >"$OUT/check.log"
  echo "=== check_vs_torch exit ${PIPESTATUS[0]}"
  grep -E "ok$|FAIL|PASSED|deviation" "$OUT/check.log" | tail -20
fi
if [[ $PARTS == *a* ]]; then
  timeout "${A_S:-200}" python3 test/gpu/check_vs_torch.py --cnnc "$C" --work /tmp/s13a \
    --models simplecnn --skip-digits --amp-flags=--conv-prologue 2>&1 | filter >"$OUT/check-prologue.log"
  echo "=== check_vs_torch --conv-prologue exit ${PIPESTATUS[0]}"
  grep -E "ok$|FAIL|PASSED|deviation" "$OUT/check-prologue.log" | tail -12
fi
if [[ $PARTS == *p* ]]; then
  TAIL=8 bash bench/device-verify.sh 3 | tail -10
fi
if [[ $PARTS == *r* ]]; then
  timeout "${R_S:-560}" python3 bench/bench.py --cnnc "$C" --models "${R_MODELS:-resnet50,resnet18}" \
    --variants "${R_VARIANTS:-default=;prologue=--conv-prologue;remat=--remat;no-conv-stats=--conv-stats=false}" \
    ${R_ARGS:-} 2>&1 | filter | tee "$OUT/bench.log" | tail -40
  echo "=== bench exit ${PIPESTATUS[0]}"
fi
if [[ $PARTS == *s* ]]; then
  timeout "${S_S:-150}" python3 bench/bench.py --cnnc "$C" --models simplecnn --steps "${S_STEPS:-2000}" \
    --no-compile --variants "default=" 2>&1 | filter | tee "$OUT/simplecnn.log" | tail -20
  echo "=== simplecnn exit ${PIPESTATUS[0]}"
fi
