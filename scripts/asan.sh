#!/usr/bin/env bash
# Builds cnnc, cnnc-opt and the unit tests with AddressSanitizer into
# build-asan/ (no CUDA runtime) and runs the unit tests, the lit tests and the
# e2e numerics against it. Not part of CI (about 10 minutes on 2 cores); run
# it after touching the reference interpreter, the importer or a pass.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD_DIR:-build-asan}
if [ ! -f "$B/build.ninja" ]; then
  cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    -DCMAKE_CXX_FLAGS="-fsanitize=address -fno-omit-frame-pointer" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address" -DCNNRT_ENABLE_CUDA=OFF
fi
B=$(realpath "$B")
ninja -C "$B" cnnc cnnc-opt cnnc-unittests cnnc-reference-run
export ASAN_OPTIONS=detect_leaks=0  # LLVM's static singletons live until exit
"$B/bin/cnnc-unittests"
# exe.mlir needs the CUDA runtime, which this build leaves out.
/usr/lib/llvm-22/bin/lit -q "$B/test" --filter-out 'Target/CUDA/exe.mlir'
CNNC_BUILD_DIR="$B" CNNC="$B/bin/cnnc" PYTHONPATH=python \
  /usr/bin/python3 -m pytest -q -p no:cacheprovider test/e2e
