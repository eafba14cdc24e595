"""The CPU-checkable pieces of bench/bench.py and bench/zoo_bench.py (issue
37's baselines), so that a device call does not find them broken:

* argument parsing: modes, per-mode limits, the zoo's defaults, bad input;
* run_limited: a mode that overruns its limit is reported as a timeout and
  its whole process group (a stand-in for Inductor's compile workers) is
  killed; a failing one is reported with its error line; a finishing one
  gives its result;
* the PyTorch worker's training step end to end on the CPU (eager f32 and
  autocast), and torch.compile reported as a failed row where this torch
  has none;
* the table and the JSON file from finished, timed-out and failed rows;
* one table over several device calls: --resume (which rows are run
  again, how files merge), --torch-group (the order of the rows, the real
  group worker on the CPU, a hung and a crashing model with a fake worker),
  zoo_bench's --torch-prewarm-jobs and --max-models (with fake runners) and
  --table (the docs/benchmarks.md family table);
* test/gpu/bench_fusions.py: its profile parsing and a --dry-run that
  exports and compiles both nets at small sizes (needs the built cnnc).
"""
import json
import os
import re
import subprocess
import sys
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench"))

import bench  # noqa: E402
import zoo_bench  # noqa: E402


def test_parse_args_defaults_and_limits():
    a = bench.parse_args(["--cnnc", "x", "--models", "resnet50"])
    assert a.modes == ["amp", "compile-default", "compile-max-autotune",
                       "compile-reduce-overhead"]
    assert a.limits["compile-max-autotune"] == bench.DEFAULT_LIMITS["compile-max-autotune"]
    assert a.json == os.path.join("/tmp/cnnc-bench", "bench.json")
    a = bench.parse_args(["--cnnc", "x", "--mode-timeout", "50",
                          "--limits", "compile-default=7.5", "--no-compile", "--compile-f32"])
    assert a.limits["compile-default"] == 7.5 and a.limits["amp"] == 50
    # --no-compile drops the compile modes, --compile-f32 adds its own back.
    assert a.modes == ["amp", "compile-f32"]
    assert bench.parse_args(["--cnnc", "x", "--cnnc-only"]).modes == []


@pytest.mark.parametrize("argv,message", [
    (["--modes", "amp,turbo"], "unknown mode 'turbo'"),
    (["--limits", "compile-default=-3"], "not a positive number"),
    (["--limits", "warp=3"], "expected MODE=SECONDS"),
    (["--models", "resnet51"], "unknown model 'resnet51'"),
])
def test_parse_args_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        bench.parse_args(["--cnnc", "x"] + argv)
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_zoo_defaults():
    argv = zoo_bench.zoo_argv(["--cnnc", "x", "--steps=5"])
    config = dict(bench.CONFIG, **zoo_bench.ZOO)
    a = bench.parse_args(argv, config)
    assert a.models == ["efficientnet_b0", "mobilenet_v3_large", "convnext_tiny",
                        "regnet_y_400mf", "densenet121"]
    assert a.steps == 5 and a.work == "/tmp/cnnc-zoo-bench"
    assert all(config[m] == (64, 224, 1000) for m in a.models)
    assert bench.CONFIG["resnet50"][2] == 1000 and bench.CONFIG["simplecnn"][2] == 10


def test_zoo_timm_selection():
    opts, argv, config = zoo_bench.select_zoo(
        ["--cnnc", "x", "--zoo", "timm", "--timm-shape", "16,128",
         "--models", "skresnet18,timm:repvgg_a2", "--prebuild-jobs", "3"])
    a = bench.parse_args(argv, config)
    assert opts.prebuild_jobs == 3
    assert a.models == ["timm:skresnet18", "timm:repvgg_a2"]
    assert config["timm:skresnet18"] == (16, 128, 1000)
    # Without --models: every family of test/gpu/timm_zoo.py.
    _, argv, config = zoo_bench.select_zoo(["--cnnc", "x", "--zoo", "timm"])
    a = bench.parse_args(argv, config)
    assert len(a.models) >= 30 and all(m.startswith("timm:") for m in a.models)
    assert config[a.models[0]] == (32, 224, 1000)
    with pytest.raises(SystemExit):
        bench.parse_args(zoo_bench.select_zoo(
            ["--cnnc", "x", "--zoo", "timm", "--models", "resnet50"])[1], config)


def test_prebuilt_failure_is_reported_not_rebuilt(tmp_path):
    """A model whose prebuild failed is that row's error in the timed phase;
    cnnc is not run again (a missing binary here would fail differently)."""
    args = bench.parse_args(["--cnnc", "/nonexistent/cnnc", "--work", str(tmp_path),
                             "--models", "simplecnn", "--prebuilt"])
    exe = bench.cnnc_exe_path("simplecnn", args, [])
    os.makedirs(os.path.dirname(exe))
    with open(exe + ".error", "w") as f:
        f.write("cnnc failed: error: unsupported op 'Foo'")
    with pytest.raises(RuntimeError, match="unsupported op 'Foo'"):
        bench.run_cnnc("simplecnn", 32, 32, args, "", 10)


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (not yet reaped by its parent) counts as gone.
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_run_limited_timeout_kills_the_group(tmp_path):
    pidfile = tmp_path / "child.pid"
    # A fake mode: it starts a grandchild (as Inductor starts compile
    # workers), prints progress, then never finishes.
    fake = ("import subprocess, sys, time\n"
            "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
            "open(%r, 'w').write(str(c.pid))\n"
            "print('compiling...', flush=True)\n"
            "time.sleep(120)\n" % str(pidfile))
    t0 = time.time()
    status, res, log = bench.run_limited([sys.executable, "-c", fake], 3)
    took = time.time() - t0
    assert status == "timeout" and res is None
    assert "compiling..." in log
    assert took < 20
    grandchild = int(pidfile.read_text())
    for _ in range(50):
        if not alive(grandchild):
            break
        time.sleep(0.1)
    assert not alive(grandchild)


def test_run_limited_result_and_failure():
    ok = "print('noise'); print(%r + '{\"ms\": 2.5}')" % bench.RESULT_TAG
    assert bench.run_limited([sys.executable, "-c", ok], 30)[:2] == ("ok", {"ms": 2.5})
    bad = "print('step 1'); raise RuntimeError('CUDA out of memory')"
    status, res, log = bench.run_limited([sys.executable, "-c", bad], 30)
    assert status == "failed" and res is None
    assert bench.last_error(log) == "RuntimeError: CUDA out of memory"


