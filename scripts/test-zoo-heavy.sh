#!/usr/bin/env bash
# Nightly-style: every torchvision zoo case of test/e2e/test_torchvision.py,
# including the deeper/wider variants (zoo_heavy: ResNet-101/152, DenseNet-
# 161/169/201, Inception-v3 with its auxiliary classifier at 299x299, VGG at
# 224x224, ...) that CI skips. Takes tens of minutes on the CPU reference.
set -euo pipefail
cd "$(dirname "$0")/.."
CNNC_ZOO_HEAVY=1 exec /usr/bin/python3 -m pytest -q -s -p no:cacheprovider \
  test/e2e/test_torchvision.py "$@"
