#!/usr/bin/env python3
"""cnnc vs PyTorch, side by side in one run on the GPU machine.

For each model (its real class count: 1000 for the torchvision ImageNet
models, 10 for SimpleCNN; --classes overrides): export it with PyTorch
(training mode, legacy exporter), compile its training step with cnnc
(timed), run the executable on synthetic data and read its steady-state
img/s and peak GPU memory; then time the same SGD-momentum training step in
PyTorch, each mode in its own process with its own time limit:

  amp                      eager, AMP (f16) + channels_last + GradScaler
  compile-default          torch.compile(step) where step is the WHOLE
  compile-max-autotune       training step a PyTorch user writes (zero_grad,
  compile-reduce-overhead    forward + loss under autocast, GradScaler's
                             scaled backward, optimizer step, scaler update),
                             AMP + channels_last; modes "default",
                             "max-autotune-no-cudagraphs", "reduce-overhead"
  eager                    eager f32 (not in the default set)
  compile-f32              torch.compile(step) in f32 (not in the default set)

A mode that does not finish within its limit (--limits, --deadline) is
killed with its compile workers and reported as "timeout after N s"; one
that fails is reported with its last error line. Neither stops the run.
TF32 is off for the f32 rows. Each torch.compile mode starts with an empty
Inductor cache (a user's first compile), unless --warm-torch-cache (Inductor's
default cache directory, kept) or --torch-cache-dir DIR (one cache directory
for every mode and process, FX-graph and AOTAutograd caches on): then a
row's compile_s is the warm-up with that cache, not a user's cold compile.

  python3 bench/bench.py --cnnc .carry/cnnc [--models simplecnn,resnet18,resnet50]
       [--steps 50] [--modes amp,compile-default,...] [--limits MODE=S,...]
       [--deadline S] [--json FILE] [--cnnc-flags "..."] [--no-compile]
       [--resume FILE ...] [--torch-group N] [--torch-cache-dir DIR]
Prints a markdown table (for docs/benchmarks.md) at the end and writes every
row, as it finishes, to the JSON file (default <work>/bench.json).

Filling one table over several runs (device calls): `--resume FILE` (may be
repeated; FILE is only read, it may be the --json file itself) starts from
FILE's rows. A row with a result (status ok) is kept, copied into the new
JSON file and not run again; a timed-out, failed or skipped one is run
again. Rows are matched on (model, runner, batch, image size, classes),
runner being the PyTorch mode or "cnnc <variant label>"; of two files
holding the same row the later one wins. Each row records the GPU and the
start time of the run that measured it ("gpu", "call").

`--torch-group N` times the PyTorch modes that can share a process (eager,
amp, and the compile modes other than reduce-overhead when the Inductor
cache is shared: --warm-torch-cache or --torch-cache-dir) for up to N
models in one worker process: torch and timm are imported once; each model
still builds its own model, optimizer and, under torch.compile, its own
graphs (Dynamo is reset between models), and each model has its mode's own
time limit from the end of the previous one. cuDNN's benchmark results for
convolution shapes an earlier model of the group already ran are reused (the
steady state is timed either way). A model whose time runs out is killed with
the process; the rest of the group goes on in a new process. Rows, table and
JSON are the same as without grouping; models are then taken N at a time
(cnnc rows of the N, then each mode over the N).
"""
import argparse
import gc
import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.join(HERE, "..", "python")
sys.path.insert(0, PYTHON_DIR)

# name -> (batch, image size, classes)
CONFIG = {"simplecnn": (32, 32, 10), "resnet18": (128, 224, 1000),
          "resnet50": (128, 224, 1000)}

# mode -> (label, AMP + channels_last, torch.compile mode or None)
TORCH_MODES = {
    "eager": ("PyTorch eager f32", False, None),
    "amp": ("PyTorch eager AMP+channels_last", True, None),
    "compile-default": ("torch.compile whole step, default, AMP+CL", True, "default"),
    "compile-max-autotune": ("torch.compile whole step, max-autotune-no-cudagraphs, AMP+CL",
                             True, "max-autotune-no-cudagraphs"),
    "compile-reduce-overhead": ("torch.compile whole step, reduce-overhead, AMP+CL", True,
                                "reduce-overhead"),
    "compile-f32": ("torch.compile whole step, default, f32", False, "default"),
}
DEFAULT_MODES = "amp,compile-default,compile-max-autotune,compile-reduce-overhead"
# Seconds each mode may take (its process: model build, compile, warm-up,
# timed steps). max-autotune benchmarks Triton templates for every GEMM and
# convolution, which takes minutes on ResNet-50.
DEFAULT_LIMITS = {"eager": 120, "amp": 120, "compile-default": 240,
                  "compile-max-autotune": 420, "compile-reduce-overhead": 240,
                  "compile-f32": 240}