def worker_args(tmp_path, **kw):
    a = bench.parse_args(["--cnnc", "x", "--steps", "1", "--work", str(tmp_path)])
    a.torch_device = "cpu"
    for k, v in kw.items():
        setattr(a, k, v)
    return a


@pytest.mark.parametrize("mode", ["eager", "amp"])
def test_torch_worker_step_on_cpu(mode, tmp_path):
    row = bench.time_torch("simplecnn", 2, 32, 10, mode, worker_args(tmp_path), 120)
    assert row["status"] == "ok", row
    assert row["ms"] > 0 and row["img_s"] == pytest.approx(2000.0 / row["ms"])
    assert row["device"] == "cpu" and row["label"] == bench.TORCH_MODES[mode][0]


def test_compile_mode_without_torch_compile_is_a_failed_row(tmp_path):
    import torch
    if hasattr(torch, "compile"):
        pytest.skip("this torch has torch.compile (the CPU compile would take minutes)")
    row = bench.time_torch("simplecnn", 2, 32, 10, "compile-reduce-overhead",
                           worker_args(tmp_path), 120)
    assert row["status"] == "failed"
    assert "torch.compile needs torch >= 2.0" in row["error"]


def test_deadline_skips_a_mode(tmp_path):
    row = bench.time_torch("simplecnn", 2, 32, 10, "amp", worker_args(tmp_path), 4)
    assert row["status"] == "skipped" and "deadline" in row["error"]


ROWS = [
    {"model": "resnet50", "batch": 128, "classes": 1000, "runner": "cnnc default",
     "label": "cnnc default", "status": "ok", "ms": 20.0, "img_s": 6400.0,
     "alloc_mib": 4192.0, "compile_s": 14.1},
    {"model": "resnet50", "batch": 128, "classes": 1000, "runner": "amp",
     "label": bench.TORCH_MODES["amp"][0], "status": "ok", "ms": 29.0, "img_s": 4413.8,
     "alloc_mib": 6000.0, "reserved_mib": 7000.0, "compile_s": 7.0},
    {"model": "resnet50", "batch": 128, "classes": 1000, "runner": "compile-default",
     "label": bench.TORCH_MODES["compile-default"][0], "status": "ok", "ms": 26.0,
     "img_s": 4923.1, "alloc_mib": 5594.0, "reserved_mib": 6100.0, "compile_s": 72.5},
    {"model": "resnet50", "batch": 128, "classes": 1000, "runner": "compile-max-autotune",
     "label": bench.TORCH_MODES["compile-max-autotune"][0], "status": "timeout",
     "error": "timeout after 420 s"},
]


def test_table():
    t = bench.table(ROWS)
    lines = t.splitlines()
    assert lines[0].startswith("| model | batch | classes | runner | ms/step | img/s |")
    amp = next(l for l in lines if "eager AMP" in l)
    assert "| 29.00 | 4414 | 6000 | 7000 | 7.0 | 1.45x |" in amp
    to = next(l for l in lines if "max-autotune" in l and l.startswith("|"))
    assert "timeout: timeout after 420 s" in to
    # The fastest PyTorch row that finished is compile-default (26 ms).
    assert "resnet50: cnnc 20.00 ms vs the fastest PyTorch row (torch.compile whole step, " \
           "default, AMP+CL) 26.00 ms: 1.30x" in t
    assert "did not finish: torch.compile whole step, max-autotune-no-cudagraphs" in t


def test_main_writes_json_as_rows_finish(tmp_path, monkeypatch, capsys):
    """main() with a fake cnnc row and a fake mode's worker: every row
    reaches the JSON file, the failing cnnc one included."""
    def fake_cnnc(name, batch, hw, args, flags, classes):
        if flags == "--broken":
            raise RuntimeError("cnnc failed\nerror: something")
        return 10.0, 1000.0, 3.0, 5.0

    def fake_torch(name, batch, hw, classes, mode, args, limit):
        return {"model": name, "batch": batch, "hw": hw, "classes": classes,
                "runner": mode, "label": mode, "status": "timeout",
                "error": "timeout after %.0f s" % limit}

    monkeypatch.setattr(bench, "run_cnnc", fake_cnnc)
    monkeypatch.setattr(bench, "time_torch", fake_torch)
    out = tmp_path / "r.json"
    assert bench.main(["--cnnc", "x", "--models", "resnet18", "--json", str(out),
                       "--variants", "a=;b=--broken", "--modes", "compile-default",
                       "--limits", "compile-default=33"]) == 0
    d = json.loads(out.read_text())
    assert [r["runner"] for r in d["rows"]] == ["cnnc a", "cnnc b", "compile-default"]
    assert d["rows"][0]["img_s"] == pytest.approx(12800.0)
    assert d["rows"][1]["status"] == "failed" and d["rows"][1]["error"] == "error: something"
    assert d["rows"][2]["error"] == "timeout after 33 s"
    assert d["rows"][0]["classes"] == 1000
    assert "| resnet18 | 128 | 1000 | cnnc a | 10.00 | 12800 |" in capsys.readouterr().out


def test_compile_time_parses_the_timing_table():
    import compile_time
    stderr = """cnnc: nvcc: 3 unit(s), 1 compiled (2 at a time), 2 from the cache '/c'
===-------------------------------------------------------------------------===
  ----User Time----  ----Wall Time----  ----Name----
    0.7598 (  0.8%)    0.7598 (  1.6%)  ONNX import
    0.0325 (  0.0%)    0.0325 (  0.1%)  Emit CUDA
   90.6821 ( 97.6%)   45.3538 ( 95.4%)  nvcc compile
   43.8540 ( 47.2%)   43.8540 ( 92.2%)    kernels0
    0.5529 (  0.6%)    0.5529 (  1.2%)  nvcc link
   92.8890 (100.0%)   47.5607 (100.0%)  Total
"""
    stages, units = compile_time.parse_timing(stderr)
    assert stages == {"ONNX import": 0.7598, "Emit CUDA": 0.0325, "nvcc compile": 45.3538,
                      "nvcc link": 0.5529, "Total": 47.5607}
    assert units == (3, 1, 2)
    # The single-column form (no parallel work: wall time only).
    stages, units = compile_time.parse_timing("    0.6267 ( 26.0%)  nvcc link\n")
    assert stages == {"nvcc link": 0.6267} and units is None


