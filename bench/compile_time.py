#!/usr/bin/env python3
"""cnnc's compile time, stage by stage (issue 37): one model compiled
several ways with the same cnnc, on this machine's cores. Each row's label
says what it builds ("default": CNNC_NVCC_HOST_UNITS not set, cnnc's
default for the jobs, NvccCompile.h's defaultHostUnits; H: --host-units):

  one nvcc unit, no cache       CNNC_NVCC_SPLIT=0, CNNC_OBJECT_CACHE=off: the
                                whole model.cu as one nvcc unit (the build
                                before the split)
  cold, 1 host unit, no cache   CNNC_NVCC_HOST_UNITS=1, cache off: kernel
                                units in parallel, the host code in one unit
  cold, default host units, no cache   cnnc's default, cache off
  cold, H host units, no cache  CNNC_NVCC_HOST_UNITS=H, cache off: the host
                                code's functions (the step cut into parts)
                                in H units (only with --host-units H > 1)
  cold, X, empty cache          the same, filling an empty object cache
  unchanged, X                  the same build again (all from the cache)
  weights changed, X            the model exported with other weights
  lr changed, X                 --lr 0.05 instead of 0.01

X is "H host units" with --host-units H, else "default host units".

Each row: wall seconds, units compiled / from the cache, the host units
built, the stages of `--mlir-timing` (ONNX import, nvcc compile, nvcc link,
the rest: cnnc's own work before nvcc), and the slowest unit's nvcc (it
bounds "nvcc compile" when there are cores for all). Then every unit's
nvcc seconds of the cold default row.

  python3 bench/compile_time.py --cnnc .carry/cnnc [--model resnet50]
       [--batch 128] [--jobs N] [--host-units H] [--work DIR] [--json FILE]
Prints markdown tables and writes the rows to JSON (default <work>/compile_time.json).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

STAGES = ("ONNX import", "Emit CUDA", "nvcc compile", "nvcc link", "Total")


def parse_timing(stderr):
    """{stage: wall seconds} from --mlir-timing's table (the last column
    before the name is the wall time), and (units, compiled, cached)."""
    stages = {}
    for line in stderr.splitlines():
        m = re.match(r"^\s+(?:[\d.]+ \(\s*[\d.]+%\)\s+)?([\d.]+) \(\s*[\d.]+%\)  (\S.*)$", line)
        if m and m.group(2) in STAGES:
            stages[m.group(2)] = float(m.group(1))
    m = re.search(r"cnnc: nvcc: (\d+) unit\(s\), (\d+) compiled .*?, (\d+) from the cache",
                  stderr)
    units = tuple(map(int, m.groups())) if m else None
    return stages, units


def parse_unit_times(stderr):
    """{unit: wall seconds} of each nvcc unit compiled, nested under "nvcc
    compile" in --mlir-timing's table (a cached unit is not timed)."""
    times = {}
    for line in stderr.splitlines():
        m = re.match(r"^\s+(?:[\d.]+ \(\s*[\d.]+%\)\s+)?([\d.]+) \(\s*[\d.]+%\)"
                     r"    ((?:kernels|host)\d*|hyper|model)$", line)
        if m:
            times[m.group(2)] = float(m.group(1))
    return times


def export(model, batch, path, seed):
    from cnnc.export import build_model, export_onnx
    export_onnx(build_model(model, None, seed=seed), path, (batch, 3, 224, 224),
                training=True, opset=17)


def build_runs(host_units):
    """(label, environment, --lr, export seed or None) of each row, in order;
    the label names what differs. host_units 0: the cached rows use cnnc's
    default."""
    off = {"CNNC_OBJECT_CACHE": "off"}
    h = {"CNNC_NVCC_HOST_UNITS": str(host_units)} if host_units else {}
    hs = ("%d host unit%s" % (host_units, "" if host_units == 1 else "s")
          if host_units else "default host units")
    runs = [("one nvcc unit, no cache", dict(off, CNNC_NVCC_SPLIT="0"), 0.01, None),
            ("cold, 1 host unit, no cache", dict(off, CNNC_NVCC_HOST_UNITS="1"), 0.01, None),
            ("cold, default host units, no cache", dict(off), 0.01, None)]
    if host_units > 1:
        runs.append(("cold, %s, no cache" % hs, dict(off, **h), 0.01, None))
    runs += [("cold, %s, empty cache" % hs, h, 0.01, None),
             ("unchanged, %s" % hs, h, 0.01, None),
             ("weights changed, %s" % hs, h, 0.01, 1),
             ("lr changed, %s" % hs, h, 0.05, None)]
    return runs


