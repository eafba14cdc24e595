#!/usr/bin/env python3
"""cnnc vs PyTorch, side by side in one run on the GPU machine.

For each model: export it with PyTorch (training mode, legacy exporter),
compile its training step with cnnc (timed), run the executable on synthetic
data and read its steady-state img/s and peak GPU memory; then time the same
SGD training step in PyTorch eager f32, eager AMP (f16) + channels_last, and
torch.compile with AMP + channels_last (--compile-f32 adds torch.compile f32). TF32 is off on both sides for the f32 rows.

  python3 bench/bench.py --cnnc .carry/cnnc [--models simplecnn,resnet18,resnet50]
       [--steps 60] [--cnnc-flags "..."] [--no-compile]
Prints a markdown table (for docs/benchmarks.md) at the end.
"""
import argparse
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

import torch  # noqa: E402

from cnnc.export import build_model, export_onnx  # noqa: E402

CONFIG = {"simplecnn": (32, 32), "resnet18": (128, 224), "resnet50": (128, 224)}


def time_torch(name, batch, hw, mode, steps):
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    model = build_model(name, 10, seed=0).cuda().train()
    x = torch.rand(batch, 3, hw, hw, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    amp = mode in ("amp", "compile-amp")
    if amp:
        model = model.to(memory_format=torch.channels_last)
        x = x.to(memory_format=torch.channels_last)
    scaler = torch.amp.GradScaler("cuda", enabled=amp)
    fwd = torch.compile(model) if mode.startswith("compile") else model

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16, enabled=amp):
            loss = torch.nn.functional.cross_entropy(fwd(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    torch.cuda.reset_peak_memory_stats()
    t0 = time.time()
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    warm = time.time() - t0
    best = float("inf")
    for _ in range(3):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(steps):
            step()
        e.record()
        e.synchronize()
        best = min(best, s.elapsed_time(e) / steps)
    # Issue 13 compares with max_memory_allocated; the allocator's reserved
    # peak (what the GPU lends PyTorch) is printed next to it.
    mem = (torch.cuda.max_memory_allocated() / 2**20,
           torch.cuda.max_memory_reserved() / 2**20)
    del model, opt, fwd
    torch.cuda.empty_cache()
    return best, mem, warm


def split_flags(flags):
    """cnnc flags and NAME=VALUE runtime environment settings (upper-case
    names, e.g. CNNRT_CONV_FUSION=split) of one variant."""
    env, cnnc = {}, []
    for tok in flags.split():
        k, eq, v = tok.partition("=")
        if eq and k.isupper() and not k.startswith("-"):
            env[k] = v
        else:
            cnnc.append(tok)
    return cnnc, env


def run_cnnc(name, batch, hw, args, flags):
    flags, env = split_flags(flags)
    env = dict(os.environ, **env)
    work = os.path.join(args.work, name)
    os.makedirs(work, exist_ok=True)
    onnx_path = os.path.join(work, "%s.onnx" % name)
    model = build_model(name, 10, seed=0)
    export_onnx(model, onnx_path, (batch, 3, hw, hw), training=True, opset=17)
    exe = os.path.join(work, "train")
    t0 = time.time()
    cmd = [args.cnnc, onnx_path, "--train", "--optimizer", "sgd", "--lr", "0.01",
           "--momentum", "0.9", "-o", exe] + flags
    p = subprocess.run(cmd, capture_output=True, text=True)
    compile_s = time.time() - t0
    if p.returncode:
        raise RuntimeError("cnnc failed: " + p.stderr[-2000:])
    t0 = time.time()
    # Logged every 3 steps: the first interval holds the warm-up (autotuning,
    # graph capture at step 3), the steady img/s of the `done:` line the
    # other args.steps steps.
    p = subprocess.run([exe, "--data", "synthetic", "--steps", str(args.steps + 3),
                        "--log-every", "3"], capture_output=True, text=True,
                       env=env)
    run_s = time.time() - t0
    if p.returncode:
        raise RuntimeError("train failed: " + (p.stdout + p.stderr)[-2000:])
    if args.profile:
        q = subprocess.run([exe, "--data", "synthetic", "--steps", "3"], capture_output=True,
                           text=True, env=dict(env, CNNRT_PROFILE="1"))
        print("\n".join(l for l in q.stderr.splitlines() if not l.startswith("cnnrt: warning")),
              flush=True)
    m = re.search(r"steady img/s (\d+), .*, peak GPU memory (\d+) MiB", p.stdout)
    ips, mem = float(m.group(1)), float(m.group(2))
    return 1000.0 * batch / ips, mem, compile_s, run_s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cnnc", required=True)
    ap.add_argument("--models", default="simplecnn,resnet18,resnet50")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--work", default="/tmp/cnnc-bench")
    ap.add_argument("--cnnc-flags", default="")
    ap.add_argument("--variants", default="",
                    help="';'-separated 'label=flags' cnnc variants (one row each; "
                         "NAME=VALUE tokens set the executable's environment); "
                         "default: one row with --cnnc-flags")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--compile-f32", action="store_true",
                    help="also time torch.compile in f32 (default: AMP + channels_last only)")
    ap.add_argument("--cnnc-only", action="store_true", help="skip the PyTorch rows")
    ap.add_argument("--profile", action="store_true",
                    help="also print each cnnc variant's CNNRT_PROFILE report of one step")
    args = ap.parse_args()
    print("GPU:", torch.cuda.get_device_name(0), "| torch", torch.__version__, flush=True)
    if args.variants:
        variants = [tuple(v.split("=", 1)) for v in args.variants.split(";") if v.strip()]
    else:
        variants = [(args.cnnc_flags or "default", args.cnnc_flags)]
    rows = []
    for name in args.models.split(","):
        batch, hw = CONFIG[name]
        res = {}
        for label, flags in variants:
            try:
                res["cnnc " + label] = run_cnnc(name, batch, hw, args, flags)
                print(name, label, res["cnnc " + label], flush=True)
            except Exception as e:
                print("cnnc %s %s: %s" % (name, label, e), flush=True)
        modes = [] if args.cnnc_only else \
            ["eager", "amp"] + ([] if args.no_compile else
                                ["compile-amp"] + (["compile"] if args.compile_f32 else []))
        for mode in modes:
            ms, mem, warm = time_torch(name, batch, hw, mode, args.steps)
            res[mode] = (ms, mem, warm, None)
        print(name, res, flush=True)
        rows.append((name, batch, hw, res))
    print("\n| model | batch | runner | ms/step | img/s | peak GPU MiB | compile s | "
          "best cnnc speed-up |")
    print("|---|---|---|---|---|---|---|---|")
    for name, batch, hw, res in rows:
        best = min((v[0] for k, v in res.items() if k.startswith("cnnc")), default=None)
        runners = [k for k in res if k.startswith("cnnc")] + [
            k for k in ("eager", "amp", "compile-amp", "compile") if k in res]
        labels = {"eager": "PyTorch eager f32", "amp": "PyTorch AMP+channels_last",
                  "compile-amp": "torch.compile AMP+channels_last",
                  "compile": "torch.compile f32"}
        for runner in runners:
            ms, mem, comp, _ = res[runner]
            ratio = "" if runner.startswith("cnnc") or best is None else "%.2fx" % (ms / best)
            # cnnc: the executable's own peak (device memory in use, context
            # excluded); PyTorch: max_memory_allocated (reserved).
            mem_s = "%.0f" % mem if not isinstance(mem, tuple) else \
                "%.0f (reserved %.0f)" % mem
            print("| %s | %d | %s | %.2f | %.0f | %s | %.1f | %s |" % (
                name, batch, labels.get(runner, runner), ms, 1000.0 * batch / ms, mem_s, comp,
                ratio))


if __name__ == "__main__":
    main()
