#!/usr/bin/env python3
"""Issue 32's fusion timings on the GPU machine (bench/device-verify.sh
part u), two measurements:

* GroupNorm + SiLU: a ResNet-18-shaped net whose every norm is
  GroupNorm(32, C) followed by SiLU (batch 32, 224x224, 1000 classes),
  compiled twice with cnnc's default f16 pipeline: as is, and with
  --fuse-group-norm=false (the normalization left on the grouped view, the
  scale, shift and SiLU a kernel of their own). Each executable is timed on
  synthetic data as bench/bench.py's run_cnnc does (steady img/s of the
  done line after a 3-step warm-up), in the order a b a b; prints
    GN_FUSION default=X ms off=Y ms (...)
  with the best run of each and cnnc --stats' kernel launches per step.
* upsample + concat: a 4-level U-Net (bilinear Upsample(scale 2,
  align_corners=False) + torch.cat skips, conv + BatchNorm + ReLU, batch 16,
  256x256, 21 classes) trained on per-pixel labels (.npy masks, as
  test/gpu/check_segmentation.py feeds the executable), compiled twice with
  cnnc's default pipeline: as is (cnn-fuse makes each upsample + concat one
  cnn.fused_resize_concat kernel and the resize gradient read its channels
  of the concat's gradient in place) and with --fuse-resize-concat=false
  (resize, concat and the gradient's slices apart, as session 29 measured
  them). Each is timed (steady ms/step, a b a b), then profiled for one step
  under CNNRT_PROFILE=1 (the by-op-kind table of runtime/src/Profile.cu,
  CUDA events around every launch of the uncaptured second step); prints
    UNET step default=X ms off=Y ms (...)
    default: UPSAMPLE_CONCAT share=P% of step (resize X ms, resize_grad Y ms, concat Z ms,
      slices W ms, cnn.fused_resize_concat V ms)
    off: UPSAMPLE_CONCAT share=P% of step (...)
  where P is those kinds' share of the profiled step and every other
  resize/concat/slice kind the table names (the fused op) follows.

--dry-run builds, exports and compiles everything (with --stats) and stops
before running an executable: the CPU machine checks the script that way
(test/e2e/test_bench_scripts.py, at small sizes).

  python3 test/gpu/bench_fusions.py --cnnc .carry/cnnc [--work DIR] [--parts gn,unet]
      [--steps 60] [--gn-batch 32] [--gn-size 224] [--gn-b-flags "..."] [--unet-batch 16]
      [--unet-size 256]
      [--unet-flags "..."] [--dry-run]
Exit 0 when every part printed its line, 1 otherwise.
"""
import argparse
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

SGD = ["--train", "--optimizer", "sgd", "--lr", "0.01", "--momentum", "0.9"]
# Each part's result line (also printed at the end).
RESULTS = []


def result(line):
    RESULTS.append(line)
    print(line, flush=True)


# ---------------------------------------------------------------------------
# The two nets.

def gn_act(c):
    return nn.Sequential(nn.GroupNorm(32, c), nn.SiLU())


