#!/usr/bin/env bash
# Configures and builds cnnc (Release, Ninja, lld) into ./build.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
# nvcc lives in /usr/local/cuda/bin, which a fresh shell may not have on PATH:
# the runtime (libcnnrt) and the nvcc lit tests need it.
if [ -z "${CUDACXX:-}" ] && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
  export PATH="/usr/local/cuda/bin:$PATH"
fi
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit
fi
ninja -C "$BUILD_DIR" -j "${JOBS:-$(nproc)}"
