"""Issue 37's compile time: cnnc compiles the generated CUDA as several
translation units (lib/Target/CUDA/SplitCUDA.cpp) by parallel nvcc processes
and keeps each object in a content-hashed cache (lib/Driver/ObjectCache.cpp).

One cold build of a small conv net (its kernel, host and learning-rate
units compiled), then: the same build compiles nothing; other weights in
the same ONNX file compile nothing; another --lr compiles only the
learning-rate unit, and the executable's --help shows the new default (the
unit is linked, not stale); the .cu beside the executable is the whole
text --emit cuda prints; CNNC_OBJECT_CACHE_MAX_MB caps the cache, the
oldest objects first; a bad CNNC_NVCC_JOBS, cap or host unit count is one
error; the host code compiles in one unit below 8 jobs, in several from 8
jobs on and with CNNC_NVCC_HOST_UNITS (the net has NHWC BatchNorm reductions
and the cross-entropy, whose two-pass kernels may then be launched from two
units).
No GPU needed (nvcc only; the executable runs --help)."""
import os
import re
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    not os.path.exists("/usr/local/cuda/bin/nvcc") and not shutil.which("nvcc"),
    reason="nvcc not installed")

torch = pytest.importorskip("torch")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "python"))
from cnnc.export import export_onnx  # noqa: E402


def export(path, seed):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8),
                                torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                                torch.nn.Flatten(), torch.nn.Linear(8, 10))
    export_onnx(model, path, (4, 3, 8, 8), training=True, opset=17)


