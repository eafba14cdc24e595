"""cnnc --tiled-transpose (cnn-select-lowering's "tiled", on by default since
the GPU check passed: bitwise the gather's step, 2.3-3.7x the gather's
kernel on an H100): the NHWC <-> NCHW transposes around a GroupNorm's
grouped view run as kernels/Transpose.cuh's batchedTranspose2D.

* the option is declared once: `cnnc --print-pipeline-options-json` (what
  the Python package reads) lists `tiled-transpose`, flag
  `--tiled-transpose`, default true;
* the step's IR: by default every transpose of the f16 NHWC step (the
  grouped statistics' view, batch N, H x W and C both at least 16) carries
  cnn.lowering = "tiled"; with --tiled-transpose=false none does;
* the executable: cnnc builds it with nvcc (no GPU needed), the .cu beside
  it launches batchedTranspose2D and no generated transpose kernel is left,
  and it starts (--help);
* test/gpu/check_tiled_transpose.py's --dry-run (the GPU check's builds).
"""
import os
import re
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))

pytestmark = [
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.skipif(not os.path.exists("/usr/local/cuda/bin/nvcc")
                       and not shutil.which("nvcc"), reason="nvcc not installed"),
]

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from cnnc import pipeline_options  # noqa: E402
from cnnc.export import export_onnx  # noqa: E402

# Channels and pixels both at least 16: the transposes qualify.
SHAPE = (4, 3, 16, 16)


class GNNet(nn.Module):
    """conv(3 -> 32) -> GroupNorm(4, 32) -> SiLU -> conv -> pool -> fc."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 32, 3, padding=1)
        self.gn = nn.GroupNorm(4, 32)
        self.conv2 = nn.Conv2d(32, 32, 3, padding=1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        y = self.conv2(F.silu(self.gn(self.conv(x))))
        return self.fc(y.mean(dim=(2, 3)))


@pytest.fixture(scope="module")
def onnx_path(tmp_path_factory):
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("tiled") / "gn.onnx"
    export_onnx(GNNet(), str(path), SHAPE, training=True, opset=17)
    return str(path)


def test_option_is_declared_on(cnnc):
    opt = [o for o in pipeline_options.options(cnnc)["options"]
           if o["name"] == "tiled-transpose"]
    assert len(opt) == 1, opt
    assert opt[0]["flag"] == "--tiled-transpose"
    assert opt[0]["type"] == "bool" and opt[0]["default"] is True


def transposes(cnnc, onnx, tmp_path, *flags):
    out = tmp_path / ("step%d.mlir" % len(flags))
    subprocess.run([cnnc, onnx, "--train", "--target", "gpu", "--emit", "mlir",
                    "-o", str(out), *flags], check=True, timeout=120)
    step = out.read_text().split("func.func @train_step")[1]
    return [l for l in step.splitlines() if "cnn.transpose" in l]


def test_the_step_gets_tiled_transposes_unless_turned_off(cnnc, onnx_path, tmp_path):
    on = transposes(cnnc, onnx_path, tmp_path)
    assert on, "the f16 NHWC GroupNorm step has no transpose"
    for line in on:
        assert 'cnn.lowering = "tiled"' in line, line
        assert re.search(r"permutation = array<i64: 0, (2, 3, 1|3, 1, 2)>", line), line
    off = transposes(cnnc, onnx_path, tmp_path, "--tiled-transpose=false")
    assert len(off) == len(on)
    assert not any("cnn.lowering" in l for l in off), off


def test_executable_builds_with_nvcc(cnnc, onnx_path, tmp_path):
    exe = tmp_path / "out" / "train"
    exe.parent.mkdir()
    env = dict(os.environ, CNNC_OBJECT_CACHE=str(tmp_path / "cache"))
    p = subprocess.run([cnnc, onnx_path, "--train", "--arch", "sm_80",
                        "-o", str(exe)], capture_output=True, text=True, env=env,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    cu = open(str(exe) + ".cu").read()
    launches = re.findall(r"batchedTranspose2D<__half><<<\d+, 256, 0, s>>>", cu)
    assert launches, "no batchedTranspose2D launch in the generated CUDA"
    assert not re.search(r'"cnn\.transpose k\d+"', cu)
    h = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=60)
    assert h.returncode == 0, h.stderr[-2000:]


def test_gpu_check_dry_run(cnnc, tmp_path):
    """test/gpu/check_tiled_transpose.py (the GPU check: bitwise equal
    steps with --tiled-transpose=false and by default) builds both executables and
    finds the launches it expects."""
    p = subprocess.run([sys.executable, os.path.join(REPO, "test", "gpu",
                                                     "check_tiled_transpose.py"),
                        "--cnnc", cnnc, "--work", str(tmp_path), "--batch", "2",
                        "--dry-run"],
                       capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, CNNC_OBJECT_CACHE=str(tmp_path / "cache")))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert re.search(r"^gather +transposes: 0 batchedTranspose2D launches, [1-9]\d* "
                     r"generated$", p.stdout, re.M), p.stdout
    assert re.search(r"^tiled +transposes: [1-9]\d* batchedTranspose2D launches, 0 "
                     r"generated$", p.stdout, re.M), p.stdout
    assert "tiled transpose (dry run): ok" in p.stdout
