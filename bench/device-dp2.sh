#!/usr/bin/env bash
# Data parallelism on TWO GPUs (issue 12), for nvidia-h200-x2: repo root,
# .carry/ from scripts/prepare-device-carry.sh, outputs in $OUT, each part
# under `timeout` (about 9 minutes in all). NCCL_NVLS_ENABLE=0 as the
# machine's notes require.
#   1. the runtime built there; nccl_check with 2 ranks (one process per GPU,
#      file rendezvous): f32 avg + f16 sum inside captured CUDA graphs,
#      values checked on both ranks; then 2 ranks where rank 1 is killed
#      after the rendezvous: rank 0 must exit 1 with a message, not hang.
#   2. PyTorch DDP baseline (torchrun, AMP + channels_last, batch 128 per
#      GPU): ResNet-50 img/s on 1 and 2 GPUs, ResNet-18 on 2 -- the anchor the
#      issue quotes (4,845 / 9,655 / 24,034 img/s).
#   3. cnnc on 2 GPUs (./train --gpus 2: one process per GPU):
#      a. SimpleCNN f32 on the digits, 2 x batch 16 vs 1 x batch 32, 5 steps:
#         the same losses and weights (max |dw|) within f32 tolerance;
#      b. ResNet-50 f16 (default pipeline) batch 128 per GPU, synthetic data:
#         img/s on 1 GPU and on 2 (per rank and total), vs part 2's DDP;
#      (MAXCTAS_SWEEP="0 4 16": the same run per CNNC_NCCL_MAX_CTAS value)
#      c. a rank killed mid-run (SIGKILL to rank 1): the launcher stops rank
#         0 and exits non-zero with a message naming the rank, not a hang.
set -uo pipefail
export CNNC_RUNTIME_DIR=$PWD/.carry/rt PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
W=/tmp/dp2; rm -rf "$W"; mkdir -p "$W"
# Logs go to $LOGS and come back as one file ($OUT/logs.txt): the device tool
# returns at most 8 files.
LOGS=$W/logs; mkdir -p "$LOGS"; SUMMARY=$OUT/summary.txt
trap 'tail -n +1 "$LOGS"/* >"$OUT/logs.txt" 2>/dev/null' EXIT
rc=0
pass() { echo "PASS $*" | tee -a "$SUMMARY"; }
fail() { echo "FAIL $*" | tee -a "$SUMMARY"; rc=1; }
nvidia-smi --query-gpu=index,name --format=csv,noheader | tee "$LOGS/gpu.txt"
nvidia-smi topo -m >"$LOGS/topo.txt" 2>&1
NGPU=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
[ "$NGPU" -ge 2 ] || { fail "needs 2 GPUs, found $NGPU"; exit 1; }

PARTS=${PARTS:-123} # a long call may run fewer parts: PARTS=3 bash bench/device-dp2.sh

# 1. NCCL runtime with 2 ranks
if [[ $PARTS == *1* ]]; then
timeout 300 bash -c "cmake -S runtime -B $W/rt -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES=90a >$LOGS/rt-cmake.log 2>&1 &&
  ninja -C $W/rt cnnrt_nccl_check >$LOGS/rt-build.log 2>&1" || fail "runtime build"
CHECK=$(find "$W/rt" -name cnnrt_nccl_check -type f | head -1)
if [ -n "$CHECK" ]; then
  for r in 0 1; do
    CNNC_RANK=$r CNNC_WORLD_SIZE=2 CNNC_LOCAL_RANK=$r CNNC_DIST_INIT=file://$W/id2 \
      CNNC_DIST_TIMEOUT=60 timeout 120 "$CHECK" single >"$LOGS/nccl-pair-$r.log" 2>&1 &
  done
  wait
  cat "$LOGS"/nccl-pair-*.log
  n=$(grep -l "world size 2 through NCCL.*: ok$" "$LOGS"/nccl-pair-*.log | wc -l)
  [ "$n" -eq 2 ] && pass "2 ranks all-reduce in captured graphs" || fail "2-rank nccl_check"
  # Rank 1 exits right after the communicator is up ("dead" mode) and never
  # joins the step's all-reduce; rank 0 runs the step: its watchdog
  # (dist::waitStream) or NCCL's error must end it with exit 1, not a hang.
  CNNC_RANK=1 CNNC_WORLD_SIZE=2 CNNC_LOCAL_RANK=1 CNNC_DIST_INIT=file://$W/id3 \
    timeout 60 "$CHECK" dead >"$LOGS/nccl-kill-1.log" 2>&1 &
  t0=$(date +%s)
  CNNC_RANK=0 CNNC_WORLD_SIZE=2 CNNC_LOCAL_RANK=0 CNNC_DIST_INIT=file://$W/id3 \
    CNNC_DIST_TIMEOUT=20 timeout 120 "$CHECK" single >"$LOGS/nccl-kill-0.log" 2>&1; r=$?
  wait; cat "$LOGS"/nccl-kill-*.log
  echo "rank 0 exit $r after $(( $(date +%s) - t0 )) s" | tee -a "$SUMMARY"
  [ $r -eq 1 ] && pass "rank 0 stopped with a message after rank 1 left" || fail "rank 0 (exit $r; 124 = hung)"
