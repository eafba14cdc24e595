#!/usr/bin/env bash
# Data parallelism on 2 or 4 GPUs (issues 12 and 36): one device call per
# part group, for nvidia-h200-x4 / nvidia-h100-x4 (or the -x2 kinds: the
# GPU count is detected, parts that need 4 GPUs shrink or are skipped and
# say so). Run from the repo root with .carry/ made by
# scripts/prepare-device-carry.sh (the static cnnc, the runtime with
# libcnnrt_nccl.a, the digits) and PyTorch 2.11 + torchvision on the machine.
#
#   PARTS=ENF bash bench/device-dp.sh     (estimated 7-8 minutes, not yet run)
#   PARTS=S1  bash bench/device-dp.sh     (estimated 5 minutes; then PARTS=S2:
#                                          PARTS=S runs both, which may not
#                                          fit one call)
#   PARTS=R   bash bench/device-dp.sh     (the runtime's own NCCL checks)
#
# Parts (letters in PARTS, any order; E's checks may be narrowed with
# E_SUB=abcde):
#  E  exactness, f32, per-rank batch B=16 (32x32 images from fixed seeds,
#     bench/dp/prepare.py; the same initial ResNet-18 and the same global
#     batches everywhere, the executable's loader order replayed in Python):
#     a. the executable: ResNet-18 `cnnc --train --precision fp32 --gpus 2
#        --sync-bn`, `./train --gpus 2`, 10 steps, against the step compiled
#        for batch 2B on one GPU: per-step losses and the final weights
#        (checkpoints);
#     b. the bound: PyTorch DDP + nn.SyncBatchNorm (torchrun, 2 x B) against
#        PyTorch one process (2B), SGD momentum, TF32 off
#        (bench/dp/torch_ref.py); a passes when its loss and weight
#        differences are <= max(E_FACTOR x b's, 1e-6) (E_FACTOR default 3:
#        training 16 images a rank is chaotic, rounding grows to 1e-2..1e-1
#        in 10 steps on both sides, see bench/dp/compare.py) and its first
#        step's loss (no update yet: the global batch's statistics) agrees
#        to 1e-5;
#     c. cnnc.compile under torchrun (2 ranks, nn.SyncBatchNorm, f32 NCHW,
#        bench/dp/compile_torchrun.py): both ranks' losses identical, and
#        against PyTorch one process within the bound of b;
#     d. a net without BatchNorm through the executable: 2 x B against
#        1 x 2B within 1e-5 relative (losses and weights);
#     e. the same net compiled with --gpus 1, run with --gpus 1 (world size
#        1: the all-reduces through NCCL inside the captured step) against
#        the plain step: within 1e-6.
#  N  two nodes on one host through NCCL's socket transport
#     (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo): the
#     executable's launcher twice, `--nnodes 2 --node-rank r --dist-init
#     tcp://127.0.0.1:PORT`, half the GPUs each, against one node with all
#     GPUs: the same losses (10 steps f32, 1e-6 relative) for the BN-free
#     net and ResNet-18 --sync-bn, and img/s of ResNet-50 f16 b128/GPU (60
#     steps) both ways; then torchrun --nnodes 2 (c10d rendezvous, one
#     process per node) with cnnc.compile: the losses of E c (N_TORCHRUN=0
#     skips it).
#  F  failures: a rank SIGKILLed mid-run (the launcher exits non-zero
#     naming the rank within seconds); node 1 never started (--nnodes 2
#     --node-rank 0 alone, CNNC_DIST_TIMEOUT=20: non-zero exit with an error
#     within 40 s); `./train --gpus 2` and `cnnc train --gpus 2` with one
#     visible GPU refused clearly.
#  S  scaling, f16, batch 128 per GPU, synthetic data, 200 steps:
#     S1: ResNet-50 on 1, 2, 4 GPUs and --sync-bn on 2, 4; then, apart
#         from the measured runs, CNNC_ALLREDUCE_TIMING=1 on all GPUs (the
#         all-reduce time the backward pass did not hide) and, with
#         MAXCTAS_SWEEP="0 4 16", one run per CNNC_NCCL_MAX_CTAS value;
#     S2: ResNet-18 and EfficientNet-B0 on 1 and 4 (the GPU count on -x2);
#     PyTorch DDP (AMP + channels_last, bench/dp/ddp_bench.py, 200 steps
#     timed after 20) on the same GPU counts, and DDP under torch.compile
#     on the GPU counts in DDP_COMPILE_GPUS (default: all GPUs; "" skips),
#     run while cnnc compiles (DDP_CONCURRENT=0: after the cnnc runs). The table (steady and
#     whole-run img/s from the `done:`/`data parallel:` lines, scaling,
#     efficiency, DDP, sync-bn overhead) is bench/dp/scaling.py's.
#  T  the first steps of ResNet-50 f16 on all GPUs, plain and --sync-bn,
#     30 steps logged every step, NCCL_GRAPH_REGISTER=1 and 0: where the
#     whole-run figure loses to the steady state.
#  R  the runtime's NCCL checks (built there with cmake, ~2 min):
#     nccl_check with 2 ranks in captured graphs, a rank that leaves after
#     the rendezvous, a rank that never comes (CNNC_DIST_TIMEOUT=10), a rank
#     without its GPU.
#
# Every step runs under `timeout`, bounded by a deadline (DEADLINE, default
# 570 s after the start) so that the call returns its files. What comes
# back in $OUT: summary.txt (PASS/FAIL lines, figures, the time of each
# part), logs.txt (the tail of every log), diffs.json (part E/N
# comparisons), scaling.md and scaling.json (part S). Exit 1 on any FAIL.
set -uo pipefail
T0=$SECONDS
PARTS=${PARTS:-${1:-ENF}}
PARTS=${PARTS//[ ,]/}
DEADLINE=${DEADLINE:-570}
ROOT=$PWD
# NVLink multicast stays off (the machines' notes): in NCCL, PyTorch, NVSHMEM.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CNNC_RUNTIME_DIR=$ROOT/.carry/rt PYTHONUNBUFFERED=1 CNNC=$ROOT/.carry/cnnc
export LD_LIBRARY_PATH=$ROOT/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONPATH=$ROOT/python${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
W=${DP_WORK:-/tmp/device-dp}; rm -rf "$W"; mkdir -p "$W"
LOGS=$W/logs; mkdir -p "$LOGS"
SUMMARY=$OUT/summary.txt; : >"$SUMMARY"
DIFFS=$OUT/diffs.json
DP=$ROOT/bench/dp
C=$CNNC
PY=${PYTHON:-python3}
# torchrun, or the module behind it where the script is not on the PATH.
if command -v torchrun >/dev/null 2>&1; then TORCHRUN=(torchrun); else TORCHRUN=("$PY" -m torch.distributed.run); fi
SGD=(--optimizer sgd --lr 0.01 --momentum 0.9)
rc=0

pass() { echo "PASS $*" | tee -a "$SUMMARY"; }
fail() { echo "FAIL $*" | tee -a "$SUMMARY"; rc=1; }
note() { echo "     $*" | tee -a "$SUMMARY"; }
# has E|N|F|R|S1|S2: whether PARTS selects it (a bare S selects S1 and S2).
has() {
  case $1 in
    S1 | S2) [[ $PARTS == *$1* ]] || [[ $PARTS == *S* && $PARTS != *S1* && $PARTS != *S2* ]] ;;
    *) [[ $PARTS == *$1* ]] ;;
  esac
}
# tmo S: S seconds, or what is left before the deadline (less a margin for
# the summary); 0 when nothing is left.
tmo() {
  local left=$((DEADLINE - (SECONDS - T0) - 15))
  ((left < 0)) && left=0
  echo $(($1 < left ? $1 : left))
}
# run NAME SECONDS cmd...: cmd under timeout, output in $LOGS/NAME.log;
# returns cmd's exit code (124: timed out, 125: no time left).
run() {
  local name=$1 s
  s=$(tmo "$2")
  shift 2
  if ((s <= 0)); then
    echo "no time left before the deadline" >"$LOGS/$name.log"
    return 125
  fi
  timeout --kill-after=5 "$s" "$@" >"$LOGS/$name.log" 2>&1
}
# build NAME SECONDS onnx cnnc-flags...: compiles $W/NAME (in the background
# when called with &); a failure leaves a line in $W/build-failures.
build() {
  local name=$1 s=$2 t=$SECONDS
  shift 2
  if run "build-$name" "$s" "$C" "$@" -o "$W/$name"; then
    echo "built $name in $((SECONDS - t)) s" >>"$W/build-times"
  else
    echo "$name (exit $?, see build-$name)" >>"$W/build-failures"
  fi
}
# check_builds NAME...: FAIL for each listed executable that did not build.
check_builds() {
  local n ok=0
  for n in "$@"; do
    if [ ! -x "$W/$n" ]; then
      fail "build $n: $(grep "^$n " "$W/build-failures" 2>/dev/null || echo 'no executable')"
      ok=1
    fi
  done
  return $ok
}
part_begin() { PART_T=$SECONDS; echo "=== part $1 ($(date -u +%H:%M:%S))" | tee -a "$SUMMARY"; }
part_end() { echo "=== part $1: $((SECONDS - PART_T)) s" | tee -a "$SUMMARY"; }
finish() {
  # The device tool returns few files: every log's tail in one.
  for f in "$LOGS"/*.log; do
    [ -f "$f" ] || continue
    echo "==> $(basename "$f") <=="
    tail -n "${LOG_LINES:-300}" "$f"
  done >"$OUT/logs.txt" 2>/dev/null
  [ -f "$W/build-times" ] && sort "$W/build-times" >>"$OUT/logs.txt"
  echo "---- summary ($((SECONDS - T0)) s)"
  cat "$SUMMARY"
}
trap finish EXIT

nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader |
  tee "$LOGS/gpu.log"
nvidia-smi topo -m >>"$LOGS/gpu.log" 2>&1
NG=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
echo "GPUs: $NG; PARTS=$PARTS; $("$C" --version 2>&1 | head -1)" | tee -a "$SUMMARY"
$PY -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision", torchvision.__version__)' 2>&1 |
  tee -a "$SUMMARY"
if ((NG < 2)); then
  fail "needs 2 or 4 GPUs, found $NG"
  exit 1
fi
((NG > 4)) && NG=4 # the parts are written for 2 and 4 GPUs
HALF=$((NG / 2))
gpu_list() { seq -s, "$1" "$2"; } # gpu_list FIRST LAST: "0,1"
ALL=$(gpu_list 0 $((NG - 1)))
port() { echo $((20000 + RANDOM % 20000)); }

# ---------------------------------------------------------------- E, N, F
# Inputs from fixed seeds (prepare.py), then every executable these parts
# need, compiled in parallel while the PyTorch parts use the GPUs.
B=16
EW=$W/e
if has E || has N || has F; then
  t=$SECONDS
  if run prepare 180 $PY "$DP/prepare.py" --work "$EW" --batch $B --size 32 --steps 10; then
    note "inputs prepared in $((SECONDS - t)) s: $(tail -1 "$LOGS/prepare.log")"
  else
    fail "prepare.py (exit $?, see prepare.log)"
  fi
  X=(--data "$EW/data_x.npy" --labels "$EW/data_y.npy" --seed 0)
  # Every executable of the selected parts, compiled in parallel.
  BUILD_PIDS=()
  F32=(--train --precision fp32 "${SGD[@]}")
  want() { # want NAME ONNX FLAGS...: build NAME in the background once
    [ -f "$2" ] || return 0
    [[ " ${WANTED:-} " == *" $1 "* ]] && return 0
    WANTED="${WANTED:-} $1"
    build "$1" 300 "${@:2}" &
    BUILD_PIDS+=($!)
  }
  if has E || { has N && ((NG == 2)); }; then
    want r18-sb-g2 "$EW/resnet18.onnx" "${F32[@]}" --gpus 2 --sync-bn
  fi
  if has E || has F || { has N && ((NG == 2)); }; then
    want nobn-g2 "$EW/nobn.onnx" "${F32[@]}" --gpus 2
  fi
  if has E; then
    want r18-1x "$EW/resnet18.onnx" "${F32[@]}" --batch $((2 * B))
    want nobn-1x "$EW/nobn.onnx" "${F32[@]}" --batch $((2 * B))
    want nobn-g1 "$EW/nobn.onnx" "${F32[@]}" --batch $((2 * B)) --gpus 1
  fi
  if has N; then
    want r18-sb-g$NG "$EW/resnet18.onnx" "${F32[@]}" --gpus $NG --sync-bn
    want nobn-g$NG "$EW/nobn.onnx" "${F32[@]}" --gpus $NG
    # ResNet-50 f16 for N's img/s: exported and compiled in the background.
    (if run export-r50 180 $PY -c "
from cnnc.export import build_model, export_onnx
export_onnx(build_model('resnet50', None, 0), '$W/resnet50.onnx', (128, 3, 224, 224), training=True)
"; then
      build r50-g$NG 300 "$W/resnet50.onnx" --train "${SGD[@]}" --gpus $NG
    else
      echo "r50-g$NG (the ResNet-50 export failed, see export-r50)" >>"$W/build-failures"
    fi) &
    BUILD_PIDS+=($!)
  fi
fi

# ---------------------------------------------------------------- E
E_SUB=${E_SUB:-abcde}
if has E && [ -f "$EW/resnet18.onnx" ]; then
  part_begin E
  KEYS=(--keys "$EW/resnet18_init.npz")
  BOUND=(--factor "${E_FACTOR:-3}" --floor 1e-6 --first-step 1e-5 --diffs "$DIFFS")
  # c. cnnc.compile under torchrun: started first, it compiles (nvcc) while
  # the rest of this part runs.
  if [[ $E_SUB == *c* ]]; then
    (CUDA_VISIBLE_DEVICES=0,1 run e-c-torchrun 400 "${TORCHRUN[@]}" --standalone --nproc-per-node 2 \
      "$DP/compile_torchrun.py" --work "$EW" --out "$EW/cnnc_tr"
    echo $? >"$W/e-c.rc") &
    EC_PID=$!
  fi
  # b. PyTorch's own difference: DDP + SyncBatchNorm (2 x B) vs one process (2B).
  if [[ $E_SUB == *[abc]* ]]; then
    CUDA_VISIBLE_DEVICES=0 run e-b-torch-one 200 $PY "$DP/torch_ref.py" one --work "$EW" \
      --out "$EW/pt_one" || fail "E b: PyTorch one process (exit $?, see e-b-torch-one.log)"
    CUDA_VISIBLE_DEVICES=0,1 run e-b-torch-ddp 200 "${TORCHRUN[@]}" --standalone --nproc-per-node 2 \
      "$DP/torch_ref.py" ddp --work "$EW" --out "$EW/pt_ddp" ||
      fail "E b: PyTorch DDP (exit $?, see e-b-torch-ddp.log)"
    if $PY "$DP/compare.py" diff torch_ddp_vs_one run:"$EW/pt_ddp" run:"$EW/pt_one" \
      "${KEYS[@]}" --diffs "$DIFFS" 2>&1 | tee -a "$SUMMARY"; then
      note "(E b: PyTorch DDP + SyncBatchNorm 2 x $B vs one process $((2 * B)): the bound)"
    else
      fail "E b: compare"
    fi
  fi
  ((${#BUILD_PIDS[@]})) && wait "${BUILD_PIDS[@]}"
  # a. the executable, 2 x B with --sync-bn vs 1 x 2B.
  if [[ $E_SUB == *a* ]] && check_builds r18-sb-g2 r18-1x; then
    CUDA_VISIBLE_DEVICES=0 run e-a-exe-1x 120 "$W/r18-1x" "${X[@]}" --steps 10 --log-every 1 \
      --checkpoint "$W/r18-1x.cnnw" || fail "E a: ./train (1 GPU, batch $((2 * B))) exit $?"
    CUDA_VISIBLE_DEVICES=0,1 run e-a-exe-g2 150 "$W/r18-sb-g2" "${X[@]}" --steps 10 --log-every 1 \
      --gpus 2 --checkpoint "$W/r18-sb-g2.cnnw" || fail "E a: ./train --gpus 2 exit $?"
    if $PY "$DP/compare.py" diff cnnc_exe_2x_vs_1x "exe:$LOGS/e-a-exe-g2.log:$W/r18-sb-g2.cnnw" \
      "exe:$LOGS/e-a-exe-1x.log:$W/r18-1x.cnnw" "${KEYS[@]}" --diffs "$DIFFS" 2>&1 |
      tee -a "$SUMMARY"; then
      if $PY "$DP/compare.py" bound cnnc_exe_2x_vs_1x torch_ddp_vs_one "${BOUND[@]}" 2>&1 |
        tee -a "$SUMMARY"; then
        pass "E a: ResNet-18 --sync-bn ./train --gpus 2 x $B vs 1 GPU x $((2 * B)) within PyTorch's own DDP difference"
      else
        fail "E a: ResNet-18 --sync-bn 2 x $B vs 1 x $((2 * B)) differs more than PyTorch DDP vs one process"
      fi
    else
      fail "E a: compare (see the lines above)"
    fi
    # Information: the one-GPU step against PyTorch one process on the same
    # batches from the same start (the loader order replayed in Python).
    $PY "$DP/compare.py" diff info_cnnc_exe_1x_vs_torch_one \
      "exe:$LOGS/e-a-exe-1x.log:$W/r18-1x.cnnw" run:"$EW/pt_one" "${KEYS[@]}" \
      --diffs "$DIFFS" 2>&1 | tee -a "$SUMMARY"
  fi
  # d. no BatchNorm: 2 x B must equal 1 x 2B to rounding.
  if [[ $E_SUB == *[de]* ]] && check_builds nobn-1x; then
    CUDA_VISIBLE_DEVICES=0 run e-d-exe-1x 120 "$W/nobn-1x" "${X[@]}" --steps 10 --log-every 1 \
      --checkpoint "$W/nobn-1x.cnnw" || fail "E d/e: ./train (1 GPU, batch $((2 * B))) exit $?"
  fi
  if [[ $E_SUB == *d* ]] && check_builds nobn-g2 nobn-1x; then
    CUDA_VISIBLE_DEVICES=0,1 run e-d-exe-g2 150 "$W/nobn-g2" "${X[@]}" --steps 10 --log-every 1 \
      --gpus 2 --checkpoint "$W/nobn-g2.cnnw" || fail "E d: ./train --gpus 2 exit $?"
    $PY "$DP/compare.py" diff nobn_exe_2x_vs_1x "exe:$LOGS/e-d-exe-g2.log:$W/nobn-g2.cnnw" \
      "exe:$LOGS/e-d-exe-1x.log:$W/nobn-1x.cnnw" --keys "$EW/nobn_init.npz" --diffs "$DIFFS" \
      2>&1 | tee -a "$SUMMARY"
    if $PY "$DP/compare.py" tol nobn_exe_2x_vs_1x --rel 1e-5 --diffs "$DIFFS" 2>&1 |
      tee -a "$SUMMARY"; then
      pass "E d: net without BatchNorm, 2 x $B equals 1 x $((2 * B)) within 1e-5 (losses and weights)"
    else
      fail "E d: net without BatchNorm, 2 x $B vs 1 x $((2 * B)) beyond 1e-5"
    fi
  fi
  # e. --gpus 1: world size 1 through NCCL equals the plain step.
  if [[ $E_SUB == *e* ]] && check_builds nobn-g1 nobn-1x; then
    CUDA_VISIBLE_DEVICES=0 run e-e-exe-g1 120 "$W/nobn-g1" "${X[@]}" --steps 10 --log-every 1 \
      --gpus 1 --checkpoint "$W/nobn-g1.cnnw" || fail "E e: ./train --gpus 1 exit $?"
    $PY "$DP/compare.py" diff nobn_gpus1_vs_plain "exe:$LOGS/e-e-exe-g1.log:$W/nobn-g1.cnnw" \
      "exe:$LOGS/e-d-exe-1x.log:$W/nobn-1x.cnnw" --keys "$EW/nobn_init.npz" --diffs "$DIFFS" \
      2>&1 | tee -a "$SUMMARY"
    if $PY "$DP/compare.py" tol nobn_gpus1_vs_plain --rel 1e-6 --diffs "$DIFFS" 2>&1 |
      tee -a "$SUMMARY"; then
      pass "E e: --gpus 1 (NCCL world size 1 in the captured step) equals the plain step within 1e-6"
    else
      fail "E e: --gpus 1 differs from the plain step"
    fi
  fi
  # c. (started above)
  if [[ $E_SUB == *c* ]]; then
    wait "$EC_PID"
    r=$(cat "$W/e-c.rc" 2>/dev/null || echo "?")
    grep -E "^rank [0-9]+ of" "$LOGS/e-c-torchrun.log" | tee -a "$SUMMARY"
    if [ "$r" != 0 ]; then
      fail "E c: cnnc.compile under torchrun (exit $r, see e-c-torchrun.log)"
    else
      if $PY "$DP/compare.py" same run:"$EW/cnnc_tr.rank0" run:"$EW/cnnc_tr.rank1" 2>&1 |
        tee -a "$SUMMARY"; then
        pass "E c: cnnc.compile under torchrun: both ranks' losses identical"
      else
        fail "E c: the two ranks' losses differ"
      fi
      if $PY "$DP/compare.py" diff cnnc_compile_torchrun_vs_torch_one run:"$EW/cnnc_tr.rank0" \
        run:"$EW/pt_one" "${KEYS[@]}" --diffs "$DIFFS" 2>&1 | tee -a "$SUMMARY" &&
        $PY "$DP/compare.py" bound cnnc_compile_torchrun_vs_torch_one torch_ddp_vs_one \
          "${BOUND[@]}" 2>&1 | tee -a "$SUMMARY"; then
        pass "E c: cnnc.compile 2 ranks x $B vs PyTorch one process x $((2 * B)) within PyTorch's own DDP difference"
      else
        fail "E c: cnnc.compile under torchrun vs PyTorch one process beyond the bound"
      fi
    fi
  fi
  part_end E
fi
wait # every build (parts N and F need theirs)

# ---------------------------------------------------------------- N
# node CUDA_DEVICES NODE_RANK GPUS_PER_NODE PORT LOG exe args...: one "node"
# of a two-node job on this host, NCCL forced onto its socket transport.
node() {
  local devs=$1 nr=$2 per=$3 p=$4 log=$5
  shift 5
  CUDA_VISIBLE_DEVICES=$devs NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo \
    run "$log" 240 "$@" --gpus "$per" --nnodes 2 --node-rank "$nr" --dist-init "tcp://127.0.0.1:$p"
}
# two_nodes TAG exe args...: node 0 on the first half of the GPUs, node 1 on
# the second, concurrently; logs n-TAG-node0/1; exit code node 0's or 1's.
two_nodes() {
  local tag=$1 p r0 r1
  shift
  p=$(port)
  node "$(gpu_list 0 $((HALF - 1)))" 0 $HALF "$p" "n-$tag-node0" "$@" &
  local pid0=$!
  node "$(gpu_list $HALF $((NG - 1)))" 1 $HALF "$p" "n-$tag-node1" "$@"
  r1=$?
  wait $pid0
  r0=$?
  ((r0 != 0)) && return $r0
  return $r1
}
if has N; then
  part_begin N
  note "two nodes of $HALF GPU(s) each (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo) vs one node of $NG"
  for m in nobn r18-sb; do
    exe=$W/$m-g$NG
    check_builds "$m-g$NG" || continue
    two_nodes "$m" "$exe" "${X[@]}" --steps 10 --log-every 1 --checkpoint "$W/n-$m-2nodes.cnnw" ||
      fail "N: $m on two nodes (exit $?, see n-$m-node0.log / n-$m-node1.log)"
    CUDA_VISIBLE_DEVICES=$ALL run "n-$m-one" 180 "$exe" "${X[@]}" --steps 10 --log-every 1 \
      --gpus $NG --checkpoint "$W/n-$m-one.cnnw" || fail "N: $m on one node (exit $?)"
    if $PY "$DP/compare.py" diff "two_nodes_vs_one_$m" \
      "exe:$LOGS/n-$m-node0.log:$W/n-$m-2nodes.cnnw" "exe:$LOGS/n-$m-one.log:$W/n-$m-one.cnnw" \
      --diffs "$DIFFS" 2>&1 | tee -a "$SUMMARY"; then
      # Losses to 1e-6 (the printed digits); the weights are reported. On
      # 4 GPUs NCCL may sum the 4 ranks in another order across "nodes",
      # and ResNet-18's training on 16 images a rank turns such rounding
      # into 1e-4..1e-2 within 10 steps (see part E): there its first
      # step (the global batch's statistics through the socket transport)
      # is judged and the others reported. Sums of 2 ranks have one order.
      judge=()
      [ "$m" = r18-sb ] && ((NG > 2)) && judge=(--steps 1)
      if $PY "$DP/compare.py" tol "two_nodes_vs_one_$m" --rel 1e-6 --losses-only "${judge[@]}" \
        --diffs "$DIFFS" 2>&1 | tee -a "$SUMMARY"; then
        pass "N: $m f32, 2 nodes x $HALF GPU(s) (socket transport) = 1 node x $NG: losses within 1e-6${judge:+ (step 1; all steps above)}"
      else
        fail "N: $m, two nodes vs one node: losses differ beyond 1e-6"
      fi
    else
      fail "N: $m compare (see above)"
    fi
  done
  if check_builds r50-g$NG; then
    R50=$W/r50-g$NG
    two_nodes r50 "$R50" --data synthetic --steps 60 --log-every 20 ||
      fail "N: ResNet-50 f16 on two nodes (exit $?)"
    CUDA_VISIBLE_DEVICES=$ALL run n-r50-one 180 "$R50" --data synthetic --steps 60 --log-every 20 \
      --gpus $NG || fail "N: ResNet-50 f16 on one node (exit $?)"
    note "ResNet-50 f16 b128/GPU, 60 steps, $NG GPUs:"
    $PY "$DP/scaling.py" --show "$LOGS/n-r50-node0.log" "$LOGS/n-r50-one.log" 2>&1 |
      sed 's/^/       /' | tee -a "$SUMMARY"
    grep -h "^data parallel" "$LOGS/n-r50-node0.log" "$LOGS/n-r50-one.log" | sed 's/^/       /' |
      tee -a "$SUMMARY"
  fi
  # torchrun with two "nodes" (c10d rendezvous, one process each) and
  # cnnc.compile: E c's job (world size 2) with its cache, so it compiles
  # only when E did not run in this call.
  if [ "${N_TORCHRUN:-1}" = 1 ]; then
    p=$(port)
    for nr in 1 0; do
      (CUDA_VISIBLE_DEVICES=$nr NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo \
        run "n-torchrun-node$nr" 400 "${TORCHRUN[@]}" --nnodes 2 --node-rank $nr --nproc-per-node 1 \
        --rdzv-backend c10d --rdzv-endpoint "127.0.0.1:$p" --rdzv-id "cnnc-dp-$p" \
        "$DP/compile_torchrun.py" --work "$EW" --out "$EW/tr2n"
      echo $? >"$W/n-torchrun-$nr.rc") &
    done
    wait
    r0=$(cat "$W/n-torchrun-0.rc"); r1=$(cat "$W/n-torchrun-1.rc")
    grep -hE "^rank [0-9]+ of" "$LOGS"/n-torchrun-node*.log | tee -a "$SUMMARY"
    if [ "$r0" = 0 ] && [ "$r1" = 0 ] &&
      $PY "$DP/compare.py" same run:"$EW/tr2n.rank0" run:"$EW/tr2n.rank1" 2>&1 | tee -a "$SUMMARY"; then
      if [ -f "$EW/cnnc_tr.rank0.json" ]; then
        $PY "$DP/compare.py" diff torchrun_two_nodes_vs_one run:"$EW/tr2n.rank0" \
          run:"$EW/cnnc_tr.rank0" --keys "$EW/resnet18_init.npz" --diffs "$DIFFS" 2>&1 |
          tee -a "$SUMMARY"
        if $PY "$DP/compare.py" tol torchrun_two_nodes_vs_one --rel 1e-6 --diffs "$DIFFS" 2>&1 |
          tee -a "$SUMMARY"; then
          pass "N: torchrun --nnodes 2 + cnnc.compile = E c's one-node torchrun (1e-6)"
        else
          fail "N: torchrun --nnodes 2 + cnnc.compile differs from one node beyond 1e-6"
        fi
      else
        pass "N: torchrun --nnodes 2 + cnnc.compile ran, both ranks' losses identical (E c not run: no one-node comparison)"
      fi
    else
      fail "N: torchrun --nnodes 2 with cnnc.compile (exit $r0 / $r1, see n-torchrun-node*.log)"
    fi
  fi
  part_end N
fi

# ---------------------------------------------------------------- F
if has F; then
  part_begin F
  # cnnc train --gpus 2 with one visible GPU (compiles first: in the
  # background while the rest of the part runs).
  (CUDA_VISIBLE_DEVICES=0 run f-cnnc-train 200 "$C" train "$EW/nobn.onnx" --data synthetic \
    --steps 2 --gpus 2 -o "$W/f-train"
  echo $? >"$W/f-cnnc-train.rc") &
  FT_PID=$!
  if check_builds nobn-g2; then
    exe=$W/nobn-g2
    # A rank killed mid-run: the launcher stops the other and names the rank.
    s=$(tmo 150)
    ((s > 0)) || s=1 # (timeout 0 would mean no limit)
    CUDA_VISIBLE_DEVICES=0,1 timeout "$s" "$exe" "${X[@]}" --steps 100000000 --log-every 200 \
      --gpus 2 >"$LOGS/f-kill.log" 2>&1 &
    L=$!
    victim=
    for _ in $(seq 1 120); do # until the ranks train (a progress line), 60 s at most
      grep -q "^step " "$LOGS/f-kill.log" && break
      sleep 0.5
    done
    for p in $(pgrep -f "$exe"); do
      tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -q '^CNNC_RANK=1$' && victim=$p
    done
    t=$SECONDS
    [ -n "$victim" ] && kill -9 "$victim"
    wait $L
    r=$?
    dt=$((SECONDS - t))
    tail -3 "$LOGS/f-kill.log" | sed 's/^/     | /' | tee -a "$SUMMARY"
    if [ -n "$victim" ] && [ $r -ne 0 ] && [ $r -ne 124 ] && ((dt <= 15)) &&
      grep -qE "rank 1 of 2 .*(killed|signal 9)" "$LOGS/f-kill.log"; then
      pass "F: rank 1 SIGKILLed mid-run: the launcher exited $r after $dt s naming rank 1"
    else
      fail "F: killed rank (victim '${victim:-none found}', exit $r after $dt s; 124 = hung)"
    fi
    # Node 1 never starts: node 0 must give up with a message, not hang.
    t=$SECONDS
    CUDA_VISIBLE_DEVICES=0 CNNC_DIST_TIMEOUT=20 run f-no-node1 90 "$exe" "${X[@]}" --steps 10 \
      --gpus 1 --nnodes 2 --node-rank 0 --dist-init "tcp://127.0.0.1:$(port)"
    r=$?
    dt=$((SECONDS - t))
    grep -iE "error" "$LOGS/f-no-node1.log" | head -3 | sed 's/^/     | /' | tee -a "$SUMMARY"
    if [ $r -ne 0 ] && [ $r -ne 124 ] && [ $r -ne 137 ] && ((dt <= 40)) &&
      grep -qiE "error.*(node|rank|timed out|time-out|timeout|connect|never)" "$LOGS/f-no-node1.log"; then
      pass "F: node 1 never started: node 0 exited $r after $dt s with an error (CNNC_DIST_TIMEOUT=20)"
    else
      fail "F: node 1 never started: exit $r after $dt s (124 = hung until the timeout), message above"
    fi
    # --gpus 2 where one GPU is visible: refused, naming the count.
    CUDA_VISIBLE_DEVICES=0 run f-one-gpu 60 "$exe" "${X[@]}" --steps 1 --gpus 2
    r=$?
    if [ $r -eq 1 ] && grep -q "only 1 GPU(s) are visible" "$LOGS/f-one-gpu.log"; then
      pass "F: ./train --gpus 2 with one visible GPU refused clearly"
    else
      fail "F: ./train --gpus 2 with one visible GPU (exit $r): $(tail -1 "$LOGS/f-one-gpu.log")"
    fi
  fi
  wait $FT_PID
  r=$(cat "$W/f-cnnc-train.rc" 2>/dev/null || echo "?")
  if [ "$r" != 0 ] && grep -q "only 1 GPU(s) are visible" "$LOGS/f-cnnc-train.log"; then
    pass "F: cnnc train --gpus 2 with one visible GPU refused clearly (exit $r)"
  else
    fail "F: cnnc train --gpus 2 with one visible GPU (exit $r): $(tail -1 "$LOGS/f-cnnc-train.log")"
  fi
  part_end F
fi

# ---------------------------------------------------------------- S
# cnnc_run NAME GPUS exe: 200 steps of synthetic data, log cnnc-NAME.log.
S_STEPS=${S_STEPS:-200}
if has S1 || has S2; then
  part_begin S
  SW=$W/s
  mkdir -p "$SW"
  MODELS=()
  has S1 && MODELS+=(resnet50)
  has S2 && MODELS+=(resnet18 efficientnet_b0)
  # Exported at batch 128 (the batch is in the graph: EfficientNet's
  # stochastic depth draws a mask of the batch's size).
  run s-export 240 $PY -c "
import sys, time
from cnnc.export import build_model, export_onnx
for name in sys.argv[1:]:
    t = time.time()
    export_onnx(build_model(name, None, 0), '$SW/%s.onnx' % name, (128, 3, 224, 224), training=True)
    print('exported', name, 'in %.1f s' % (time.time() - t))
" "${MODELS[@]}" || fail "S: export (see s-export.log)"
  # What runs: "model gpus sync-bn" (1 GPU: the step without all-reduces).
  ((NG < 4)) && note "S: $NG GPUs: the 4-GPU runs are skipped (ResNet-18 and EfficientNet-B0 on 1 and $NG)"
  RUNS=()
  if has S1; then
    RUNS+=("resnet50 1 -" "resnet50 2 -")
    ((NG >= 4)) && RUNS+=("resnet50 4 -")
    RUNS+=("resnet50 2 sb")
    ((NG >= 4)) && RUNS+=("resnet50 4 sb")
  fi
  if has S2; then
    RUNS+=("resnet18 1 -" "resnet18 $NG -" "efficientnet_b0 1 -" "efficientnet_b0 $NG -")
  fi
  exe_of() { # model gpus sb -> executable name
    local n=$1-g$2
    [ "$3" = sb ] && n=$n-sb
    echo "s-$n"
  }
  for spec in "${RUNS[@]}"; do
    set -- $spec
    flags=(--train "${SGD[@]}")
    (($2 > 1)) && flags+=(--gpus "$2")
    [ "$3" = sb ] && flags+=(--sync-bn)
    [ -f "$SW/$1.onnx" ] && build "$(exe_of "$@")" 330 "$SW/$1.onnx" "${flags[@]}" &
  done
  # PyTorch DDP on the same GPU counts, while cnnc compiles.
  ddp_runs() {
    local spec
    for spec in "${RUNS[@]}"; do
      set -- $spec
      [ "$3" = sb ] && continue
      CUDA_VISIBLE_DEVICES=$(gpu_list 0 $(($2 - 1))) run "ddp-$1-g$2" 180 "${TORCHRUN[@]}" --standalone \
        --nproc-per-node "$2" "$DP/ddp_bench.py" "$1" --batch 128 --steps "$S_STEPS" --warmup 20 ||
        fail "S: PyTorch DDP $1 on $2 GPU(s) (exit $?, see ddp-$1-g$2.log)"
      grep -h "^DDP" "$LOGS/ddp-$1-g$2.log" | sed 's/^/     /' | tee -a "$SUMMARY"
      # The whole DDP module under torch.compile, on the GPU counts in
      # DDP_COMPILE_GPUS (default: the largest; "" skips it).
      if [[ " ${DDP_COMPILE_GPUS-$NG} " == *" $2 "* ]]; then
        CUDA_VISIBLE_DEVICES=$(gpu_list 0 $(($2 - 1))) run "ddpc-$1-g$2" 300 "${TORCHRUN[@]}" \
          --standalone --nproc-per-node "$2" "$DP/ddp_bench.py" "$1" --batch 128 \
          --steps "$S_STEPS" --warmup 20 --compile ||
          fail "S: PyTorch DDP + torch.compile $1 on $2 GPU(s) (exit $?, see ddpc-$1-g$2.log)"
        grep -h "^DDP" "$LOGS/ddpc-$1-g$2.log" | sed 's/^/     /' | tee -a "$SUMMARY"
      fi
    done
  }
  t=$SECONDS
  if [ "${DDP_CONCURRENT:-1}" = 1 ]; then
    ddp_runs
    note "PyTorch DDP runs took $((SECONDS - t)) s (while cnnc compiled)"
  fi
  wait
  note "S: builds done $((SECONDS - PART_T)) s into the part"
  for spec in "${RUNS[@]}"; do
    set -- $spec
    n=$(exe_of "$@")
    check_builds "$n" || continue
    log=cnnc-$1-g$2
    [ "$3" = sb ] && log=$log-sb
    args=(--data synthetic --steps "$S_STEPS" --log-every 20)
    (($2 > 1)) && args+=(--gpus "$2")
    CUDA_VISIBLE_DEVICES=$(gpu_list 0 $(($2 - 1))) run "$log" 200 "$W/$n" "${args[@]}" ||
      fail "S: cnnc $1 on $2 GPU(s) ${3/-/} (exit $?, see $log.log)"
    grep -h "^done:\|^data parallel" "$LOGS/$log.log" | sed "s/^/     $log: /" | tee -a "$SUMMARY"
  done
  if [ "${DDP_CONCURRENT:-1}" != 1 ]; then
    ddp_runs
  fi
  # The all-reduce time not hidden by the backward pass (timing events at
  # the joins), in its own run so that the measured runs carry no events.
  R50N=s-resnet50-g$NG
  if has S1 && [ -x "$W/$R50N" ]; then
    CUDA_VISIBLE_DEVICES=$ALL CNNC_ALLREDUCE_TIMING=1 run s-allreduce-timing 150 "$W/$R50N" \
      --data synthetic --steps 60 --log-every 5 --gpus $NG ||
      fail "S: ResNet-50 with CNNC_ALLREDUCE_TIMING=1 (exit $?)"
    grep -h "^data parallel: all-reduce not hidden" "$LOGS/s-allreduce-timing.log" |
      sed 's/^/     /' | tee -a "$SUMMARY" | grep -q . || fail "S: no all-reduce timing line"
    for m in ${MAXCTAS_SWEEP:-}; do
      CUDA_VISIBLE_DEVICES=$ALL CNNC_NCCL_MAX_CTAS=$m run "s-maxctas-$m" 150 "$W/$R50N" \
        --data synthetic --steps "$S_STEPS" --log-every 20 --gpus $NG ||
        fail "S: CNNC_NCCL_MAX_CTAS=$m (exit $?)"
      $PY "$DP/scaling.py" --show "$LOGS/s-maxctas-$m.log" | sed "s/^/     CNNC_NCCL_MAX_CTAS=$m: /" |
        tee -a "$SUMMARY"
    done
  fi
  $PY "$DP/scaling.py" "$LOGS" --json "$OUT/scaling.json" >"$OUT/scaling.md" 2>&1 ||
    fail "S: scaling table"
  cat "$OUT/scaling.md" | tee -a "$SUMMARY"
  part_end S
fi

# ---------------------------------------------------------------- T
# Where a data-parallel run's whole-run figure loses to its steady state:
# ResNet-50 f16 b128 on all GPUs, plain and --sync-bn, 30 steps logged
# every step (step 1 and 2 run uncaptured, step 3 captures the graph),
# with NCCL's registration of captured buffers on (the default) and off
# (NCCL_GRAPH_REGISTER=0), and the steady/whole-run figures of each.
if has T; then
  part_begin T
  TW=$W/t
  mkdir -p "$TW"
  run t-export 240 $PY -c "
from cnnc.export import build_model, export_onnx
export_onnx(build_model('resnet50', None, 0), '$TW/resnet50.onnx', (128, 3, 224, 224), training=True)
" || fail "T: export (see t-export.log)"
  build t-r50-g$NG 330 "$TW/resnet50.onnx" --train "${SGD[@]}" --gpus $NG &
  build t-r50-g$NG-sb 330 "$TW/resnet50.onnx" --train "${SGD[@]}" --gpus $NG --sync-bn &
  wait
  for exe in t-r50-g$NG t-r50-g$NG-sb; do
    check_builds $exe || continue
    for reg in 1 0; do
      CUDA_VISIBLE_DEVICES=$ALL NCCL_GRAPH_REGISTER=$reg run "$exe-reg$reg" 120 "$W/$exe" \
        --data synthetic --steps 30 --log-every 1 --gpus $NG ||
        fail "T: $exe NCCL_GRAPH_REGISTER=$reg (exit $?)"
      grep -h "^step [1-5] \|^done:" "$LOGS/$exe-reg$reg.log" |
        sed "s/^/     $exe NCCL_GRAPH_REGISTER=$reg: /" | tee -a "$SUMMARY"
    done
  done
  part_end T
fi

# ---------------------------------------------------------------- P
# Pipeline stages (issue 38, docs/pipeline-parallel.md), f32, GPipe:
#  a. a net without BatchNorm (prepare.py's NoBN, micro-batch 8, 32x32):
#     `cnnc --pipeline-stages 2 --micro-batches 4` (and S=4 on 4 GPUs), 5
#     steps, against the same ONNX compiled with --accumulate 4 on one GPU
#     over the same data (one epoch: 5 x 32 samples): each step's loss
#     against the mean of its 4 micro-steps', within 1e-5 relative;
#  b. ResNet-18 (BatchNorm per micro-batch on both sides) likewise, 1e-4;
#  c. ResNet-50, micro-batch 16 x M = 8 (global batch 128), S = 2,
#     synthetic data, 60 steps: the pipeline's img/s next to the one-GPU
#     step's at batch 128, and the plan cnnc printed (cuts, per-stage
#     memory, bubble);
#  d. a stage SIGKILLed mid-run: the launcher exits non-zero with one
#     "pipeline run failed" error within 60 s;
#  e. --checkpoint after 3 steps (one file, the stages' union), --resume to
#     step 5: steps 4 and 5 as a's (1e-5 relative);
#  f. fp16 (the default precision, a loss scale agreed across the stages):
#     ResNet-18 S=2 M=4 against the one-GPU f16 --accumulate 4 over the same
#     data, 5 steps; bound: the larger of 3 % and PyTorch's AMP-vs-f32
#     spread (torch_ref.py accumulate --amp against the f32 run, the largest
#     relative loss difference over the 5 steps); and c's ResNet-50 at f16
#     (img/s, pipeline and one GPU).
#  g. pipeline x data parallel (4 GPUs, else skipped with a line): the
#     BN-free net, f32, `--pipeline-stages 2 --micro-batches 4 --gpus 2`
#     (ranks 0..3 = replica x 2 + stage), 2 steps of the global batch 2 x 4 x
#     8 = 64, against the one-GPU --accumulate 8 over the same 8-row
#     micro-batches (16 micro-steps), 1e-5 relative (reduction order).
#  h. 1F1B (--pipeline-schedule 1f1b: the transfers in NCCL groups): the
#     BN-free net S=2 M=4 f32 against a's GPipe run, each step's loss
#     within 1e-6 relative (the same ops in another order of micro-batches:
#     exact but for rounding of the accumulation order, which both keep),
#     and S=4 on 4 GPUs.
# With 4 GPUs, b and f also run on S=4 (and a, as before).
# The last line: PIPELINE PART P: PASS, or FAIL <what failed>.
if has P; then
  part_begin P
  PW=$W/p
  P_FAILS=()
  pfail() { fail "P $*"; P_FAILS+=("${1%%:*}"); }
  PF32=(--train --precision fp32 "${SGD[@]}")
  PF16=(--train --precision fp16 "${SGD[@]}")
  if run p-prepare 180 $PY "$DP/prepare.py" --work "$PW" --batch 8 --size 32 --steps 10; then
    PX=(--data "$PW/data_x.npy" --labels "$PW/data_y.npy" --seed 0 --log-every 1)
    BUILD_PIDS=()
    build p-nobn-pp2 300 "$PW/nobn.onnx" "${PF32[@]}" --pipeline-stages 2 --micro-batches 4 &
    BUILD_PIDS+=($!)
    build p-nobn-acc 300 "$PW/nobn.onnx" "${PF32[@]}" --accumulate 4 &
    BUILD_PIDS+=($!)
    build p-r18-pp2 300 "$PW/resnet18.onnx" "${PF32[@]}" --pipeline-stages 2 --micro-batches 4 &
    BUILD_PIDS+=($!)
    build p-r18-acc 300 "$PW/resnet18.onnx" "${PF32[@]}" --accumulate 4 &
    BUILD_PIDS+=($!)
    build p-r18f16-pp2 300 "$PW/resnet18.onnx" "${PF16[@]}" --pipeline-stages 2 --micro-batches 4 &
    BUILD_PIDS+=($!)
    build p-nobn-1f1b2 300 "$PW/nobn.onnx" "${PF32[@]}" --pipeline-stages 2 --micro-batches 4 \
      --pipeline-schedule 1f1b &
    BUILD_PIDS+=($!)
    build p-r18f16-acc 300 "$PW/resnet18.onnx" "${PF16[@]}" --accumulate 4 &
    BUILD_PIDS+=($!)
    if ((NG >= 4)); then
      build p-nobn-pp4 300 "$PW/nobn.onnx" "${PF32[@]}" --pipeline-stages 4 --micro-batches 4 &
      BUILD_PIDS+=($!)
      build p-r18-pp4 300 "$PW/resnet18.onnx" "${PF32[@]}" --pipeline-stages 4 --micro-batches 4 &
      BUILD_PIDS+=($!)
      build p-r18f16-pp4 300 "$PW/resnet18.onnx" "${PF16[@]}" --pipeline-stages 4 --micro-batches 4 &
      BUILD_PIDS+=($!)
      build p-nobn-pp2dp2 300 "$PW/nobn.onnx" "${PF32[@]}" --pipeline-stages 2 --micro-batches 4 --gpus 2 &
      BUILD_PIDS+=($!)
      build p-nobn-acc8 300 "$PW/nobn.onnx" "${PF32[@]}" --accumulate 8 &
      BUILD_PIDS+=($!)
      build p-nobn-1f1b4 300 "$PW/nobn.onnx" "${PF32[@]}" --pipeline-stages 4 --micro-batches 4 \
        --pipeline-schedule 1f1b &
      BUILD_PIDS+=($!)
    fi
    (if run p-export-r50 180 $PY -c "
from cnnc.export import build_model, export_onnx
m = build_model('resnet50', None, 0)
export_onnx(m, '$PW/r50_b16.onnx', (16, 3, 224, 224), training=True)
export_onnx(m, '$PW/r50_b128.onnx', (128, 3, 224, 224), training=True)
"; then
      build p-r50-pp2 400 "$PW/r50_b16.onnx" "${PF32[@]}" --pipeline-stages 2 --micro-batches 8 &
      build p-r50-1x 400 "$PW/r50_b128.onnx" "${PF32[@]}" &
      build p-r50f16-pp2 400 "$PW/r50_b16.onnx" "${PF16[@]}" --pipeline-stages 2 --micro-batches 8 &
      build p-r50f16-1x 400 "$PW/r50_b128.onnx" "${PF16[@]}" &
      wait
    else
      echo "p-r50 (the ResNet-50 export failed, see p-export-r50)" >>"$W/build-failures"
    fi) &
    R50_PID=$!
    # The small nets run while ResNet-50 compiles.
    wait "${BUILD_PIDS[@]}"
    # p_compare NAME PP ACC BOUND [K [STEPS]]: PP's step losses against the
    # mean of each K (4) consecutive micro-step losses of ACC, STEPS (5).
    p_compare() {
      $PY - "$LOGS/$2.log" "$LOGS/$3.log" "$4" "${5:-4}" "${6:-5}" <<'PYEOF'
import re, sys
step = re.compile(r"^step (\d+) loss (\S+)", re.M)
pp = [float(v) for _, v in step.findall(open(sys.argv[1]).read())]
acc = [float(v) for _, v in step.findall(open(sys.argv[2]).read())]
bound = float(sys.argv[3])
k_, n_ = int(sys.argv[4]), int(sys.argv[5])
if len(pp) != n_ or len(acc) != k_ * n_:
    print("steps: %d pipelined, %d accumulated (want %d and %d)" % (len(pp), len(acc), n_, k_ * n_))
    sys.exit(1)
ref = [sum(acc[k_ * k:k_ * k + k_]) / k_ for k in range(n_)]
diff = max(abs(a - b) for a, b in zip(pp, ref))
rel = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(pp, ref))
print("losses %s vs %s: max |diff| %.3g, max relative %.3g (bound %g)"
      % (["%.7g" % v for v in pp], ["%.7g" % v for v in ref], diff, rel, bound))
sys.exit(0 if rel <= bound else 1)
PYEOF
    }
    # b's bound: PyTorch's own spread for micro-batched BatchNorm. ResNet-18
    # at micro-batch 8 of 32x32 is chaotic: PyTorch itself, from initial
    # weights changed by 1e-7 relative, differs by 4e-4 at step 2 and 5e-2
    # at step 5 (CPU, session 25). The bound is 3 x PyTorch's largest
    # relative difference over the 5 steps between the same accumulation
    # (torch_ref.py accumulate, the executable's batch stream) from the
    # exact and the perturbed weights on this GPU, at least 1e-4.
    P_R18_BOUND=1e-4
    if CUDA_VISIBLE_DEVICES=0 run p-torch-acc 120 $PY "$DP/torch_ref.py" accumulate --micro 4 --steps 5 \
      --work "$PW" --out "$PW/pt_acc" &&
      CUDA_VISIBLE_DEVICES=0 run p-torch-acc-perturbed 120 $PY "$DP/torch_ref.py" accumulate --micro 4 \
        --steps 5 --perturb 1e-7 --work "$PW" --out "$PW/pt_acc_perturbed"; then
      P_R18_BOUND=$($PY -c "
import json
a = json.load(open('$PW/pt_acc.json'))['losses']; b = json.load(open('$PW/pt_acc_perturbed.json'))['losses']
print('%.3g' % max(1e-4, 3 * max(abs(u - v) / abs(u) for u, v in zip(a, b))))")
      note "b: PyTorch's own spread (accumulate 4 x 8, weights x (1 + 1e-7 N(0,1))): $(grep -h losses "$LOGS/p-torch-acc.log" "$LOGS/p-torch-acc-perturbed.log" | tr '\n' ' '); bound $P_R18_BOUND"
    else
      note "b: PyTorch's spread not measured (see p-torch-acc*.log): bound 1e-4"
    fi
    # f's bound: PyTorch's AMP-vs-f32 spread on the same accumulation, at
    # least 3 % of the loss.
    P_F16_BOUND=0.03
    if [ -f "$PW/pt_acc.json" ] &&
      CUDA_VISIBLE_DEVICES=0 run p-torch-acc-amp 120 $PY "$DP/torch_ref.py" accumulate --micro 4 --steps 5 \
        --amp --work "$PW" --out "$PW/pt_acc_amp"; then
      P_F16_BOUND=$($PY -c "
import json
a = json.load(open('$PW/pt_acc.json'))['losses']; b = json.load(open('$PW/pt_acc_amp.json'))['losses']
print('%.3g' % max(0.03, max(abs(u - v) / abs(u) for u, v in zip(a, b))))")
      note "f: PyTorch's AMP-vs-f32 spread (accumulate 4 x 8): $(grep -h losses "$LOGS/p-torch-acc-amp.log" | tr '\n' ' '); bound $P_F16_BOUND"
    else
      note "f: PyTorch's AMP spread not measured (see p-torch-acc-amp.log): bound 0.03"
    fi
    # a, b, f: the pipelined step against accumulation over the same data.
    for c in "a nobn pp2 1e-5" "b r18 pp2 $P_R18_BOUND" "f r18f16 pp2 $P_F16_BOUND" \
      "a nobn pp4 1e-5" "b r18 pp4 $P_R18_BOUND" "f r18f16 pp4 $P_F16_BOUND"; do
      set -- $c
      [ -x "$W/p-$2-$3" ] || { [ "$3" = pp4 ] && ((NG < 4)) && continue; pfail "$1: p-$2-$3 did not build (see build-p-$2-$3.log)"; continue; }
      [ -x "$W/p-$2-acc" ] || { pfail "$1: p-$2-acc did not build"; continue; }
      [ -f "$LOGS/p-$2-acc.log" ] ||
        CUDA_VISIBLE_DEVICES=0 run "p-$2-acc" 120 "$W/p-$2-acc" "${PX[@]}" --steps 20 ||
        pfail "$1: $2 --accumulate 4 run (exit $?, see p-$2-acc.log)"
      run "p-$2-$3" 120 "$W/p-$2-$3" "${PX[@]}" --steps 5 ||
        pfail "$1: $2 $3 run (exit $?, see p-$2-$3.log)"
      if out=$(p_compare "$1" "p-$2-$3" "p-$2-acc" "$4" 2>&1); then
        pass "P $1: $2 S=${3#pp} M=4 vs --accumulate 4: $out"
      else
        pfail "$1: $2 S=${3#pp} M=4 vs --accumulate 4: $out"
      fi
    done
    # h. 1F1B against GPipe (a's runs), S=2 and (4 GPUs) S=4.
    for c in "2 pp2" "4 pp4"; do
      set -- $c
      if [ "$1" = 4 ] && ((NG < 4)); then
        note "h: S=4 skipped: needs 4 GPUs, $NG visible"
        continue
      fi
      if [ ! -x "$W/p-nobn-1f1b$1" ]; then
        pfail "h: p-nobn-1f1b$1 did not build (see build-p-nobn-1f1b$1.log)"
        continue
      fi
      run "p-nobn-1f1b$1" 120 "$W/p-nobn-1f1b$1" "${PX[@]}" --steps 5 ||
        pfail "h: nobn 1f1b S=$1 run (exit $?, see p-nobn-1f1b$1.log)"
      if out=$($PY - "$LOGS/p-nobn-1f1b$1.log" "$LOGS/p-nobn-$2.log" <<'PYEOF'
import re, sys
step = re.compile(r"^step (\d+) loss (\S+)", re.M)
a = [float(v) for _, v in step.findall(open(sys.argv[1]).read())]
b = [float(v) for _, v in step.findall(open(sys.argv[2]).read())]
if len(a) != 5 or len(b) != 5:
    print("steps: %d 1f1b, %d gpipe (want 5 each)" % (len(a), len(b)))
    sys.exit(1)
rel = max(abs(u - v) / max(abs(v), 1e-12) for u, v in zip(a, b))
print("losses %s vs GPipe %s: max relative %.3g (bound 1e-6)"
      % (["%.7g" % v for v in a], ["%.7g" % v for v in b], rel))
sys.exit(0 if rel <= 1e-6 else 1)
PYEOF
      ); then
        pass "P h: nobn 1F1B S=$1 M=4 vs GPipe: $out"
      else
        pfail "h: nobn 1F1B S=$1 M=4 vs GPipe: $out"
      fi
    done
    # g. pipeline x data parallel on 4 GPUs.
    if ((NG < 4)); then
      note "g: skipped: pipeline x data parallel (S=2 x D=2) needs 4 GPUs, $NG visible"
    elif [ ! -x "$W/p-nobn-pp2dp2" ] || [ ! -x "$W/p-nobn-acc8" ]; then
      pfail "g: p-nobn-pp2dp2 or p-nobn-acc8 did not build (see build-p-nobn-*.log)"
    else
      CUDA_VISIBLE_DEVICES=0 run p-nobn-acc8 120 "$W/p-nobn-acc8" "${PX[@]}" --steps 16 ||
        pfail "g: nobn --accumulate 8 run (exit $?, see p-nobn-acc8.log)"
      run p-nobn-pp2dp2 120 "$W/p-nobn-pp2dp2" "${PX[@]}" --steps 2 ||
        pfail "g: nobn S=2 x D=2 run (exit $?, see p-nobn-pp2dp2.log)"
      if out=$(p_compare g p-nobn-pp2dp2 p-nobn-acc8 1e-5 8 2 2>&1); then
        pass "P g: nobn S=2 x D=2 M=4 (global batch 64) vs --accumulate 8: $out"
      else
        pfail "g: nobn S=2 x D=2 M=4 vs --accumulate 8: $out"
      fi
    fi
    # e. a checkpoint of the stages (their union, one file) and a resumed
    # run: steps 4 and 5 as in a's uninterrupted run.
    if [ -x "$W/p-nobn-pp2" ] && [ -f "$LOGS/p-nobn-pp2.log" ]; then
      run p-ckpt3 120 "$W/p-nobn-pp2" "${PX[@]}" --steps 3 --checkpoint "$PW/ck3.cnnw" ||
        pfail "e: 3 steps with --checkpoint (exit $?, see p-ckpt3.log)"
      run p-resume 120 "$W/p-nobn-pp2" "${PX[@]}" --steps 5 --resume "$PW/ck3.cnnw" \
        --checkpoint "$PW/ck5.cnnw" || pfail "e: --resume (exit $?, see p-resume.log)"
      if out=$($PY - "$LOGS/p-nobn-pp2.log" "$LOGS/p-resume.log" "$PW/ck5.cnnw" "$PW/nobn_init.npz" 2>&1 <<'PYEOF'
import glob, re, sys
import numpy as np
from cnnc.cnnw import read_cnnw
step = re.compile(r"^step (\d+) loss (\S+)", re.M)
full = dict((int(k), float(v)) for k, v in step.findall(open(sys.argv[1]).read()))
res = dict((int(k), float(v)) for k, v in step.findall(open(sys.argv[2]).read()))
ck = read_cnnw(sys.argv[3])
names = list(np.load(sys.argv[4]).keys())
missing = [n for n in names if n not in ck]
parts = glob.glob(sys.argv[3] + ".stage*")
if sorted(res) != [4, 5] or missing or parts:
    print("resumed steps %s, missing %s, parts left %s" % (sorted(res), missing, parts))
    sys.exit(1)
rel = max(abs(res[k] - full[k]) / abs(full[k]) for k in (4, 5))
print("resumed steps 4, 5: %s vs %s (max relative %.3g); the checkpoint holds all %d tensors"
      % ([res[4], res[5]], [full[4], full[5]], rel, len(names)))
sys.exit(0 if rel <= 1e-5 else 1)
PYEOF
      ); then
        pass "P e: $out"
      else
        pfail "e: checkpoint and resume: $out"
      fi
    fi
    # c. ResNet-50 img/s and the plan.
    wait $R50_PID
    if [ -x "$W/p-r50-pp2" ] && [ -x "$W/p-r50-1x" ]; then
      grep -A8 "^pipeline plan" "$LOGS/build-p-r50-pp2.log" | tee -a "$SUMMARY"
      run p-r50-pp2 200 "$W/p-r50-pp2" --data synthetic --steps 60 ||
        pfail "c: ResNet-50 pipeline run (exit $?, see p-r50-pp2.log)"
      CUDA_VISIBLE_DEVICES=0 run p-r50-1x 200 "$W/p-r50-1x" --data synthetic --steps 60 ||
        pfail "c: ResNet-50 one-GPU run (exit $?, see p-r50-1x.log)"
      note "c: ResNet-50 f32 batch 128, pipeline S=2 x M=8 (micro-batch 16): $(grep '^done:' "$LOGS/p-r50-pp2.log" | tail -1)"
      note "c: ResNet-50 f32 batch 128, one GPU:                             $(grep '^done:' "$LOGS/p-r50-1x.log" | tail -1)"
    else
      pfail "c: the ResNet-50 executables did not build (see build-p-r50-*.log)"
    fi
    # f. ResNet-50 at f16 (the default precision), as c.
    if [ -x "$W/p-r50f16-pp2" ] && [ -x "$W/p-r50f16-1x" ]; then
      run p-r50f16-pp2 200 "$W/p-r50f16-pp2" --data synthetic --steps 60 ||
        pfail "f: ResNet-50 f16 pipeline run (exit $?, see p-r50f16-pp2.log)"
      CUDA_VISIBLE_DEVICES=0 run p-r50f16-1x 200 "$W/p-r50f16-1x" --data synthetic --steps 60 ||
        pfail "f: ResNet-50 f16 one-GPU run (exit $?, see p-r50f16-1x.log)"
      note "f: ResNet-50 f16 batch 128, pipeline S=2 x M=8 (micro-batch 16): $(grep '^done:' "$LOGS/p-r50f16-pp2.log" | tail -1)"
      note "f: ResNet-50 f16 batch 128, one GPU:                             $(grep '^done:' "$LOGS/p-r50f16-1x.log" | tail -1)"
    else
      pfail "f: the ResNet-50 f16 executables did not build (see build-p-r50f16-*.log)"
    fi
    # d. a stage killed mid-run stops the run with one error, no hang.
    if [ -x "$W/p-nobn-pp2" ]; then
      t=$SECONDS
      run p-kill 90 "$W/p-nobn-pp2" "${PX[@]}" --steps 1000000 &
      KP=$!
      for _ in $(seq 1 60); do grep -q "^step 2 " "$LOGS/p-kill.log" 2>/dev/null && break; sleep 1; done
      victim=$(pgrep -f "$W/p-nobn-pp2" | while read -r p; do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -q '^CNNC_RANK=0$' && echo "$p"; done | head -1)
      if [ -n "$victim" ]; then
        kt=$SECONDS
        kill -9 "$victim"
        wait $KP
        r=$?
        n=$(grep -c "pipeline run failed" "$LOGS/p-kill.log")
        if [ $r -ne 0 ] && [ $r -ne 124 ] && [ "$n" -eq 1 ] && ((SECONDS - kt <= 60)); then
          pass "P d: stage 0 SIGKILLed: exit $r after $((SECONDS - kt)) s, one error: $(grep 'pipeline run failed' "$LOGS/p-kill.log")"
        else
          pfail "d: stage 0 SIGKILLed: exit $r (124 = hung) after $((SECONDS - kt)) s, $n 'pipeline run failed' lines"
        fi
      else
        kill "$KP" 2>/dev/null
        wait $KP
        pfail "d: no stage-0 process found to kill (see p-kill.log)"
      fi
    fi
  else
    pfail "prepare.py (exit $?, see p-prepare.log)"
  fi
  if ((${#P_FAILS[@]} == 0)); then
    echo "PIPELINE PART P: PASS" | tee -a "$SUMMARY"
  else
    echo "PIPELINE PART P: FAIL ${P_FAILS[*]}" | tee -a "$SUMMARY"
  fi
  part_end P
fi

# ---------------------------------------------------------------- R
# The runtime's own NCCL checks (formerly in the one- and two-GPU scripts).
if has R; then
  part_begin R
  run r-runtime-build 300 bash -c "cmake -S runtime -B $W/rt -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CUDA_ARCHITECTURES=90a \
      -DCNNRT_TURBOJPEG_INCLUDE_DIR=$ROOT/.carry/ext/include \
      -DCNNRT_TURBOJPEG_LIBRARY=$ROOT/.carry/rt/lib/libturbojpeg.a \
      -DPNG_PNG_INCLUDE_DIR=$ROOT/.carry/ext/include -DPNG_LIBRARY=$ROOT/.carry/rt/lib/libpng16.a \
      -DZLIB_INCLUDE_DIR=$ROOT/.carry/ext/include -DZLIB_LIBRARY=$ROOT/.carry/rt/lib/libz.a &&
    ninja -C $W/rt cnnrt_nccl_check" ||
    fail "R: runtime build (see r-runtime-build.log)"
  CHECK=$(find "$W/rt" -name cnnrt_nccl_check -type f 2>/dev/null | head -1)
  if [ -n "$CHECK" ]; then
    for r in 0 1; do
      CNNC_RANK=$r CNNC_WORLD_SIZE=2 CNNC_LOCAL_RANK=$r CNNC_DIST_INIT=file://$W/id2 \
        CNNC_DIST_TIMEOUT=60 run "r-pair-$r" 120 "$CHECK" single &
    done
    wait
    n=$(grep -l "world size 2 through NCCL.*: ok$" "$LOGS"/r-pair-*.log | wc -l)
    [ "$n" -eq 2 ] && pass "R: 2 ranks all-reduce in captured graphs" || fail "R: 2-rank nccl_check"
    # Rank 1 leaves right after the rendezvous ("dead" mode); rank 0 must end.
    CNNC_RANK=1 CNNC_WORLD_SIZE=2 CNNC_LOCAL_RANK=1 CNNC_DIST_INIT=file://$W/id3 \
      run r-left-1 60 "$CHECK" dead &
    t=$SECONDS
    CNNC_RANK=0 CNNC_WORLD_SIZE=2 CNNC_LOCAL_RANK=0 CNNC_DIST_INIT=file://$W/id3 \
      CNNC_DIST_TIMEOUT=20 run r-left-0 120 "$CHECK" single
    r=$?
    wait
    [ $r -eq 1 ] && pass "R: rank 0 stopped with a message $((SECONDS - t)) s after rank 1 left" ||
      fail "R: rank 1 left: rank 0 exit $r (124 = hung)"
    # A rank that never comes.
    t=$SECONDS
    CNNC_RANK=0 CNNC_WORLD_SIZE=2 CNNC_DIST_INIT=file://$W/dead-id CNNC_DIST_TIMEOUT=10 \
      run r-dead 90 "$CHECK" dead
    r=$?
    if [ $r -eq 1 ] && grep -q "did not complete in 10 s" "$LOGS/r-dead.log"; then
      pass "R: a rank that never comes: exit 1 after $((SECONDS - t)) s"
    else
      fail "R: a rank that never comes: exit $r after $((SECONDS - t)) s"
    fi
    # A rank whose local rank has no GPU.
    CUDA_VISIBLE_DEVICES=0 CNNC_RANK=1 CNNC_WORLD_SIZE=2 CNNC_LOCAL_RANK=1 \
      CNNC_DIST_INIT=file://$W/dev-id run r-devices 60 "$CHECK" devices
    r=$?
    [ $r -eq 1 ] && grep -q "needs GPU 1" "$LOGS/r-devices.log" && pass "R: missing GPU reported" ||
      fail "R: missing GPU (exit $r)"
  fi
  part_end R
fi
exit $rc
