#!/usr/bin/env bash
# Input pipeline throughput on the GPU machine: ResNet-50, batch 128, f16
# NHWC, trained from a generated ImageFolder of JPEGs (decode +
# RandomResizedCrop + flip + normalization in the runtime's worker threads)
# versus --data synthetic (one batch resident on the GPU). Target: the JPEG
# run reaches >= 90 % of the synthetic img/s for some --workers value.
#
#   bash bench/data_pipeline.sh [WORKERS_LIST] [STEPS]
#   (repo root, .carry/ from scripts/prepare-device-carry.sh; writes $OUT)
#
# The JPEGs are made here with PIL (smooth random images of 400-500 x
# 330-400 pixels, quality 90, like ImageNet's ~110 KB average), 100 classes x
# 64 images: 6400 images = 50 batches per epoch.
set -uo pipefail
WORKERS=${1:-"4 8 12 16"}
STEPS=${2:-120}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export CNNC_RUNTIME_DIR=${CNNC_RUNTIME_DIR:-$PWD/.carry/rt} PYTHONUNBUFFERED=1
CNNC=${CNNC:-$PWD/.carry/cnnc}
WORK=${WORK:-/tmp/data_bench}
PY=${PYTHON:-python3}
mkdir -p "$WORK"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
nproc

if [ ! -f "$WORK/jpeg/.done" ]; then
  "$PY" - "$WORK/jpeg" <<'PYEOF'
import os, sys
from multiprocessing import Pool
import numpy as np
from PIL import Image
root = sys.argv[1]
def make(job):
    cls, i = job
    rng = np.random.default_rng(cls * 1000 + i)
    w, h = int(rng.integers(400, 501)), int(rng.integers(330, 401))
    small = rng.integers(0, 256, size=(h // 8, w // 8, 3), dtype=np.uint8)
    img = Image.fromarray(small).resize((w, h), Image.BILINEAR)
    arr = np.asarray(img).astype(np.int16) + rng.integers(-12, 13, size=(h, w, 3))
    d = os.path.join(root, "c%03d" % cls)
    os.makedirs(d, exist_ok=True)
    Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8)).save(
        os.path.join(d, "%04d.jpg" % i), quality=90)
jobs = [(c, i) for c in range(100) for i in range(64)]
with Pool() as p:
    p.map(make, jobs, chunksize=64)
open(os.path.join(root, ".done"), "w").close()
print("generated", len(jobs), "JPEGs in", root)
PYEOF
  du -sh "$WORK/jpeg"
fi

if [ ! -x "$WORK/r50" ]; then
  PYTHONPATH=python "$PY" -m cnnc.export resnet50 "$WORK/r50.onnx" --batch 128 --training \
    >/dev/null 2>&1 || { echo "FAIL: export"; exit 1; }
  "$CNNC" "$WORK/r50.onnx" --train --optimizer sgd -o "$WORK/r50" 2>&1 | tail -2
  [ -x "$WORK/r50" ] || { echo "FAIL: cnnc"; exit 1; }
fi

run() { # run NAME ARGS...: prints "NAME img/s"
  local name=$1
  shift
  "$WORK/r50" --steps "$STEPS" --log-every 40 "$@" >"$OUT/data_$name.log" 2>&1
  local rc=$?
  local ips
  # Steady img/s: after the first logged interval (start-up, warm-up).
  ips=$(sed -n 's/^done: .*steady img\/s \([0-9]*\),.*/\1/p' "$OUT/data_$name.log")
  if [ $rc -ne 0 ] || [ -z "$ips" ]; then
    echo "FAIL: $name (exit $rc)"
    tail -5 "$OUT/data_$name.log"
    echo "$name 0"
    return
  fi
  echo "$name $ips"
}

synth=$(run synthetic --data synthetic | tail -1 | awk '{print $2}')
echo "| data | workers | img/s | vs synthetic |"
echo "|---|---|---|---|"
echo "| synthetic | - | $synth | 100 % |"
best=0
for w in $WORKERS; do
  ips=$(run "jpeg_w$w" --data "$WORK/jpeg" --workers "$w" | tail -1 | awk '{print $2}')
  pct=$(awk -v a="$ips" -v b="$synth" 'BEGIN{printf "%.1f", (b > 0) ? 100 * a / b : 0}')
  echo "| ImageFolder JPEG | $w | $ips | $pct % |"
  awk -v p="$pct" -v q="$best" 'BEGIN{exit !(p > q)}' && best=$pct
done
echo "best JPEG pipeline: $best % of synthetic (target >= 90 %)"
awk -v p="$best" 'BEGIN{exit !(p >= 90)}'