fi
fi

# 2. PyTorch DDP baseline
if [[ $PARTS == *2* ]]; then
cat >"$W/ddp.py" <<'PY'
import os, sys, time, torch, torchvision
import torch.distributed as dist
arch, batch, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
m = getattr(torchvision.models, arch)().cuda().to(memory_format=torch.channels_last)
m = torch.nn.parallel.DistributedDataParallel(m, device_ids=[torch.cuda.current_device()])
opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
scaler = torch.amp.GradScaler()
x = torch.randn(batch, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
y = torch.randint(0, 1000, (batch,), device="cuda")
def step():
    with torch.autocast("cuda", torch.float16):
        loss = torch.nn.functional.cross_entropy(m(x), y)
    opt.zero_grad(set_to_none=True)
    scaler.scale(loss).backward(); scaler.step(opt); scaler.update()
for _ in range(10): step()
best = 0
for _ in range(3):
    torch.cuda.synchronize(); dist.barrier(); t = time.time()
    for _ in range(steps): step()
    torch.cuda.synchronize(); dist.barrier()
    best = max(best, steps * batch * world / (time.time() - t))
if rank == 0:
    print(f"DDP {arch} world {world} batch {batch}/GPU: {best:.0f} img/s total")
dist.destroy_process_group()
PY
for spec in "resnet50 1" "resnet50 2" "resnet18 2"; do
  set -- $spec
  timeout 150 torchrun --standalone --nproc_per_node=$2 "$W/ddp.py" $1 128 30 \
    >"$LOGS/ddp-$1-$2.log" 2>&1 || fail "torchrun $1 x$2"
  grep "^DDP" "$LOGS/ddp-$1-$2.log" | tee -a "$SUMMARY"
done
fi

# 3. cnnc on 2 GPUs
C=$PWD/.carry/cnnc
if [[ $PARTS != *3* ]]; then
  :
elif timeout 90 env PYTHONPATH=python python3 -c "
from cnnc import train_check as tc
for b in (16, 32):
    tc.export_training(tc.make_model('simplecnn', seed=0), '$W/simplecnn%d.onnx' % b, (b, 3, 32, 32))
for b in (128,):
    tc.export_training(tc.make_model('resnet50', seed=0), '$W/resnet50.onnx', (b, 3, 224, 224))
" >"$LOGS/export.log" 2>&1; then
  # a. 2 x B == 1 x 2B
  # Every step of this part is compiled first, in parallel (16 cores; the
  # nvcc runs dominate the part's time when they run one after another).
  build() { local name=$1; shift; timeout 240 "$C" "$@" -o "$W/$name" >"$LOGS/build-$name.log" 2>&1 || fail "build $name"; }
  build s2 "$W/simplecnn16.onnx" --train --precision fp32 --gpus 2 &
  build s1 "$W/simplecnn32.onnx" --train --precision fp32 &
  build r2 "$W/resnet50.onnx" --train --gpus 2 &
  [ "${SCALING:-1}" = 1 ] && build r1 "$W/resnet50.onnx" --train &
  build r2s "$W/resnet50.onnx" --train --gpus 2 --sync-bn &
  wait
  D=$PWD/.carry/digits
  timeout 60 "$W/s1" --data "$D" --steps 5 --log-every 1 --seed 3 --checkpoint "$W/w1.cnnw" >"$LOGS/run-s1.log" 2>&1 || fail "run s1"
  timeout 90 "$W/s2" --data "$D" --steps 5 --log-every 1 --seed 3 --gpus 2 --checkpoint "$W/w2.cnnw" >"$LOGS/run-s2.log" 2>&1 || fail "run s2 --gpus 2"
  cat "$LOGS/run-s2.log"
  if PYTHONPATH=python python3 - "$LOGS/run-s1.log" "$LOGS/run-s2.log" "$W/w1.cnnw" "$W/w2.cnnw" <<'PY' | tee -a "$SUMMARY"
import sys, numpy as np
from cnnc.cnnw import read_cnnw
def losses(p):
    return [float(l.split()[3]) for l in open(p) if l.startswith("step ")]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
wa, wb = read_cnnw(sys.argv[3]), read_cnnw(sys.argv[4])
dw = max(float(np.abs(wa[k].astype(np.float64) - wb[k]).max()) for k in wa if not k.startswith("__"))
ok = len(a) == len(b) == 5 and all(abs(x - y) <= 1e-4 * max(1, abs(x)) for x, y in zip(a, b)) and dw <= 1e-4
print("1 x 32:", a, "\n2 x 16:", b, "\nmax |dw| %.2e" % dw, "same" if ok else "DIFFERENT")
sys.exit(0 if ok else 1)
PY
  then pass "SimpleCNN 2 GPUs x 16 == 1 GPU x 32 (losses, weights)"; else fail "2 x B vs 1 x 2B"; fi
  # b. ResNet-50 scaling
  if [ "${SCALING:-1}" = 1 ]; then
  timeout 90 "$W/r1" --data synthetic --steps 60 >"$LOGS/run-r1.log" 2>&1 || fail "run r50 1 GPU"
  timeout 120 "$W/r2" --data synthetic --steps 60 --gpus 2 >"$LOGS/run-r2.log" 2>&1 || fail "run r50 --gpus 2"
  fi
  # The all-reduce time the backward pass did not hide (timing events at
  # the joins), in a separate run so that the scaling run has no events.
  CNNC_ALLREDUCE_TIMING=1 timeout 120 "$W/r2" --data synthetic --steps 60 --log-every 5 --gpus 2 \
    >"$LOGS/run-r2-timing.log" 2>&1 || fail "run r50 --gpus 2 with CNNC_ALLREDUCE_TIMING"
  grep "^data parallel: all-reduce not hidden" "$LOGS/run-r2-timing.log" | tee -a "$SUMMARY" ||
    fail "no all-reduce timing line"
  # The communicator's CTA limit (CNNC_NCCL_MAX_CTAS, default 8; 0 = NCCL's
  # own choice): NCCL's kernels take SMs from the overlapped backward pass.
  for m in ${MAXCTAS_SWEEP:-}; do
    CNNC_NCCL_MAX_CTAS=$m timeout 90 "$W/r2" --data synthetic --steps 60 --gpus 2 \
      >"$LOGS/run-r2-ctas$m.log" 2>&1 || fail "run r50 --gpus 2 maxCTAs $m"
    grep "^done:" "$LOGS/run-r2-ctas$m.log" | sed "s/^/CNNC_NCCL_MAX_CTAS=$m: /" | tee -a "$SUMMARY"
  done
  # --sync-bn: ResNet-50's 53 BatchNorm layers over the global batch.
  timeout 120 "$W/r2s" --data synthetic --steps 60 --gpus 2 >"$LOGS/run-r2s.log" 2>&1 || fail "run r50 --gpus 2 --sync-bn"
  grep "^done:" "$LOGS/run-r2s.log" | sed 's/^/sync-bn: /' | tee -a "$SUMMARY"
  one=$(sed -n 's/^done: .*mean img\/s \([0-9]*\).*/\1/p' "$LOGS/run-r1.log")
  two=$(sed -n 's/^done: .*mean img\/s \([0-9]*\).*/\1/p' "$LOGS/run-r2.log")
  grep "^data parallel" "$LOGS/run-r2.log" | tee -a "$SUMMARY"
  echo "cnnc resnet50 f16 batch 128/GPU: 1 GPU $one img/s, 2 GPUs $two img/s" | tee -a "$SUMMARY"
  [ -n "$one" ] && [ -n "$two" ] && python3 -c "print('scaling %.3fx' % ($two / $one))" | tee -a "$SUMMARY"
  # c. a rank killed mid-run
  timeout 120 "$W/s2" --data "$D" --steps 1000000 --gpus 2 >"$LOGS/run-kill.log" 2>&1 &
  L=$!
  sleep 15
  victim=$(pgrep -f "$W/s2" | while read p; do
    tr '\0' '\n' </proc/$p/environ 2>/dev/null | grep -q '^CNNC_RANK=1$' && echo $p; done | head -1)
  t0=$(date +%s); [ -n "$victim" ] && kill -9 "$victim"
  wait $L; r=$?
  tail -3 "$LOGS/run-kill.log"
  if [ -n "$victim" ] && [ $r -ne 0 ] && [ $r -ne 124 ] && grep -q "rank 1 of 2 was killed by signal 9" "$LOGS/run-kill.log"; then
    pass "rank 1 killed: the launcher stopped rank 0 and exited $r after $(( $(date +%s) - t0 )) s"
  else
    fail "killed rank (victim '$victim', exit $r; 124 = hung)"
  fi
else
  fail "export (see export.log)"
fi
echo "---- summary"; cat "$SUMMARY"
exit $rc
