#!/usr/bin/env bash
# Copies what the GPU machine needs and cannot build (it has no MLIR) into
# .carry/ (git-ignored): the static cnnc binary, libcnnrt.a and the runtime
# headers. Pass `.carry` in the device call's carry list and set
# CNNC_RUNTIME_DIR=$PWD/.carry/rt there.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD_DIR:-build}
rm -rf .carry && mkdir -p .carry/rt/lib
cp "$B/bin/cnnc" .carry/cnnc
strip .carry/cnnc
cp "$B/lib/libcnnrt.a" .carry/rt/lib/
cp -r runtime/include .carry/rt/include
[ -f data/generated/digits/test_batch.bin ] && cp -r data/generated/digits .carry/digits || /usr/bin/python3 scripts/make_digits.py --out .carry/digits
du -sh .carry
