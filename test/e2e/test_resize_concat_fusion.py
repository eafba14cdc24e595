"""Upsample + concat through the GPU pipeline (cnn-fuse phase 5, issue 32):
a U-Net decoder's concat(resize(x), skip) along the channels is one
cnn.fused_resize_concat (one kernel writes the concatenation; the resized
tensor is never stored), and the backward's resize_grad reads its channel
range of the concat's gradient in place (`channel_offset`) instead of a
cnn.slice copy; the skip's slice stays.

* the IR of the default pipeline (f16 NHWC) and of f32 NCHW: no cnn.resize
  and no cnn.concat left in the training step, one fused_resize_concat and
  one resize_grad with channel_offset per decoder level, one slice (the
  skip's) per level;
* the launches per step (`cnnc --stats` with --emit cuda): 3 fewer per
  level in the training step than with --fuse-resize-concat=false (resize +
  the concat's two copies -> one kernel; one slice), in f16 NHWC and f32
  NCHW;
* the numerics: the -O0 step after cnn-layout / cnn-precision as the GPU
  pipeline runs them, then cnn-fuse with and without resize-concat, on the
  reference interpreter: the same loss and gradients bit for bit (f32 NCHW,
  f32 NHWC, f16 NHWC), for the bilinear resized-first U-Net and a net whose
  nearest resize is the concat's second operand (a non-zero channel offset);
  and the whole default GPU step (`--target gpu --run-reference`, two SGD
  steps) bit for bit with and without the fusion.
"""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
import torch.nn as nn  # noqa: E402

from cnnc import train_check as tc  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

SHAPE = (2, 3, 16, 16)
CLASSES = 5
F32 = ("--precision", "fp32", "--layout", "nchw")


def conv_bn_relu(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, 1, 1, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU())


class UNet2(nn.Module):
    """Two levels of test/gpu/bench_fusions.py's U-Net: bilinear
    Upsample(2) (align_corners=False), torch.cat([up, skip])."""

    def __init__(self):
        super().__init__()
        self.d0, self.d1 = conv_bn_relu(3, 8), conv_bn_relu(8, 16)
        self.bottom = conv_bn_relu(16, 32)
        self.pool = nn.MaxPool2d(2)
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.u1, self.u0 = conv_bn_relu(32 + 16, 16), conv_bn_relu(16 + 8, 8)
        self.head = nn.Conv2d(8, CLASSES, 1)

    def forward(self, x):
        s0 = self.d0(x)
        s1 = self.d1(self.pool(s0))
        x = self.bottom(self.pool(s1))
        x = self.u1(torch.cat([self.up(x), s1], dim=1))
        x = self.u0(torch.cat([self.up(x), s0], dim=1))
        return self.head(x)


class SkipFirst(nn.Module):
    """One level whose nearest upsampling is the concat's second operand:
    torch.cat([skip, up(x)]) (resized_first = false, channel offset 8)."""

    def __init__(self):
        super().__init__()
        self.d0, self.bottom = conv_bn_relu(3, 8), conv_bn_relu(8, 16)
        self.pool = nn.MaxPool2d(2)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.u0 = conv_bn_relu(8 + 16, 8)
        self.head = nn.Conv2d(8, CLASSES, 1)

    def forward(self, x):
        s0 = self.d0(x)
        x = self.bottom(self.pool(s0))
        return self.head(self.u0(torch.cat([s0, self.up(x)], dim=1)))


NETS = {"unet2": (UNet2, 2), "skip_first": (SkipFirst, 1)}


@pytest.fixture(params=sorted(NETS))
def exported(request, tmp_path):
    cls, levels = NETS[request.param]
    torch.manual_seed(0)
    path = tmp_path / (request.param + ".onnx")
    tc.export_training(cls(), path, SHAPE)
    return path, levels


def train_step_text(cnnc, onnx, tmp_path, *flags):
    out = tmp_path / "step.mlir"
    subprocess.run([cnnc, str(onnx), "--train", "--target", "gpu", *flags,
                    "--emit", "mlir", "-o", str(out)], check=True)
    text = out.read_text().split("func.func @train_step")[1]
    return text.split("func.func ")[0]


@pytest.mark.parametrize("flags", [(), F32], ids=["f16_nhwc", "f32_nchw"])
def test_step_ir(cnnc, exported, tmp_path, flags):
    path, levels = exported
    step = train_step_text(cnnc, path, tmp_path, *flags)
    assert step.count("cnn.fused_resize_concat") == levels, step
    assert not re.search(r"cnn\.(resize|concat) ", step), step
    grads = [l for l in step.splitlines() if "cnn.resize_grad" in l]
    assert len(grads) == levels and all("channel_offset" in l for l in grads), grads
    # The skip's gradient is the one slice left per level.
    assert step.count("cnn.slice ") == levels, step
    off = train_step_text(cnnc, path, tmp_path, *flags, "--fuse-resize-concat=false")
    assert "fused_resize_concat" not in off and "channel_offset" not in off
    assert off.count("cnn.slice ") == 2 * levels


def train_step_launches(cnnc, onnx, tmp_path, *flags):
    """The training step's launches in the generated CUDA (--emit cuda: no
    nvcc or runtime needed): kernels (<<<) between trainStep and evalStep."""
    out = tmp_path / "model.cu"
    subprocess.run([cnnc, str(onnx), "--train", "--target", "gpu", *flags,
                    "--emit", "cuda", "-o", str(out)], check=True)
    text = out.read_text()
    step = text.split("static void trainStep(")[1].split("static void evalStep(")[0]
    return step.count("<<<")


