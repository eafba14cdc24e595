#!/usr/bin/env bash
# GPU smoke test of the runtime with the hand-written tiny model.
# usage: run_tiny_model.sh TINY_MODEL TINY_FIXTURE WORKDIR
# Exit 3 (ctest SKIP_RETURN_CODE) when there is no GPU.
set -u
model=$1
fx=$2
dir=$3
rm -rf "$dir"
mkdir -p "$dir/cifar" "$dir/bad"
export CNNRT_ALGO_CACHE="$dir/algos.txt"
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
losses() { grep '^step ' "$1" | awk '{print $2, $4}'; }

"$fx" weights "$dir/w.cnnw" || exit 1
"$fx" cifar "$dir/cifar" 100 || exit 1

# 1. 50 steps on synthetic data, CUDA graph on.
"$model" --data synthetic --steps 50 --log-every 1 --weights "$dir/w.cnnw" \
  >"$dir/graph.out" 2>"$dir/graph.err"
rc=$?
if [ $rc -eq 3 ]; then
  cat "$dir/graph.err"
  echo "SKIPPED: no GPU"
  exit 3
fi
cat "$dir/graph.out" "$dir/graph.err"
[ $rc -eq 0 ] || { echo "FAIL: tiny model exited $rc"; exit 1; }
first=$(losses "$dir/graph.out" | awk 'NR==1{print $2}')
last=$(losses "$dir/graph.out" | awk 'END{print $2}')
echo "first loss $first, last loss $last"
awk -v a="$first" -v b="$last" 'BEGIN{exit !(b < 0.9 * a)}' ||
  fail "loss did not decrease by 10% ($first -> $last)"
grep -Eq '^done: 50 steps, final loss [0-9.e+-]+, steady img/s [0-9]+, start-up [0-9]+\.[0-9] s, mean img/s [0-9]+ \(whole run\), peak GPU memory [0-9]+ MiB$' \
  "$dir/graph.out" || fail "bad summary line"
grep -Eq '^step 7 loss [0-9.e+-]+ epoch [0-9.]+ lr [0-9.e+-]+ img/s [0-9]+ eta [0-9]+:[0-9]{2}:[0-9]{2}$' "$dir/graph.out" ||
  fail "bad progress line"

# 2. Same numbers as the CPU reference (f32; tolerance for summation order).
"$fx" ref "$dir/w.cnnw" 50 0.1 0 >"$dir/ref.out"
paste <(losses "$dir/graph.out") <(losses "$dir/ref.out") | awk '
  { d = $2 - $4; if (d < 0) d = -d; tol = ($1 <= 3 ? 1e-4 : 2e-3) * ($4 < 0 ? -$4 : $4) + 1e-6;
    if (d > tol) { printf "step %s gpu %s cpu %s\n", $1, $2, $4; bad = 1 } }
  END { exit bad }' || fail "GPU losses differ from the CPU reference"

# 3. Eager (no graph) gives the same losses.
"$model" --data synthetic --steps 50 --log-every 1 --weights "$dir/w.cnnw" \
  --no-graph >"$dir/eager.out" 2>&1 || fail "--no-graph run failed"
diff <(losses "$dir/graph.out") <(losses "$dir/eager.out") >/dev/null ||
  fail "--no-graph losses differ from the graph run"

# 3b. CNNRT_PROFILE=1 reports one step's launches by op kind, and profiling
# does not change the numbers.
CNNRT_PROFILE=1 "$model" --data synthetic --steps 50 --log-every 1 \
  --weights "$dir/w.cnnw" >"$dir/prof.out" 2>"$dir/prof.err" || fail "profiled run failed"
cat "$dir/prof.err"
grep -Eq '^cnnrt: profile of training step 2: [0-9]+ launches and library calls, [0-9.]+ ms' \
  "$dir/prof.err" || fail "no profile report"
grep -q 'cuDNN conv fwd' "$dir/prof.err" || fail "profile lacks the convolution"
diff <(losses "$dir/graph.out") <(losses "$dir/prof.out") >/dev/null ||
  fail "profiled losses differ from the graph run"

# 4. CIFAR-format data: exact resume (end-of-run and mid-run checkpoints).
"$model" --data "$dir/cifar" --steps 40 --log-every 1 --weights "$dir/w.cnnw" \
  --seed 7 --checkpoint "$dir/ck_{step}.cnnw" --checkpoint-every 13 \
  >"$dir/full.out" 2>&1 || fail "cifar run failed"
[ -f "$dir/ck_13.cnnw" ] && [ -f "$dir/ck_39.cnnw" ] && [ -f "$dir/ck_40.cnnw" ] ||
  fail "periodic checkpoints missing"
