#!/usr/bin/env bash
# Bad data-parallel launch flags (./train --gpus N --nnodes M --node-rank R
# --dist-init URL) and launcher environments: one message naming what is
# wrong and exit 1, with or without a GPU (they are checked before the GPU
# is looked for). The model has no all-reduces: a launch that passes the
# checks stops at "compile it with cnnc --gpus <world size>".
# usage: bad_launch.sh MODEL_EXECUTABLE
exe=$1
fails=0
# expect "MESSAGE" [env VAR=V ...] -- ARGS...
expect() {
  local want=$1
  shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local out rc
  out=$(env -u RANK -u WORLD_SIZE -u SLURM_PROCID -u SLURM_NTASKS \
    -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE -u CNNC_RANK \
    -u CNNC_WORLD_SIZE -u CNNC_DIST_INIT "${envs[@]}" \
    "$exe" --data synthetic --steps 1 "$@" 2>&1)
  rc=$?
  echo "$ ${envs[*]} train $*"
  echo "$out"
  if [ "$rc" -ne 1 ]; then
    echo "FAIL: exit $rc, expected 1"; fails=$((fails + 1)); return
  fi
  if [ "$(printf '%s\n' "$out" | wc -l)" -ne 1 ]; then
    echo "FAIL: expected one line"; fails=$((fails + 1)); return
  fi
  if ! grep -qxF "cnnrt: $want (see --help)" <<<"$out"; then
    echo "FAIL: expected 'cnnrt: $want (see --help)'"; fails=$((fails + 1))
  fi
}

expect "--nnodes 2 needs --dist-init tcp://HOST:PORT (node 0's address and a free port there; or CNNC_DIST_INIT)" \
  -- --gpus 2 --nnodes 2 --node-rank 0
expect "--nnodes 2 needs --node-rank R (this node's index, 0 on the node whose address --dist-init names)" \
  -- --gpus 2 --nnodes 2 --dist-init tcp://node0:29400
expect "--node-rank 2 is not in [0, 2) (--nnodes 2)" \
  -- --gpus 2 --nnodes 2 --node-rank 2 --dist-init tcp://node0:29400
expect "--nnodes 2 needs --gpus N (the ranks of each node)" \
  -- --nnodes 2 --node-rank 1 --dist-init tcp://node0:29400
expect "--dist-init 'tcp://node0': no :PORT; expected file:///absolute/path (a file on a filesystem every rank sees; rank 0 writes the NCCL id there) or tcp://HOST:PORT (rank 0's host, which listens on PORT)" \
  -- --gpus 2 --dist-init tcp://node0
# CNNC_DIST_INIT stands for --dist-init; the checks pass, the model has no
# all-reduces for a world of 2 x 2.
expect "--gpus 2: this step has no all-reduces; compile it with cnnc --gpus 4 (data parallel)" \
  CNNC_DIST_INIT=tcp://node0:29400 -- --gpus 2 --nnodes 2 --node-rank 1
# Under another launcher its ranks are used.
expect "--nnodes/--node-rank are the executable's own launcher's; under torchrun its ranks are used (rank 0 of 2 (local rank 0, torchrun))" \
  RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 -- --nnodes 2 --node-rank 0
# Slurm across nodes without --dist-init: no file is shared between nodes.
expect "rank 0 of 4 (local rank 0, slurm): a slurm job across nodes needs --dist-init tcp://<first node>:<port> (rank 0's host and a free port; or CNNC_DIST_INIT), or --dist-init file:///path on a filesystem every node sees" \
  SLURM_PROCID=0 SLURM_NTASKS=4 SLURM_LOCALID=0 SLURM_NNODES=2 SLURM_JOB_ID=7 --
[ "$fails" -eq 0 ] || { echo "$fails case(s) failed"; exit 1; }
echo "all launch errors as expected"