def test_roofline_floors(tmp_path):
    """bench/roofline.py: a convolution's FLOPs from its filter and output,
    the filter gradient's from dy and the filter, bytes of operands and
    results, reshapes free, only the named function read, and each op's
    floor the larger of its FLOP and byte times."""
    ir = tmp_path / "step.mlir"
    ir.write_text(
        "func.func @forward(%a: tensor<2x8x8x4xf16>) {\n"
        "  %x = cnn.conv2d %a, %w {groups = 1 : i64} : (tensor<2x8x8x4xf16>, "
        "tensor<16x3x3x4xf16>) -> tensor<2x8x8x16xf16>\n"
        "}\n"
        "func.func @train_step(%a: tensor<2x8x8x4xf16>) {\n"
        "  %y = cnn.conv2d %a, %w {groups = 1 : i64} : (tensor<2x8x8x4xf16>, "
        "tensor<16x3x3x4xf16>) -> tensor<2x8x8x16xf16>\n"
        "  %g = cnn.conv2d_bwd_filter %a, %y {groups = 1 : i64} : (tensor<2x8x8x4xf16>, "
        "tensor<2x8x8x16xf16>) -> tensor<16x3x3x4xf16>\n"
        "  %r = cnn.reshape %y : (tensor<2x8x8x16xf16>) -> tensor<2x1024xf16>\n"
        "  %z = cnn.fused_elementwise %y {broadcast = array<i64: 0>} : "
        "(tensor<2x8x8x16xf16>) -> tensor<2x8x8x16xf32> {\n"
        "  ^bb0(%e: f16):\n"
        "  }\n"
        "}\n")
    # 1 TFLOP/s and 1 TB/s make FLOPs and bytes read as picoseconds.
    out = subprocess.run([sys.executable, os.path.join(REPO, "bench", "roofline.py"), str(ir),
                          "--tflops", "1e-6", "--tbps", "1e-6"],
                         capture_output=True, text=True, check=True).stdout
    rows = {l.split()[0]: l.split() for l in out.splitlines()[1:] if l and l[0].islower()
            and len(l.split()) == 7}
    flops = 2 * (2 * 8 * 8 * 16) * 3 * 3 * 4  # 147,456 per convolution
    assert int(rows["conv2d"][1]) == 1 and "reshape" not in rows
    assert float(rows["conv2d"][2]) == pytest.approx(flops / 1e9)
    assert float(rows["conv2d_bwd_filter"][2]) == pytest.approx(flops / 1e9)
    conv_bytes = (2 * 8 * 8 * 4 + 16 * 3 * 3 * 4 + 2 * 8 * 8 * 16) * 2
    assert float(rows["conv2d"][3]) == pytest.approx(conv_bytes / 1e6, abs=0.05)
    ew_bytes = 2 * 8 * 8 * 16 * (2 + 4)
    assert float(rows["fused_elementwise"][3]) == pytest.approx(ew_bytes / 1e6, abs=0.05)
    # At 1e-6 TFLOP/s (1e6 FLOP/s) the conv takes 147.5 ms, more than its
    # 6,272 bytes' 6.3 ms at 1e6 B/s.
    assert float(rows["conv2d"][6]) == pytest.approx(flops / 1e3, rel=1e-3)


# ---------------------------------------------------------------------------
# Filling one table over several device calls: --resume, --torch-group,
# zoo_bench's --torch-prewarm-jobs, --max-models and --table.

def bench_json(path, rows, gpu="NVIDIA H100 80GB HBM3", started="2026-11-27 09:00:00 UTC"):
    path.write_text(json.dumps({"gpu": gpu, "started": started, "rows": rows}))
    return str(path)


def trow(model, runner, status="ok", ms=10.0, batch=128, hw=224, classes=1000, **kw):
    r = {"model": model, "runner": runner, "batch": batch, "hw": hw, "classes": classes,
         "label": bench.TORCH_MODES[runner][0] if runner in bench.TORCH_MODES else runner,
         "status": status}
    if status == "ok":
        r.update(ms=ms, img_s=1000.0 * batch / ms)
    else:
        r["error"] = kw.pop("error", "timeout after 240 s")
    r.update(kw)
    return r


def fake_runs(monkeypatch, calls):
    """bench's cnnc and PyTorch runners replaced by fakes that record what
    was run: [("cnnc", model, flags) | (mode, model) | ("group", mode, [models])]."""
    def fake_cnnc(name, batch, hw, args, flags, classes):
        calls.append(("cnnc", name, flags))
        return 10.0, 1000.0, 3.0, 5.0

    def fake_torch(name, batch, hw, classes, mode, args, limit):
        calls.append((mode, name))
        row = bench.torch_row(name, batch, hw, classes, mode, limit)
        row.update(status="ok", ms=20.0, img_s=1000.0 * batch / 20.0, compile_s=1.0)
        return row

    def fake_group(members, mode, args, limit_of, on_row=None):
        calls.append(("group", mode, [m[0] for m in members]))
        rows = []
        for m in members:
            row = bench.torch_row(*m, mode, limit_of())
            row.update(status="ok", ms=15.0, img_s=1.0, compile_s=1.0)
            rows.append(row)
            on_row(row)
        return rows

    monkeypatch.setattr(bench, "run_cnnc", fake_cnnc)
    monkeypatch.setattr(bench, "time_torch", fake_torch)
    monkeypatch.setattr(bench, "time_torch_group", fake_group)


