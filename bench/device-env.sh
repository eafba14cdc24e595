# Sourced by the bench/device-session*.sh scripts (GPU machine, repo root,
# .carry/ from scripts/prepare-device-carry.sh): the carried compiler and
# runtime on the paths, $OUT for the files that come back, $C the compiler,
# the GPU's name in $OUT/gpu.txt, and `filter` for PyTorch's export warnings.
export CNNC_RUNTIME_DIR=$PWD/.carry/rt PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
C=$PWD/.carry/cnnc
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
filter() { grep -v -e Warning -e "warnings.warn" -e "torch.onnx.export" -e "_C._jit_pass"; }
# build_runtime DIR SECONDS TARGET...: the runtime (runtime/) built in DIR for
# sm_90a with the given ninja targets; logs in $OUT/rt-*.log.
build_runtime() {
  local dir=$1 s=$2
  shift 2
  timeout "$s" bash -c "cmake -S runtime -B $dir -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CUDA_ARCHITECTURES=90a >$OUT/rt-cmake.log 2>&1 &&
    ninja -C $dir $* >$OUT/rt-build.log 2>&1" ||
    { echo "runtime build failed"; tail -30 "$OUT/rt-build.log"; }
}
