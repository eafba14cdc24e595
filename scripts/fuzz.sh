#!/usr/bin/env bash
# libFuzzer builds and runs of the fuzz targets (fuzz/, docs/robustness.md).
#
#   scripts/fuzz.sh build                      build the libFuzzer binaries in build-san/
#                                              (scripts/sanitizer-build.sh: clang-22,
#                                              -fsanitize=fuzzer,address,undefined)
#   scripts/fuzz.sh fast-build [TARGETS...]    build them in build-fuzz/ without ASan
#                                              (clang-22 -O2, UBSan, libFuzzer's coverage);
#                                              FUZZ_BUILD=fast selects it for ci/campaign
#   scripts/fuzz.sh ci [SECONDS]               every target for SECONDS (default 8) from a
#                                              copy of its corpus, fixed seed: the CI job
#   scripts/fuzz.sh campaign TARGET SECONDS    a long run; new coverage is merged into
#                                              fuzz/corpus/TARGET, crashers land in
#                                              fuzz/regressions/TARGET (add them to git)
#   scripts/fuzz.sh device-carry [TARGETS...]  the fast build's binaries (default reference
#                                              train-step), stripped, into .carry-fuzz/ for
#                                              bench/device-fuzz.sh on the GPU machine's cores
#
# Limits (a run exceeding one is a finding): -timeout=10 s per input,
# -rss_limit_mb=2048, -malloc_limit_mb=1024 (one allocation).
# Targets: cnnw npy cnnt safetensors cifar image onnx onnx-model pipeline
# reference train-step. The ONNX targets get fuzz/dict/onnx.dict.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
B=${SAN_BUILD_DIR:-build-san}
[ "${FUZZ_BUILD:-}" != fast ] || B=build-fuzz
TARGETS=(cnnw npy cnnt safetensors cifar image onnx onnx-model pipeline
  reference train-step)
LIMITS=(-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024)
# allow_user_poisoning=0: LLVM's BumpPtrAllocator poisons its slabs when
# compiled with ASan; our instrumented objects and Debian's uninstrumented
# libMLIR each instantiate its inline code, and whichever copy the linker
# keeps can leave a slab poisoned that the other side allocates from (a
# false use-after-poison while constructing an MLIRContext).
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}:allow_user_poisoning=0"
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

build() {
  if [ "$B" = build-fuzz ]; then
    fast_build "${TARGETS[@]/#/cnnc-fuzz-}"
  else
    ./scripts/sanitizer-build.sh "${TARGETS[@]/#/cnnc-fuzz-}"
  fi
}

# The fast build: no ASan (shadow memory on every tensor access, redzones
# on every allocation), so a campaign spends its core on inputs. Without it
# a crash, an abort, a hang, an out-of-memory or a UBSan report is still a
# finding; a heap overflow that does not crash is not (the ASan campaigns
# and CI's asan.sh cover those). UBSan stays: it is cheap and found the
# signed overflows so far. (Measured in session 24: ASan was not the main
# cost of the reference target, libFuzzer's comparison tracing in the
# interpreter's kernels was; fuzz/CMakeLists.txt turns that off for them.)
fast_build() {
  if [ ! -f build-fuzz/build.ninja ]; then
    local san="-fsanitize=undefined -fno-sanitize=vptr,function -fno-sanitize-recover=undefined"
    CC=clang-22 CXX=clang++-22 cmake -S . -B build-fuzz -G Ninja \
      -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CXX_FLAGS_RELEASE="-O2 -gline-tables-only -DNDEBUG" \
      -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
      -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
      -DCNNRT_ENABLE_CUDA=OFF -DCNNC_FUZZ=ON \
      -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link $san -fno-omit-frame-pointer" \
      -DCMAKE_EXE_LINKER_FLAGS="$san"
  fi
  ninja -C build-fuzz -j "${JOBS:-$(nproc)}" "$@"
}

