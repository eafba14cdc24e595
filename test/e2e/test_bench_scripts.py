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
* the table and the JSON file from finished, timed-out and failed rows.
"""
import json
import os
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
