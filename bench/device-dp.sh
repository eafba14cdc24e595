#!/usr/bin/env bash
# Data parallelism on ONE GPU (issue 12): what a single GPU can check. Run on
# the GPU machine (nvidia-h100-x1 / nvidia-h200) from the repo root, with
# .carry/ made by scripts/prepare-device-carry.sh (it carries cnnc, libcnnrt.a
# and libcnnrt_nccl.a); outputs in $OUT. Each part has its own time limit;
# the whole script stays under 8 minutes.
#   1. the runtime built there (cmake -S runtime) with the system NCCL
#      (/usr/include/nccl.h, /usr/lib/x86_64-linux-gnu/libnccl.so.2)
#   2. nccl_check single: world size 1 through real NCCL, two buckets (f32
#      avg, f16 sum) inside a captured CUDA graph, comm stream + events
#   3. nccl_check dead: world size 2 via --dist-init file, rank 1 never comes:
#      rank 0 must exit 1 with a message after CNNC_DIST_TIMEOUT, not hang
#   4. nccl_check devices: a rank whose local rank has no GPU: clear error
#   5. cnnc end to end: SimpleCNN compiled with --gpus 1 (all-reduces through
#      NCCL in the captured step) gives the losses of the plain step (5 steps,
#      synthetic data, f16 default pipeline); ./train --gpus 2 on this 1-GPU
#      machine and `cnnc train --gpus 2` give clear errors.
set -uo pipefail
export CNNC_RUNTIME_DIR=$PWD/.carry/rt PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
W=/tmp/dp; rm -rf "$W"; mkdir -p "$W"
rc=0
pass() { echo "PASS $*" | tee -a "$OUT/summary.txt"; }
fail() { echo "FAIL $*" | tee -a "$OUT/summary.txt"; rc=1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
ls -l /usr/include/nccl.h /usr/lib/x86_64-linux-gnu/libnccl.so* 2>&1 | tee "$OUT/nccl-files.txt"

# 1. runtime + nccl_check
if timeout 300 bash -c "cmake -S runtime -B $W/rt -G Ninja -DCMAKE_BUILD_TYPE=Release \
     -DCMAKE_CUDA_ARCHITECTURES=90a >$OUT/rt-cmake.log 2>&1 &&
   ninja -C $W/rt cnnrt_nccl_check >$OUT/rt-build.log 2>&1"; then
  pass "runtime + nccl_check built ($(grep -o 'cnnrt: NCCL .*' $OUT/rt-cmake.log))"
else
  fail "runtime build (see rt-cmake.log, rt-build.log)"; tail -20 "$OUT/rt-build.log"
fi
CHECK=$W/rt/test/cnnrt_nccl_check
[ -x "$CHECK" ] || CHECK=$(find "$W/rt" -name cnnrt_nccl_check -type f | head -1)

# 2. world size 1 inside a captured graph
if [ -n "$CHECK" ]; then
  timeout 60 "$CHECK" single >"$OUT/nccl-single.log" 2>&1; r=$?
  cat "$OUT/nccl-single.log"
  [ $r -eq 0 ] && grep -q ": ok$" "$OUT/nccl-single.log" && pass "nccl_check single" || fail "nccl_check single (exit $r)"

  # 3. a dead rank: world size 2, rank 1 never starts
  t0=$(date +%s)
  CNNC_RANK=0 CNNC_WORLD_SIZE=2 CNNC_DIST_INIT=file://$W/dead-id CNNC_DIST_TIMEOUT=10 \
    timeout 90 "$CHECK" dead >"$OUT/nccl-dead.log" 2>&1; r=$?
  t1=$(date +%s); cat "$OUT/nccl-dead.log"
  if [ $r -eq 1 ] && grep -q "did not complete in 10 s" "$OUT/nccl-dead.log"; then
    pass "dead rank detected: exit 1 after $((t1 - t0)) s"
  else
    fail "dead rank (exit $r after $((t1 - t0)) s; 124 = hung until timeout)"
  fi

  # 4. a rank without its GPU
  CNNC_RANK=1 CNNC_WORLD_SIZE=2 CNNC_LOCAL_RANK=1 CNNC_DIST_INIT=file://$W/dev-id \
    timeout 60 "$CHECK" devices >"$OUT/nccl-devices.log" 2>&1; r=$?
  cat "$OUT/nccl-devices.log"
  [ $r -eq 1 ] && grep -q "needs GPU 1" "$OUT/nccl-devices.log" && pass "missing GPU reported" || fail "missing GPU (exit $r)"
fi

# 5. cnnc end to end
C=$PWD/.carry/cnnc
if timeout 60 env PYTHONPATH=python python3 -c "
from cnnc import train_check as tc
tc.export_training(tc.make_model('simplecnn', seed=0), '$W/simplecnn.onnx', (32, 3, 32, 32))
" >"$OUT/export.log" 2>&1; then
  timeout 150 "$C" "$W/simplecnn.onnx" --train -o "$W/plain" >"$OUT/build-plain.log" 2>&1 || fail "build plain"
  timeout 150 "$C" "$W/simplecnn.onnx" --train --gpus 1 -o "$W/dp1" >"$OUT/build-dp1.log" 2>&1 || fail "build --gpus 1"
  grep -c "cnnrt::dist::allReduce" "$W/dp1.cu" | sed 's/^/all-reduce calls in dp1.cu: /' | tee -a "$OUT/summary.txt"
  for e in plain dp1; do
    timeout 60 "$W/$e" --data synthetic --steps 5 --log-every 1 --seed 0 >"$OUT/run-$e.log" 2>&1 || fail "run $e"
  done
  grep "^step " "$OUT/run-plain.log" | awk '{print $2, $4}' >"$W/l-plain"
  grep "^step " "$OUT/run-dp1.log" | awk '{print $2, $4}' >"$W/l-dp1"
  paste "$W/l-plain" "$W/l-dp1" | tee "$OUT/losses.txt"
  if [ -s "$W/l-plain" ] && python3 - "$W/l-plain" "$W/l-dp1" <<'PY'
import sys
a = [float(l.split()[1]) for l in open(sys.argv[1])]
b = [float(l.split()[1]) for l in open(sys.argv[2])]
ok = len(a) == len(b) == 5 and all(abs(x - y) <= 1e-3 * max(1, abs(x)) for x, y in zip(a, b))
print("plain", a, "\n--gpus 1", b, "\n", "same" if ok else "DIFFERENT")
sys.exit(0 if ok else 1)
PY
  then pass "--gpus 1 (NCCL in the captured step) matches the plain step over 5 steps"
  else fail "--gpus 1 losses differ from the plain step"; fi
  timeout 60 "$W/dp1" --data synthetic --steps 1 --gpus 2 >"$OUT/run-gpus2.log" 2>&1; r=$?
  cat "$OUT/run-gpus2.log"
  [ $r -eq 1 ] && grep -q "only 1 GPU(s) are visible" "$OUT/run-gpus2.log" && pass "./train --gpus 2 on 1 GPU: clear error" || fail "./train --gpus 2 (exit $r)"
  timeout 120 "$C" train "$W/simplecnn.onnx" --data synthetic --steps 2 --gpus 2 -o "$W/t2" >"$OUT/cnnc-train-gpus2.log" 2>&1; r=$?
  cat "$OUT/cnnc-train-gpus2.log"
  [ $r -ne 0 ] && grep -q "only 1 GPU(s) are visible" "$OUT/cnnc-train-gpus2.log" && pass "cnnc train --gpus 2: clear error" || fail "cnnc train --gpus 2 (exit $r)"
else
  fail "export SimpleCNN (see export.log)"
fi
echo "---- summary"; cat "$OUT/summary.txt"
exit $rc
