#!/usr/bin/env bash
# GPU robustness checks (ctest label gpu; exit 77 = skipped without a GPU):
#  1. out of GPU memory: SimpleCNN compiled with --batch 1000000 must exit 2
#     and print the plan's largest buffers (no crash, no CUDA error text);
#  2. corrupt checkpoints given to --resume are rejected (exit 1) before any
#     training step: truncated, wrong shape, negative step, data cursor past
#     the data;
#  3. checkpoints to /dev/null keep the device node; through a symlink they
#     write the target; a normal checkpoint resumes.
# Usage: test/gpu/robustness_gpu.sh [BUILD_DIR]   (default: build)
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
B=$(realpath "${1:-build}")
CNNC="$B/bin/cnnc"
PY=${PYTHON:-/usr/bin/python3}
if ! { [ -e /dev/nvidia0 ] || [ -e /dev/nvidiactl ]; } || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "robustness_gpu: no GPU: skipped"
  exit 77
fi
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fails=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
export PYTHONPATH="$ROOT/python"

$PY -m cnnc.export simplecnn "$W/simple.onnx" >/dev/null || { echo "export failed"; exit 1; }

# 1. Out of memory.
if "$CNNC" "$W/simple.onnx" --batch 1000000 -o "$W/huge" 2>"$W/huge.build"; then
  "$W/huge" --data synthetic --steps 1 >"$W/oom.out" 2>"$W/oom.err"
  rc=$?
  if [ $rc -eq 2 ] && grep -q "out of GPU memory" "$W/oom.err" &&
    grep -q "largest buffers" "$W/oom.err"; then
    pass "OOM: exit 2 with the plan's largest buffers"
  else
    fail "OOM: exit $rc"; cat "$W/oom.err"
  fi
else
  # Compile-time rejection is acceptable if it is one clear error.
  if grep -q "error:" "$W/huge.build" && ! grep -q "Stack dump" "$W/huge.build"; then
    pass "OOM: cnnc rejected --batch 1000000 at compile time: $(grep error: "$W/huge.build" | head -1)"
  else
    fail "OOM: cnnc failed without a clear error"; cat "$W/huge.build"
  fi
fi

# 3 first: a real checkpoint to work from.
"$CNNC" "$W/simple.onnx" --batch 32 -o "$W/train" 2>/dev/null || { fail "build"; exit 1; }
if "$W/train" --data synthetic --steps 3 --checkpoint "$W/ck.cnnw" >/dev/null 2>&1 &&
  [ -f "$W/ck.cnnw" ]; then
  pass "checkpoint written"
else
  fail "checkpoint"
fi
"$W/train" --data synthetic --steps 2 --checkpoint /dev/null >/dev/null 2>&1
if [ -c /dev/null ]; then pass "/dev/null is still a character device"; else fail "/dev/null replaced"; fi
ln -s real.cnnw "$W/link.cnnw"
"$W/train" --data synthetic --steps 2 --checkpoint "$W/link.cnnw" >/dev/null 2>&1
if [ -L "$W/link.cnnw" ] && [ -s "$W/real.cnnw" ]; then pass "checkpoint through a symlink"; else fail "symlink checkpoint"; fi
if "$W/train" --data synthetic --steps 5 --resume "$W/ck.cnnw" >"$W/resume.out" 2>&1; then
  pass "resume from a good checkpoint"
else
  fail "resume"; cat "$W/resume.out"
fi

# 2. Corrupt checkpoints.
$PY - "$W" <<'PYEOF'
import sys
import numpy as np
from cnnc.cnnw import read_cnnw, write_cnnw
w = sys.argv[1]
b = open(w + "/ck.cnnw", "rb").read()
open(w + "/cut.cnnw", "wb").write(b[: len(b) // 2])
t = read_cnnw(w + "/ck.cnnw")
k = next(n for n in t if not n.startswith("__"))
bad = dict(t); bad[k] = np.zeros((1, 2, 3), np.float32); write_cnnw(w + "/shape.cnnw", bad)
bad = dict(t); bad["__step__"] = np.array([-4], np.int64); write_cnnw(w + "/neg.cnnw", bad)
bad = dict(t); bad["__loader__"] = np.array([0, 0, 10 ** 12], np.int64); write_cnnw(w + "/cursor.cnnw", bad)
bad = dict(t); bad[k] = bad[k].astype(np.int32); write_cnnw(w + "/dtype.cnnw", bad)
PYEOF
for c in cut shape neg cursor dtype; do
  "$W/train" --data synthetic --steps 10 --resume "$W/$c.cnnw" >"$W/$c.out" 2>&1
  rc=$?
  if [ $rc -eq 1 ] && grep -q "cannot resume" "$W/$c.out" && ! grep -qi "^step\|loss" "$W/$c.out"; then
    pass "corrupt checkpoint '$c' rejected before training: $(grep 'cannot resume' "$W/$c.out")"
  else
    fail "corrupt checkpoint '$c': exit $rc"; cat "$W/$c.out"
  fi
done

echo "robustness_gpu: $fails failure(s)"
[ $fails -eq 0 ]
