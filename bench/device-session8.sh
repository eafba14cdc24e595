#!/usr/bin/env bash
# Session 8's H100 runs (device tool, repo root, .carry/ from
# scripts/prepare-device-carry.sh; outputs in $OUT). PARTS selects:
#   p  the runtime built there and runtime/test/cudnn_fusion_check.cu at
#      batch 128: cuDNN graph API conv + BatchNorm statistics (+ BN-apply/ReLU
#      prologue) on ResNet-50's shapes, supported? as fast as the plain conv?
#      the same numbers? (issue 13)
#   b  data_pipeline.sh with 16 workers (issue 15, after the faster resample)
#      and python_path.py WITH torch.compile in the same run (issue 10)
#   c  check_zoo.py on the zoo models not yet checked on the GPU (issue 9),
#      then zoo_bench.py for ConvNeXt-Tiny (the channel_sum reductions)
#   r  bench.py ResNet-50/18: cnnc default vs torch.compile (issue 13);
#      BENCH_VARIANTS="default=;legacy=CNNRT_CONV_GRAPH=0" adds variants
# Each part is bounded by `timeout` so that one call returns what finished.
set -uo pipefail
PARTS=${PARTS:-pbc}
source "$(dirname "$0")/device-env.sh"
if [[ $PARTS == *p* ]]; then
  W=/tmp/s8rt
  build_runtime $W "${P1_S:-240}" cnnrt_cudnn_fusion_check cnnrt_ops_check
  # The runtime's op checks (f16 NHWC convolutions through the graph API
  # where it is faster), with the algorithm choices printed.
  O=$(find $W -name cnnrt_ops_check -type f | head -1)
  [ -n "$O" ] && CNNRT_VERBOSE=1 CNNRT_ALGO_CACHE=$W/ops_algos.txt timeout 120 "$O" >"$OUT/ops_check.log" 2>&1
  echo "=== ops_check exit $?"; grep -E "ops_check|graph|FAIL|mismatch" "$OUT/ops_check.log" | tail -25
  P=$(find $W -name cnnrt_cudnn_fusion_check -type f | head -1)
  if [ "${PROBE:-1}" = 1 ] && [ -n "$P" ]; then
    timeout "${P2_S:-240}" "$P" "${PROBE_BATCH:-128}" 2>&1 | tee "$OUT/fusion_check.log"
    echo "=== fusion_check exit ${PIPESTATUS[0]}"
  fi
fi
if [[ $PARTS == *b* ]]; then
  timeout "${B1_S:-150}" bash bench/data_pipeline.sh "${WORKERS:-16}" 100 2>&1 | filter |
    tee "$OUT/data_pipeline.log"
  echo "=== data_pipeline exit ${PIPESTATUS[0]}"
  timeout "${B2_S:-330}" python3 bench/python_path.py --cnnc "$C" 2>&1 | filter |
    tee "$OUT/python_path.log"
  echo "=== python_path exit ${PIPESTATUS[0]}"
fi
if [[ $PARTS == *c* ]]; then
  CHECK_S=${CHECK_S:-400} BENCH_S=${BENCH_S:-120} \
    BENCH_ARGS="--no-compile --models convnext_tiny" \
    bash bench/device-zoo.sh --models "${ZOO_MODELS:-vgg11_bn,alexnet,resnet18,squeezenet1_0}" 2>&1 |
    tee "$OUT/zoo.log" | tail -60
fi
if [[ $PARTS == *r* ]]; then
  timeout "${R_S:-420}" python3 bench/bench.py --cnnc "$C" --models resnet50,resnet18 \
    ${BENCH_VARIANTS:+--variants "$BENCH_VARIANTS"} 2>&1 | filter | tee "$OUT/bench.log"
  echo "=== bench exit ${PIPESTATUS[0]}"
fi
