#!/usr/bin/env bash
# The kernel prelude cnnc prints at commit REV (kernels/*.cuh through that
# commit's EmbedPrelude.cmake), as text: the PRELUDE_OLD/PRELUDE_NEW files of
# bench/ab/prelude_swap_nvcc.py. Run here (git, cmake); the device part `a`
# of bench/device-verify.sh reads them from .carry/ab/.
#   bash bench/ab/make-prelude.sh REV OUT.txt
set -euo pipefail
rev=$1 out=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git archive "$rev" kernels lib/Target/CUDA/EmbedPrelude.cmake | tar -x -C "$tmp"
cmake -DPRELUDE="$tmp/kernels/Prelude.cuh" -DOUTPUT="$tmp/p.inc" \
  -P "$tmp/lib/Target/CUDA/EmbedPrelude.cmake"
python3 - "$tmp/p.inc" "$out" <<'PY'
import re, sys
body = open(sys.argv[1]).read().split("\n", 1)[1]
text = bytes(int(x, 16) for x in re.findall(r"0x([0-9a-f]{2})", body)).rstrip(b"\0")
open(sys.argv[2], "w").write(text.decode())
PY
git log -1 --format="%h %s" "$rev" | cut -c1-60 >"${out%.txt}.rev"
echo "prelude of $(git rev-parse --short "$rev"): $(wc -c <"$out") bytes -> $out"
