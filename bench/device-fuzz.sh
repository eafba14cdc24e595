#!/usr/bin/env bash
# On the GPU machine's CPU cores (device tool), from the repo root, with
# .carry-fuzz/ from `scripts/fuzz.sh device-carry`: libFuzzer campaigns of
# the fast build (no ASan, UBSan on; docs/robustness.md), FUZZ_WORKERS
# independent processes per target (distinct seeds, each its own new-units
# directory over the shared corpus and regressions), FUZZ_S seconds each.
# Prints each target's executions summed over its workers; a finding's
# input is in $OUT/fuzz-artifacts/ and its log in $OUT/fuzz-<target>-<k>.log.
#
#   FUZZ_S=520 FUZZ_WORKERS=8 bash bench/device-fuzz.sh [TARGETS...]
#
# Limits as scripts/fuzz.sh's campaigns: -timeout=60 (wall clock, a loaded
# machine), -rss_limit_mb=2048, -malloc_limit_mb=1024, -max_len=8192.
set -uo pipefail
ROOT=$PWD
OUT=${OUT:-/tmp/out}
SECS=${FUZZ_S:-520}
W=${FUZZ_WORKERS:-8}
BIN=/tmp/device-fuzz/bin
mkdir -p "$BIN" && tar xJf "$ROOT/.carry-fuzz/bin.tar.xz" -C "$BIN" || exit 2
[ $# -gt 0 ] || set -- reference train-step
export LD_LIBRARY_PATH=$BIN/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export CNNC_FUZZ_ONNX_DATA_DIR=$ROOT/fuzz/regressions/onnx
nproc
for t in "$@"; do
  [ -x "$BIN/cnnc-fuzz-$t" ] || { echo "no $BIN/cnnc-fuzz-$t: run scripts/fuzz.sh device-carry"; exit 2; }
  for k in $(seq 1 "$W"); do
    work=/tmp/device-fuzz/$t-$k
    mkdir -p "$work/new" "$OUT/fuzz-artifacts/$t-$k"
    (cd "$work" && timeout $((SECS + 90)) "$BIN/cnnc-fuzz-$t" -timeout=60 -rss_limit_mb=2048 \
      -malloc_limit_mb=1024 -dict="$ROOT/fuzz/dict/onnx.dict" -max_len=8192 \
      -report_slow_units=600 -max_total_time="$SECS" -seed=$((2500 + 100 * k)) -reload=0 \
      -print_final_stats=1 -artifact_prefix="$OUT/fuzz-artifacts/$t-$k/" \
      new "$ROOT/fuzz/corpus/$t" "$ROOT/fuzz/regressions/$t" >"$OUT/fuzz-$t-$k.log" 2>&1
    echo "exit $?" >>"$OUT/fuzz-$t-$k.log") &
  done
done
wait
status=0
for t in "$@"; do
  total=0
  for k in $(seq 1 "$W"); do
    log=$OUT/fuzz-$t-$k.log
    n=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | awk '{print $2}' | tail -1)
    rc=$(tail -1 "$log")
    echo "$t worker $k: ${n:-?} executions, $rc"
    total=$((total + ${n:-0}))
    if [ "$rc" != "exit 0" ]; then
      status=1
      grep -E "ERROR|SUMMARY|Test unit written|runtime error" "$log" | head -5
    fi
  done
  echo "FUZZ $t: $total executions over $W workers of ${SECS} s"
done
find "$OUT/fuzz-artifacts" -type f | head -20
# Keep the logs small: only the stats and findings come back.
for f in "$OUT"/fuzz-*.log; do grep -v -E '^#[0-9]+' "$f" >"$f.tmp"; mv "$f.tmp" "$f"; done
exit $status
