"""cnn-layout keeps the numerics: one training step of resnet18 (BN, residual
adds, global pool -> linear) and SimpleCNN (flatten of spatial NHWC data) on
the reference interpreter, before and after the pass.

    cnnc model.onnx --train --optimizer none --batch 2 --emit mlir -o step.mlir
    cnnc-opt step.mlir --cnn-layout -o step_nhwc.mlir
    cnnc step[_nhwc].mlir --train --run-reference --input x.npy --labels y.npy \
         --steps 1 --optimizer none --save-state state.cnnw

The loss, every parameter gradient and every BN running statistic agree to
rel <= 1e-5 (max|a - b| / max|b| per tensor): the NHWC ops run on the
interpreter's NCHW kernels between transposes, so only summation order may
differ.
"""
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")
pytest.importorskip("onnx")
from cnnc import train_check as tc  # noqa: E402
from cnnc.cnnw import read_cnnw  # noqa: E402
from cnnc.export import exportable_stochastic_depth  # noqa: E402
from cnnc.tools import require_tool  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
TOL = 1e-5


@pytest.fixture(scope="module")
def tools():
    return require_tool("cnnc"), require_tool("cnnc-opt")


def run(*args):
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, "%s\n%s" % (" ".join(map(str, args)), proc.stderr[-4000:])
    return proc.stdout


def reference_step(cnnc, mlir, xp, yp, state):
    t0 = time.time()
    out = run(cnnc, mlir, "--train", "--run-reference", "--input", xp, "--labels", yp,
              "--steps", 1, "--optimizer", "none", "--save-state", state)
    loss = float(re.search(r"step 1 loss (\S+)", out).group(1))
    return loss, read_cnnw(state), time.time() - t0


def make(name):
    if name == "convnext_tiny":
        torch.manual_seed(0)
        model = torchvision.models.convnext_tiny(weights=None, num_classes=10)
        for m in model.modules():
            if isinstance(m, torchvision.ops.StochasticDepth):
                m.p = 0.0
        return model
    return tc.make_model(name, num_classes=10, seed=0)


# ConvNeXt: its blocks permute to N x H x W x C for LayerNorm and the
# Linear layers and back; the LayerNorm ops (numpy-broadcast
# fused_elementwise in the backward) are not channel ops and must not be
# transposed as if they were NCHW.
@pytest.mark.parametrize("name", ["resnet18", "simplecnn", "convnext_tiny"])
def test_layout_preserves_train_step(tools, tmp_path, name):
    cnnc, opt = tools
    shape = (2, 3, 32, 32)
    model = make(name)
    onnx_path = tmp_path / (name + ".onnx")
    with exportable_stochastic_depth():
        tc.export_training(model, onnx_path, shape)
    x, y = tc.random_batch(shape, 10, seed=1, label_dtype=np.int32)
    xp, yp = tmp_path / "x.npy", tmp_path / "y.npy"
    np.save(xp, x)
    np.save(yp, y)

    nchw, nhwc = tmp_path / "step.mlir", tmp_path / "step_nhwc.mlir"
    run(cnnc, onnx_path, "--train", "--optimizer", "none", "--batch", shape[0],
        "--emit", "mlir", "-o", nchw)
    run(opt, nchw, "--cnn-layout", "-o", nhwc)
    text = nhwc.read_text()
    step = text[text.index("@train_step"):]
    assert 'layout = #cnn.layout<NHWC>' in step
    # Every conv, pool and BN of the step is NHWC.
    for op in ("conv2d", "conv2d_bwd_data", "conv2d_bwd_filter", "batch_norm_train",
               "batch_norm_grad", "max_pool2d", "max_pool2d_grad", "global_avg_pool"):
        for line in re.findall(r"cnn\.%s .*" % op, step):
            assert 'layout = #cnn.layout<NHWC>' in line, line
    # Transposes only at the edges: the image, each 4-D filter use and
    # gradient, and (SimpleCNN) the flatten and its gradient.
    convs = len(re.findall(r"cnn\.conv2d ", step))
    transposes = len(re.findall(r"cnn\.transpose .*-> tensor<\d+x\d+x\d+x\d+x", step))
    flattens = 2 if name == "simplecnn" else 0
    assert transposes <= 1 + 2 * convs + flattens, (transposes, convs)

    loss0, s0, t0 = reference_step(cnnc, nchw, xp, yp, tmp_path / "s0.cnnw")
    loss1, s1, t1 = reference_step(cnnc, nhwc, xp, yp, tmp_path / "s1.cnnw")
    print("\n%s %s: NCHW %.2f s, NHWC %.2f s, %d transposes, %d convs" %
          (name, "x".join(map(str, shape)), t0, t1, transposes, convs))
    assert abs(loss0 - loss1) <= TOL * abs(loss0), (loss0, loss1)
    assert sorted(s0) == sorted(s1)
    assert any(k.endswith(".grad") for k in s0)
    worst = (0.0, "")
    for k in s0:
        a, b = np.asarray(s1[k], np.float64), np.asarray(s0[k], np.float64)
        assert a.shape == b.shape, k
        scale = np.max(np.abs(b))
        err = np.max(np.abs(a - b)) / scale if scale > 0 else np.max(np.abs(a))
        worst = max(worst, (err, k))
        assert err <= TOL, (k, err)
    print("worst rel err %.2e (%s)" % worst)


class SoftmaxAttention(torch.nn.Module):
    """Softmax over the channels (split attention's and selective kernels'
    forms on a conv output) and over the height of N x C x H x W."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8, 10)

    def forward(self, x):
        a = torch.softmax(self.c1(x), dim=1)
        b = torch.softmax(self.c2(a), dim=2) + a
        return self.fc(b.mean(dim=(2, 3)))


def test_layout_softmax_over_channels(tools, tmp_path):
    """cnn-layout renumbers a softmax's axis under the transpose it pushes
    through (the channels are NHWC's last dimension: no transpose in front
    of it); the step's numerics are unchanged."""
    cnnc, opt = tools
    shape = (2, 3, 8, 6)
    torch.manual_seed(0)
    onnx_path = tmp_path / "softmax.onnx"
    tc.export_training(SoftmaxAttention(), onnx_path, shape)
    x, y = tc.random_batch(shape, 10, seed=1, label_dtype=np.int32)
    xp, yp = tmp_path / "x.npy", tmp_path / "y.npy"
    np.save(xp, x)
    np.save(yp, y)
    nchw, nhwc = tmp_path / "step.mlir", tmp_path / "step_nhwc.mlir"
    run(cnnc, onnx_path, "--train", "--optimizer", "none", "--batch", shape[0],
        "--emit", "mlir", "-o", nchw)
    run(opt, nchw, "--cnn-layout", "-o", nhwc)
    text = nhwc.read_text()
    step = text[text.index("@train_step"):]
    axes = re.findall(r"cnn\.softmax %\S+ \{axis = (\d+) : i64\} : "
                      r"\(tensor<2x8x6x8xf32>\)", step)
    assert axes == ["3", "1"], axes
    loss0, s0, _ = reference_step(cnnc, nchw, xp, yp, tmp_path / "s0.cnnw")
    loss1, s1, _ = reference_step(cnnc, nhwc, xp, yp, tmp_path / "s1.cnnw")
    assert abs(loss0 - loss1) <= TOL * abs(loss0), (loss0, loss1)
    assert sorted(s0) == sorted(s1)
    for k in s0:
        a, b = np.asarray(s1[k], np.float64), np.asarray(s0[k], np.float64)
        err = np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30)
        assert err <= TOL, (k, err)
