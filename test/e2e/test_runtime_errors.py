"""A runtime error reaches Python as an exception, not as the end of the
process (issue 35: libcnnrt's failures are thrown inside the library and
returned by the C API; cnnc.runtime_errors raises cnnc.CnnrtError).

The GPU step library is built as cnnc.compile builds it on a GPU machine
(cnnc --emit lib, nvcc) and loaded with ctypes in a child Python process,
so that a regression to exit() shows as the child's exit status instead of
killing pytest. Without a GPU, cnnrt_create fails with "no usable GPU";
with a bad CNNRT_* setting it fails before it looks for the GPU (on any
machine).
"""
import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

import cnnc
import cnnc.api
from cnnc.tools import find_library, find_tool

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.skipif(
    not os.path.exists("/usr/local/cuda/bin/nvcc") and not shutil.which("nvcc"),
    reason="nvcc not installed")

# Creates a session of the library argv[1] twice (the process must survive
# the first failure), then reports what each raised, as JSON.
CHILD = r"""
import ctypes, json, sys
sys.path.insert(0, sys.argv[2])
from cnnc import api, runtime_errors
import cnnc
lib = ctypes.CDLL(sys.argv[1])
for name, (res, args) in api._cuda_api_signatures(ctypes).items():
    fn = getattr(lib, name)
    fn.restype, fn.argtypes = res, args
out = []
for attempt in range(2):
    try:
        runtime_errors.create_session(lib, lib.cnnrt_model_spec(), sys.argv[1] + ".cnnw")
        out.append({"raised": None})
    except cnnc.CnnrtError as e:
        out.append({"raised": type(e).__name__, "runtime_error": isinstance(e, RuntimeError),
                    "kind": e.kind, "message": str(e)})
try:
    runtime_errors.check(lib, lib.cnnrt_set_device(0), "set device")
    out.append({"raised": None})
except cnnc.CnnrtError as e:
    out.append({"raised": type(e).__name__, "kind": e.kind, "message": str(e)})
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def step_library(tmp_path_factory):
    """libstep.so of a small conv net, as the Python entry builds it."""
    if find_tool("cnnc") is None or find_library("libcnnc_reference.so") is None:
        pytest.skip("cnnc / libcnnc_reference.so not built")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8),
                                torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                                torch.nn.Flatten(), torch.nn.Linear(8, 10))
    x = torch.randn(4, 3, 8, 8)
    flags, _ = cnnc.optimizer_flags(torch.optim.SGD(model.parameters(), lr=0.1), model)
    flags.update({"label-smoothing": 0.0, "precision": "fp16", "layout": "nhwc",
                  "arch": "sm_80"})
    root = str(tmp_path_factory.mktemp("runtime-errors"))
    artifact = cnnc.api._build(model, x, flags, "cuda", find_tool("cnnc"), ["test"], root,
                               verbose=False)
    return os.path.join(artifact, "libstep.so")


def run_child(lib, **env):
    child_env = dict(os.environ, **env)
    proc = subprocess.run([sys.executable, "-c", CHILD, lib, os.path.join(REPO, "python")],
                          capture_output=True, text=True, env=child_env, timeout=120)
    assert proc.returncode == 0, (
        "the process ended (exit %d) instead of raising:\n%s%s"
        % (proc.returncode, proc.stdout, proc.stderr))
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is visible")
def test_no_gpu_is_an_exception(step_library):
    create1, create2, set_device = run_child(step_library)
    for r in (create1, create2):
        assert r["raised"] == "CnnrtError" and r["runtime_error"], r
        assert r["kind"] == "no-gpu", r
        assert r["message"].startswith(
            "cnnc: cannot create the GPU session: cnnrt: no CUDA GPU available ("), r
    assert set_device["raised"] == "CnnrtError" and set_device["kind"] == "cuda", set_device
    assert "cnnrt_set_device(0): " in set_device["message"], set_device


def test_bad_runtime_setting_is_an_exception(step_library):
    """CNNRT_CONV_FUSION=bogus: the same message as the executable's
    (runtime/test/bad_environment.sh), with or without a GPU."""
    create1, create2, _ = run_child(step_library, CNNRT_CONV_FUSION="bogus")
    for r in (create1, create2):
        assert r["raised"] == "CnnrtError" and r["kind"] == "config", r
        assert r["message"] == ("cnnc: cannot create the GPU session: cnnrt: "
                                "CNNRT_CONV_FUSION must be auto, cudnn or split, "
                                "not 'bogus'"), r