def host_units_of(unit_s):
    """How many host units a build had, from its unit names (host, host1,
    ...); None when it was one unit (model) or everything was cached."""
    names = [u.split(" ")[0] for u in unit_s]
    n = sum(1 for u in names if re.match(r"^host\d*$", u))
    return n or None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cnnc", required=True)
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--jobs", type=int, default=0, help="CNNC_NVCC_JOBS (default: cnnc's)")
    ap.add_argument("--host-units", type=int, default=0,
                    help="CNNC_NVCC_HOST_UNITS of a row of its own and of the cached "
                         "rows (default 0: cnnc's default)")
    ap.add_argument("--work", default="/tmp/cnnc-compile-time")
    ap.add_argument("--json", default="")
    ap.add_argument("--flags", default="--optimizer sgd --momentum 0.9",
                    help="more cnnc flags (default: %(default)s)")
    args = ap.parse_args(argv)
    if not 0 <= args.host_units <= 64:
        ap.error("--host-units must be from 0 (cnnc's default) to 64")
    os.makedirs(args.work, exist_ok=True)
    onnx = os.path.join(args.work, args.model + ".onnx")
    cache = os.path.join(args.work, "object-cache")
    shutil.rmtree(cache, ignore_errors=True)
    exe = os.path.join(args.work, "out", "train")
    os.makedirs(os.path.dirname(exe), exist_ok=True)
    base = dict(os.environ, CNNC_OBJECT_CACHE=cache)
    base.pop("CNNC_NVCC_SPLIT", None)
    if args.jobs:
        base["CNNC_NVCC_JOBS"] = str(args.jobs)
    print("cores:", os.cpu_count(), "| cnnc:", args.cnnc, flush=True)
    export(args.model, args.batch, onnx, seed=0)
    base.pop("CNNC_NVCC_HOST_UNITS", None)
    runs = build_runs(args.host_units)
    rows = []
    for label, env, lr, seed in runs:
        if seed is not None:
            export(args.model, args.batch, onnx, seed=seed)
        cmd = [args.cnnc, onnx, "--train", "--lr", str(lr), "-o", exe,
               "--mlir-timing"] + args.flags.split()
        t0 = time.time()
        p = subprocess.run(cmd, capture_output=True, text=True, env=dict(base, **env))
        wall = time.time() - t0
        if p.returncode:
            print(p.stderr[-3000:], flush=True)
            rows.append({"run": label, "error": "exit %d" % p.returncode})
            continue
        stages, units = parse_timing(p.stderr)
        row = {"run": label, "env": env, "lr": lr, "wall_s": wall, "stages": stages,
               "units": units, "unit_s": parse_unit_times(p.stderr)}
        row["host_units"] = host_units_of(row["unit_s"])
        rows.append(row)
        print(json.dumps(row), flush=True)
    path = args.json or os.path.join(args.work, "compile_time.json")
    with open(path, "w") as f:
        json.dump({"model": args.model, "batch": args.batch, "cores": os.cpu_count(),
                   "rows": rows}, f, indent=1)
    print("\n| %s, %d cores | wall s | units compiled / cached | host units | "
          "ONNX import s | nvcc compile s | slowest unit | nvcc link s | rest s |"
          % (args.model, os.cpu_count()))
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print("| %s | %s | | | | | | | |" % (r["run"], r["error"]))
            continue
        s = r["stages"]
        known = sum(s.get(k, 0) for k in ("ONNX import", "nvcc compile", "nvcc link"))
        u = r["units"]
        per_unit = r["unit_s"]
        slowest = max(per_unit.items(), key=lambda kv: kv[1]) if per_unit else None
        print("| %s | %.2f | %s | %s | %.2f | %.2f | %s | %.2f | %.2f |" % (
            r["run"], r["wall_s"], "%d / %d" % (u[1], u[2]) if u else "?",
            r["host_units"] or "", s.get("ONNX import", 0), s.get("nvcc compile", 0),
            "%s %.2f" % slowest if slowest else "",
            s.get("nvcc link", 0), max(0.0, r["wall_s"] - known)))
    cold = [r for r in rows if r["run"] == "cold, default host units, no cache"
            and "error" not in r]
    if cold:
        units = sorted(cold[0]["unit_s"].items(), key=lambda kv: -kv[1])
        print("\nEvery unit of the cold default build (nvcc wall s, %d at a time):"
              % (args.jobs or os.cpu_count()))
        print("| " + " | ".join(n for n, _ in units) + " |")
        print("|" + "---|" * len(units))
        print("| " + " | ".join("%.2f" % t for _, t in units) + " |")
    print("JSON:", path)
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
