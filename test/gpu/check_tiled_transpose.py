#!/usr/bin/env python3
"""GPU check of cnnc --tiled-transpose (cnn-select-lowering's "tiled":
kernels/Transpose.cuh's batchedTranspose2D for the NHWC <-> NCHW transposes
around every GroupNorm's grouped statistics; the default since session 32)
against the generic gather (--tiled-transpose=false).

A GroupNorm + SiLU net whose sides are not multiples of the 32 x 32 tile
(56 x 56 images: 28 x 28 = 784 and 14 x 14 = 196 pixels; 48 and 96
channels) is compiled twice with cnnc's default f16 pipeline, with
--tiled-transpose=false (the gather) and as is (tiled). The transposes are copies, so the two steps must compute
the same thing bit for bit: each executable trains STEPS steps on the
runtime's synthetic data over one algorithm cache (the gather run first
tunes it; CNNRT_DETERMINISTIC's default keeps the rest reproducible), and
the check compares every logged loss and every tensor of the final
safetensors checkpoint (weights and optimizer state) byte for byte. Then
prints each one's steady ms/step (bench/bench.py's `done` line; one run
each, not an A/B: bench_fusions.py's FUSION_GN_B=--tiled-transpose is the
timing) and CNNRT_PROFILE=1's transpose launches of one step.

Exit 0: passed; 1: a check failed; 77: no CUDA GPU. --dry-run builds both
and checks the generated CUDA only (the tiled one launches
batchedTranspose2D, the gather one does not): the CPU machine checks the
script that way (test/e2e/test_tiled_transpose.py).

  python3 test/gpu/check_tiled_transpose.py --cnnc .carry/cnnc [--work DIR]
      [--batch 16] [--steps 12] [--dry-run]
"""
import argparse
import json
import os
import re
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

from cnnc.export import export_onnx  # noqa: E402

SGD = ["--train", "--optimizer", "sgd", "--lr", "0.01", "--momentum", "0.9"]
IMAGE = 56


def gn_act(groups, c):
    return nn.Sequential(nn.GroupNorm(groups, c), nn.SiLU())


def make_net():
    """56 x 56 -> 28 x 28 x 48 -> 14 x 14 x 96, GroupNorm + SiLU after each
    convolution, global pool, 10 classes."""
    return nn.Sequential(
        nn.Conv2d(3, 48, 3, 2, 1, bias=False), gn_act(8, 48),
        nn.Conv2d(48, 48, 3, 1, 1, bias=False), gn_act(8, 48),
        nn.Conv2d(48, 96, 3, 2, 1, bias=False), gn_act(16, 96),
        nn.Conv2d(96, 96, 3, 1, 1, bias=False), gn_act(16, 96),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(96, 10))


def safetensors_tensors(path):
    """{name: raw bytes} of a .safetensors file (8-byte header length, the
    JSON header, then the data the offsets index)."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    return {k: data[v["data_offsets"][0]:v["data_offsets"][1]]
            for k, v in header.items() if k != "__metadata__"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cnnc", required=True)
    ap.add_argument("--work", default="/tmp/cnnc-tiled-transpose")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args()
    if not a.dry_run and not torch.cuda.is_available():
        print("no CUDA GPU: skipped")
        return 77
    os.makedirs(a.work, exist_ok=True)
    torch.manual_seed(0)
    onnx = os.path.join(a.work, "gn.onnx")
    export_onnx(make_net(), onnx, (a.batch, 3, IMAGE, IMAGE), training=True, opset=17)
    failures = []
    exes = {}
    for tag, flags in (("gather", ["--tiled-transpose=false"]), ("tiled", [])):
        exe = os.path.join(a.work, tag, "train")
        os.makedirs(os.path.dirname(exe), exist_ok=True)
        p = subprocess.run([a.cnnc, onnx, *SGD, *flags, "-o", exe], capture_output=True,
                           text=True, timeout=600)
        if p.returncode != 0:
            print(p.stderr[-3000:])
            failures.append("cnnc %s failed (exit %d)" % (" ".join(flags), p.returncode))
            continue
        cu = open(exe + ".cu").read()
        tiled = len(re.findall(r"batchedTranspose2D<__half><<<", cu))
        generic = len(re.findall(r'"cnn\.transpose k\d+"', cu))
        print("%-8s transposes: %d batchedTranspose2D launches, %d generated" %
              (tag, tiled, generic), flush=True)
        if tag == "tiled" and (tiled == 0 or generic):
            failures.append("the default (tiled) step left generated transposes (%d "
                            "tiled, %d generated)" % (tiled, generic))
        if tag == "gather" and (tiled or generic == 0):
            failures.append("--tiled-transpose=false has %d tiled and %d generated "
                            "transposes" % (tiled, generic))
        exes[tag] = exe
    if a.dry_run or failures:
        for f in failures:
            print("FAIL  " + f)
        print("tiled transpose (dry run): %s" % ("ok" if not failures else "FAILED"))
        return 1 if failures else 0

    env = dict(os.environ, CNNRT_ALGO_CACHE=os.path.join(a.work, "algos.txt"))
    runs = {}
    for tag in ("gather", "tiled"):
        ck = os.path.join(a.work, tag, "final.safetensors")
        p = subprocess.run([exes[tag], "--data", "synthetic", "--steps", str(a.steps),
                            "--log-every", "1", "--checkpoint", ck],
                           capture_output=True, text=True, env=env, timeout=600)
        if p.returncode != 0:
            print(p.stdout[-2000:] + p.stderr[-2000:])
            failures.append("the %s executable failed (exit %d)" % (tag, p.returncode))
            continue
        losses = re.findall(r"^step \d+ loss (\S+)", p.stdout, re.M)
        m = re.search(r"steady img/s (\d+)", p.stdout + p.stderr)
        ms = 1000.0 * a.batch / float(m.group(1)) if m and float(m.group(1)) > 0 else None
        q = subprocess.run([exes[tag], "--data", "synthetic", "--steps", "3"],
                           capture_output=True, text=True,
                           env=dict(env, CNNRT_PROFILE="1"), timeout=600)
        profile = [l for l in q.stderr.splitlines() if "transpose" in l]
        runs[tag] = (losses, safetensors_tensors(ck))
        print("%-8s losses %s" % (tag, " ".join(losses)), flush=True)
        print("%-8s steady %s ms/step (batch %d)" %
              (tag, "%.3f" % ms if ms else "?", a.batch), flush=True)
        for l in profile:
            print("%-8s   %s" % (tag, l.strip()))
    if len(runs) == 2:
        (la, ta), (lb, tb) = runs["gather"], runs["tiled"]
        if not la or la != lb:
            failures.append("the losses differ: %s against %s" % (la, lb))
        if sorted(ta) != sorted(tb):
            failures.append("the checkpoints hold different tensors")
        differ = [k for k in ta if k in tb and ta[k] != tb[k]]
        if differ:
            failures.append("%d checkpoint tensors differ (%s)" % (len(differ), differ[:3]))
        print("checkpoints: %d tensors, %d differ" % (len(ta), len(differ)))
    for f in failures:
        print("FAIL  " + f)
    print("tiled transpose: %s" % ("ok" if not failures else "FAILED"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
