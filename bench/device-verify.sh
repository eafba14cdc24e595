#!/usr/bin/env bash
# One device call that re-verifies the GPU side after a merge (GPU machine,
# repo root, .carry/ from scripts/prepare-device-carry.sh):
#  1. the runtime's own GPU tests (ctest -L gpu of runtime/, built there);
#  2. the CUDA backend against PyTorch (test/gpu/check_vs_torch.py);
#  3. the Python entry on CUDA tensors (test/gpu/check_python_api.py), then
#     the residual block's f32 gradients against float64, cnnc's and
#     PyTorch's (test/gpu/diag_grads.py resnet_block; a diagnostic);
#  4. GPU robustness: out of memory, corrupt checkpoints, special files
#     (test/gpu/robustness_gpu.sh);
#  5. the ops added for issue 32 against PyTorch on the GPU
#     (test/gpu/check_new_ops.py; NEW_OPS_ARGS, e.g. "--quick");
#  6. the OSA/eSE VoVNet (both gates) f32 and AMP against PyTorch
#     (check_vs_torch.py's vovnet_ese_* models);
#  7. the cross-entropy kernels with ignore_index (check_ignore_index.py);
#  8. runtime/test/dgrad_stats_check.cu on all twelve shapes at batch 128
#     (ctest runs three at batch 32; DGRAD_BATCH sets the batch), in the
#     runtime built by part 1 or configured the same way here;
#  9. BatchNorm modules in eval mode in the CUDA step (check_finetune_modes.py);
#  o. frozen layers, param groups, clipping, accumulation in the CUDA step
#     (check_finetune_optim.py);
#  h. issue 32's f16 failures, block by block: SK, RepVGG, ConvNeXt-V2's
#     GRN, BiT in small nets, the CUDA f16 step against the CPU reference's
#     f16 and f32 steps (test/gpu/check_f16_blocks.py; F16_NETS narrows).
#  s. dense prediction: torchvision's FCN, DeepLabV3 (aux heads) and LRASPP
#     through cnnc.compile and the executable with .npy masks, mIoU
#     (test/gpu/check_segmentation.py; SEG_MODELS narrows);
#  d. the executable's dense validation: a tiny FCN (with and without an
#     aux head) trains 3 steps with --eval; its per-class IoU and mIoU
#     against PyTorch's from the checkpoint's weights on the same
#     validation .npy (test/gpu/check_dense_eval.py);
#  r. the f16 step is the same computation in every process (two processes
#     over one algorithm cache agree bitwise: the resume contract;
#     test/gpu/check_determinism.py);
#  c. cnnc's compile time by stage on this machine's cores (issue 37):
#     bench/compile_time.py, ResNet-50 compiled as one nvcc unit, cold
#     with 1 and with COMPILE_HOST_UNITS (default 4) host units, then
#     unchanged, other weights, another --lr with that many host units.
#  g. issue 37: ResNet-50 f16 b128's conv+GenStats plans through the
#     reproducibility probe (each candidate's verdict), two
#     CNNRT_DETERMINISTIC=1 processes' losses identical, img/s against
#     CNNRT_DETERMINISTIC=0, then check_determinism.py (bench/genstats_repro.sh).
#  b. issue 37: the split conv+stats form's kernels, old and new in one
#     binary (runtime/test/bn_stats_bench.cu): `check` (host f64 reference,
#     bitwise equal over runs), then ResNet-50's shapes at batch BN_BATCH
#     (default 128): ms, GB/s and % of the HBM peak per shape, per step.
#  f. the f32 step at a large batch (ResNet-50, batch F32_BATCH, default 128):
#     img/s by default, with CNNRT_DETERMINISTIC=0 and with --workspace-mb
#     2048, the convolution algorithms picked (CNNRT_VERBOSE) and the
#     slowest launches (CNNRT_PROFILE); PyTorch eager f32 beside it.
#  p. where one model's step spends its time: bench/profile_model.py
#     (PROFILE_MODELS, default timm:resnest14d; CNNRT_PROFILE=1 on the
#     default f16 step, the profile JSON and the generated CUDA in $OUT/profile).
#  u. fusion A/Bs (test/gpu/bench_fusions.py; FUSION_PARTS=gn,unet): the
#     GroupNorm ResNet-18 default vs FUSION_GN_B's flags (default
#     --fuse-group-norm=false; e.g. FUSION_GN_B=--tiled-transpose), the U-Net
#     with and without --fuse-resize-concat.
#  a. A/B of two compilers: ResNet-50 f16 batch 128 (AB_MODEL, AB_BATCH,
#     AB_FLAGS) built by .carry/ab/cnnc-old and by .carry/cnnc, one
#     algorithm cache, timed old new old new (steady img/s, peak memory).
#  t. --tiled-transpose (off by default): test/gpu/check_tiled_transpose.py
#     (the default and the tiled step bitwise equal: losses and checkpoint),
#     then runtime/test/transpose_bench.cu (the kernel against the gather).
#  b also runs runtime/test/bn_grad_bench.cu (the BatchNorm gradient
#     kernels: `check`, then ResNet-50's shapes, old and new).
# Data parallelism on 2 or 4 GPUs has its own script: bench/device-dp.sh.
# Each part has its own time limit so the call returns what finished; logs
# go to $OUT.   Usage: bash bench/device-verify.sh [PARTS]  (default 1234)
set -uo pipefail
# The parts: $1, else $PARTS, else 1234 (session 32 set PARTS=abp in the
# environment and got the default parts).
PARTS=${1:-${PARTS:-1234}}
export CNNC_RUNTIME_DIR=$PWD/.carry/rt PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
CNNC=$PWD/.carry/cnnc
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
"$CNNC" --version | head -2
rc=0
part() { # name seconds command...
  local name=$1 s=$2 t0=$SECONDS r
  shift 2
  timeout "$s" "$@" >"$OUT/$name.log" 2>&1
  r=$?
  echo "=== $name: exit $r in $((SECONDS - t0)) s"
  grep -v -e UserWarning -e _jit_pass -e "^ *warnings.warn" "$OUT/$name.log" | tail -${TAIL:-25}
  [ $r -eq 0 ] || rc=1
}
# The runtime configured in /tmp/rt with the carried image decoders.
CONFIGURE_RT='cmake -S runtime -B /tmp/rt -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DCNNRT_TURBOJPEG_INCLUDE_DIR=$PWD/.carry/ext/include \
    -DCNNRT_TURBOJPEG_LIBRARY=$PWD/.carry/rt/lib/libturbojpeg.a \
    -DPNG_PNG_INCLUDE_DIR=$PWD/.carry/ext/include -DPNG_LIBRARY=$PWD/.carry/rt/lib/libpng16.a \
    -DZLIB_INCLUDE_DIR=$PWD/.carry/ext/include -DZLIB_LIBRARY=$PWD/.carry/rt/lib/libz.a \
    >/tmp/rt-cmake.log 2>&1'
