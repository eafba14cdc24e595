#!/usr/bin/env bash
# Runs every test (lit, GoogleTest, Python numerics vs PyTorch) through ctest.
# GPU tests (label gpu) report "Skipped" on machines without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
./scripts/prepare-data.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j "${JOBS:-$(nproc)}" "$@"