run_target() { # target seconds corpus-dir artifact-dir [extra args]
  local t=$1 secs=$2 corpus=$3 art=$4
  shift 4
  mkdir -p "$art"
  local dict=()
  case $t in
  onnx | onnx-model | reference | train-step)
    dict=(-dict="$ROOT/fuzz/dict/onnx.dict")
    ;;
  esac
  CNNC_FUZZ_ONNX_DATA_DIR="$ROOT/fuzz/regressions/onnx" \
    "$B/bin/cnnc-fuzz-$t" "${LIMITS[@]}" "${dict[@]}" -max_total_time="$secs" \
    -artifact_prefix="$art/" -print_final_stats=1 "$corpus" "$@" \
    "$ROOT/fuzz/regressions/$t"
}

case "${1:-}" in
build) build ;;
fast-build)
  shift
  B=build-fuzz
  if [ $# -gt 0 ]; then fast_build "${@/#/cnnc-fuzz-}"; else build; fi
  ;;
ci)
  secs=${2:-8}
  build
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  fail=0
  for t in "${TARGETS[@]}"; do
    cp -r "fuzz/corpus/$t" "$work/$t"
    echo "== fuzz $t (${secs} s)"
    if ! run_target "$t" "$secs" "$work/$t" "$work/artifacts-$t" -seed=1 \
      >"$work/$t.log" 2>&1; then
      tail -40 "$work/$t.log"
      echo "fuzz $t: FAILED; the input is in the log above (artifact: $(ls "$work/artifacts-$t"))"
      fail=1
    else
      grep -E "stat::number_of_executed_units|Done" "$work/$t.log" | tr '\n' ' '
      echo
    fi
  done
  exit $fail
  ;;
campaign)
  t=${2:?target}
  secs=${3:?seconds}
  if [ -z "${FUZZ_NO_BUILD:-}" ]; then
    if [ "$B" = build-fuzz ]; then fast_build "cnnc-fuzz-$t"; else ./scripts/sanitizer-build.sh "cnnc-fuzz-$t"; fi
  fi
  work=${FUZZ_WORK:-$B/campaign-$t}
  mkdir -p "$work/new"
  # FUZZ_ARGS: more libFuzzer flags, e.g. -fork=2 (one campaign, two
  # worker processes).
  # shellcheck disable=SC2086
  run_target "$t" "$secs" "$work/new" "$ROOT/fuzz/regressions/$t" \
    -seed="${FUZZ_SEED:-0}" -reload=0 ${FUZZ_ARGS:-} "fuzz/corpus/$t" 2>&1 |
    tee "$work/log" | grep -E "^#[0-9]+:? +(pulse|DONE|cov)|stat::|ERROR|SUMMARY" || true
  # Keep what adds coverage.
  # (Artifacts of inputs that crash during the merge go to $work, not to the
  # current directory.)
  # FUZZ_MERGE: the merge's flags (default -merge=1; none: no merge, e.g.
  # between the slices of a campaign run in turns; -set_cover_merge=1
  # -use_counters=0 keeps a small edge-covering set).
  # shellcheck disable=SC2086
  [ "${FUZZ_MERGE:-}" = none ] || "$B/bin/cnnc-fuzz-$t" ${FUZZ_MERGE:--merge=1} \
    -artifact_prefix="$work/merge-" "fuzz/corpus/$t" "$work/new" >/dev/null 2>&1 || true
  ;;
device-carry)
  shift
  [ $# -gt 0 ] || set -- reference train-step
  B=build-fuzz
  fast_build "${@/#/cnnc-fuzz-}"
  rm -rf .carry-fuzz && mkdir -p .carry-fuzz/lib
  for t in "$@"; do
    cp "build-fuzz/bin/cnnc-fuzz-$t" .carry-fuzz/ && strip ".carry-fuzz/cnnc-fuzz-$t"
  done
  # The GPU machine may lack the image decoders' shared libraries.
  for so in $(ldd "build-fuzz/bin/cnnc-fuzz-$1" | awk '/turbojpeg|libpng/ {print $3}'); do
    cp -L "$so" .carry-fuzz/lib/
  done
  # Compressed: the device tool carries at most 64 MiB with .carry/.
  (cd .carry-fuzz && tar cJf bin.tar.xz cnnc-fuzz-* lib && rm -rf cnnc-fuzz-* lib)
  du -sh .carry-fuzz
  ;;
*)
  sed -n '2,23p' "$0"
  exit 2
  ;;
esac
