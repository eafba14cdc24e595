#!/usr/bin/env python3
"""cnnc vs PyTorch on the torchvision zoo beyond ResNet (GPU machine).

bench/bench.py's rows (cnnc's executable: ms/step and peak GPU memory from
its own report; PyTorch eager AMP + channels_last and the whole training step
under torch.compile in its three modes, each with its own time limit) for
the models of issue 37's zoo table, batch 64 at 224x224, 1000 classes:
EfficientNet-B0, MobileNetV3-Large, ConvNeXt-Tiny, RegNetY-400MF,
DenseNet-121, and ShuffleNetV2 x1.0 when named. The export is the legacy
(TorchScript) exporter in training mode at opset 17 (python/cnnc/export.py
passes dynamo=False on torch >= 2.9; StochasticDepth is exported as Dropout +
Mul).

  python3 bench/zoo_bench.py --cnnc .carry/cnnc [--models efficientnet_b0,...]
       [--steps 30] [--modes ...] [--limits MODE=S,...] [--deadline S] [--no-compile]
       [--zoo timm [--timm-shape BATCH,HW]] [--prebuild-jobs N]

`--zoo timm` times issue 32's timm families instead (test/gpu/timm_zoo.py:
one member per family, random init, timm's default drop rates, 1000
classes; --timm-shape, default 32,224); `--models` then picks among them,
with or without their `timm:` prefix. `--prebuild-jobs N` first exports and
compiles every model's executable, N at a time (cnnc's compile is CPU work:
the GPU is timed only afterwards, one model at a time); compile_s stays each
model's own wall time (N builds sharing the machine's cores).
`--cnnc-warm` (with --prebuild-jobs): each executable, once built, runs one
step, one at a time on the GPU while other models still build, so that the
runtime's algorithm search (every cuDNN candidate of every convolution,
timed; 20-40 s with an empty cache) fills the algorithm cache
(CNNRT_ALGO_CACHE, default ~/.cache/cnnc/algos.txt) before the timed run;
the row's "autotune_s" holds it and its run_s no longer does. The steady
ms/step never included it. The search then runs beside the other builds and
the Inductor prewarm: what other work on the GPU does to its choices can
only slow cnnc's steady step, not speed it up.

Every bench/bench.py flag applies (--resume, --torch-group, --deadline, ...).
A model cnnc cannot compile yet prints its error and keeps PyTorch's rows. The
three torch.compile modes take minutes per model: name a few models per device
call, or bound the call with --deadline (which counts from zoo_bench's start:
the build phases are in it).

`--torch-prewarm-jobs N`: beside the cnnc builds and before any timing, every
requested torch.compile mode's worker runs once per model (1 timed step after
the 3 warm-up steps), N processes at a time at a lower CPU priority (nice 10:
cnnc's builds keep theirs), all compiling into one shared Inductor cache
(<work>/inductor-cache, or --torch-cache-dir; FX-graph and AOTAutograd caches
on; Inductor's compile threads split between the N:
TORCHINDUCTOR_COMPILE_THREADS = cores / N, at least 2, unless set), each
within its mode's limit. The timed phase then runs with that cache. A row's
"prewarm" holds the prewarm's status, wall seconds and compile_s (a cold
compile, N at a time on a shared machine); the row's own compile_s is then
the warm-up with a warm cache, NOT a user's cold compile. A mode whose
prewarm timed out or failed is not timed again (its row says "prewarm: ...").
The cache also keeps the launch configurations Triton benchmarked for
Inductor's kernels during the prewarm, while other processes shared the GPU;
cuDNN's benchmark of the convolutions is redone in the timed process.

`--max-models K`: only the first K models (in --models order) that still
have rows to run after --resume; successive calls with the same --models and
the previous calls' JSON files as --resume fill the table K models at a time.
`--shard I/N`: of those models, every N-th from the I-th (before
--max-models): bench/zoo-table-gpus.sh runs one shard per GPU of a
several-GPU machine, each pinned to its own share of the cores.

`--timing FILE.json [...] [--budget S]` (no GPU): where each call's time went
(its build phase, the mean seconds of each kind of row) and how many families
like its own a call of S seconds (default 540) holds: --max-models for the
next call.

`--table FILE.json [FILE.json ...]` (no GPU, nothing else needed): prints the
markdown table of docs/benchmarks.md from the rows of the files (merged as
--resume merges them): family, batch x size, cnnc ms/step, eager AMP
ms/step, the fastest torch.compile mode that finished (its name), cnnc's
speed-up over each, cnnc's compile seconds; a side that failed, timed out
or was not run says so.
"""
import argparse
import concurrent.futures
import json
import math
import multiprocessing
import os
import shutil
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "test", "gpu"))