if [[ $PARTS == *1* ]]; then
  part runtime-gpu 320 bash -c "$CONFIGURE_RT"' &&
    ninja -C /tmp/rt >/tmp/rt-build.log 2>&1 || { tail -30 /tmp/rt-cmake.log /tmp/rt-build.log; exit 1; }
    cd /tmp/rt && ctest -L gpu --output-on-failure --timeout 100'
fi
if [[ $PARTS == *2* ]]; then
  part check-vs-torch 200 python3 test/gpu/check_vs_torch.py --cnnc "$CNNC" --work /tmp/gpucheck \
    --digits "$PWD/.carry/digits"
fi
if [[ $PARTS == *3* ]]; then
  part python-api 120 python3 test/gpu/check_python_api.py --cnnc "$CNNC"
  # Each f32 gradient of the residual block against float64 for cnnc and
  # PyTorch (issue 35's AdamW accuracy gap: which tensor, which side).
  CNNC="$CNNC" CNNC_CACHE_DIR=/tmp/diag-cache part diag-grads 60 \
    python3 test/gpu/diag_grads.py resnet_block
  # The AdamW check's own metric per parameter (max and 99th percentile of
  # the distance from float64, cnnc and PyTorch's f32 runs) and the step-1
  # gradient at cnnc's worst element (reference interpreter on the CPU,
  # session 35: conv1.weight's worst at 0.001 of the largest gradient).
  CNNC="$CNNC" CNNC_CACHE_DIR=/tmp/diag-cache part diag-adamw 90 \
    python3 test/gpu/diag_grads.py resnet_block --optim adamw
fi
if [[ $PARTS == *4* ]]; then
  mkdir -p /tmp/carrybuild/bin && ln -sf "$CNNC" /tmp/carrybuild/bin/cnnc
  PYTHON=python3 part robustness-gpu 90 bash test/gpu/robustness_gpu.sh /tmp/carrybuild
fi
if [[ $PARTS == *5* ]]; then
  PYTHONPATH=$PWD/python part new-ops ${NEW_OPS_S:-300} python3 test/gpu/check_new_ops.py \
    --cnnc "$CNNC" ${NEW_OPS_ARGS:-}
fi
if [[ $PARTS == *6* ]]; then
  part vovnet-ese ${VOVNET_S:-200} python3 test/gpu/check_vs_torch.py --cnnc "$CNNC" \
    --work /tmp/ese --models vovnet_ese_hs,vovnet_ese_hs:nhwc,vovnet_ese_timm \
    --amp-models vovnet_ese_hs,vovnet_ese_timm --skip-digits