def build(cnnc, onnx, exe, env, lr, jobs=2):
    p = subprocess.run([cnnc, onnx, "--train", "--lr", str(lr), "--arch", "sm_80", "-o", exe,
                        "--mlir-timing"], capture_output=True, text=True, env=env,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    m = re.search(r"cnnc: nvcc: (\d+) unit\(s\), (\d+) compiled \((\d+) at a time\), "
                  r"(\d+) from the cache", p.stderr)
    assert m, p.stderr[-3000:]
    units, compiled, n_jobs, cached = map(int, m.groups())
    assert units == compiled + cached and n_jobs == jobs, p.stderr[-3000:]
    return units, compiled, p.stderr


def test_object_cache_weights_and_lr(cnnc, tmp_path):
    onnx, exe = str(tmp_path / "m.onnx"), str(tmp_path / "out" / "train")
    os.makedirs(os.path.dirname(exe))
    export(onnx, seed=0)
    env = dict(os.environ, CNNC_OBJECT_CACHE=str(tmp_path / "cache"), CNNC_NVCC_JOBS="2")
    env.pop("CNNC_NVCC_SPLIT", None)

    units, compiled, log = build(cnnc, onnx, exe, env, 0.1)
    # Cold: one kernel unit (2 jobs), the host unit and the learning rate's.
    assert (units, compiled) == (3, 3), log
    for stage in ("nvcc compile", "kernels0", "host", "hyper", "nvcc link"):
        assert re.search(r"\)  +%s\n" % re.escape(stage), log), stage
    cnnw0 = open(exe + ".cnnw", "rb").read()
    assert len(os.listdir(tmp_path / "cache")) >= 1

    # The same build, then other weights: nothing to compile.
    assert build(cnnc, onnx, exe, env, 0.1)[:2] == (3, 0)
    export(onnx, seed=1)
    assert build(cnnc, onnx, exe, env, 0.1)[:2] == (3, 0)
    assert open(exe + ".cnnw", "rb").read() != cnnw0

    # Another learning rate: only its own unit.
    units, compiled, log = build(cnnc, onnx, exe, env, 0.05)
    assert (units, compiled) == (3, 1), log
    assert "hyper (cached)" not in log and "host (cached)" in log
    h = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60)
    assert h.returncode == 0 and re.search(r"--lr X +learning rate \(default 0\.05\)",
                                           h.stdout), h.stdout + h.stderr

    # The source beside the executable is the whole text, as --emit cuda.
    cu = subprocess.run([cnnc, onnx, "--train", "--lr", "0.05", "--arch", "sm_80",
                         "--emit", "cuda"], capture_output=True, text=True, timeout=120)
    assert cu.returncode == 0 and open(exe + ".cu").read() == cu.stdout

    # The size cap (CNNC_OBJECT_CACHE_MAX_MB): 0 keeps only the objects of
    # the build that just ran (the --lr 0.1 unit goes), an old object of the
    # cache's own naming goes, a file the cache did not name stays.
    cache = tmp_path / "cache"
    old = cache / "ab" / ("ab" + "0" * 62 + ".o")
    os.makedirs(old.parent, exist_ok=True)
    old.write_bytes(b"\0" * 4096)
    os.utime(old, (1, 1))
    foreign = cache / "README"
    foreign.write_text("not an object")
    objects = lambda: sorted(str(f) for f in cache.rglob("*.o"))  # noqa: E731
    assert len(objects()) == 5
    assert build(cnnc, onnx, exe, dict(env, CNNC_OBJECT_CACHE_MAX_MB="0"), 0.05)[:2] == (3, 0)
    assert len(objects()) == 3 and str(old) not in objects() and foreign.exists()
    assert build(cnnc, onnx, exe, env, 0.05)[:2] == (3, 0)

    # Without CNNC_NVCC_JOBS the jobs are the CPUs the process may run on
    # (its affinity), not the host's: pinned to one CPU, one at a time.
    if shutil.which("taskset"):
        pinned = dict(env)
        pinned.pop("CNNC_NVCC_JOBS")
        p = subprocess.run(["taskset", "-c", "0", cnnc, onnx, "--train", "--lr", "0.05",
                            "--arch", "sm_80", "-o", exe, "--mlir-timing"],
                           capture_output=True, text=True, env=pinned, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        assert re.search(r"cnnc: nvcc: \d+ unit\(s\), \d+ compiled \(1 at a time\)",
                         p.stderr), p.stderr[-3000:]


def test_host_code_in_units(cnnc, tmp_path):
    """The host code compiles in one unit by default below 8 jobs (kernels0,
    host, hyper), in a quarter of the jobs' units from 8 on (host, host1 with
    8 jobs) and in CNNC_NVCC_HOST_UNITS units when set (4: host1..host3
    beside the host unit). The timing report lists every unit and the link;
    each executable links and runs --help; the same build again compiles
    nothing. The net's NHWC BatchNorm statistics and gradients and its
    cross-entropy are two-pass prelude kernels, launched from the host units
    through the kernel unit that instantiates them (cnncPreludeLaunch<i>,
    SplitCUDA.cpp); their partial sums go through the Context's
    reductionScratch, not a per-unit __device__ array (session 24's split
    trained dm-NFNet wrong that way)."""
    onnx, exe = str(tmp_path / "m.onnx"), str(tmp_path / "out" / "train")
    os.makedirs(os.path.dirname(exe))
    export(onnx, seed=0)
    env = dict(os.environ, CNNC_OBJECT_CACHE=str(tmp_path / "cache"), CNNC_NVCC_JOBS="4",
               CNNC_NVCC_SPLIT="1")
    env.pop("CNNC_NVCC_HOST_UNITS", None)
    units, compiled, log = build(cnnc, onnx, exe, env, 0.1, jobs=4)
    assert (units, compiled) == (3, 3), log
    for stage in ("nvcc compile", "kernels0", "host", "hyper", "nvcc link"):
        assert re.search(r"\)  +%s\n" % re.escape(stage), log), stage
    assert not re.search(r"\)  +host1\n", log), log
    h = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60)
    assert h.returncode == 0 and "--lr" in h.stdout, h.stdout + h.stderr
    assert build(cnnc, onnx, exe, env, 0.1, jobs=4)[:2] == (3, 0)

    # 8 jobs: two host units by default; the kernel unit (the same text: it
    # instantiates the prelude kernels the host code launches either way)
    # and the LR unit come from the cache.
    cu = open(exe + ".cu").read()
    assert "nhwcStatsFinish<" in cu and "softmaxXentLossFinish<<<" in cu
    assert "ctx.reductionScratch(" in cu
    assert not re.search(r"^__device__ double \w+ *[\[;]", cu, re.M), cu
    env8 = dict(env, CNNC_NVCC_JOBS="8")
    units, compiled, log = build(cnnc, onnx, exe, env8, 0.1, jobs=8)
    assert (units, compiled) == (4, 2), log
    for stage in ("host", "host1", "kernels0 (cached)", "hyper (cached)"):
        assert re.search(r"\)  +%s\n" % re.escape(stage), log), stage
    h = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60)
    assert h.returncode == 0 and "--lr" in h.stdout, h.stdout + h.stderr

    env4 = dict(env8, CNNC_NVCC_HOST_UNITS="4")
    units, compiled, log = build(cnnc, onnx, exe, env4, 0.1, jobs=8)
    assert (units, compiled) == (6, 4), log
    for stage in ("host", "host1", "host2", "host3", "nvcc link"):
        assert re.search(r"\)  +%s\n" % re.escape(stage), log), stage
    h = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60)
    assert h.returncode == 0 and "--lr" in h.stdout, h.stdout + h.stderr
    assert build(cnnc, onnx, exe, env4, 0.1, jobs=8)[:2] == (6, 0)


@pytest.mark.parametrize("var,value,message", [
    ("CNNC_NVCC_JOBS", "many", "CNNC_NVCC_JOBS must be a positive integer, not 'many'"),
    ("CNNC_OBJECT_CACHE_MAX_MB", "-3", "CNNC_OBJECT_CACHE_MAX_MB must be a non-negative "
                                       "number of MiB"),
    ("CNNC_NVCC_HOST_UNITS", "0", "CNNC_NVCC_HOST_UNITS must be a number of host units "
                                  "from 1 (the host code in one unit) to 64, not '0'"),
])
def test_bad_build_setting_is_an_error(cnnc, tmp_path, var, value, message):
    onnx = str(tmp_path / "m.onnx")
    export(onnx, seed=0)
    p = subprocess.run([cnnc, onnx, "--train", "--arch", "sm_80", "-o", str(tmp_path / "t")],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, **{var: value}))
    assert p.returncode != 0
    assert message in p.stderr and p.stderr.count("error") == 1, p.stderr
    assert not os.path.exists(tmp_path / "t")
