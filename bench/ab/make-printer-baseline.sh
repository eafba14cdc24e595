#!/usr/bin/env bash
# A cnnc that prints CUDA as commit REV's printer did, everything else as
# build/bin/cnnc: build/'s objects with REV's lib/Target/CUDA/EmitCUDA.cpp
# and REV's kernel prelude (kernels/*.cuh through EmbedPrelude.cmake)
# compiled in. The OLD of bench/ab/sass-compare.sh (and of an A/B timing)
# when only the printer or the prelude changed: the passes, and so the
# kernels printed and their numbering, are the same on both sides, which a
# cnnc built at an older commit does not promise while other work lands.
# Needs REV's EmitCUDA.cpp to compile against the current headers.
#   bash bench/ab/make-printer-baseline.sh REV OUT
set -euo pipefail
rev=$1 out=$(readlink -f "$2")
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$root"
git archive "$rev" kernels | tar -x -C "$tmp"
git show "$rev:lib/Target/CUDA/EmitCUDA.cpp" >"$tmp/EmitCUDA.cpp"
cmake -DPRELUDE="$tmp/kernels/Prelude.cuh" -DOUTPUT="$tmp/KernelPrelude.inc" \
  -P lib/Target/CUDA/EmbedPrelude.cmake
# build/'s own compile and link lines, pointed at the copies. The build
# lock: another build must not rewrite the objects while they are read.
exec 9>/tmp/cnnc-build.lock
flock 9
compile=$(ninja -C build -t commands bin/cnnc |
  grep -E '^/usr/bin/c\+\+ .* -c [^ ]*/lib/Target/CUDA/EmitCUDA\.cpp' | head -1)
link=$(ninja -C build -t commands bin/cnnc | tail -1)
[ -n "$compile" ] && [ -n "$link" ] || {
  echo "make-printer-baseline: no EmitCUDA.cpp compile or cnnc link line in build/" >&2
  exit 1
}
compile=$(echo "$compile" | sed \
  -e "s#-I$root/build/lib/Target/CUDA#-I$tmp -I$root/lib/Target/CUDA#" \
  -e "s#-o [^ ]*EmitCUDA\.cpp\.o#-o $tmp/EmitCUDA.cpp.o#" \
  -e "s#-c [^ ]*/lib/Target/CUDA/EmitCUDA\.cpp#-c $tmp/EmitCUDA.cpp#" \
  -e 's#-MD ##' -e 's#-MT [^ ]* ##' -e 's#-MF [^ ]* ##')
(cd build && eval "$compile")
cp build/lib/libCNNCTargetCUDA.a "$tmp/"
(cd "$tmp" && ar r libCNNCTargetCUDA.a EmitCUDA.cpp.o)
link=$(echo "$link" | sed -e "s#lib/libCNNCTargetCUDA\.a#$tmp/libCNNCTargetCUDA.a#g" \
  -e "s#-o bin/cnnc #-o $out #")
(cd build && eval "$link")
flock -u 9
echo "$out: build/bin/cnnc with the printer and prelude of $(git log -1 --format='%h %s' "$rev" | cut -c1-60)"
