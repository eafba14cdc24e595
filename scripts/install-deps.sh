#!/usr/bin/env bash
# Installs every build and test dependency of cnnc from Debian 12's archive (plus the LLVM 22
# packages the image's apt sources provide). Idempotent; run as root (or with sudo available).
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
PKGS=(
  cmake ninja-build g++ lld
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools libzstd-dev
  libfmt-dev libonnx-dev libprotobuf-dev protobuf-compiler
  libgtest-dev googletest
  clang-22 libfuzzer-22-dev libclang-rt-22-dev libturbojpeg0-dev libpng-dev
  python3-torch python3-torchvision python3-onnx python3-numpy python3-pytest python3-sklearn
  python3-setuptools python3-pip python3-venv python3-pil python3-tqdm python3-matplotlib
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "install-deps: all dependencies present"
