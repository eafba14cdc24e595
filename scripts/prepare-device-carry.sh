#!/usr/bin/env bash
# Copies what the GPU machine needs and cannot build (it has no MLIR) into
# .carry/ (git-ignored): the static cnnc binary, libcnnrt.a and the runtime
# headers. Pass `.carry` in the device call's carry list and set
# CNNC_RUNTIME_DIR=$PWD/.carry/rt there.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD_DIR:-build}
# The runtime libraries are rebuilt first: a libcnnrt_nccl.a older than
# cnnrt.h's ContextOptions (a field added, the Context's layout shifted)
# crashed every pipeline stage on the device (session 29: signal 11).
[ -f "$B/build.ninja" ] && ninja -C "$B" cnnrt cnnrt_nccl >/dev/null
rm -rf .carry && mkdir -p .carry/rt/lib
cp "$B/bin/cnnc" .carry/cnnc
strip .carry/cnnc
# cnnc itself (its CPU data path) needs libturbojpeg/libpng at run time; the
# GPU machine may lack them: device scripts put .carry/lib on LD_LIBRARY_PATH.
mkdir -p .carry/lib
for so in $(ldd .carry/cnnc | awk '/turbojpeg|libpng/ {print $3}'); do
  cp -L "$so" .carry/lib/
done
cp "$B/lib/libcnnrt.a" .carry/rt/lib/
# The NCCL part (data-parallel steps link it; see docs/data-parallel.md).
[ -f "$B/lib/libcnnrt_nccl.a" ] && cp "$B/lib/libcnnrt_nccl.a" .carry/rt/lib/
# The runtime's image decoders, statically: the GPU machine need not have
# libturbojpeg/libpng development files (cnnc links what the .link file says).
if grep -q turbojpeg "$B/lib/libcnnrt.a.link" 2>/dev/null; then
  for a in libturbojpeg.a libpng16.a libz.a; do
    cp "/usr/lib/x86_64-linux-gnu/$a" .carry/rt/lib/
  done
  echo "{libdir}/libturbojpeg.a {libdir}/libpng16.a {libdir}/libz.a -lpthread" \
    >.carry/rt/lib/libcnnrt.a.link
  # Debian's static libjpeg-turbo is not position independent: a shared
  # step library (the Python entry, --emit lib) links the shared copies,
  # found through its rpath.
  cp -L /usr/lib/x86_64-linux-gnu/libturbojpeg.so.0 \
    /usr/lib/x86_64-linux-gnu/libpng16.so.16 .carry/rt/lib/
  echo "-L{libdir} -Xlinker -l:libturbojpeg.so.0 -Xlinker -l:libpng16.so.16" \
    "-Xlinker -rpath={libdir} -lpthread" >.carry/rt/lib/libcnnrt.a.link-shared
  # Headers, so that the GPU machine can build the runtime (and its GPU
  # tests) with image decoders against the static copies above.
  mkdir -p .carry/ext/include
  for h in turbojpeg.h png.h pngconf.h pnglibconf.h zlib.h zconf.h; do
    cp -L "/usr/include/$h" .carry/ext/include/
  done
else
  cp "$B/lib/libcnnrt.a.link" .carry/rt/lib/ 2>/dev/null || true
fi
cp -r runtime/include .carry/rt/include
[ -f data/generated/digits/test_batch.bin ] && cp -r data/generated/digits .carry/digits || /usr/bin/python3 scripts/make_digits.py --out .carry/digits
du -sh .carry
