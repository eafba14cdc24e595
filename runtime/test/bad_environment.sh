#!/usr/bin/env bash
# A bad runtime environment setting: one message and exit 1, with or without
# a GPU (trainMain checks the environment before it looks for the GPU).
# usage: bad_environment.sh MODEL_EXECUTABLE
out=$(CNNRT_CONV_FUSION=bogus "$1" --data synthetic --steps 1 2>&1)
rc=$?
echo "$out"
[ "$rc" -eq 1 ] || { echo "FAIL: exit $rc, expected 1"; exit 1; }
[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || { echo "FAIL: expected one line"; exit 1; }
grep -qx "cnnrt: CNNRT_CONV_FUSION must be auto, cudnn or split, not 'bogus'" <<<"$out" ||
  { echo "FAIL: unexpected message"; exit 1; }