fi
if [[ $PARTS == *7* ]]; then
  part ignore-index ${IGNORE_S:-120} env CNNC="$CNNC" PYTHONPATH="$PWD/python" \
    python3 test/gpu/check_ignore_index.py
fi
if [[ $PARTS == *9* ]]; then
  part finetune-modes ${FINETUNE_S:-180} env CNNC="$CNNC" PYTHONPATH="$PWD/python" \
    python3 test/gpu/check_finetune_modes.py
fi
if [[ $PARTS == *o* ]]; then
  part finetune-optim ${FINETUNE_OPTIM_S:-300} env CNNC="$CNNC" PYTHONPATH="$PWD/python" \
    python3 test/gpu/check_finetune_optim.py
fi
if [[ $PARTS == *h* ]]; then
  part f16-blocks ${F16_S:-400} env PYTHONPATH="$PWD/python" python3 test/gpu/check_f16_blocks.py \
    --cnnc "$CNNC" ${F16_NETS:+--nets $F16_NETS} ${F16_STEPS:+--steps $F16_STEPS}
fi
if [[ $PARTS == *s* ]]; then
  part segmentation ${SEG_S:-300} env CNNC="$CNNC" PYTHONPATH="$PWD/python" python3 test/gpu/check_segmentation.py \
    --cnnc "$CNNC" ${SEG_MODELS:+--models $SEG_MODELS}
fi
if [[ $PARTS == *d* ]]; then
  part dense-eval ${DENSE_EVAL_S:-240} env PYTHONPATH="$PWD/python" python3 test/gpu/check_dense_eval.py \
    --cnnc "$CNNC" --work /tmp/dense-eval
fi
if [[ $PARTS == *r* ]]; then
  part determinism ${DETERMINISM_S:-200} env CNNC="$CNNC" PYTHONPATH="$PWD/python" \
    python3 test/gpu/check_determinism.py
fi
if [[ $PARTS == *g* ]]; then
  part genstats-repro ${GENSTATS_S:-540} env CNNC="$CNNC" PYTHONPATH="$PWD/python" \
    bash bench/genstats_repro.sh
fi
if [[ $PARTS == *c* ]]; then
  part compile-time ${COMPILE_S:-200} python3 bench/compile_time.py --cnnc "$CNNC" \
    --model ${COMPILE_MODEL:-resnet50} --host-units ${COMPILE_HOST_UNITS:-4} \
    --work /tmp/ct --json "$OUT/compile_time.json"
fi
if [[ $PARTS == *f* ]]; then
  part f32-step ${F32_S:-300} bash -c '
    set -e; d=/tmp/f32; mkdir -p $d; b=${F32_BATCH:-128}
    PYTHONPATH=$PWD/python python3 -c "from cnnc.export import build_model, export_onnx as e
