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
# CNNRT_REPRO_RUNS (the reproducibility probe's run count): not a number,
# trailing junk, out of range.
for v in many 5x 1 101; do
  out=$(CNNRT_REPRO_RUNS=$v "$1" --data synthetic --steps 1 2>&1)
  rc=$?
  echo "$out"
  [ "$rc" -eq 1 ] || { echo "FAIL: CNNRT_REPRO_RUNS=$v: exit $rc, expected 1"; exit 1; }
  [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || { echo "FAIL: expected one line"; exit 1; }
  grep -qx "cnnrt: CNNRT_REPRO_RUNS must be an integer from 2 to 100, not '$v'" <<<"$out" ||
    { echo "FAIL: CNNRT_REPRO_RUNS=$v: unexpected message"; exit 1; }
done
# CNNRT_PROFILE_JSON asks for the profile; CNNRT_PROFILE=0 beside it cannot
# be honoured (the file would never be written).
out=$(CNNRT_PROFILE=0 CNNRT_PROFILE_JSON=/nonexistent/p.json "$1" --data synthetic --steps 3 2>&1)
rc=$?
echo "$out"
[ "$rc" -eq 1 ] || { echo "FAIL: CNNRT_PROFILE=0 with CNNRT_PROFILE_JSON: exit $rc, expected 1"; exit 1; }
[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || { echo "FAIL: expected one line"; exit 1; }
grep -qx "cnnrt: CNNRT_PROFILE_JSON=/nonexistent/p.json needs the profile, but CNNRT_PROFILE turns it off" <<<"$out" ||
  { echo "FAIL: CNNRT_PROFILE_JSON: unexpected message"; exit 1; }
