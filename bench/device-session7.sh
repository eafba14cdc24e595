#!/usr/bin/env bash
# Session 7's H100 runs (device tool, repo root, .carry/ from
# scripts/prepare-device-carry.sh; outputs in $OUT). PARTS selects:
#   a  bench.py: ResNet-50 and ResNet-18 (batch 128), cnnc default and
#      --remat (cnn-remat: BN-apply/ReLU recomputed in backward) vs PyTorch
#      eager f32, AMP + channels_last and torch.compile AMP + channels_last
#      (issue 13: step time and peak memory side by side)
#   b  data_pipeline.sh (issue 15: JPEG ImageFolder vs --data synthetic) and
#      python_path.py (issue 10: cnnc.compile's step vs the executable)
#   c  check_zoo.py on the 11 zoo models never checked on the GPU (issue 9),
#      then zoo_bench.py for ConvNeXt-Tiny and DenseNet-121
# Each part is bounded by `timeout` so that one call returns what finished.
set -uo pipefail
PARTS=${PARTS:-abc}
source "$(dirname "$0")/device-env.sh"
if [[ $PARTS == *a* ]]; then
  timeout "${A_S:-420}" python3 bench/bench.py --cnnc "$C" --models resnet50,resnet18 \
    --variants "default=;remat=--remat" 2>&1 | filter | tee "$OUT/bench.log"
  echo "=== bench exit ${PIPESTATUS[0]}"
fi
if [[ $PARTS == *b* ]]; then
  timeout "${B1_S:-200}" bash bench/data_pipeline.sh "${WORKERS:-8 16}" 100 2>&1 | filter |
    tee "$OUT/data_pipeline.log"
  echo "=== data_pipeline exit ${PIPESTATUS[0]}"
  timeout "${B2_S:-200}" python3 bench/python_path.py --cnnc "$C" --no-compile 2>&1 | filter |
    tee "$OUT/python_path.log"
  echo "=== python_path exit ${PIPESTATUS[0]}"
fi
if [[ $PARTS == *c* ]]; then
  CHECK_S=${CHECK_S:-400} BENCH_S=${BENCH_S:-150} \
    BENCH_ARGS="--no-compile --models convnext_tiny,densenet121" \
    bash bench/device-zoo.sh --models "${ZOO_MODELS:-resnext50_32x4d,googlenet,inception_v3,mobilenet_v2,mnasnet1_0,efficientnet_v2_s,regnet_x_400mf,squeezenet1_0,vgg11_bn,alexnet,resnet18}" 2>&1 |
    tee "$OUT/zoo.log" | tail -60
fi