e(build_model(\"resnet50\", 1000), \"$d/m.onnx\", ($b, 3, 224, 224), training=True, opset=17)" 2>/dev/null
    c="--train --precision fp32 --optimizer sgd --lr 0.01 --momentum 0.9"
    '"$CNNC"' $d/m.onnx $c -o $d/train; '"$CNNC"' $d/m.onnx $c --workspace-mb 2048 -o $d/train-ws
    run() { n=$1; shift; echo "$n: $(env "$@" --data synthetic --steps 12 --log-every 3 | grep -o "steady img/s [0-9]*")"; }
    run default $d/train; run CNNRT_DETERMINISTIC=0 CNNRT_DETERMINISTIC=0 $d/train
    run workspace-2048MiB $d/train-ws
    CNNRT_VERBOSE=1 $d/train --data synthetic --steps 2 2>&1 | grep -o "bwd_data algo [0-9]* math [0-9]* workspace [0-9]*" | sort | uniq -c
    CNNRT_PROFILE=1 $d/train --data synthetic --steps 3 2>&1 | grep -A8 "slowest launches"
    python3 bench/bench.py --cnnc '"$CNNC"' --models resnet50 --modes eager --steps 10 \
      --cnnc-flags "--precision fp32" --work $d/b 2>&1 | grep "^| resnet50"'
fi
if [[ $PARTS == *a* ]]; then
  # Two compilers side by side: .carry/ab/cnnc-old (copied there before
  # the carry, its revision in .carry/ab/old.rev) and .carry/cnnc; each
  # builds AB_MODEL (resnet50) at batch AB_BATCH (128) with AB_FLAGS (the
  # default f16 step), one algorithm cache, timed old new old new.
  part compiler-ab ${AB_S:-300} bash -c '
    set -e; d=/tmp/ab; mkdir -p $d; ab=$PWD/.carry/ab; m=${AB_MODEL:-resnet50}; b=${AB_BATCH:-128}
    PYTHONPATH=$PWD/python python3 -c "from cnnc.export import build_model, export_onnx as e
e(build_model(\"$m\", 1000), \"$d/m.onnx\", ($b, 3, 224, 224), training=True, opset=17)" 2>/dev/null
    $ab/cnnc-old $d/m.onnx --train ${AB_FLAGS:-} -o $d/old >$d/old.log 2>&1 &
    '"$CNNC"' $d/m.onnx --train ${AB_FLAGS:-} -o $d/new >$d/new.log 2>&1 || { tail -5 $d/new.log; exit 1; }
    wait $! || { tail -5 $d/old.log; exit 1; }
    export CNNRT_ALGO_CACHE=$d/algo.txt
    $d/new --data synthetic --steps 3 >/dev/null; $d/old --data synthetic --steps 3 >/dev/null
    echo "old = $(cat $ab/old.rev 2>/dev/null), new = $('"$CNNC"' --version | head -1)"
    for r in 1 2; do for v in old new; do
      echo "$m b$b $v run $r: $($d/$v --data synthetic --steps 80 --log-every 40 | grep -o "steady img/s [0-9]*\|peak GPU memory [0-9]* MiB" | tr "\n" " ")"
    done; done'
fi
if [[ $PARTS == *b* ]]; then
  part bn-stats ${BN_STATS_S:-300} bash -c "{ [ -f /tmp/rt/build.ninja ] || $CONFIGURE_RT; }"' &&
    ninja -C /tmp/rt cnnrt_bn_stats_bench >/tmp/rt-build.log 2>&1 ||
      { tail -30 /tmp/rt-cmake.log /tmp/rt-build.log; exit 1; }
    b="$(find /tmp/rt -name cnnrt_bn_stats_bench -type f | head -1)"
    "$b" check && "$b" '"${BN_BATCH:-128}"
  # The BatchNorm gradient kernels, old and new (bn_grad_bench.cu).
  part bn-grad ${BN_GRAD_S:-300} bash -c "{ [ -f /tmp/rt/build.ninja ] || $CONFIGURE_RT; }"' &&
    ninja -C /tmp/rt cnnrt_bn_grad_bench >/tmp/rt-build.log 2>&1 ||
      { tail -30 /tmp/rt-cmake.log /tmp/rt-build.log; exit 1; }
    b="$(find /tmp/rt -name cnnrt_bn_grad_bench -type f | head -1)"
    # The timing runs even when the check fails (its lines say which
    # variant failed; session 32 lost the timing to a check of the check).
    "$b" check; c=$?; "$b" '"${BN_BATCH:-128}"' && exit $c
fi
if [[ $PARTS == *t* ]]; then
  # --tiled-transpose: the default step and the tiled one bitwise equal,
  # then the kernel against the generic gather on BiT's shapes.
  part tiled-transpose ${TILED_S:-300} bash -c 'python3 test/gpu/check_tiled_transpose.py \
    --cnnc '"$CNNC"' --work /tmp/tt && PATH=$PATH:/usr/local/cuda/bin nvcc -O3 -std=c++17 -arch=sm_90a -Ikernels \
    -Iruntime/include -Iruntime/test runtime/test/transpose_bench.cu -o /tmp/transpose_bench &&
    /tmp/transpose_bench'
fi
if [[ $PARTS == *8* ]]; then
  part dgrad-stats ${DGRAD_S:-400} bash -c "{ [ -f /tmp/rt/build.ninja ] || $CONFIGURE_RT; }"' &&
    ninja -C /tmp/rt cnnrt_dgrad_stats_check >/tmp/rt-build.log 2>&1 ||
      { tail -30 /tmp/rt-cmake.log /tmp/rt-build.log; exit 1; }
    "$(find /tmp/rt -name cnnrt_dgrad_stats_check -type f | head -1)" '"${DGRAD_BATCH:-128}"
fi
if [[ $PARTS == *p* ]]; then
  part profile ${PROFILE_S:-300} env PYTHONPATH="$PWD/python" python3 bench/profile_model.py \
    --cnnc "$CNNC" --models "${PROFILE_MODELS:-timm:resnest14d}" --out "$OUT/profile" \
    --emit-cuda ${PROFILE_ARGS:-}
fi
if [[ $PARTS == *u* ]]; then
  part fusions ${FUSIONS_S:-300} env PYTHONPATH="$PWD/python" python3 test/gpu/bench_fusions.py \
    --cnnc "$CNNC" --work /tmp/fusions ${FUSION_PARTS:+--parts $FUSION_PARTS} \
    ${FUSION_GN_B:+--gn-b-flags="$FUSION_GN_B"}
fi
exit $rc