import bench  # noqa: E402

# name -> (batch, image size, classes)
ZOO = {
    "efficientnet_b0": (64, 224, 1000),
    "mobilenet_v3_large": (64, 224, 1000),
    "convnext_tiny": (64, 224, 1000),
    "regnet_y_400mf": (64, 224, 1000),
    "densenet121": (64, 224, 1000),
    "shufflenet_v2_x1_0": (64, 224, 1000),
}
# The table; ShuffleNetV2 only when named.
DEFAULT_MODELS = ["efficientnet_b0", "mobilenet_v3_large", "convnext_tiny",
                  "regnet_y_400mf", "densenet121"]


def zoo_argv(argv):
    """bench.py's arguments with the zoo's defaults where argv does not
    set them."""
    def given(flag):
        return any(a == flag or a.startswith(flag + "=") for a in argv)

    argv = list(argv)
    if not given("--models"):
        argv += ["--models", ",".join(DEFAULT_MODELS)]
    if not given("--steps"):
        argv += ["--steps", "30"]
    if not given("--work"):
        argv += ["--work", "/tmp/cnnc-zoo-bench"]
    return argv


def timm_config(shape):
    """`timm:NAME` -> (batch, image size, 1000) for every timm family."""
    from timm_zoo import TIMM_FAMILIES

    batch, hw = shape
    return {"timm:" + n: (batch, hw, 1000) for n in TIMM_FAMILIES}


def timm_family(name):
    return name[len("timm:"):] if name.startswith("timm:") else name


def _prebuild_one(job):
    name, batch, hw, classes, args, flags = job
    flags = bench.split_flags(flags)[0]
    try:
        return name, bench.build_cnnc(name, batch, hw, args, flags, classes), ""
    except Exception as e:  # the timed phase reports it as the row's error
        exe = bench.cnnc_exe_path(name, args, flags)
        os.makedirs(os.path.dirname(exe), exist_ok=True)
        with open(exe + ".error", "w") as f:
            f.write(str(e))
        return name, None, bench.last_error(str(e))


def warm_cnnc(name, exe, env, limit):
    """One step of a built executable, so that the runtime's algorithm
    search (cuDNN candidates, each timed, for every convolution) fills the
    algorithm cache before the timed run; its seconds go next to the
    executable (bench.main: the row's "autotune_s")."""
    t0 = time.time()
    status, _, log = bench.run_limited([exe, "--data", "synthetic", "--steps", "1"], limit,
                                       dict(os.environ, **env))
    secs = time.time() - t0
    if status == "ok":
        with open(exe + ".warm_s", "w") as f:
            f.write("%.3f" % secs)
        print("warmed %s: %.1f s" % (name, secs), flush=True)
    else:  # the timed run searches (and fails) on its own
        print("warming %s: %s %s" % (name, status, bench.last_error(log)), flush=True)