@pytest.mark.parametrize("flags", [(), F32], ids=["f16_nhwc", "f32_nchw"])
def test_launches_per_step(cnnc, exported, tmp_path, flags):
    """Per level, the resize kernel and the concat's two copies become one
    kernel, and the resize gradient's slice is gone: 3 launches fewer."""
    path, levels = exported
    fused = train_step_launches(cnnc, path, tmp_path, *flags)
    off = train_step_launches(cnnc, path, tmp_path, *flags,
                              "--fuse-resize-concat=false")
    assert off - fused == 3 * levels, (fused, off)


def reference_step(cnnc, mlir, x, y, workdir):
    """One step of `mlir` (no optimizer) on the reference interpreter."""
    workdir.mkdir()
    xp, yp = str(workdir / "x.npy"), str(workdir / "y.npy")
    sp = str(workdir / "state.cnnw")
    np.save(xp, np.ascontiguousarray(x, dtype=np.float32))
    np.save(yp, np.ascontiguousarray(y))
    args = [str(mlir), "--train", "--optimizer", "none", "--run-reference",
            "--steps", 1, "--input", xp, "--labels", yp, "--save-state", sp]
    proc = tc.run_cnnc(cnnc, *args)
    return tc.CnncRun([cnnc, *args], proc, 0.0, sp).check()


@pytest.mark.parametrize("before", [(), ("--cnn-layout",),
                                    ("--cnn-layout", "--cnn-precision")],
                         ids=["f32_nchw", "f32_nhwc", "f16_nhwc"])
def test_fused_step_is_bit_for_bit(cnnc, exported, tmp_path, before):
    path, levels = exported
    opt = cnnc.replace("/cnnc", "/cnnc-opt")
    base = tmp_path / "base.mlir"
    subprocess.run([cnnc, str(path), "--train", "-O0", "--optimizer", "none",
                    "--emit", "mlir", "-o", str(base)], check=True)
    steps = {}
    for name, fuse in (("fused", "--cnn-fuse"),
                       ("off", "--cnn-fuse=resize-concat=false")):
        steps[name] = tmp_path / (name + ".mlir")
        subprocess.run([opt, str(base), *before, fuse, "-o", str(steps[name])],
                       check=True)
    fused_text = steps["fused"].read_text()
    assert fused_text.count("cnn.fused_resize_concat") >= levels
    assert "channel_offset" in fused_text
    assert "fused_resize_concat" not in steps["off"].read_text()
    rng = np.random.default_rng(1)
    x = rng.standard_normal(SHAPE).astype(np.float32)
    y = rng.integers(0, CLASSES, (SHAPE[0],) + SHAPE[2:]).astype(np.int64)
    runs = {name: reference_step(cnnc, mlir, x, y, tmp_path / name)
            for name, mlir in steps.items()}
    assert runs["fused"].losses[0] == runs["off"].losses[0]
    assert runs["fused"].state.keys() == runs["off"].state.keys()
    assert any("grad" in k for k in runs["fused"].state), list(runs["fused"].state)
    for k, v in runs["off"].state.items():
        assert np.array_equal(np.asarray(v), np.asarray(runs["fused"].state[k])), k


def test_gpu_pipeline_on_the_reference(cnnc, exported, tmp_path):
    """`cnnc --target gpu --run-reference`: the whole default GPU step (f16
    NHWC, the fused forms with their "vec8" lowering where the channels
    allow) on the interpreter, two SGD steps: the losses and the trained
    state bit for bit those of --fuse-resize-concat=false."""
    path, _ = exported
    rng = np.random.default_rng(2)
    x = rng.standard_normal(SHAPE).astype(np.float32)
    y = rng.integers(0, CLASSES, (SHAPE[0],) + SHAPE[2:]).astype(np.int64)
    xp, yp = str(tmp_path / "x.npy"), str(tmp_path / "y.npy")
    np.save(xp, x)
    np.save(yp, y)
    runs = {}
    for name, flags in (("fused", []), ("off", ["--fuse-resize-concat=false"])):
        sp = str(tmp_path / (name + ".cnnw"))
        args = [str(path), "--train", "--target", "gpu", *flags, "--run-reference",
                "--steps", 2, "--input", xp, "--labels", yp, "--save-state", sp]
        runs[name] = tc.CnncRun([cnnc, *args], tc.run_cnnc(cnnc, *args), 0.0, sp).check()
    assert len(runs["fused"].losses) == 2
    assert runs["fused"].losses == runs["off"].losses
    for k, v in runs["off"].state.items():
        assert np.array_equal(np.asarray(v), np.asarray(runs["fused"].state[k])), k


def test_stats_count_the_fusions(cnnc, exported, tmp_path):
    """`cnnc --stats` names the rewrites: one fused_resize_concat per level
    in each of the training and evaluation steps, one channel-range
    resize_grad per level in the training step; none with the switch off."""
    path, levels = exported

    def stats(*flags):
        r = subprocess.run([cnnc, str(path), "--train", "--target", "gpu", *flags,
                            "--emit", "mlir", "--stats", "-o", str(tmp_path / "s.mlir")],
                           capture_output=True, text=True, check=True)
        return dict(re.findall(r"cnnc: stats: fusion (\w+) (\d+)", r.stderr))

    on = stats()
    assert on["resize_concats"] == str(2 * levels), on
    assert on["resize_grad_slices"] == str(levels), on
    off = stats("--fuse-resize-concat=false")
    assert off["resize_concats"] == "0" and off["resize_grad_slices"] == "0", off
