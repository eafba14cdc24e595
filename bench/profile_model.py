#!/usr/bin/env python3
"""Where one model's cnnc step spends its time (GPU machine).

For each model named (torchvision names, or `timm:NAME`): the training
export bench.py makes (opset 17, random init, 1000 classes), cnnc's
default CUDA step (f16, SGD momentum), then 3 steps with CNNRT_PROFILE=1:
the runtime prints the second step's launches by kind and the slowest
launches by ONNX location (CNNRT_PROFILE_TOP, default 30 here), and writes
them as JSON (CNNRT_PROFILE_JSON) into --out. With --emit-cuda the step's
generated CUDA is written there too (gzipped), to read the kernels the
profile names without a GPU.

  python3 bench/profile_model.py --cnnc .carry/cnnc --models timm:resnest14d \
      [--batch 32] [--image-size 224] [--flags "--precision fp32"] --out $OUT
"""
import argparse
import gzip
import os
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "python")]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cnnc", required=True)
    p.add_argument("--models", required=True)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--flags", default="")
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--work", default="/tmp/cnnc-profile")
    p.add_argument("--out", required=True)
    p.add_argument("--emit-cuda", action="store_true")
    p.add_argument("--limit", type=int, default=300)
    a = p.parse_args(argv)
    import bench  # bench/bench.py: the export and compile every bench row uses

    os.makedirs(a.out, exist_ok=True)
    build = argparse.Namespace(cnnc=a.cnnc, work=a.work, cnnc_timeout=a.limit)
    flags = shlex.split(a.flags)
    rc = 0
    for name in a.models.split(","):
        tag = name.replace(":", "_")
        exe = bench.cnnc_exe_path(name, build, flags)
        try:
            secs = bench.build_cnnc(name, a.batch, a.image_size, build, flags, a.classes)
        except RuntimeError as e:
            print("=== %s: %s" % (name, e), flush=True)
            rc = 1
            continue
        print("=== %s: export + compile %.1f s" % (name, secs), flush=True)
        if a.emit_cuda:
            src = exe + ".cu"
            onnx_path = os.path.join(os.path.dirname(exe), "model-%d.onnx" % a.classes)
            subprocess.run([a.cnnc, onnx_path, "--train", "--optimizer", "sgd", "--lr",
                            "0.01", "--momentum", "0.9", *flags, "--emit", "cuda",
                            "-o", src], check=False, capture_output=True, timeout=a.limit)
            if os.path.exists(src):
                with open(src, "rb") as f, gzip.open(os.path.join(a.out, tag + ".cu.gz"), "wb") as g:
                    g.write(f.read())
        env = dict(os.environ, CNNRT_PROFILE="1", CNNRT_PROFILE_TOP=str(a.top),
                   CNNRT_PROFILE_JSON=os.path.join(a.out, tag + ".profile.json"))
        r = subprocess.run([exe, "--data", "synthetic", "--steps", str(a.steps),
                            "--log-every", "1"], capture_output=True, text=True,
                           timeout=a.limit, env=env)
        print(r.stdout[-12000:] + r.stderr[-4000:], flush=True)
        if r.returncode != 0:
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