RESULT_TAG = "BENCH_RESULT "
WARMUP_STEPS = 3


# ---------------------------------------------------------------------------
# The PyTorch side: one mode in one process (--torch-worker SPEC).

def torch_worker(spec):
    """Times one PyTorch mode; returns the result dict. spec: name, batch,
    hw, classes, mode, steps, repeats, device ("cuda" or, for the CPU test
    of this code, "cpu")."""
    import torch

    from cnnc.export import build_model

    label, amp, compile_mode = TORCH_MODES[spec["mode"]]
    dev = spec.get("device", "cuda")
    cuda = dev == "cuda"
    if compile_mode is not None and not hasattr(torch, "compile"):
        raise RuntimeError("torch.compile needs torch >= 2.0; this is torch %s"
                           % torch.__version__)
    if cuda:
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
    batch, hw, classes = spec["batch"], spec["hw"], spec["classes"]
    model = build_model(spec["name"], classes, seed=0).to(dev).train()
    x = torch.rand(batch, 3, hw, hw, device=dev)
    y = torch.randint(0, classes, (batch,), device=dev)
    if amp:
        model = model.to(memory_format=torch.channels_last)
        x = x.to(memory_format=torch.channels_last)
    # Eager AMP gets the fused SGD kernel where this torch has it (2.4+):
    # what a user tuning eager PyTorch would pick, and it unscales the
    # gradients inside the same kernel. Compiled modes compile the optimizer.
    fused = bool(amp and cuda and compile_mode is None and spec.get("fused_sgd", True)
                 and "fused" in torch.optim.SGD.__init__.__code__.co_varnames)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9,
                          **({"fused": True} if fused else {}))
    # f16 autocast and its GradScaler on the GPU; bfloat16 without a scaler
    # on the CPU (this code's CPU test).
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        scaler = torch.amp.GradScaler("cuda", enabled=amp and cuda)
    else:  # torch < 2.3
        scaler = torch.cuda.amp.GradScaler(enabled=amp and cuda)
    amp_dtype = torch.float16 if cuda else torch.bfloat16

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev, dtype=amp_dtype, enabled=amp):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    # The whole step, as a PyTorch user compiles it (not only the module's
    # forward): backward, the optimizer and GradScaler are in what Dynamo
    # sees, graph breaks included.
    if compile_mode == "reduce-overhead":
        # One eager step first, as a resumed or warmed-up job has: SGD's
        # first step clones each gradient into a new momentum buffer, and
        # under cudagraph trees that clone reads a gradient the backward
        # graph's replay has already overwritten (torch 2.11 raises
        # "accessing tensor output of CUDAGraphs that has been overwritten").
        step()
    run = torch.compile(step, mode=compile_mode) if compile_mode else step
    # reduce-overhead replays CUDA graphs (cudagraph trees); a new step must
    # be marked as one, or the previous replay's outputs count as live.
    mark = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)
    if compile_mode != "reduce-overhead":
        mark = None

    def one():
        if mark:
            mark()
        run()

    sync = torch.cuda.synchronize if cuda else (lambda: None)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    t0 = time.time()
    for _ in range(WARMUP_STEPS):
        one()
    sync()
    warm = time.time() - t0
    warm_alloc = torch.cuda.max_memory_allocated() / 2**20 if cuda else None
    # The steady state's peak: compile-time autotuning buffers and cuDNN's
    # benchmark trials of the warm-up are not the training step's memory.
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    best = float("inf")
    for _ in range(spec.get("repeats", 3)):
        if cuda:
            s = torch.cuda.Event(enable_timing=True)
            e = torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(spec["steps"]):
                one()
            e.record()
            e.synchronize()
            ms = s.elapsed_time(e) / spec["steps"]
        else:
            t = time.perf_counter()
            for _ in range(spec["steps"]):
                one()
            ms = 1000.0 * (time.perf_counter() - t) / spec["steps"]
        best = min(best, ms)
    res = {"ms": best, "img_s": 1000.0 * batch / best, "compile_s": warm,
           "fused_sgd": fused,
           "torch": torch.__version__,
           "device": torch.cuda.get_device_name(0) if cuda else "cpu"}
    if cuda:
        res.update(alloc_mib=torch.cuda.max_memory_allocated() / 2**20,
                   reserved_mib=torch.cuda.max_memory_reserved() / 2**20,
                   warmup_alloc_mib=warm_alloc)
    return res


def worker_main(spec_text):
    spec = json.loads(spec_text)
    res = torch_worker(spec)
    print(RESULT_TAG + json.dumps(res), flush=True)
    return 0


