#!/usr/bin/env python3
"""An nvcc stand-in (CNNC_NVCC) for A/B timing of the kernel prelude: every
.cu argument that holds the prelude cnnc printed (PRELUDE_NEW, a text file)
gets PRELUDE_OLD's text in its place, then the real nvcc (REAL_NVCC, default
/usr/local/cuda/bin/nvcc) runs with the same arguments. The generated
kernels and host code stay cnnc's own, so a timing difference is the
prelude's. Fails (exit 2) when no argument held the prelude: a swap that did
not happen must not pass for one that did.

  PRELUDE_NEW=new.txt PRELUDE_OLD=old.txt CNNC_NVCC=bench/ab/prelude_swap_nvcc.py cnnc ...
"""
import os
import sys


def main(argv):
    new = open(os.environ["PRELUDE_NEW"]).read()
    old = open(os.environ["PRELUDE_OLD"]).read()
    swapped = 0
    for a in argv:
        if a.endswith(".cu") and os.path.isfile(a):
            with open(a) as f:
                text = f.read()
            n = text.count(new)
            if n:
                with open(a, "w") as f:
                    f.write(text.replace(new, old))
                swapped += n
    compiling = any(a.endswith(".cu") for a in argv)
    if compiling and not swapped:
        sys.stderr.write("prelude_swap_nvcc: no .cu argument holds PRELUDE_NEW's text: %s\n"
                         % " ".join(a for a in argv if a.endswith(".cu")))
        return 2
    real = os.environ.get("REAL_NVCC", "/usr/local/cuda/bin/nvcc")
    os.execv(real, [real] + argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