def test_read_rows_merges_files(tmp_path):
    a = bench_json(tmp_path / "a.json", [
        trow("resnet18", "amp", ms=30.0),
        trow("resnet18", "compile-default", status="timeout"),
        trow("resnet50", "amp", status="failed", error="RuntimeError: boom")])
    b = bench_json(tmp_path / "b.json", [
        trow("resnet18", "amp", status="failed", error="CUDA out of memory"),
        trow("resnet18", "compile-default", ms=25.0),
        trow("resnet50", "amp", status="timeout")], gpu="NVIDIA H200", started="later")
    rows = {(r["model"], r["runner"]): r for r in bench.read_rows([a, b])}
    # A row with a result wins over a later one without; else the later one.
    assert rows[("resnet18", "amp")]["ms"] == 30.0
    assert rows[("resnet18", "amp")]["gpu"] == "NVIDIA H100 80GB HBM3"
    assert rows[("resnet18", "compile-default")]["call"] == "later"
    assert rows[("resnet50", "amp")]["status"] == "timeout"
    assert [r["model"] for r in bench.read_rows([a, b], ok_only=True)] == ["resnet18"] * 2
    # Another batch is another measurement.
    c = bench_json(tmp_path / "c.json", [trow("resnet18", "amp", ms=5.0, batch=64)])
    assert len(bench.read_rows([a, c], ok_only=True)) == 2


def test_resume_runs_only_what_has_no_result(tmp_path, monkeypatch):
    calls = []
    fake_runs(monkeypatch, calls)
    prev = bench_json(tmp_path / "prev.json", [
        trow("resnet18", "cnnc default", ms=8.0, compile_s=12.0),
        trow("resnet18", "amp", ms=30.0),
        trow("resnet18", "compile-default", status="timeout"),
        trow("resnet50", "cnnc default", status="failed", error="error: x"),
        trow("resnet50", "amp", status="skipped", error="no time left before --deadline"),
    ])
    out = tmp_path / "new.json"
    assert bench.main(["--cnnc", "x", "--models", "resnet18,resnet50", "--json", str(out),
                       "--modes", "amp,compile-default", "--resume", prev]) == 0
    assert calls == [("compile-default", "resnet18"), ("cnnc", "resnet50", ""),
                     ("amp", "resnet50"), ("compile-default", "resnet50")]
    d = json.loads(out.read_text())
    assert d["resumed_from"] == [os.path.abspath(prev)]
    got = {(r["model"], r["runner"]): r for r in d["rows"]}
    assert len(d["rows"]) == 6
    # Kept rows keep their own GPU and call; new rows get this run's.
    assert got[("resnet18", "amp")]["ms"] == 30.0
    assert got[("resnet18", "amp")]["gpu"] == "NVIDIA H100 80GB HBM3"
    assert got[("resnet18", "amp")]["call"] == "2026-11-27 09:00:00 UTC"
    assert got[("resnet50", "amp")]["call"] == d["started"]
    # The --json file itself as --resume: everything has a result now.
    calls.clear()
    assert bench.main(["--cnnc", "x", "--models", "resnet18,resnet50", "--json", str(out),
                       "--modes", "amp,compile-default", "--resume", str(out)]) == 0
    assert calls == [] and len(json.loads(out.read_text())["rows"]) == 6


@pytest.mark.parametrize("content,message", [
    (None, "No such file"), ("{", "is not JSON"), ('{"gpu": "x"}', 'no "rows" list')])
def test_resume_bad_file(tmp_path, content, message, capsys):
    path = tmp_path / "r.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(SystemExit) as e:
        bench.parse_args(["--cnnc", "x", "--resume", str(path)])
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_torch_group_blocks(tmp_path, monkeypatch):
    """--torch-group 2 over three models: the cnnc rows of a block, then
    each mode over the block; compile modes share a process only with a
    shared cache, reduce-overhead never; a block of one runs alone."""
    calls = []
    fake_runs(monkeypatch, calls)
    argv = ["--cnnc", "x", "--models", "simplecnn,resnet18,resnet50", "--torch-group", "2",
            "--modes", "amp,compile-default", "--json", str(tmp_path / "a.json")]
    assert bench.main(argv) == 0
    assert calls == [
        ("cnnc", "simplecnn", ""), ("cnnc", "resnet18", ""),
        ("group", "amp", ["simplecnn", "resnet18"]),
        ("compile-default", "simplecnn"), ("compile-default", "resnet18"),
        ("cnnc", "resnet50", ""), ("amp", "resnet50"), ("compile-default", "resnet50")]
    rows = json.loads((tmp_path / "a.json").read_text())["rows"]
    assert len(rows) == 9 and all(r["status"] == "ok" for r in rows)
    calls.clear()
    assert bench.main(argv[:-2] + ["--json", str(tmp_path / "b.json"), "--torch-cache-dir",
                                   str(tmp_path / "cache"), "--cnnc-only"]) == 0
    assert [c[0] for c in calls] == ["cnnc"] * 3
    a = bench.parse_args(["--cnnc", "x", "--torch-cache-dir", str(tmp_path / "c")])
    assert bench.groupable("compile-default", a) and bench.groupable("amp", a)
    assert not bench.groupable("compile-reduce-overhead", a)
    assert not bench.groupable("compile-default", bench.parse_args(["--cnnc", "x"]))
    with pytest.raises(SystemExit):
        bench.parse_args(["--cnnc", "x", "--torch-group", "0"])