# The group worker's protocol (--torch-group-worker SPECS): for the i-th
# spec, "BENCH_START i", then either "BENCH_RESULT {..., "index": i}" or
# "BENCH_FAILED i <error line>" (its traceback before it).
START_TAG = "BENCH_START "
FAILED_TAG = "BENCH_FAILED "


def group_worker_main(specs_text):
    """Times every spec of the list in this process, one after the other;
    a model that raises is reported and the next one runs."""
    import traceback

    import torch

    for i, spec in enumerate(json.loads(specs_text)):
        print(START_TAG + str(i), flush=True)
        try:
            res = torch_worker(spec)
            res["index"] = i
            print(RESULT_TAG + json.dumps(res), flush=True)
        except Exception as e:  # noqa: BLE001 -- reported, the group goes on
            traceback.print_exc()
            line = ("%s: %s" % (type(e).__name__, e)).splitlines()[0]
            print(FAILED_TAG + "%d %s" % (i, line[:300]), flush=True)
            # A CUDA error other than out-of-memory is sticky: the context
            # is lost for every later model. The parent runs them in a new
            # process.
            if "CUDA error" in str(e) or "CUBLAS_STATUS" in str(e):
                return 3
        # The next model starts from an empty allocator (its reserved
        # memory is its own) and without this one's compiled graphs (Dynamo
        # counts recompilations of `step` across models otherwise).
        if hasattr(torch, "_dynamo"):
            torch._dynamo.reset()
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    return 0


# ---------------------------------------------------------------------------
# Running a mode (or cnnc) in a process with a time limit.

