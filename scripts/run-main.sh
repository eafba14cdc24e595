#!/usr/bin/env bash
# The main job: install, build, make the bundled data/model, then train
# SimpleCNN on the handwritten digits. With a GPU, cnnc compiles the step to
# CUDA and runs it; without one it falls back to the CPU reference
# interpreter and says so.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
./scripts/prepare-data.sh
./build/bin/cnnc train data/generated/simplecnn.onnx --data data/generated/digits \
  --optimizer adam --lr 0.001 --steps "${STEPS:-150}" --batch 32 -o build/simplecnn-train "$@"