def prebuild(args, config, jobs, work, warm=False, left=lambda: float("inf")):
    """Every model's executable (of the variants `work` still needs: see
    bench.pending_work), `jobs` compiles at a time, before any timing
    (bench.run_cnnc then finds them: args.prebuilt). warm: each executable,
    once built, also runs one step (warm_cnnc), one at a time on the GPU
    while the others still compile."""
    todo, seen = [], set()
    for name in args.models:
        batch, hw, classes = bench.geometry(name, args, config)
        for _, flags in work.get(name, ([], []))[0]:
            # Variants that differ only in the runtime's environment share
            # one executable: built once, warmed once per environment.
            exe = bench.cnnc_exe_path(name, args, bench.split_flags(flags)[0])
            env = sorted(bench.split_flags(flags)[1].items())
            if (exe, tuple(env)) in seen:
                continue
            built = any(e == exe for e, _ in seen)
            seen.add((exe, tuple(env)))
            todo.append((name, batch, hw, classes, args, flags, built))
    if not todo:
        return
    # Spawned, not forked: the Inductor prewarm's threads run beside this.
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool, \
            concurrent.futures.ThreadPoolExecutor(max_workers=1) as lane:
        builds = {pool.submit(_prebuild_one, job[:6]): job for job in todo if not job[6]}
        warms = []
        for done in concurrent.futures.as_completed(builds):
            name, compile_s, err = done.result()
            print("prebuilt %s: %s" % (name, "%.1f s" % compile_s if err == "" else err),
                  flush=True)
            if not warm or err != "" or left() < 60:
                continue
            cnnc_flags = bench.split_flags(builds[done][5])[0]
            exe = bench.cnnc_exe_path(name, args, cnnc_flags)
            for job in todo:  # this executable in each of its environments
                if bench.cnnc_exe_path(job[0], args, bench.split_flags(job[5])[0]) == exe:
                    warms.append(lane.submit(warm_cnnc, name, exe,
                                             bench.split_flags(job[5])[1], args.cnnc_timeout))
        for w in warms:
            w.result()


