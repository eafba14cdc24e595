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
#   3. cnnc on 2 GPUs: SimpleCNN 2 x B vs 1 x 2B for 5 steps and ResNet-50 f16
#      batch 128/GPU scaling. NOT POSSIBLE YET: the generated executable's
#      training driver does not shard the data or fork/join ranks (see
#      docs/data-parallel.md, "What is not done"); the part records the
#      clear error instead, and the CPU reference interpreter's 2-rank check
#      (test/e2e/test_data_parallel.py) runs for comparison.
set -uo pipefail
export CNNC_RUNTIME_DIR=$PWD/.carry/rt PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
W=/tmp/dp2; rm -rf "$W"; mkdir -p "$W"
rc=0
pass() { echo "PASS $*" | tee -a "$OUT/summary.txt"; }
fail() { echo "FAIL $*" | tee -a "$OUT/summary.txt"; rc=1; }
nvidia-smi --query-gpu=index,name --format=csv,noheader | tee "$OUT/gpu.txt"
nvidia-smi topo -m >"$OUT/topo.txt" 2>&1
NGPU=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
[ "$NGPU" -ge 2 ] || { fail "needs 2 GPUs, found $NGPU"; exit 1; }

# 1. NCCL runtime with 2 ranks
timeout 300 bash -c "cmake -S runtime -B $W/rt -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES=90a >$OUT/rt-cmake.log 2>&1 &&
  ninja -C $W/rt cnnrt_nccl_check >$OUT/rt-build.log 2>&1" || fail "runtime build"
CHECK=$(find "$W/rt" -name cnnrt_nccl_check -type f | head -1)
if [ -n "$CHECK" ]; then
  for r in 0 1; do
    CNNC_RANK=$r CNNC_WORLD_SIZE=2 CNNC_LOCAL_RANK=$r CNNC_DIST_INIT=file://$W/id2 \
      CNNC_DIST_TIMEOUT=60 timeout 120 "$CHECK" single >"$OUT/nccl-pair-$r.log" 2>&1 &
  done
  wait
  cat "$OUT"/nccl-pair-*.log
  n=$(grep -l "world size 2 through NCCL.*: ok$" "$OUT"/nccl-pair-*.log | wc -l)
  [ "$n" -eq 2 ] && pass "2 ranks all-reduce in captured graphs" || fail "2-rank nccl_check"
  # Rank 1 exits right after the communicator is up ("dead" mode) and never
  # joins the step's all-reduce; rank 0 runs the step: its watchdog
  # (dist::waitStream) or NCCL's error must end it with exit 1, not a hang.
  CNNC_RANK=1 CNNC_WORLD_SIZE=2 CNNC_LOCAL_RANK=1 CNNC_DIST_INIT=file://$W/id3 \
    timeout 60 "$CHECK" dead >"$OUT/nccl-kill-1.log" 2>&1 &
  t0=$(date +%s)
  CNNC_RANK=0 CNNC_WORLD_SIZE=2 CNNC_LOCAL_RANK=0 CNNC_DIST_INIT=file://$W/id3 \
    CNNC_DIST_TIMEOUT=20 timeout 120 "$CHECK" single >"$OUT/nccl-kill-0.log" 2>&1; r=$?
  wait; cat "$OUT"/nccl-kill-*.log
  echo "rank 0 exit $r after $(( $(date +%s) - t0 )) s" | tee -a "$OUT/summary.txt"
  [ $r -eq 1 ] && pass "rank 0 stopped with a message after rank 1 left" || fail "rank 0 (exit $r; 124 = hung)"
fi

# 2. PyTorch DDP baseline
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
    >"$OUT/ddp-$1-$2.log" 2>&1 || fail "torchrun $1 x$2"
  grep "^DDP" "$OUT/ddp-$1-$2.log" | tee -a "$OUT/summary.txt"
done

# 3. cnnc on 2 GPUs: recorded as not possible yet (clear error expected)
if timeout 60 env PYTHONPATH=python python3 -c "
from cnnc import train_check as tc
tc.export_training(tc.make_model('simplecnn', seed=0), '$W/simplecnn.onnx', (32, 3, 32, 32))
" >"$OUT/export.log" 2>&1; then
  timeout 120 .carry/cnnc train "$W/simplecnn.onnx" --data synthetic --steps 5 --gpus 2 \
    -o "$W/t2" >"$OUT/cnnc-gpus2.log" 2>&1
  echo "cnnc train --gpus 2: exit $? -- $(tail -1 "$OUT/cnnc-gpus2.log")" | tee -a "$OUT/summary.txt"
fi
echo "---- summary"; cat "$OUT/summary.txt"
exit $rc