class GNBlock(nn.Module):
    """ResNet's basic block with GroupNorm(32, C) + SiLU for BatchNorm +
    ReLU."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.norm1 = gn_act(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.norm2 = nn.GroupNorm(32, cout)
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                       nn.GroupNorm(32, cout))
        self.act = nn.SiLU()

    def forward(self, x):
        y = self.norm2(self.conv2(self.norm1(self.conv1(x))))
        return self.act(y + (x if self.short is None else self.short(x)))


class GNResNet18(nn.Module):
    """ResNet-18's layout (stem, 4 stages of 2 blocks, 64..512 channels)
    with GroupNorm(32, C) + SiLU everywhere."""

    def __init__(self, classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), gn_act(64),
                                  nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], 64
        for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
            blocks += [GNBlock(cin, cout, stride), GNBlock(cout, cout, 1)]
            cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.blocks(self.stem(x))), 1))


def double_conv(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU(inplace=True),
                         nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU(inplace=True))


class UNet(nn.Module):
    """A 4-level U-Net: encoder 32..256 channels (max-pool between levels),
    a 512-channel bottleneck, and 4 decoder levels of bilinear Upsample(2) +
    concat with the encoder's feature + two conv-BN-ReLU; per-pixel logits."""

    def __init__(self, classes=21, widths=(32, 64, 128, 256)):
        super().__init__()
        self.down = nn.ModuleList()
        cin = 3
        for w in widths:
            self.down.append(double_conv(cin, w))
            cin = w
        self.pool = nn.MaxPool2d(2)
        self.bottom = double_conv(widths[-1], 2 * widths[-1])
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.dec = nn.ModuleList()
        cin = 2 * widths[-1]
        for w in reversed(widths):
            self.dec.append(double_conv(cin + w, w))
            cin = w
        self.head = nn.Conv2d(widths[0], classes, 1)

    def forward(self, x):
        skips = []
        for d in self.down:
            x = d(x)
            skips.append(x)
            x = self.pool(x)
        x = self.bottom(x)
        for d, s in zip(self.dec, reversed(skips)):
            x = d(torch.cat([self.up(x), s], dim=1))
        return self.head(x)


# ---------------------------------------------------------------------------
# Compiling and running.

def run(cmd, env=None, limit=900):
    """(combined output, seconds); raises with the output's tail on failure."""
    t = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=limit)
    if p.returncode != 0:
        raise RuntimeError("failed (%d): %s\n%s" % (p.returncode, " ".join(cmd),
                                                    (p.stdout + p.stderr)[-3000:]))
    return p.stdout + p.stderr, time.time() - t


def launches_of(text):
    """cnnc --stats' kernel launches per training step."""
    m = re.search(r"cnnc: stats: (\d+) kernel launches and library calls per training step",
                  text)
    if not m:
        raise RuntimeError("no 'kernel launches ... per training step' line in cnnc --stats' "
                           "output:\n" + text[-2000:])
    return int(m.group(1))


def compile_step(cnnc, onnx_path, exe, flags):
    out, secs = run([cnnc, onnx_path] + SGD + ["--stats", "-o", exe] + flags)
    n = launches_of(out)
    print("built %s (%s): %.1f s, %d launches per step"
          % (exe, " ".join(flags) or "default", secs, n), flush=True)
    return n


def ms_per_step(exe, data, batch, steps, env=None):
    """The steady ms/step of the executable's done line (the first 3 steps,
    autotuning and graph capture, are outside it), as bench.run_cnnc."""
    out, _ = run([exe, "--data", data, "--steps", str(steps + 3), "--log-every", "3"], env)
    m = re.search(r"steady img/s (\d+)", out)
    if not m:
        raise RuntimeError("no 'steady img/s' in the executable's output:\n" + out[-1500:])
    return 1000.0 * batch / float(m.group(1))


def profile_by_kind(text):
    """(total ms, {kind: (ms, calls)}) of CNNRT_PROFILE's report."""
    head = re.search(r"cnnrt: profile of .*?: (\d+) launches and library calls, ([\d.]+) ms",
                     text)
    if not head:
        raise RuntimeError("no CNNRT_PROFILE report in:\n" + text[-2000:])
    kinds, inside = {}, False
    for line in text[head.end():].splitlines():
        if re.match(r"^\s+by op kind\s", line):
            inside = True
            continue
        if not inside:
            continue
        m = re.match(r"^\s+(\S.*?)\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s*$", line)
        if not m:
            break
        kinds[m.group(1)] = (float(m.group(2)), int(m.group(4)))
    return float(head.group(2)), kinds


