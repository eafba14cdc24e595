#!/usr/bin/env bash
# On a several-GPU machine (device tool), from the repo root, with .carry/
# from scripts/prepare-device-carry.sh: the timm ms/step table
# (bench/zoo_bench.py --zoo timm) with one shard per GPU. Shard g runs
# `--shard g/N` of the families still without a result in the --resume
# files, on GPU g only (CUDA_VISIBLE_DEVICES) and pinned to its own 1/N of
# the cores (taskset), so each shard has what the one-GPU machine has
# (16 cores a GPU on the 4-GPU kinds); nothing is shared between shards but
# the host's memory bandwidth. Each writes $OUT/zoo-shard<g>.json and .log;
# the merged table is printed at the end.
#   bash bench/zoo-table-gpus.sh --timm-shape 32,224 --modes amp,compile-default \
#     --resume bench/results/timm-2.json --max-models 7 --deadline 540 ...
# ZOO_GPUS=N uses the first N GPUs only. ZOO=torchvision shards the
# torchvision zoo instead (issue 37's table: batch 64 at 224², zoo_bench.py's shapes,
# e.g. --models efficientnet_b0,mobilenet_v3_large,convnext_tiny,
# regnet_y_400mf --modes amp,compile-default,compile-reduce-overhead,
# compile-max-autotune: one model per GPU, each mode in its own process).
set -uo pipefail
export CNNC_RUNTIME_DIR=$PWD/.carry/rt PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
NG=$(nvidia-smi -L | grep -c '^GPU')
NG=${ZOO_GPUS:-$NG}
((NG >= 1)) || { echo "zoo-table-gpus: no GPU" >&2; exit 2; }
NC=$(nproc)
PER=$((NC / NG))
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
echo "zoo-table-gpus: $NG shards, $PER cores each"
pids=()
for ((g = 0; g < NG; g++)); do
  pin=()
  ((PER >= 1)) && command -v taskset >/dev/null &&
    pin=(taskset -c "$((g * PER))-$((g * PER + PER - 1))")
  CUDA_VISIBLE_DEVICES=$g "${pin[@]}" python3 bench/zoo_bench.py --cnnc "$PWD/.carry/cnnc" \
    --zoo "${ZOO:-timm}" --work "/tmp/zoo-shard$g" --shard "$g/$NG" "$@" --json "$OUT/zoo-shard$g.json" \
    >"$OUT/zoo-shard$g.log" 2>&1 &
  pids+=($!)
done
rc=0
for g in "${!pids[@]}"; do
  wait "${pids[$g]}" || { s=$?; rc=1; echo "zoo-table-gpus: shard $g exited $s"; }
  grep -v -e Warning -e "warnings.warn" -e "torch.onnx.export" -e _jit_pass \
    "$OUT/zoo-shard$g.log" | tail -25 | sed "s/^/shard$g: /"
done
shopt -s nullglob
files=("$OUT"/zoo-shard*.json)
((${#files[@]})) && python3 bench/zoo_bench.py --cnnc x --zoo "${ZOO:-timm}" --table "${files[@]}"
exit $rc