def usable_cores():
    """The cores this process may run on (its affinity: a shard pinned by
    bench/zoo-table-gpus.sh sees its own share, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def compile_threads(jobs):
    """Inductor's compile workers per prewarm process: the cores split
    between the `jobs` processes (at least 2 each)."""
    return max(2, usable_cores() // max(1, jobs))


def prewarm_one(name, mode, member, args, cache, limit, jobs):
    """Runs `mode`'s worker once for one model into `cache`; the info dict
    bench.main puts in the row ("prewarm")."""
    info = {"status": "skipped", "jobs": jobs, "limit_s": limit, "cache": cache}
    if limit < 10:
        info["error"] = "no time left before --deadline"
        return info
    spec = bench.worker_spec(*member, mode, args, steps=1, repeats=1)
    env = bench.shared_cache_env(bench.torch_env("amp", args)[0], cache)
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", str(compile_threads(jobs)))
    # Below the cnnc builds' priority: cnnc's compile seconds stay its own
    # (the prewarm takes the cores they leave).
    nice = ["nice", "-n", "10"] if shutil.which("nice") else []
    t0 = time.time()
    status, res, log = bench.run_limited(
        nice + [sys.executable, os.path.join(HERE, "bench.py"), "--torch-worker",
                json.dumps(spec)], limit, env)
    info.update(status=status, wall_s=time.time() - t0)
    if status == "ok" and res is None:
        info.update(status="failed", error="the worker printed no result")
    elif status == "ok":
        info["compile_s"] = res["compile_s"]
    elif status == "timeout":
        info["error"] = "timeout after %.0f s (cold compile, %d at a time)" % (limit, jobs)
    else:
        info["error"] = bench.last_error(log)
    return info


def prewarm(args, config, jobs, work, left):
    """The --torch-prewarm-jobs phase: {(model, mode): info} for every
    compile mode `work` still needs; left() is the time left before the
    deadline (s)."""
    cache = args.torch_cache_dir or os.path.abspath(os.path.join(args.work, "inductor-cache"))
    os.makedirs(cache, exist_ok=True)
    items = [(name, mode) for name in args.models if name in work
             for mode in work[name][1] if bench.TORCH_MODES[mode][2]]

    def one(item):
        name, mode = item
        member = (name,) + bench.geometry(name, args, config)
        info = prewarm_one(name, mode, member, args, cache,
                           min(args.limits[mode], left()), jobs)
        print("prewarmed %s %s: %s" % (name, mode, "%.1f s" % info["wall_s"]
                                      if info["status"] == "ok" else
                                      "%s %s" % (info["status"], info.get("error", ""))),
              flush=True)
        return item, info

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        return dict(pool.map(one, items)), cache


def markdown_cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def family_table(rows):
    """The docs/benchmarks.md table of bench.json rows (see --table), then
    a summary line."""
    out = ["| family | batch × size | cnnc ms/step | eager AMP ms/step | "
           "torch.compile ms/step (mode) | cnnc vs eager AMP | cnnc vs torch.compile | "
           "cnnc compile s | GPU |",
           "|---|---|---|---|---|---|---|---|---|"]
    models = []
    for r in rows:
        if r["model"] not in models:
            models.append(r["model"])
    amp_ratios, compile_ratios, cnnc_ok = [], [], 0

    def failed(rs):
        r = rs[0]
        return markdown_cell("%s: %s" % (r["status"], r.get("error", ""))[:120])

    for name in models:
        mine = [r for r in rows if r["model"] == name]
        shape = "%d × %d²" % (mine[0]["batch"], mine[0]["hw"])
        cnnc = [r for r in mine if r["runner"].startswith("cnnc")]
        cnnc_ok_rows = [r for r in cnnc if r["status"] == "ok"]
        best = min(cnnc_ok_rows, key=lambda r: r["ms"]) if cnnc_ok_rows else None
        if best:
            cnnc_ok += 1
            label = best["runner"][len("cnnc "):]
            cnnc_cell = "%.2f" % best["ms"] + ("" if label == "default" else " (%s)" % label)
            compile_cell = fmt_s(best.get("compile_s"))
        else:
            cnnc_cell = failed(cnnc) if cnnc else "not run"
            compile_cell = ""
        amp = [r for r in mine if r["runner"] == "amp"]
        amp_ok = [r for r in amp if r["status"] == "ok"]
        amp_cell = "%.2f" % amp_ok[0]["ms"] if amp_ok else (failed(amp) if amp else "not run")
        comp = [r for r in mine if bench.TORCH_MODES.get(r["runner"], ("", True, None))[2]
                and bench.TORCH_MODES[r["runner"]][1]]
        comp_ok = [r for r in comp if r["status"] == "ok"]
        fastest = min(comp_ok, key=lambda r: r["ms"]) if comp_ok else None
        if fastest:
            comp_cell = "%.2f (%s)" % (fastest["ms"], bench.TORCH_MODES[fastest["runner"]][2])
        elif comp:
            comp_cell = failed(comp) + " (%s)" % ", ".join(
                bench.TORCH_MODES[r["runner"]][2] for r in comp)
        else:
            comp_cell = "not run"
        # A speed-up only between rows timed on the same kind of GPU (a
        # table filled over several calls may mix machines).
        vs_amp = vs_comp = ""
        if best and amp_ok:
            if same_gpu(best, amp_ok[0]):
                amp_ratios.append(amp_ok[0]["ms"] / best["ms"])
                vs_amp = "%.2f×" % amp_ratios[-1]
            else:
                vs_amp = "not compared (GPUs differ)"
        if best and fastest:
            if same_gpu(best, fastest):
                compile_ratios.append(fastest["ms"] / best["ms"])
                vs_comp = "%.2f×" % compile_ratios[-1]
            else:
                vs_comp = "not compared (GPUs differ)"
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            timm_family(name), shape, cnnc_cell, amp_cell, comp_cell, vs_amp, vs_comp,
            compile_cell, gpu_cell([r for r in (best, amp_ok[0] if amp_ok else None, fastest)
                                    if r])))

    def gmean(v):
        return "%.2f×" % math.exp(sum(math.log(x) for x in v) / len(v)) if v else "n/a"

    gpus = sorted({r.get("gpu", "unknown") for r in rows})
    torches = sorted({r["torch"] for r in rows if r.get("torch")})
    out.append("")
    out.append("%d families, cnnc ran %d; geometric-mean cnnc speed-up %s over eager AMP "
               "(%d families), %s over the fastest torch.compile mode (%d families); "
               "GPU %s; torch %s" % (
                   len(models), cnnc_ok, gmean(amp_ratios), len(amp_ratios),
                   gmean(compile_ratios), len(compile_ratios), ", ".join(gpus),
                   ", ".join(torches) or "unknown"))
    return "\n".join(out)


def gpu_name(row):
    """A row's GPU, short ("H100", "H200") where the name says so."""
    name = row.get("gpu", "unknown")
    for short in ("H100", "H200", "A100", "B200"):
        if short in name:
            return short
    return name


def same_gpu(a, b):
    return a.get("gpu", "unknown") == b.get("gpu", "unknown")