def upsample_concat_line(total, kinds):
    """The UPSAMPLE_CONCAT line of a profile: the named kinds always (0 when
    the table has none: fused away or not launched), then any other kind
    naming resize, concat or slice."""
    named = [("resize", "cnn.resize"), ("resize_grad", "cnn.resize_grad"),
             ("concat", "cnn.concat"), ("slices", "cnn.slice")]
    parts, picked = [], 0.0
    for label, kind in named:
        ms = kinds.get(kind, (0.0, 0))[0]
        picked += ms
        parts.append("%s %.3f ms" % (label, ms))
    for kind, (ms, calls) in sorted(kinds.items()):
        if kind not in dict(named).values() and re.search(r"resize|concat|slice", kind):
            picked += ms
            parts.append("%s %.3f ms" % (kind, ms))
    share = 100.0 * picked / total if total > 0 else 0.0
    return "UPSAMPLE_CONCAT share=%.1f%% of step (%s)" % (share, ", ".join(parts))


def export(model, shape, path):
    from cnnc.export import export_for_training

    model.train()
    x = torch.randn(*shape)
    export_for_training(model, x, path)
    return x


def part_gn(args):
    work = os.path.join(args.work, "gn")
    os.makedirs(work, exist_ok=True)
    onnx_path = os.path.join(work, "gn_resnet18.onnx")
    torch.manual_seed(0)
    export(GNResNet18(1000), (args.gn_batch, 3, args.gn_size, args.gn_size), onnx_path)
    exes = {"default": os.path.join(work, "default", "train"),
            "off": os.path.join(work, "off", "train")}
    # "off" is the B side of the A/B: --fuse-group-norm=false by default,
    # --gn-b-flags for another switch (e.g. --tiled-transpose).
    flags = {"default": [], "off": args.gn_b_flags.split()}
    launches = {}
    for v in ("default", "off"):
        os.makedirs(os.path.dirname(exes[v]), exist_ok=True)
        launches[v] = compile_step(args.cnnc, onnx_path, exes[v], flags[v])
    if args.dry_run:
        result("GN_FUSION dry run: launches default=%d off=%d" % (launches["default"],
                                                                   launches["off"]))
        return True
    times = {"default": [], "off": []}
    for r in range(2):
        for v in ("default", "off"):
            ms = ms_per_step(exes[v], "synthetic", args.gn_batch, args.steps)
            times[v].append(ms)
            print("gn %s run %d: %.3f ms/step" % (v, r + 1, ms), flush=True)
    result("GN_FUSION default=%.3f ms off=%.3f ms (off = %s; best of %s / %s; launches per step "
           "default %d, off %d; batch %d, %dx%d)"
           % (min(times["default"]), min(times["off"]), args.gn_b_flags,
              ", ".join("%.3f" % t for t in times["default"]),
              ", ".join("%.3f" % t for t in times["off"]), launches["default"],
              launches["off"], args.gn_batch, args.gn_size, args.gn_size))
    return True


