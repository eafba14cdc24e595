#!/usr/bin/env bash
# Makes the bundled default data and model under data/generated/:
#   digits/     the 1,797 handwritten digits of python3-sklearn, CIFAR-10 format
#   simplecnn.onnx  the SimpleCNN of DESIGN.md, exported with Debian's PyTorch
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=data/generated
mkdir -p "$OUT"
[ -f "$OUT/digits/test_batch.bin" ] || /usr/bin/python3 scripts/make_digits.py --out "$OUT/digits"
if [ ! -f "$OUT/simplecnn.onnx" ]; then
  PYTHONPATH=python /usr/bin/python3 -m cnnc.export simplecnn "$OUT/simplecnn.onnx" --batch 32 --training
fi