def gpu_cell(rows):
    """One GPU name, or which side ran where when a family's rows differ."""
    names = [gpu_name(r) for r in rows]
    if len(set(names)) <= 1:
        return names[0] if names else ""
    return ", ".join("%s %s" % ("cnnc" if r["runner"].startswith("cnnc") else r["runner"], n)
                     for r, n in zip(rows, names))


def call_timing(path, budget):
    """What one call's JSON file says about where its time went, and how
    many families like these a call of `budget` seconds holds."""
    with open(path) as f:
        d = json.load(f)
    if not isinstance(d, dict) or not isinstance(d.get("rows"), list):
        raise ValueError("%s has no \"rows\" list (not a bench.py --json file)" % path)
    mine = [r for r in d["rows"] if r.get("call") == d.get("started")
            and r.get("status") != "skipped"]
    families = sorted({r["model"] for r in mine})
    zb = d.get("zoo_bench", {})
    lines = ["%s: call of %s on %s, %d cores: %d families measured, wall %s s "
             "(build phase %s s: prebuild %s s, prewarm %s s)" % (
                 path, d.get("started", "?"), d.get("gpu", "?"), zb.get("cores") or 0,
                 len(families), fmt_s(d.get("wall_s")), fmt_s(zb.get("build_phase_s")),
                 fmt_s(zb.get("prebuild_s")), fmt_s(zb.get("prewarm_s")))]

    def mean(key, pick):
        v = [r[key] for r in mine if pick(r) and r.get(key) is not None]
        return (sum(v) / len(v), len(v)) if v else (None, 0)

    for label, key, pick in [
            ("cnnc compile (prebuild, s)", "compile_s", lambda r: r["runner"].startswith("cnnc")),
            ("cnnc algorithm search (--cnnc-warm, s)", "autotune_s",
             lambda r: r["runner"].startswith("cnnc")),
            ("cnnc timed run (s)", "run_s", lambda r: r["runner"].startswith("cnnc")),
            ("eager AMP timed process or group share (s)", "wall_s",
             lambda r: r["runner"] == "amp"),
            ("torch.compile timed (warm cache, s)", "wall_s",
             lambda r: r["runner"].startswith("compile")),
            ("torch.compile prewarm (cold, concurrent, s)", None, None)]:
        if key is None:
            v = [r["prewarm"]["wall_s"] for r in mine
                 if isinstance(r.get("prewarm"), dict) and r["prewarm"].get("wall_s")]
            m, n = (sum(v) / len(v), len(v)) if v else (None, 0)
        else:
            m, n = mean(key, pick)
        lines.append("  mean %s: %s over %d rows" % (label, fmt_s(m) or "n/a", n))
    if families and d.get("wall_s"):
        per = d["wall_s"] / len(families)
        lines.append("  %.1f s per family: a %d-s call holds about %d such families "
                     "(--max-models)" % (per, budget, int(budget // per)))
    return "\n".join(lines)


def fmt_s(v):
    return "" if v is None else "%.1f" % v


def select_zoo(argv):
    """zoo_bench's own flags out of argv: (options, bench.py's argv, the
    model table)."""
    own = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    own.add_argument("--zoo", choices=["torchvision", "timm"], default="torchvision")
    own.add_argument("--timm-shape", default="32,224")
    own.add_argument("--prebuild-jobs", type=int, default=0)
    own.add_argument("--torch-prewarm-jobs", type=int, default=0)
    own.add_argument("--max-models", type=int, default=0)
    own.add_argument("--cnnc-warm", action="store_true")
    own.add_argument("--table", nargs="+", default=None)
    own.add_argument("--timing", nargs="+", default=None)
    own.add_argument("--budget", type=int, default=540)
    own.add_argument("--shard", default=None, metavar="I/N")
    opts, argv = own.parse_known_args(list(argv))
    if opts.shard is not None:
        try:
            i, n = (int(v) for v in opts.shard.split("/"))
        except ValueError:
            i, n = -1, 0
        if not 0 <= i < n:
            own.error("--shard: expected I/N with 0 <= I < N, got %r" % opts.shard)
    for flag in ("prebuild_jobs", "torch_prewarm_jobs", "max_models"):
        if getattr(opts, flag) < 0:
            own.error("--%s: expected a number >= 0" % flag.replace("_", "-"))
    if opts.cnnc_warm and not opts.prebuild_jobs:
        own.error("--cnnc-warm runs the executables --prebuild-jobs builds; "
                  "give --prebuild-jobs N")
    if opts.zoo == "timm":
        config = timm_config([int(v) for v in opts.timm_shape.split(",")])
        models = None
        for i, a in enumerate(argv):
            if a == "--models" and i + 1 < len(argv):
                models = argv[i + 1]
                argv = argv[:i] + argv[i + 2:]
                break
            if a.startswith("--models="):
                models = a.split("=", 1)[1]
                argv = argv[:i] + argv[i + 1:]
                break
        names = [m if m.startswith("timm:") else "timm:" + m
                 for m in (models.split(",") if models else []) if m] or list(config)
        argv += ["--models", ",".join(names)]
    else:
        config = dict(bench.CONFIG, **ZOO)
    return opts, zoo_argv(argv), config


def main(argv=None):
    start = time.time()
    opts, argv, config = select_zoo(sys.argv[1:] if argv is None else argv)
    if opts.table is not None:
        try:
            print(family_table(bench.read_rows(opts.table)))
        except (OSError, ValueError) as e:
            print("zoo_bench.py: error: --table: %s" % e, file=sys.stderr)
            return 2
        return 0
    if opts.timing is not None:
        try:
            print("\n".join(call_timing(p, opts.budget) for p in opts.timing))
        except (OSError, ValueError) as e:
            print("zoo_bench.py: error: --timing: %s" % e, file=sys.stderr)
            return 2
        return 0
    args = bench.parse_args(argv, config)
    done = {bench.row_key(r) for r in bench.read_rows(args.resume, ok_only=True)}
    work = bench.pending_work(args, config, done)
    models = [m for m in args.models if m in work]
    if opts.shard is not None:
        # Every I-th of the models still to run: N processes (one per GPU)
        # given the same --resume files split the same list.
        i, n = (int(v) for v in opts.shard.split("/"))
        models = models[i::n]
    if opts.max_models:
        models = models[:opts.max_models]
    if models != args.models:
        print("to run: %s" % (", ".join(models) or "nothing (every row has a result)"),
              flush=True)
        argv = argv + ["--models", ",".join(models)]
        args = bench.parse_args(argv, config)
    work = {m: work[m] for m in models}

    def left():
        return args.deadline - (time.time() - start) - 20 if args.deadline else float("inf")

    # The build phase: cnnc's builds (and --cnnc-warm's one-step runs) and
    # the Inductor prewarm side by side, all before any timing.
    phase, seconds = {}, {}
    t_build = time.time()

    def timed(key, fn, *a):
        t0 = time.time()
        phase[key] = fn(*a)
        seconds[key + "_s"] = round(time.time() - t0, 1)
        print("%s: %.0f s" % (key, seconds[key + "_s"]), flush=True)

    prewarm_thread = None
    if opts.torch_prewarm_jobs > 0:
        prewarm_thread = threading.Thread(target=timed, args=(
            "prewarm", prewarm, args, config, opts.torch_prewarm_jobs, work, left))
        prewarm_thread.start()
    if opts.prebuild_jobs > 0:
        timed("prebuild", prebuild, args, config, opts.prebuild_jobs, work, opts.cnnc_warm,
              left)
        argv = argv + ["--prebuilt"]
    prewarmed = None
    if prewarm_thread is not None:
        prewarm_thread.join()
        prewarmed, cache = phase["prewarm"]
        if not args.torch_cache_dir:
            argv = argv + ["--torch-cache-dir", cache]
    seconds["build_phase_s"] = round(time.time() - t_build, 1)
    meta = {"zoo_bench": dict(seconds, models=models, prebuild_jobs=opts.prebuild_jobs,
                              cnnc_warm=opts.cnnc_warm,
                              torch_prewarm_jobs=opts.torch_prewarm_jobs,
                              cores=usable_cores(), shard=opts.shard)}
    return bench.main(argv, config, prewarm=prewarmed, started_at=start, meta_extra=meta)


if __name__ == "__main__":
    sys.exit(main())