def part_unet(args):
    import numpy as np

    work = os.path.join(args.work, "unet")
    data = os.path.join(work, "data")
    os.makedirs(data, exist_ok=True)
    onnx_path = os.path.join(work, "unet.onnx")
    torch.manual_seed(0)
    shape = (args.unet_batch, 3, args.unet_size, args.unet_size)
    x = export(UNet(args.unet_classes), shape, onnx_path)
    g = torch.Generator().manual_seed(1)
    y = torch.randint(0, args.unet_classes, (shape[0],) + shape[2:], generator=g)
    # One batch of images and per-pixel labels: the executable's dense
    # mode reads .npy masks (synthetic data has one label per image).
    np.save(os.path.join(data, "train_x.npy"), x.numpy())
    np.save(os.path.join(data, "train_y.npy"), y.numpy())
    # The A/B of the upsample + concat fusion: the default pipeline, and
    # --fuse-resize-concat=false (resize, concat and the gradient's slices
    # as separate kernels, as session 29 measured them).
    exes = {v: os.path.join(work, v, "train") for v in ("default", "off")}
    flags = {"default": args.unet_flags.split(),
             "off": args.unet_flags.split() + ["--fuse-resize-concat=false"]}
    launches = {}
    for v in ("default", "off"):
        os.makedirs(os.path.dirname(exes[v]), exist_ok=True)
        launches[v] = compile_step(args.cnnc, onnx_path, exes[v], flags[v])
    if args.dry_run:
        result("UPSAMPLE_CONCAT dry run: launches per step default=%d off=%d"
               % (launches["default"], launches["off"]))
        return True
    times = {"default": [], "off": []}
    for r in range(2):
        for v in ("default", "off"):
            ms = ms_per_step(exes[v], data, args.unet_batch, args.steps)
            times[v].append(ms)
            print("unet %s run %d: %.3f ms/step" % (v, r + 1, ms), flush=True)
    profiles = {}
    for v in ("default", "off"):
        out, _ = run([exes[v], "--data", data, "--steps", "3"],
                     dict(os.environ, CNNRT_PROFILE="1"))
        profiles[v] = profile_by_kind(out)
        print("unet %s:" % v, flush=True)
        print("\n".join(l for l in out.splitlines()
                        if l.startswith("  ") or l.startswith("cnnrt: profile")), flush=True)
    result("UNET step default=%.3f ms off=%.3f ms (steady, best of %s / %s; --fuse-resize-concat"
           "=false is off; batch %d, %dx%d; launches per step default %d, off %d); profiled "
           "step default %.3f ms, off %.3f ms (uncaptured, events between launches)"
           % (min(times["default"]), min(times["off"]),
              ", ".join("%.3f" % t for t in times["default"]),
              ", ".join("%.3f" % t for t in times["off"]), args.unet_batch, args.unet_size,
              args.unet_size, launches["default"], launches["off"], profiles["default"][0],
              profiles["off"][0]))
    for v in ("default", "off"):
        result("%s: %s" % (v, upsample_concat_line(*profiles[v])))
    return True


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cnnc", required=True)
    ap.add_argument("--work", default="/tmp/bench-fusions")
    ap.add_argument("--parts", default="gn,unet")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--gn-batch", type=int, default=32)
    ap.add_argument("--gn-size", type=int, default=224)
    ap.add_argument("--gn-b-flags", default="--fuse-group-norm=false",
                    help="the GroupNorm net's second build (the B side, 'off' in the result "
                         "line; default --fuse-group-norm=false)")
    ap.add_argument("--unet-batch", type=int, default=16)
    ap.add_argument("--unet-size", type=int, default=256)
    ap.add_argument("--unet-classes", type=int, default=21)
    ap.add_argument("--unet-flags", default="",
                    help="more cnnc flags for the U-Net (default: none, the default "
                         "f16 NHWC pipeline; e.g. '--precision fp32 --layout nchw', the "
                         "dense form test/gpu/check_segmentation.py checks)")
    ap.add_argument("--dry-run", action="store_true",
                    help="build, export and compile, then stop before running anything")
    args = ap.parse_args(argv)
    parts = [p for p in args.parts.split(",") if p]
    for p in parts:
        if p not in ("gn", "unet"):
            ap.error("--parts: unknown part %r (known: gn, unet)" % p)
    if args.unet_size % 16:
        ap.error("--unet-size: the U-Net pools 4 times; %d is not a multiple of 16"
                 % args.unet_size)
    ok = True
    for p in parts:
        try:
            ok &= {"gn": part_gn, "unet": part_unet}[p](args)
        except Exception as e:  # the other part still runs
            print("%s: FAILED: %s" % (p, e), flush=True)
            RESULTS.append("%s: FAILED: %s" % (p, str(e).splitlines()[0]))
            ok = False
    # The result lines again, last: device-verify.sh shows a log's tail.
    print("\n".join(RESULTS), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
