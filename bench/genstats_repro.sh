#!/usr/bin/env bash
# Issue 37 on the GPU machine (device-verify.sh part g): does the
# reproducibility probe win back the conv+GenStats graphs without losing
# determinism? ResNet-50, batch 128, 224², 1000 classes, the default f16
# step (`cnnc r50.onnx --train --batch 128`), synthetic data:
#  1. tune: one process with a fresh algorithm cache and CNNRT_VERBOSE=1
#     prints, per conv+stats entry, each candidate plan's verdict ("plan #i
#     ... reproduces bitwise over 5 runs" / "does not reproduce: <why>") and
#     the choice; summarized here (every line in $OUT/genstats-tune.log);
#  2. det-1, det-2: two processes over that cache, STEPS steps each
#     (CNNRT_DETERMINISTIC=1, the default): their losses (every 10th step)
#     must be identical (the resume contract) -- FAIL otherwise;
#  3. fast: CNNRT_DETERMINISTIC=0 with its own cache (tuned first), the
#     timing of session 25's fast mode on the same card;
#  4. test/gpu/check_determinism.py (part r), the small net's acceptance.
# Pass: "genstats-repro: ok" (exit 0). The img/s of det-1/det-2 against
# fast is the number to report (session 25: 5,502 vs 6,144 on an H100).
#   CNNC=.carry/cnnc PYTHONPATH=python bash bench/genstats_repro.sh
set -uo pipefail
CNNC=${CNNC:-$PWD/.carry/cnnc}
OUT=${OUT:-/tmp/out}
W=${GENSTATS_WORK:-/tmp/genstats}
STEPS=${GENSTATS_STEPS:-80}
mkdir -p "$W" "$OUT"
rm -f "$W"/det.txt "$W"/fast.txt
fail=0
python3 - "$W/r50.onnx" <<'EOF' || exit 1
import sys
from cnnc.export import build_model, export_onnx
export_onnx(build_model("resnet50", 1000, seed=0), sys.argv[1], (128, 3, 224, 224),
            training=True, opset=17)
EOF
t0=$SECONDS
"$CNNC" "$W/r50.onnx" --train --batch 128 -o "$W/train" >"$W/cnnc.log" 2>&1 ||
  { tail -20 "$W/cnnc.log"; exit 1; }
echo "compiled in $((SECONDS - t0)) s"

run() { # tag cache-file steps env...
  local tag=$1 cache=$2 steps=$3
  shift 3
  env CNNRT_ALGO_CACHE="$cache" "$@" "$W/train" --data synthetic --steps "$steps" \
    --log-every 10 >"$OUT/genstats-$tag.log" 2>&1
  local r=$?
  [ $r -eq 0 ] || { echo "FAIL  the $tag run exited $r"; tail -5 "$OUT/genstats-$tag.log"; fail=1; }
  grep "^done:" "$OUT/genstats-$tag.log" | sed "s/^/$tag: /"
}

t0=$SECONDS
run tune "$W/det.txt" 3 CNNRT_VERBOSE=1
echo "tune (probe every candidate plan) took $((SECONDS - t0)) s"
T="$OUT/genstats-tune.log"
echo "conv+genstats entries: $(grep -c 'conv+genstats[^:]*: split .* -> ' "$T")," \
  "graph $(grep -c 'conv+genstats[^:]*: split .* -> graph' "$T")," \
  "split $(grep -c 'conv+genstats[^:]*: split .* -> split' "$T")"
echo "candidate plans: $(grep -c 'reproduces bitwise' "$T") reproduce," \
  "$(grep -c ' ms does not reproduce: ' "$T") do not"
echo "--- plans that do not reproduce (first 15):"
grep ' ms does not reproduce: ' "$T" | sed 's/^cnnrt: //' | head -15
echo "--- the choices (first 12):"
grep 'conv+genstats[^:]*: split .* -> ' "$T" | sed 's/^cnnrt: //' | head -12

run det-1 "$W/det.txt" "$STEPS"
run det-2 "$W/det.txt" "$STEPS"
losses() { grep -o '^step [0-9]* loss [^ ]*' "$OUT/genstats-$1.log"; }
if [ -n "$(losses det-1)" ] && [ "$(losses det-1)" == "$(losses det-2)" ]; then
  echo "det-1 and det-2: their $(losses det-1 | wc -l) logged losses are identical"
else
  echo "FAIL  det-1 and det-2 differ:"
  diff <(losses det-1) <(losses det-2) | head -6
  fail=1
fi

run fast-tune "$W/fast.txt" 3 CNNRT_DETERMINISTIC=0
run fast "$W/fast.txt" "$STEPS" CNNRT_DETERMINISTIC=0

echo "--- check_determinism.py (part r)"
python3 test/gpu/check_determinism.py | tail -12
[ "${PIPESTATUS[0]}" -eq 0 ] || fail=1
echo "genstats-repro: $([ $fail -eq 0 ] && echo ok || echo FAILED)"
exit $fail