def test_torch_cache_env(tmp_path):
    a = bench.parse_args(["--cnnc", "x", "--torch-cache-dir", str(tmp_path / "ind")])
    env, cache = bench.torch_env("compile-default", a)
    assert cache is None and env["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "ind")
    assert env["TRITON_CACHE_DIR"] == str(tmp_path / "ind" / "triton")
    assert env["TORCHINDUCTOR_FX_GRAPH_CACHE"] == "1"
    assert env["TORCHINDUCTOR_AUTOGRAD_CACHE"] == "1"
    # Without it: a fresh cache per compile mode, removed afterwards.
    env, cache = bench.torch_env("compile-default", bench.parse_args(["--cnnc", "x"]))
    assert cache and env["TORCHINDUCTOR_CACHE_DIR"] == cache and os.path.isdir(cache)
    os.rmdir(cache)
    assert bench.torch_env("amp", bench.parse_args(["--cnnc", "x"]))[1] is None


def test_torch_group_worker_on_cpu(tmp_path):
    """The real group worker on the CPU: three models in one process, the
    middle one fails (unknown model) and the third still runs."""
    args = worker_args(tmp_path)
    members = [("simplecnn", 2, 32, 10), ("no_such_model", 2, 32, 10),
               ("simplecnn", 3, 32, 10)]
    seen = []
    rows = bench.time_torch_group(members, "amp", args, lambda: 120, seen.append)
    assert [r["status"] for r in rows] == ["ok", "failed", "ok"]
    assert "unknown model 'no_such_model'" in rows[1]["error"]
    assert rows[2]["batch"] == 3 and rows[2]["img_s"] == pytest.approx(3000.0 / rows[2]["ms"])
    assert rows[0]["device"] == "cpu" and "index" not in rows[0]
    assert set(rows[0]) >= {"ms", "img_s", "compile_s", "fused_sgd", "torch", "wall_s"}
    assert seen == rows


FAKE_GROUP = r"""
import json, os, sys, time
specs = json.loads(sys.argv[1])
with open(%r, "a") as f:
    f.write(",".join(s["name"] for s in specs) + "\n")
for i, s in enumerate(specs):
    print("BENCH_START %%d" %% i, flush=True)
    if s["name"] == "hang":
        time.sleep(60)
    if s["name"] == "crash":
        print("Fatal Python error: Segmentation fault", flush=True)
        os._exit(139)
    if s["name"] == "sticky":
        print("BENCH_FAILED %%d RuntimeError: CUDA error: an illegal memory access" %% i,
              flush=True)
        sys.exit(3)
    print("BENCH_RESULT " + json.dumps({"ms": 2.0, "img_s": 1.0, "compile_s": 0.1,
                                         "index": i}), flush=True)
"""


def test_torch_group_timeout_and_crash(tmp_path, monkeypatch):
    """A model that hangs is killed at its own limit and one whose process
    dies is a failed row; the models after each go on in a new process, as
    after a worker that ends itself between models (a sticky CUDA error)."""
    starts = tmp_path / "starts.txt"
    script = tmp_path / "fake.py"
    script.write_text(FAKE_GROUP % str(starts))
    monkeypatch.setattr(bench, "group_worker_argv",
                        lambda specs: [sys.executable, str(script), json.dumps(specs)])
    members = [(n, 2, 32, 10) for n in ["a", "hang", "b", "crash", "sticky", "c"]]
    t0 = time.time()
    rows = bench.time_torch_group(members, "amp", worker_args(tmp_path), lambda: 10)
    assert time.time() - t0 < 40
    assert [r["status"] for r in rows] == ["ok", "timeout", "ok", "failed", "failed", "ok"]
    assert rows[1]["error"] == "timeout after 10 s"
    assert "Segmentation fault" in rows[3]["error"]
    assert rows[4]["error"] == "RuntimeError: CUDA error: an illegal memory access"
    assert starts.read_text().splitlines() == ["a,hang,b,crash,sticky,c", "b,crash,sticky,c",
                                               "sticky,c", "c"]
    # No time left: the rest are skipped, nothing runs.
    rows = bench.time_torch_group(members[:2], "amp", worker_args(tmp_path), lambda: 5)
    assert [r["status"] for r in rows] == ["skipped", "skipped"]
    assert len(starts.read_text().splitlines()) == 4
    # A worker that dies before its first model: that model is the failed
    # row (something progresses), the next one runs in a new process.
    monkeypatch.setattr(bench, "group_worker_argv", lambda specs: [
        sys.executable, "-c", "import sys; sys.exit('ImportError: no torch')"])
    rows = bench.time_torch_group([("x", 2, 32, 10), ("y", 2, 32, 10)], "amp",
                                  worker_args(tmp_path), lambda: 10)
    assert [r["status"] for r in rows] == ["failed", "failed"]
    assert all("ImportError: no torch" in r["error"] for r in rows)


def test_zoo_max_models_and_prewarm(tmp_path, monkeypatch):
    """zoo_bench: --max-models takes the first models with work left after
    --resume; --torch-prewarm-jobs runs each compile mode once per model
    into one cache, the timed phase gets that cache; a model whose prewarm
    timed out is not timed again."""
    calls, prewarmed = [], []
    fake_runs(monkeypatch, calls)

    def fake_prewarm_one(name, mode, member, args, cache, limit, jobs):
        prewarmed.append((name, mode, member, cache, jobs))
        if name == "convnext_tiny":
            return {"status": "timeout", "error": "timeout after 240 s (cold compile)"}
        return {"status": "ok", "wall_s": 50.0, "compile_s": 45.0, "jobs": jobs}

    monkeypatch.setattr(zoo_bench, "prewarm_one", fake_prewarm_one)
    seen_args = []
    real_main = bench.main

    def spy_main(argv, config, **kw):
        seen_args.append(argv)
        return real_main(argv, config, **kw)

    monkeypatch.setattr(bench, "main", spy_main)
    prev = bench_json(tmp_path / "prev.json", [
        trow(m, r, batch=64) for m in ["efficientnet_b0", "mobilenet_v3_large"]
        for r in ["cnnc default", "amp", "compile-default"]])
    out = tmp_path / "z.json"
    assert zoo_bench.main(["--cnnc", "x", "--work", str(tmp_path / "w"), "--json", str(out),
                           "--modes", "amp,compile-default", "--resume", prev,
                           "--max-models", "2", "--torch-prewarm-jobs", "3",
                           "--torch-group", "2"]) == 0
    cache = os.path.join(str(tmp_path / "w"), "inductor-cache")
    assert os.path.isdir(cache)
    assert sorted(p[0] for p in prewarmed) == ["convnext_tiny", "regnet_y_400mf"]
    assert all(p[1] == "compile-default" and p[3] == cache and p[4] == 3 for p in prewarmed)
    assert ("regnet_y_400mf", 64, 224, 1000) in [p[2] for p in prewarmed]
    assert seen_args[0][-2:] == ["--torch-cache-dir", cache]
    # Only regnet is timed under torch.compile (in the group path: cache shared).
    assert calls == [("cnnc", "convnext_tiny", ""), ("cnnc", "regnet_y_400mf", ""),
                     ("group", "amp", ["convnext_tiny", "regnet_y_400mf"]),
                     ("compile-default", "regnet_y_400mf")]
    rows = {(r["model"], r["runner"]): r for r in json.loads(out.read_text())["rows"]}
    assert len(rows) == 6 + 6
    r = rows[("convnext_tiny", "compile-default")]
    assert r["status"] == "timeout" and r["error"].startswith("prewarm: timeout after 240 s")
    r = rows[("regnet_y_400mf", "compile-default")]
    assert r["status"] == "ok" and r["prewarm"]["compile_s"] == 45.0
    assert "prewarm" not in rows[("regnet_y_400mf", "amp")]


def test_zoo_shards_split_what_is_left(tmp_path, monkeypatch, capsys):
    """zoo_bench --shard I/N: N processes given the same --resume split the
    models still to run between them (every N-th from the I-th, before
    --max-models), so together they run each once; a bad shard is an error."""
    calls = []
    fake_runs(monkeypatch, calls)
    prev = bench_json(tmp_path / "prev.json", [
        trow(m, r, batch=64) for m in ["efficientnet_b0"] for r in ["cnnc default", "amp"]])
    models = "efficientnet_b0,mobilenet_v3_large,convnext_tiny,regnet_y_400mf,densenet121"
    ran = []
    for i in range(2):
        calls.clear()
        assert zoo_bench.main(["--cnnc", "x", "--work", str(tmp_path / "w"),
                               "--json", str(tmp_path / ("s%d.json" % i)), "--modes", "amp",
                               "--no-compile", "--resume", prev, "--models", models,
                               "--shard", "%d/2" % i]) == 0
        ran.append(sorted({c[1] for c in calls if c[0] == "cnnc"}))
    # efficientnet_b0 has its rows; the four others are split two and two.
    assert [len(r) for r in ran] == [2, 2] and not set(ran[0]) & set(ran[1])
    assert sorted(ran[0] + ran[1]) == ["convnext_tiny", "densenet121", "mobilenet_v3_large",
                                       "regnet_y_400mf"]
    meta = json.loads((tmp_path / "s1.json").read_text())["zoo_bench"]
    assert meta["shard"] == "1/2" and meta["cores"] >= 1
    for bad in ("2/2", "x", "1/0"):
        with pytest.raises(SystemExit):
            zoo_bench.main(["--cnnc", "x", "--shard", bad])
        assert "--shard" in capsys.readouterr().err


def test_zoo_prewarm_one_without_torch_compile(tmp_path):
    """prewarm_one runs the real worker (1 step) into the shared cache with
    the compile threads split; on a torch without torch.compile it is a
    failed prewarm naming why."""
    import torch
    if hasattr(torch, "compile"):
        pytest.skip("this torch has torch.compile (the CPU compile would take minutes)")
    args = worker_args(tmp_path)
    info = zoo_bench.prewarm_one("simplecnn", "compile-default", ("simplecnn", 2, 32, 10),
                                 args, str(tmp_path / "cache"), 120, 4)
    assert info["status"] == "failed" and "torch.compile needs torch >= 2.0" in info["error"]
    assert info["jobs"] == 4 and info["wall_s"] > 0
    assert zoo_bench.compile_threads(4) == max(2, (os.cpu_count() or 1) // 4)
    assert zoo_bench.prewarm_one("simplecnn", "compile-default", ("simplecnn", 2, 32, 10),
                                 args, str(tmp_path / "cache"), 5, 4)["status"] == "skipped"


def test_zoo_table(tmp_path):
    """--table: one line per family from two calls' files; failures and
    rows not run say so; speed-ups over eager AMP and the fastest
    torch.compile mode that finished."""
    a = bench_json(tmp_path / "a.json", [
        trow("timm:resnet26d", "cnnc default", ms=6.0, batch=32, compile_s=9.25),
        trow("timm:resnet26d", "amp", ms=13.5, batch=32),
        trow("timm:resnet26d", "compile-default", ms=9.0, batch=32),
        trow("timm:resnet26d", "compile-max-autotune", ms=8.0, batch=32),
        trow("timm:resnet26d", "compile-f32", ms=4.0, batch=32),
        trow("timm:dla34", "cnnc default", status="failed", batch=32,
             error="error: 'cnn.foo' | unsupported"),
        trow("timm:dla34", "amp", ms=20.0, batch=32),
        trow("timm:dla34", "compile-default", status="timeout", batch=32),
        trow("timm:resnest14d", "amp", ms=16.5, batch=32),
        trow("timm:resnest14d", "compile-default", ms=14.2, batch=32),
    ])
    b = bench_json(tmp_path / "b.json", [
        trow("timm:dpn68", "cnnc default", ms=10.0, batch=32, compile_s=12.0),
        trow("timm:dpn68", "amp", ms=25.0, batch=32),
        # Timed on another GPU than its PyTorch rows (file a's H100): no speed-up.
        trow("timm:resnest14d", "cnnc default", ms=11.0, batch=32, compile_s=70.0),
    ], gpu="NVIDIA H200")
    out = subprocess.run([sys.executable, os.path.join(REPO, "bench", "zoo_bench.py"),
                          "--table", a, b], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert lines[0].startswith("| family | batch × size | cnnc ms/step | eager AMP ms/step |")
    assert lines[2] == ("| resnet26d | 32 × 224² | 6.00 | 13.50 | 8.00 (max-autotune-no-cudagraphs)"
                        " | 2.25× | 1.33× | 9.2 | H100 |")
    assert lines[3].startswith("| dla34 | 32 × 224² | failed: error: 'cnn.foo' \\| unsupported |"
                               " 20.00 | timeout: timeout after 240 s (default) |  |  |")
    assert lines[4] == ("| resnest14d | 32 × 224² | 11.00 | 16.50 | 14.20 (default) | not compared"
                        " (GPUs differ) | not compared (GPUs differ) | 70.0 | cnnc H200, amp H100,"
                        " compile-default H100 |")
    assert lines[5] == "| dpn68 | 32 × 224² | 10.00 | 25.00 | not run | 2.50× |  | 12.0 | H200 |"
    summary = lines[-1]
    assert summary.startswith("4 families, cnnc ran 3; geometric-mean cnnc speed-up 2.37× over "
                              "eager AMP (2 families), 1.33× over the fastest torch.compile "
                              "mode (1 families)")
    assert "NVIDIA H100 80GB HBM3, NVIDIA H200" in summary
    bad = subprocess.run([sys.executable, os.path.join(REPO, "bench", "zoo_bench.py"),
                          "--table", str(tmp_path / "none.json")], capture_output=True, text=True)
    assert bad.returncode == 2 and "--table" in bad.stderr


# ---------------------------------------------------------------------------
# test/gpu/bench_fusions.py (device-verify.sh part u): what runs without a GPU.

PROFILE = """cnnrt: warning: something else
cnnrt: profile of step 2: 274 launches and library calls, 20.000 ms (CUDA events between consecutive launches; no graph)
  by op kind                                ms      %  calls
  cnn.fused_conv                        12.000   60.0     46
  cuDNN convolution backward data        3.000   15.0     20
  cnn.resize_grad                        1.500    7.5      4
  cnn.concat                             1.000    5.0      8
  cnn.resize                             0.500    2.5      4
  cnn.fused_slice_concat                 0.250    1.2      2
  slowest launches:
      1.000 ms  cnn.fused_conv fusedConv3   loc("x")
"""


def fusions_module():
    sys.path.insert(0, os.path.join(REPO, "test", "gpu"))
    import bench_fusions
    return bench_fusions


def test_fusions_profile_line():
    bf = fusions_module()
    total, kinds = bf.profile_by_kind(PROFILE)
    assert total == 20.0
    assert kinds["cuDNN convolution backward data"] == (3.0, 20)
    assert kinds["cnn.resize"] == (0.5, 4) and "slowest" not in " ".join(kinds)
    # cnn.slice is not in this table: 0 ms; the fused kind is listed after.
    assert bf.upsample_concat_line(total, kinds) == (
        "UPSAMPLE_CONCAT share=16.2% of step (resize 0.500 ms, resize_grad 1.500 ms, "
        "concat 1.000 ms, slices 0.000 ms, cnn.fused_slice_concat 0.250 ms)")
    with pytest.raises(RuntimeError, match="no CNNRT_PROFILE report"):
        bf.profile_by_kind("done: steady img/s 100")
    assert bf.launches_of("cnnc: stats: 638 kernel launches and library calls per "
                          "training step\n") == 638
    with pytest.raises(RuntimeError, match="kernel launches"):
        bf.launches_of("cnnc: built 'x'")


def test_fusions_dry_run(cnnc, tmp_path):
    """Both nets build, export and compile (GroupNorm with and without
    --fuse-group-norm, the U-Net's dense step), at small sizes, and the
    script stops before running an executable."""
    p = subprocess.run([sys.executable, os.path.join(REPO, "test", "gpu", "bench_fusions.py"),
                        "--cnnc", cnnc, "--work", str(tmp_path), "--dry-run", "--gn-batch", "2",
                        "--gn-size", "64", "--unet-batch", "2", "--unet-size", "32"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    m = re.search(r"^GN_FUSION dry run: launches default=(\d+) off=(\d+)$", p.stdout, re.M)
    assert m and int(m.group(1)) > 100 and int(m.group(2)) > 100
    # The U-Net with and without --fuse-resize-concat: 3 launches fewer per
    # decoder level in the training step (4 levels; the count cnnc --stats
    # prints also holds the evaluation step's, 2 fewer per level).
    m = re.search(r"^UPSAMPLE_CONCAT dry run: launches per step default=(\d+) off=(\d+)$",
                  p.stdout, re.M)
    assert m and int(m.group(2)) - int(m.group(1)) >= 4 * 3, m and m.group(0)
    assert (tmp_path / "unet" / "off" / "train").exists()
    assert (tmp_path / "gn" / "off" / "train").exists()
    assert (tmp_path / "unet" / "data" / "train_y.npy").exists()
    bad = subprocess.run([sys.executable, os.path.join(REPO, "test", "gpu", "bench_fusions.py"),
                          "--cnnc", cnnc, "--unet-size", "40", "--dry-run"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "not a multiple of 16" in bad.stderr


def test_fusions_gn_b_side_flags(tmp_path, monkeypatch, capsys):
    """--gn-b-flags replaces the GroupNorm net's B build (default
    --fuse-group-norm=false), e.g. to A/B --tiled-transpose; the result line
    names them."""
    bf = fusions_module()
    built = []
    monkeypatch.setattr(bf, "export", lambda model, shape, path: None)
    monkeypatch.setattr(bf, "compile_step",
                        lambda cnnc, onnx, exe, flags: built.append(list(flags)) or 100)
    assert bf.main(["--cnnc", "x", "--work", str(tmp_path), "--parts", "gn", "--dry-run",
                    "--gn-b-flags", "--tiled-transpose --conv-stats=false"]) == 0
    assert built == [[], ["--tiled-transpose", "--conv-stats=false"]]
    built.clear()
    assert bf.main(["--cnnc", "x", "--work", str(tmp_path), "--parts", "gn", "--dry-run"]) == 0
    assert built == [[], ["--fuse-group-norm=false"]]


def test_zoo_warm_cnnc(tmp_path, capsys):
    """--cnnc-warm's one-step run: its seconds next to the executable when
    it succeeds, nothing (the timed run searches itself) when it fails."""
    exe = tmp_path / "train"
    exe.write_text("#!/bin/sh\n[ \"$CNNRT_X\" = 1 ] || { echo 'cnnrt: error: no GPU' >&2; "
                   "exit 1; }\necho \"$@\" > %s/args\n" % tmp_path)
    exe.chmod(0o755)
    zoo_bench.warm_cnnc("m", str(exe), {"CNNRT_X": "1"}, 30)
    assert float((tmp_path / "train.warm_s").read_text()) >= 0
    assert (tmp_path / "args").read_text().split() == ["--data", "synthetic", "--steps", "1"]
    (tmp_path / "train.warm_s").unlink()
    zoo_bench.warm_cnnc("m", str(exe), {}, 30)
    assert not (tmp_path / "train.warm_s").exists()
    assert "warming m: failed cnnrt: error: no GPU" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        zoo_bench.select_zoo(["--cnnc", "x", "--cnnc-warm"])


def test_zoo_build_phase_on_cpu(cnnc, tmp_path, capsys):
    """zoo_bench end to end on the CPU machine: the cnnc build (spawned
    pool) with --cnnc-warm beside the Inductor prewarm threads, then the
    timed phase: the executable cannot run here (its row fails), eager AMP
    runs on the CPU, and compile-default, whose prewarm failed on this
    torch, is not run again."""
    import torch
    if hasattr(torch, "compile"):
        pytest.skip("this torch has torch.compile (the CPU compile would take minutes)")
    out = tmp_path / "z.json"
    assert zoo_bench.main(["--cnnc", cnnc, "--models", "simplecnn", "--work", str(tmp_path),
                           "--json", str(out), "--steps", "1", "--modes", "amp,compile-default",
                           "--torch-device", "cpu", "--prebuild-jobs", "1", "--cnnc-warm",
                           "--torch-prewarm-jobs", "2", "--torch-group", "2"]) == 0
    text = capsys.readouterr().out
    assert re.search(r"^prebuilt simplecnn: [\d.]+ s$", text, re.M)
    assert re.search(r"^warming simplecnn: failed ", text, re.M)
    assert re.search(r"^prewarm: \d+ s$", text, re.M) and re.search(r"^prebuild: \d+ s$",
                                                                     text, re.M)
    d = json.loads(out.read_text())
    assert d["torch_cache_dir"] == str(tmp_path / "inductor-cache")
    zb = d["zoo_bench"]
    assert zb["models"] == ["simplecnn"] and zb["cnnc_warm"] and zb["torch_prewarm_jobs"] == 2
    assert zb["build_phase_s"] >= max(zb["prebuild_s"], zb["prewarm_s"]) > 0
    assert d["wall_s"] >= zb["build_phase_s"]
    rows = {r["runner"]: r for r in d["rows"]}
    assert rows["cnnc default"]["status"] == "failed"
    assert "compile_s" not in rows["cnnc default"] and "autotune_s" not in rows["cnnc default"]
    assert rows["amp"]["status"] == "ok" and rows["amp"]["device"] == "cpu"
    assert rows["compile-default"]["status"] == "failed"
    assert rows["compile-default"]["error"].startswith(
        "prewarm: RuntimeError: torch.compile needs torch >= 2.0")
    assert rows["compile-default"]["prewarm"]["jobs"] == 2
    exe = bench.cnnc_exe_path("simplecnn", bench.parse_args(
        ["--cnnc", cnnc, "--work", str(tmp_path)]), [])
    assert os.path.exists(exe + ".compile_s") and not os.path.exists(exe + ".warm_s")


def test_zoo_timing(tmp_path):
    """--timing: a call's build phase and mean row seconds, and how many
    families like them a call of --budget seconds holds."""
    started = "2026-11-28 10:00:00 UTC"
    rows = [
        trow("timm:a", "cnnc default", compile_s=10.0, autotune_s=20.0, run_s=6.0,
             call=started),
        trow("timm:a", "amp", wall_s=12.0, call=started),
        trow("timm:a", "compile-default", wall_s=18.0, prewarm={"wall_s": 90.0},
             call=started),
        trow("timm:b", "cnnc default", compile_s=14.0, autotune_s=30.0, run_s=8.0,
             call=started),
        trow("timm:b", "amp", status="skipped", error="no time left", call=started),
        # Kept from an earlier call: not this call's.
        trow("timm:c", "amp", wall_s=99.0, call="earlier"),
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"gpu": "H100", "started": started, "wall_s": 200.0,
                                "zoo_bench": {"cores": 16, "build_phase_s": 80.0,
                                              "prebuild_s": 30.0, "prewarm_s": 80.0},
                                "rows": rows}))
    out = subprocess.run([sys.executable, os.path.join(REPO, "bench", "zoo_bench.py"),
                          "--timing", str(path), "--budget", "500"], capture_output=True,
                         text=True, check=True).stdout
    assert "2 families measured, wall 200.0 s (build phase 80.0 s: prebuild 30.0 s, " \
           "prewarm 80.0 s)" in out
    assert "mean cnnc algorithm search (--cnnc-warm, s): 25.0 over 2 rows" in out
    assert "mean eager AMP timed process or group share (s): 12.0 over 1 rows" in out
    assert "mean torch.compile prewarm (cold, concurrent, s): 90.0 over 1 rows" in out
    assert "100.0 s per family: a 500-s call holds about 5 such families" in out


def test_stage_profile_compares_stages_with_one_gpu(tmp_path):
    """bench/dp/stage_profile.py: a stage's locations the one-GPU step has
    are its share (pipeline ms / M against one-GPU ms), the rest its own
    (transfers, the flag's all-reduce, the optimizer); a file that is not
    a profile is one error."""
    def prof(path, locs):
        path.write_text(json.dumps({"format": "cnnrt-profile", "version": 1, "title": "t",
                                    "total_ms": sum(locs.values()), "launches": len(locs),
                                    "by_location": {k: {"ms": v, "launches": 1}
                                                    for k, v in locs.items()}}))
        return str(path)
    one = prof(tmp_path / "acc.json", {"/conv1": 1.0, "/conv2": 2.0, "/fc": 0.5})
    s0 = prof(tmp_path / "pipe.json.rank0", {"/conv1": 4 * 1.25, "ncclSend": 0.8})
    s1 = prof(tmp_path / "pipe.json.rank1", {"/conv2": 4 * 2.0, "/fc": 4 * 0.5,
                                              "optimizer.fc.weight": 0.3})
    script = os.path.join(REPO, "bench", "dp", "stage_profile.py")
    out = subprocess.run([sys.executable, script, "--one", one, "--micro-batches", "4", s1, s0],
                         capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert lines[0] == "one GPU, one micro-batch: 3.500 ms over 3 locations"
    assert lines[1].startswith("stage 0: 1 shared locations, 1.250 ms per micro-batch against "
                               "1.000 ms on one GPU (x1.250); its own launches 0.800 ms")
    assert lines[2] == "  own: ncclSend 0.800 ms"
    assert "/conv1 +0.250 ms" in lines[3]
    assert lines[4].startswith("stage 1: 2 shared locations, 2.500 ms per micro-batch against "
                               "2.500 ms on one GPU (x1.000)")
    assert lines[-1] == "one-GPU locations no stage launched: 0.000 ms"
    (tmp_path / "bad.json").write_text("{}")
    bad = subprocess.run([sys.executable, script, "--one", str(tmp_path / "bad.json"),
                          "--micro-batches", "4", s0], capture_output=True, text=True)
    assert bad.returncode == 2 and "not a CNNRT_PROFILE_JSON file" in bad.stderr