def run_limited(argv, limit_s, env=None):
    """Runs argv in its own session for at most limit_s seconds.
    Returns (status, result, log): status "ok" (result: the dict of the last
    RESULT_TAG line, or None when the command prints none), "timeout" (the
    whole process group, compile workers included, was killed) or "failed"
    (non-zero exit; log holds its output)."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, env=env, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        kill_group(p)
        try:
            out, _ = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:  # a descendant left the group
            out = ""
        return "timeout", None, out or ""
    result = None
    for line in out.splitlines():
        if line.startswith(RESULT_TAG):
            result = json.loads(line[len(RESULT_TAG):])
    if p.returncode != 0:
        return "failed", None, out
    return "ok", result, out


def kill_group(p):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def last_error(log):
    """The line of a failed run that says why (the exception's), else its
    last non-empty line."""
    lines = [l.strip() for l in log.splitlines() if l.strip()]
    for l in reversed(lines):
        if re.match(r"^[A-Za-z_.]*(Error|Exception)\b", l):
            return l[:300]
    return lines[-1][:300] if lines else "no output"


def shared_cache_env(env, cache):
    """env with Inductor's on-disk caches in `cache`: compiled FX graphs,
    AOTAutograd's joint graphs (both keyed on the graph, its input shapes
    and the configuration, so another process compiling the same step hits
    them), autotuning results and Triton's kernels."""
    env = dict(env)
    env["TORCHINDUCTOR_CACHE_DIR"] = cache
    env["TRITON_CACHE_DIR"] = os.path.join(cache, "triton")
    env["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "1"
    env["TORCHINDUCTOR_AUTOGRAD_CACHE"] = "1"
    return env


def torch_env(mode, args):
    """The worker's environment for `mode` and the cache directory to remove
    after it (None): an empty Inductor cache of its own per compile mode
    (a user's first compile) unless the cache is warm or shared."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = PYTHON_DIR + os.pathsep + env.get("PYTHONPATH", "")
    if getattr(args, "torch_cache_dir", ""):
        return shared_cache_env(env, args.torch_cache_dir), None
    if TORCH_MODES[mode][2] and not args.warm_torch_cache:
        cache = tempfile.mkdtemp(prefix="inductor-cache-")
        return shared_cache_env(env, cache), cache
    return env, None


def worker_spec(name, batch, hw, classes, mode, args, steps=None, repeats=3):
    return {"name": name, "batch": batch, "hw": hw, "classes": classes, "mode": mode,
            "steps": args.steps if steps is None else steps, "repeats": repeats,
            "device": args.torch_device}


def torch_row(name, batch, hw, classes, mode, limit_s):
    return {"model": name, "batch": batch, "hw": hw, "classes": classes, "runner": mode,
            "label": TORCH_MODES[mode][0], "limit_s": limit_s}


def time_torch(name, batch, hw, classes, mode, args, limit_s):
    """One row: a dict with status ok/timeout/failed/skipped."""
    row = torch_row(name, batch, hw, classes, mode, limit_s)
    if limit_s < 10:
        row.update(status="skipped", error="no time left before --deadline")
        return row
    spec = worker_spec(name, batch, hw, classes, mode, args)
    env, cache = torch_env(mode, args)
    t0 = time.time()
    status, res, log = run_limited(
        [sys.executable, os.path.abspath(__file__), "--torch-worker", json.dumps(spec)],
        limit_s, env)
    row["wall_s"] = time.time() - t0
    if cache:
        subprocess.run(["rm", "-rf", cache])
    row["status"] = status
    if status == "ok" and res is None:
        row.update(status="failed", error="the worker printed no result")
    elif status == "ok":
        row.update(res)
    elif status == "timeout":
        row["error"] = "timeout after %.0f s" % limit_s
    else:
        row["error"] = last_error(log)
    if row["status"] != "ok":
        print("\n".join(log.splitlines()[-15:]), flush=True)
    return row


def groupable(mode, args):
    """Whether `mode` may time several models in one process: eager modes
    always; compile modes when the Inductor cache is shared anyway (a cold
    cache per model is one process per model), except reduce-overhead
    (cudagraph trees keep their memory pool across Dynamo resets)."""
    compile_mode = TORCH_MODES[mode][2]
    if compile_mode is None:
        return True
    if compile_mode == "reduce-overhead":
        return False
    return bool(args.warm_torch_cache or getattr(args, "torch_cache_dir", ""))


def group_worker_argv(specs):
    """The command of one group worker (tests put a fake one here)."""
    return [sys.executable, os.path.abspath(__file__), "--torch-group-worker",
            json.dumps(specs)]


def time_torch_group(members, mode, args, limit_of, on_row=None):
    """`mode`'s rows for members [(name, batch, hw, classes), ...], timed in
    as few worker processes as possible, in order. limit_of() is the time
    limit (s) of the next model, read when the previous one ends (or its
    process starts): the mode's limit, bounded by --deadline. A model that
    runs past it is killed with its process, and the rest continue in a
    new one; a model whose process dies is a failed row. on_row(row) is
    called as each row is done. Returns the rows in member order."""
    rows = [None] * len(members)

    def finish(i, row):
        rows[i] = row
        if on_row:
            on_row(row)

    pending = list(range(len(members)))
    while pending:
        limit = limit_of()
        if limit < 10:
            for i in pending:
                row = torch_row(*members[i], mode, limit)
                row.update(status="skipped", error="no time left before --deadline")
                finish(i, row)
            break
        specs = [worker_spec(*members[i], mode, args) for i in pending]
        env, cache = torch_env(mode, args)
        p = subprocess.Popen(group_worker_argv(specs), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, env=env,
                             start_new_session=True)
        lines = queue.Queue()

        def read(stream=p.stdout, out=lines):
            for line in stream:
                out.put(line)
            out.put(None)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        # Local indices done and started; the log; the current model's first line.
        done, started, log, since = set(), set(), [], 0
        t_event, timed_out, out_of_time = time.time(), False, False
        while True:
            try:
                line = lines.get(timeout=max(0.05, t_event + limit - time.time()))
            except queue.Empty:
                timed_out = True
                break
            if line is None:
                break
            log.append(line.rstrip("\n"))
            j = None
            if line.startswith(START_TAG):
                started.add(int(line[len(START_TAG):]))
            elif line.startswith(RESULT_TAG):
                res = json.loads(line[len(RESULT_TAG):])
                j = res.pop("index")
                row = torch_row(*members[pending[j]], mode, limit)
                row.update(status="ok", **res)
            elif line.startswith(FAILED_TAG):
                k, _, err = line[len(FAILED_TAG):].rstrip("\n").partition(" ")
                j = int(k)
                row = torch_row(*members[pending[j]], mode, limit)
                row.update(status="failed", error=err)
                print("\n".join(log[since:][-15:]), flush=True)
            if j is None:
                continue
            now = time.time()
            row["wall_s"] = now - t_event
            done.add(j)
            finish(pending[j], row)
            t_event, since = now, len(log)
            limit = limit_of()
            if limit < 10 and len(done) < len(pending):
                out_of_time = True
                break
        if timed_out or out_of_time:
            kill_group(p)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            kill_group(p)
        reader.join(timeout=10)
        if cache:
            subprocess.run(["rm", "-rf", cache])
        rest = [j for j in range(len(pending)) if j not in done]
        if rest and not out_of_time and (rest[0] in started or not started or timed_out):
            # The model the process was on when it was killed or died (or,
            # when it started none, the first: something must progress):
            # its row says so; the ones after it run in a new process. A
            # process that ended between two models (the worker's exit
            # after a sticky CUDA error) leaves the next one to a new one.
            j = rest[0]
            row = torch_row(*members[pending[j]], mode, limit)
            if timed_out:
                row.update(status="timeout", error="timeout after %.0f s" % limit)
            else:
                row.update(status="failed", error=last_error("\n".join(log[since:])))
            row["wall_s"] = time.time() - t_event
            print("\n".join(log[since:][-15:]), flush=True)
            finish(pending[j], row)
            rest = rest[1:]
        pending = [pending[j] for j in rest]
    return rows


# ---------------------------------------------------------------------------
# The cnnc side.

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


def cnnc_exe_path(name, args, flags):
    """Where a model's executable for one set of cnnc flags lives."""
    tag = re.sub(r"[^A-Za-z0-9_.-]+", "_", " ".join(flags))[:60] or "default"
    return os.path.join(args.work, name.replace(":", "_"), tag, "train")


def build_cnnc(name, batch, hw, args, flags, classes):
    """Exports the model and compiles its training step; returns cnnc's
    wall seconds (also written next to the executable, for --prebuilt)."""
    from cnnc.export import build_model, export_onnx

    exe = cnnc_exe_path(name, args, flags)
    work = os.path.dirname(exe)
    os.makedirs(work, exist_ok=True)
    onnx_path = os.path.join(work, "model-%d.onnx" % classes)
    model = build_model(name, classes, seed=0)
    export_onnx(model, onnx_path, (batch, 3, hw, hw), training=True, opset=17)
    limit = getattr(args, "cnnc_timeout", 600)
    t0 = time.time()
    cmd = [args.cnnc, onnx_path, "--train", "--optimizer", "sgd", "--lr", "0.01",
           "--momentum", "0.9", "-o", exe] + flags
    status, _, log = run_limited(cmd, limit)
    compile_s = time.time() - t0
    if status != "ok":
        raise RuntimeError("cnnc %s: %s" % (status, log[-2000:]))
    with open(exe + ".compile_s", "w") as f:
        f.write("%.3f" % compile_s)
    return compile_s


def run_cnnc(name, batch, hw, args, flags, classes=10):
    """cnnc's row: (ms/step, peak MiB, compile s, run s); raises on failure.
    classes defaults to 10 for python_path.py's callers."""
    flags, env = split_flags(flags)
    env = dict(os.environ, **env)
    limit = getattr(args, "cnnc_timeout", 600)
    exe = cnnc_exe_path(name, args, flags)
    done = exe + ".compile_s"
    if getattr(args, "prebuilt", False) and os.path.exists(done):
        with open(done) as f:  # built by build_cnnc in an earlier phase
            compile_s = float(f.read())
    elif getattr(args, "prebuilt", False) and os.path.exists(exe + ".error"):
        with open(exe + ".error") as f:  # that phase's failure, not retried
            raise RuntimeError(f.read())
    else:
        compile_s = build_cnnc(name, batch, hw, args, flags, classes)
    t0 = time.time()
    # Logged every 3 steps: the first interval holds the warm-up (autotuning,
    # graph capture at step 3), the steady img/s of the `done:` line the
    # other args.steps steps.
    status, _, log = run_limited([exe, "--data", "synthetic", "--steps", str(args.steps + 3),
                                  "--log-every", "3"], limit, env)
    run_s = time.time() - t0
    if status != "ok":
        raise RuntimeError("train %s: %s" % (status, log[-2000:]))
    if getattr(args, "profile", False):
        q = subprocess.run([exe, "--data", "synthetic", "--steps", "3"], capture_output=True,
                           text=True, env=dict(env, CNNRT_PROFILE="1"))
        print("\n".join(l for l in q.stderr.splitlines() if not l.startswith("cnnrt: warning")),
              flush=True)
    m = re.search(r"steady img/s (\d+), .*, peak GPU memory (\d+) MiB", log)
    if not m:
        raise RuntimeError("no 'steady img/s ..., peak GPU memory' line in: " + log[-1000:])
    ips, mem = float(m.group(1)), float(m.group(2))
    return 1000.0 * batch / ips, mem, compile_s, run_s


# ---------------------------------------------------------------------------
# Arguments, the table, the JSON file.

def parse_limits(text, modes, default_s):
    """'MODE=S,...' over DEFAULT_LIMITS (or default_s for every mode when
    given); an unknown mode or a non-positive number is an error."""
    limits = {m: (default_s if default_s else DEFAULT_LIMITS[m]) for m in modes}
    for item in filter(None, (t.strip() for t in text.split(","))):
        mode, eq, s = item.partition("=")
        if not eq or mode not in TORCH_MODES:
            raise ValueError("--limits: expected MODE=SECONDS with MODE one of %s, got %r"
                             % (", ".join(TORCH_MODES), item))
        try:
            v = float(s)
        except ValueError:
            v = 0
        if v <= 0:
            raise ValueError("--limits: %r is not a positive number of seconds" % item)
        limits[mode] = v
    return limits


def parse_args(argv, config=None):
    config = CONFIG if config is None else config
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cnnc", required=True)
    ap.add_argument("--models", default="simplecnn,resnet18,resnet50")
    ap.add_argument("--classes", type=int, default=0,
                    help="class count of every model (default: each model's own)")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--work", default="/tmp/cnnc-bench")
    ap.add_argument("--json", default="", help="the rows as JSON (default <work>/bench.json)")
    ap.add_argument("--cnnc-flags", default="")
    ap.add_argument("--variants", default="",
                    help="';'-separated 'label=flags' cnnc variants (one row each; "
                         "NAME=VALUE tokens set the executable's environment); "
                         "default: one row with --cnnc-flags")
    ap.add_argument("--modes", default=DEFAULT_MODES,
                    help="PyTorch modes, comma-separated: " + ", ".join(TORCH_MODES))
    ap.add_argument("--limits", default="",
                    help="per-mode time limits, MODE=SECONDS,... (defaults: %s)" %
                         ", ".join("%s=%d" % kv for kv in DEFAULT_LIMITS.items()))
    ap.add_argument("--mode-timeout", type=float, default=0,
                    help="one time limit (s) for every mode, before --limits")
    ap.add_argument("--deadline", type=float, default=0,
                    help="seconds for the whole run: a mode gets at most what is left "
                         "(minus 20 s for the table); 0: no deadline")
    ap.add_argument("--cnnc-timeout", type=float, default=600,
                    help="time limit (s) of cnnc's compile and of its run, each")
    ap.add_argument("--no-compile", action="store_true",
                    help="drop the torch.compile modes")
    ap.add_argument("--compile-f32", action="store_true", help="add compile-f32")
    ap.add_argument("--cnnc-only", action="store_true", help="skip the PyTorch rows")
    ap.add_argument("--warm-torch-cache", action="store_true",
                    help="keep Inductor's on-disk cache between modes and runs")
    ap.add_argument("--torch-cache-dir", default="",
                    help="one Inductor cache directory (FX-graph and AOTAutograd caches "
                         "on) for every PyTorch mode and process: warm once filled")
    ap.add_argument("--torch-group", type=int, default=1,
                    help="time the PyTorch modes that can share a process for up to N "
                         "models per worker process (see above); default 1")
    ap.add_argument("--resume", action="append", default=[], metavar="FILE",
                    help="start from FILE's rows (a --json file of an earlier run; read "
                         "only; may be repeated): rows with a result are kept and not "
                         "run again")
    ap.add_argument("--torch-device", default="cuda", help=argparse.SUPPRESS)
    ap.add_argument("--prebuilt", action="store_true",
                    help="use the executables an earlier build phase left in --work "
                         "(bench/zoo_bench.py --prebuild-jobs)")
    ap.add_argument("--profile", action="store_true",
                    help="also print each cnnc variant's CNNRT_PROFILE report of one step")
    args = ap.parse_args(argv)
    if args.torch_group < 1:
        ap.error("--torch-group: expected a positive number of models, got %d"
                 % args.torch_group)
    for path in args.resume:
        try:
            read_rows([path])
        except (OSError, ValueError) as e:
            ap.error("--resume: %s" % e)
    if args.torch_cache_dir:
        args.torch_cache_dir = os.path.abspath(args.torch_cache_dir)
    args.models = [m for m in args.models.split(",") if m]
    for m in args.models:
        if m not in config:
            ap.error("--models: unknown model %r (known: %s)" % (m, ", ".join(config)))
    modes = [m for m in args.modes.split(",") if m]
    for m in modes:
        if m not in TORCH_MODES:
            ap.error("--modes: unknown mode %r (known: %s)" % (m, ", ".join(TORCH_MODES)))
    if args.no_compile:
        modes = [m for m in modes if TORCH_MODES[m][2] is None]
    if args.compile_f32 and "compile-f32" not in modes:
        modes.append("compile-f32")
    args.modes = [] if args.cnnc_only else modes
    try:
        args.limits = parse_limits(args.limits, TORCH_MODES, args.mode_timeout)
    except ValueError as e:
        ap.error(str(e))
    if not args.json:
        args.json = os.path.join(args.work, "bench.json")
    if args.variants:
        args.variants = [tuple(v.split("=", 1)) for v in args.variants.split(";")
                         if v.strip()]
    else:
        args.variants = [(args.cnnc_flags or "default", args.cnnc_flags)]
    return args


def row_key(r):
    """What makes two rows the same measurement (--resume)."""
    return (r["model"], r["runner"], r.get("batch"), r.get("hw"), r.get("classes"))


def read_rows(paths, ok_only=False):
    """The rows of bench.json files, one per row_key: a row with a result
    wins over one without, else the later file's. Each row gets its file's
    GPU and start time where it has none ("gpu", "call"). Raises ValueError
    for a file that is not such a JSON file."""
    by_key = {}
    for path in paths:
        try:
            with open(path) as f:
                d = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError("%s is not JSON: %s" % (path, e))
        if not isinstance(d, dict) or not isinstance(d.get("rows"), list):
            raise ValueError("%s has no \"rows\" list (not a bench.py --json file)" % path)
        for r in d["rows"]:
            if ok_only and r.get("status") != "ok":
                continue
            r = dict(r)
            r.setdefault("gpu", d.get("gpu", "unknown"))
            r.setdefault("call", d.get("started", ""))
            old = by_key.get(row_key(r))
            if old is None or r.get("status") == "ok" or old.get("status") != "ok":
                by_key[row_key(r)] = r
    return list(by_key.values())


def runner_rank(runner):
    """cnnc rows first, then the PyTorch modes in TORCH_MODES' order."""
    if runner.startswith("cnnc"):
        return -1
    return list(TORCH_MODES).index(runner) if runner in TORCH_MODES else len(TORCH_MODES)


def fmt(v, spec):
    return "" if v is None else spec % v


def table(rows):
    """The markdown table of all rows, then one line per model: cnnc's best
    against the fastest PyTorch row that finished."""
    out = ["| model | batch | classes | runner | ms/step | img/s | peak MiB allocated | "
           "peak MiB reserved | compile s | best cnnc speed-up |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    models = []
    for r in rows:
        if r["model"] not in models:
            models.append(r["model"])
    summary = []
    for name in models:
        mine = sorted((r for r in rows if r["model"] == name),
                      key=lambda r: runner_rank(r["runner"]))
        ok = [r for r in mine if r["status"] == "ok"]
        cnnc = [r for r in ok if r["runner"].startswith("cnnc")]
        best = min((r["ms"] for r in cnnc), default=None)
        for r in mine:
            head = "| %s | %d | %d | %s |" % (name, r["batch"], r["classes"], r["label"])
            if r["status"] != "ok":
                out.append(head + " %s: %s | | | | | |" % (r["status"], r.get("error", "")))
                continue
            ratio = "" if r["runner"].startswith("cnnc") or best is None else \
                "%.2fx" % (r["ms"] / best)
            out.append(head + " %.2f | %.0f | %s | %s | %s | %s |" % (
                r["ms"], r["img_s"], fmt(r.get("alloc_mib"), "%.0f"),
                fmt(r.get("reserved_mib"), "%.0f"), fmt(r.get("compile_s"), "%.1f"), ratio))
        torch_ok = [r for r in ok if not r["runner"].startswith("cnnc")]
        if best is not None and torch_ok:
            fastest = min(torch_ok, key=lambda r: r["ms"])
            summary.append("%s: cnnc %.2f ms vs the fastest PyTorch row (%s) %.2f ms: %.2fx" % (
                name, best, fastest["label"], fastest["ms"], fastest["ms"] / best))
        missing = [r for r in mine if r["status"] != "ok"]
        if missing:
            summary.append("%s: did not finish: %s" % (name, "; ".join(
                "%s (%s)" % (r["label"], r.get("error", r["status"])) for r in missing)))
    return "\n".join(out + [""] + summary)


def write_json(path, meta, rows):
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(dict(meta, rows=rows), f, indent=1)
    os.replace(tmp, path)


def gpu_name():
    try:
        p = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
        return p.stdout.strip().splitlines()[0] if p.returncode == 0 else "unknown"
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "unknown"


def geometry(name, args, config):
    """(batch, image size, classes) of a model in this run."""
    batch, hw, classes = config[name]
    return batch, hw, args.classes or classes


def cnnc_row(name, label, flags, batch, hw, classes):
    return {"model": name, "batch": batch, "hw": hw, "classes": classes,
            "runner": "cnnc " + label, "label": "cnnc " + label, "flags": flags}


def pending_work(args, config, done):
    """What is left to run after --resume: {model: (cnnc variants as
    (label, flags), PyTorch modes)} for the models with anything left."""
    out = {}
    for name in args.models:
        batch, hw, classes = geometry(name, args, config)
        variants = [(label, flags) for label, flags in args.variants
                    if row_key(cnnc_row(name, label, flags, batch, hw, classes)) not in done]
        modes = [m for m in args.modes
                 if row_key(torch_row(name, batch, hw, classes, m, 0)) not in done]
        if variants or modes:
            out[name] = (variants, modes)
    return out


def main(argv=None, config=None, prewarm=None, started_at=None, meta_extra=None):
    """The run. prewarm: {(model, mode): info} of bench/zoo_bench.py's
    --torch-prewarm-jobs phase; a mode whose prewarm did not finish is not
    run again (its row says why), the others' rows keep the info.
    started_at: when --deadline's clock started (default: now); meta_extra:
    more keys for the JSON file's header."""
    config = CONFIG if config is None else config
    args = parse_args(sys.argv[1:] if argv is None else argv, config)
    prewarm = prewarm or {}
    start = time.time() if started_at is None else started_at
    # The parent does not initialize CUDA: each PyTorch mode's process gets
    # the whole GPU, and its peak memory is its own.
    meta = {"gpu": gpu_name(), "started": time.strftime("%Y-%m-%d %H:%M:%S UTC",
                                                        time.gmtime()),
            "argv": sys.argv if argv is None else argv, "steps": args.steps,
            "warmup_steps": WARMUP_STEPS}
    if args.resume:
        meta["resumed_from"] = [os.path.abspath(p) for p in args.resume]
    if args.torch_cache_dir:
        meta["torch_cache_dir"] = args.torch_cache_dir
    meta.update(meta_extra or {})
    print("GPU:", meta["gpu"], flush=True)
    rows = read_rows(args.resume, ok_only=True)
    done = {row_key(r) for r in rows}
    if args.resume:
        print("resumed %d rows with a result from %s" % (len(rows), ", ".join(args.resume)),
              flush=True)
    write_json(args.json, meta, rows)

    def left():
        return args.deadline - (time.time() - start) - 20 if args.deadline else float("inf")

    def limit_of(mode):
        return min(args.limits[mode], left())

    def add(row):
        row.setdefault("gpu", meta["gpu"])
        row.setdefault("call", meta["started"])
        rows.append(row)
        print(json.dumps(row), flush=True)
        write_json(args.json, meta, rows)

    work = pending_work(args, config, done)
    models = [m for m in args.models if m in work]
    for b in range(0, len(models), args.torch_group):
        block = models[b:b + args.torch_group]
        for name in block:
            batch, hw, classes = geometry(name, args, config)
            for label, flags in work[name][0]:
                row = cnnc_row(name, label, flags, batch, hw, classes)
                if left() < 10:
                    row.update(status="skipped", error="no time left before --deadline")
                    add(row)
                    continue
                try:
                    ms, mem, comp, run_s = run_cnnc(name, batch, hw, args, flags, classes)
                    row.update(status="ok", ms=ms, img_s=1000.0 * batch / ms, alloc_mib=mem,
                               compile_s=comp, run_s=run_s)
                    # zoo_bench --cnnc-warm's one-step run (the algorithm
                    # search) before the timed phase, not in run_s.
                    warm = cnnc_exe_path(name, args, split_flags(flags)[0]) + ".warm_s"
                    if args.prebuilt and os.path.exists(warm):
                        with open(warm) as f:
                            row["autotune_s"] = float(f.read())
                except Exception as e:  # the PyTorch rows still run
                    row.update(status="failed", error=last_error(str(e)))
                    print("cnnc %s %s: %s" % (name, label, e), flush=True)
                add(row)
        for mode in args.modes:
            run = []
            for name in block:
                if mode not in work[name][1]:
                    continue
                member = (name,) + geometry(name, args, config)
                pw = prewarm.get((name, mode))
                if pw is not None and pw["status"] != "ok":
                    # The timed run would compile cold again: not run.
                    row = torch_row(*member, mode, limit_of(mode))
                    row.update(status=pw["status"], error="prewarm: " + pw.get("error", ""),
                               prewarm=pw)
                    add(row)
                else:
                    run.append(member)

            def add_timed(row, mode=mode):
                if (row["model"], mode) in prewarm:
                    row["prewarm"] = prewarm[(row["model"], mode)]
                add(row)

            if len(run) > 1 and groupable(mode, args):
                time_torch_group(run, mode, args, lambda mode=mode: limit_of(mode), add_timed)
            else:
                for member in run:
                    add_timed(time_torch(*member, mode, args, limit_of(mode)))
    meta["wall_s"] = round(time.time() - start, 1)  # from started_at
    write_json(args.json, meta, rows)
    print()
    print(table(rows))
    print("JSON:", args.json)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--torch-worker":
        sys.exit(worker_main(sys.argv[2]))
    if len(sys.argv) == 3 and sys.argv[1] == "--torch-group-worker":
        sys.exit(group_worker_main(sys.argv[2]))
    sys.exit(main())
