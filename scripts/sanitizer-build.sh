#!/usr/bin/env bash
# Configures and builds the sanitizer build (default build-san/): clang-22,
# AddressSanitizer + UndefinedBehaviorSanitizer, libFuzzer coverage
# instrumentation (-fsanitize=fuzzer-no-link) and the libFuzzer binaries
# (CNNC_FUZZ=ON), no CUDA runtime. One build serves scripts/asan.sh (unit,
# lit and e2e tests) and scripts/fuzz.sh (fuzzing).
#   scripts/sanitizer-build.sh [ninja targets...]
set -euo pipefail
cd "$(dirname "$0")/.."
B=${SAN_BUILD_DIR:-build-san}
if [ ! -f "$B/build.ninja" ]; then
  # vptr needs RTTI (LLVM is built without); function would flag LLVM's
  # own type-punned callbacks. NDEBUG as Debian's LLVM was built: its headers
  # change layout with it (llvm::Statistic is TrackingStatistic without
  # NDEBUG, NoopStatistic with it), and a pass statistic constructed by
  # libMLIRPass in one layout and used by our pass in the other reads
  # uninitialized memory (UBSan: invalid bool in Statistic::init).
  SAN="-fsanitize=address,undefined -fno-sanitize=vptr,function -fno-sanitize-recover=undefined"
  CC=clang-22 CXX=clang++-22 cmake -S . -B "$B" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    -DCNNRT_ENABLE_CUDA=OFF -DCNNC_FUZZ=ON \
    -DCMAKE_C_COMPILER_LAUNCHER="${CMAKE_C_COMPILER_LAUNCHER:-}" \
    -DCMAKE_CXX_COMPILER_LAUNCHER="${CMAKE_CXX_COMPILER_LAUNCHER:-}" \
    -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link $SAN -fno-omit-frame-pointer" \
    -DCMAKE_EXE_LINKER_FLAGS="$SAN"
fi
ninja -C "$B" -j "${JOBS:-$(nproc)}" "$@"