ls "$dir"/*.tmp.* >/dev/null 2>&1 && fail "temporary checkpoint files left"
"$model" --data "$dir/cifar" --steps 20 --log-every 1 --weights "$dir/w.cnnw" \
  --seed 7 --checkpoint "$dir/ck_a.cnnw" >"$dir/parta.out" 2>&1 ||
  fail "first half failed"
"$model" --data "$dir/cifar" --steps 40 --log-every 1 --resume "$dir/ck_a.cnnw" \
  >"$dir/partb.out" 2>&1 || fail "resume from end-of-run checkpoint failed"
diff <(losses "$dir/full.out" | awk '$1 > 20') <(losses "$dir/partb.out") ||
  fail "resumed (step 20) losses differ from the uninterrupted run"
"$model" --data "$dir/cifar" --steps 40 --log-every 1 --resume "$dir/ck_13.cnnw" \
  >"$dir/partc.out" 2>&1 || fail "resume from mid-run checkpoint failed"
diff <(losses "$dir/full.out" | awk '$1 > 13') <(losses "$dir/partc.out") ||
  fail "resumed (step 13) losses differ from the uninterrupted run"

# 5. --eval on the test split.
"$model" --data "$dir/cifar" --steps 0 --eval --resume "$dir/ck_40.cnnw" \
  >"$dir/eval.out" 2>&1 || fail "--eval failed"
cat "$dir/eval.out"
grep -Eq '^eval step 40 epoch [0-9.]+: top-1 [0-9.]+% \([0-9]+/100\) top-5 [0-9.]+% \([0-9]+/100\)$' "$dir/eval.out" ||
  fail "bad eval line"

# 6. Errors: truncated data file, unknown flag.
head -c 5000 "$dir/cifar/data_batch_1.bin" >"$dir/bad/data_batch_1.bin"
"$model" --data "$dir/bad" --steps 1 --weights "$dir/w.cnnw" >"$dir/bad.out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q 'short/truncated file' "$dir/bad.out" ||
  fail "truncated data: rc $rc, $(cat "$dir/bad.out")"
"$model" --data synthetic --bogus >/dev/null 2>&1
[ $? -eq 1 ] || fail "unknown flag did not exit 1"

# 6b. An ImageFolder of JPEGs/PNGs (decoded by the workers, RandomResizedCrop,
# ImageNet normalization in the input conversion) with validation every 5
# steps and --log-json; a corrupt JPEG in it is one error naming the file.
if python3 -c 'import PIL, numpy' 2>/dev/null; then
  python3 - "$dir/folder" <<'PYEOF'
import os, sys
import numpy as np
from PIL import Image
rng = np.random.default_rng(0)
for split, n in (("train", 12), ("val", 4)):
    for k in range(10):
        d = os.path.join(sys.argv[1], split, "class%d" % k)
        os.makedirs(d, exist_ok=True)
        for i in range(n):
            img = rng.integers(0, 80, size=(48, 40, 3), dtype=np.uint8)
            img[..., k % 3] += 150
            Image.fromarray(img).save(os.path.join(d, "%d.%s" % (i, "png" if i % 2 else "jpg")))
PYEOF
  "$model" --data "$dir/folder" --epochs 2 --eval-every 5 --workers 4 --log-every 1 \
    --weights "$dir/w.cnnw" --log-json "$dir/folder.jsonl" >"$dir/folder.out" 2>&1 ||
    fail "ImageFolder run failed: $(tail -3 "$dir/folder.out")"
  cat "$dir/folder.out"
  grep -q '^data: ImageFolder .*: 10 classes, 120 images, RandomResizedCrop+flip; 4 workers; normalization mean 0.485,0.456,0.406' \
    "$dir/folder.out" || fail "ImageFolder: no data line"
  [ "$(grep -c '^eval step' "$dir/folder.out")" -eq 2 ] || fail "ImageFolder: expected 2 eval lines (steps 5, 8)"
  grep -Eq '^eval step 8 epoch 2.13: top-1 [0-9.]+% \([0-9]+/40\) top-5 [0-9.]+% \([0-9]+/40\)$' \
    "$dir/folder.out" || fail "ImageFolder: bad final eval line"
  [ "$(grep -c '"type": "train"' "$dir/folder.jsonl")" -eq 8 ] || fail "ImageFolder: --log-json lines"
  head -c 300 "$dir/folder/train/class3/0.jpg" >"$dir/cut.jpg" && mv "$dir/cut.jpg" "$dir/folder/train/class3/0.jpg"
  "$model" --data "$dir/folder" --epochs 1 --weights "$dir/w.cnnw" >"$dir/corrupt.out" 2>&1
  rc=$?
  [ $rc -eq 1 ] && grep -q "^cnnrt: corrupt JPEG $dir/folder/train/class3/0.jpg: " "$dir/corrupt.out" ||
    fail "corrupt JPEG: rc $rc, $(cat "$dir/corrupt.out")"
else
  echo "note: python3 with PIL/numpy not found; ImageFolder GPU check skipped"
fi

# 7. Algorithm cache written and reused.
grep -q '|conv|f32|nchw|' "$dir/algos.txt" || fail "algorithm cache not written"

if [ $failures -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "tiny model: all checks passed"
