#!/bin/bash
# The generated elementwise and multi-tensor kernels of two cnnc builds side
# by side at the machine-code level: registers, spill bytes and SASS
# instructions of every kernel the printer names (k<N>: elementwise, mt<N>:
# grouped optimizer updates and casts, af<N>: all_finite, clip<N>: the
# gradient norm, and its finish, clip<N>_finish before kernels/
# MultiTensor.cuh's clipDivisorFinish), old vs new, matched by name and
# parameter types (the printer numbers kernels in program order).
#
#   bench/ab/sass-compare.sh OLD_CNNC NEW_CNNC MODEL.onnx [cnnc flags...]
#
# Both must print the same kernels (the same passes): for a printer or
# prelude change, OLD_CNNC from bench/ab/make-printer-baseline.sh REV (this
# build with REV's printer); a cnnc of an older commit differs wherever
# other work changed the fusions, and those kernels are on one side only.
#
# Compiles each `--emit cuda` training step (for f16, the default pipeline,
# and for --precision fp32; SGD with momentum and --clip-grad-norm 1, so
# that every multi-tensor family is there, unless flags are given: then
# those flags, once) with `nvcc -cubin -arch sm_90a`, no GPU needed.
# Registers and spills: ptxas -v (cuobjdump --dump-resource-usage says the
# same). Instructions: `cuobjdump --dump-sass` lines where cuobjdump is
# installed, else the kernel's .text section size / 16 (every sm_90
# instruction is 16 bytes; both counts include the padding NOPs).
#
# Prints one row per kernel whose numbers differ and a summary per
# configuration; exits 1 when a kernel is only on one side, 0 otherwise
# (differences are for the reader to judge). WORK=dir keeps the files.
set -euo pipefail
if [ $# -lt 3 ]; then
  sed -n '2,/^set -euo/p' "$0" | grep '^#'
  exit 2
fi
OLD=$(readlink -f "$1")
NEW=$(readlink -f "$2")
MODEL=$(readlink -f "$3")
shift 3
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
NVCC=${NVCC:-nvcc}
WORK=${WORK:-$(mktemp -d /tmp/sass-compare.XXXXXX)}
mkdir -p "$WORK"

if [ $# -gt 0 ]; then
  CONFIGS=("custom|$*")
else
  BASE="--train --batch 32 --optimizer sgd --momentum 0.9 --clip-grad-norm 1"
  CONFIGS=("f16|$BASE" "f32|$BASE --precision fp32")
fi

status=0
for config in "${CONFIGS[@]}"; do
  name=${config%%|*}
  flags=${config#*|}
  for side in old new; do
    cnnc=$OLD
    [ "$side" = new ] && cnnc=$NEW
    dir="$WORK/$name/$side"
    mkdir -p "$dir"
    # The same file name on both sides: nvcc names anonymous-namespace
    # symbols after it.
    # shellcheck disable=SC2086
    "$cnnc" "$MODEL" $flags --emit cuda -o "$dir/model.cu"
    (cd "$dir" && "$NVCC" -std=c++17 -cubin -arch=sm_90a \
      -I"$ROOT/runtime/include" -Xptxas -v model.cu -o model.cubin \
      >ptxas.txt 2>&1) || {
      cat "$dir/ptxas.txt" >&2
      exit 2
    }
    if command -v cuobjdump >/dev/null; then
      cuobjdump --dump-sass "$dir/model.cubin" >"$dir/sass.txt"
    fi
  done
  echo "== $name: $flags"
  python3 - "$WORK/$name/old" "$WORK/$name/new" <<'EOF' || status=1
import os, re, subprocess, sys

def demangle(mangled):
    return subprocess.run(["c++filt", mangled], capture_output=True,
                          text=True).stdout.strip()

def key(mangled):
    """The kernel's name and parameters, the same on both sides: nvcc names
    the anonymous namespace (the prelude's) with a hash that differs between
    any two files, and clip<N>_finish became the prelude's
    clipDivisorFinish (same parameters)."""
    name = demangle(mangled).replace("(anonymous namespace)::", "")
    return re.sub(r"^clip\d+_finish\(", "clipDivisorFinish(", name)

def kernels(d):
    """{mangled: [registers, spill bytes, instructions]} of the cubin."""
    out, cur = {}, None
    for line in open(os.path.join(d, "ptxas.txt")):
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            cur = key(m.group(1))
            out[cur] = [0, 0, 0]
            continue
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and cur:
            out[cur][1] = int(m.group(1)) + int(m.group(2))
        m = re.search(r"Used (\d+) registers", line)
        if m and cur:
            out[cur][0] = int(m.group(1))
    sass = os.path.join(d, "sass.txt")
    if os.path.exists(sass):
        fn = None
        for line in open(sass):
            m = re.match(r"\s*Function : (\S+)", line)
            if m:
                fn = key(m.group(1))
            elif fn in out and re.match(r"\s*/\*[0-9a-f]{4,}\*/", line):
                out[fn][2] += 1
    else:
        sections = subprocess.run(
            ["readelf", "-SW", os.path.join(d, "model.cubin")],
            capture_output=True, text=True).stdout
        for line in sections.splitlines():
            m = re.search(r"\]\s+\.text\.(\S+)\s+\S+\s+\S+\s+\S+\s+([0-9a-f]+)",
                          line)
            if m and key(m.group(1)) in out:
                out[key(m.group(1))][2] = int(m.group(2), 16) // 16
    return out

def plain(k):
    return k.split("(")[0]

old, new = kernels(sys.argv[1]), kernels(sys.argv[2])
generated = re.compile(r"^((k|mt|af|clip)\d+|clipDivisorFinish)$")
ours = lambda ks: {k for k in ks if generated.match(plain(k))}
o, n = ours(old), ours(new)
# The prelude's clipDivisorFinish is compiled into every model.cu; it is the
# old clip<N>_finish only where the model clips.
n = {k for k in n if plain(k) != "clipDivisorFinish" or k in old}
rows, same, missing = [], 0, 0
for k in sorted(o | n, key=lambda k: (re.sub(r"\d+", "", plain(k)),
                                     int(re.sub(r"\D", "", plain(k)) or 0))):
    if k not in old or k not in new:
        print(f"  {plain(k)}: only in {'new' if k in new else 'old'}")
        missing += 1
        continue
    a, b = old[k], new[k]
    if a == b:
        same += 1
        continue
    rows.append((plain(k), a, b))
if rows:
    print(f"  {'kernel':10} {'regs':>9} {'spill B':>9} {'instructions':>14}")
for name, a, b in rows:
    print(f"  {name:10} {a[0]:>4}>{b[0]:<4} {a[1]:>4}>{b[1]:<4} "
          f"{a[2]:>6}>{b[2]:<6} ({b[2] - a[2]:+d})")
others = set(old) | set(new)
others -= o | n
diff_others = sum(1 for k in others if old.get(k) != new.get(k))
print(f"  {len(o | n)} generated kernels: {same} identical, {len(rows)} "
      f"differ, {missing} on one side only; total instructions "
      f"{sum(old[k][2] for k in o)} -> {sum(new[k][2] for k in n)}")
print(f"  {len(others)} prelude kernels: {diff_others} differ or on one side only")
sys.exit(1 if missing else 0)
EOF
done
echo "(files in $WORK)"
exit $status
