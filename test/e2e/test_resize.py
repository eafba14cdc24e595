"""Upsampling (ONNX Resize / Upsample -> cnn.resize, cnn.resize_grad) vs
PyTorch on the CPU reference path, end to end (export -> import ->
cnn-autodiff -> reference interpreter).

* Forward: each F.interpolate form torch.onnx.export writes (nearest with a
  scale or a size, bilinear with align_corners False/True, scale factors
  that are not in/out, downsampling, nn.Upsample), exported at opsets 13
  and 11, and nearest at opsets 9/10 (Upsample, Resize-10), run by
  `cnnc --run-reference` and compared with PyTorch's f32 output: nearest
  bit for bit, bilinear within 1e-5 relative (PyTorch's CPU kernel rounds
  differently: ~1e-6).
* Training: a small U-Net/FPN-like net (bilinear and nearest upsampling,
  skip additions and concatenations, BatchNorm): the gradients of one step
  vs torch.autograd in f64, and 3 SGD steps (losses and parameters, each
  step from cnnc's previous state) vs torch.optim in f64, within 1e-4.
* torchvision's LRASPP and DeepLabV3 (MobileNetV3): step-1 gradients vs
  autograd f64 within 1e-4.
* cnn-layout: the same step before and after the pass (the NHWC resize
  runs on the interpreter's NCHW kernel between transposes) agrees to 1e-5;
  after cnn-layout and cnn-precision (f16 NHWC, the GPU pipeline's forms)
  the loss and gradients stay within 1e-2 of the f32 step.
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
onnx = pytest.importorskip("onnx")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from cnnc import train_check as tc  # noqa: E402
from cnnc.cnnw import read_cnnw  # noqa: E402
from cnnc.tools import require_tool  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
TOL = 1e-4


class Interp(nn.Module):
    def __init__(self, kw):
        super().__init__()
        self.kw = kw

    def forward(self, x):
        return F.interpolate(x, **self.kw)


FORWARD = {
    "nearest_scale2": dict(scale_factor=2, mode="nearest"),
    "nearest_scale_2x3": dict(scale_factor=(2, 3), mode="nearest"),
    "nearest_size": dict(size=(20, 11), mode="nearest"),  # 14 -> 20: floor(10 * 0.7f) = 6
    "nearest_down": dict(size=(5, 4), mode="nearest"),
    "bilinear_scale2": dict(scale_factor=2, mode="bilinear", align_corners=False),
    "bilinear_scale1.7": dict(scale_factor=1.7, mode="bilinear", align_corners=False),
    "bilinear_align_corners": dict(scale_factor=3, mode="bilinear", align_corners=True),
    "bilinear_align_corners_size": dict(size=(9, 10), mode="bilinear", align_corners=True),
    "bilinear_size": dict(size=(23, 9), mode="bilinear", align_corners=False),
    "bilinear_down": dict(size=(5, 3), mode="bilinear", align_corners=False),
    "bilinear_half": dict(scale_factor=0.5, mode="bilinear", align_corners=False),
}


def export(model, shape, path, opset):
    torch.onnx.export(model, (torch.randn(*shape),), str(path), opset_version=opset,
                      input_names=["x"], output_names=["y"])


def run_forward(cnnc, path, x, tmp_path):
    xp, yp = tmp_path / "x.npy", tmp_path / "y.npy"
    np.save(xp, x)
    proc = subprocess.run([str(cnnc), str(path), "--run-reference", "--input", str(xp),
                           "--output", str(yp)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return np.load(yp)


def compare_forward(cnnc, tmp_path, model, opset, mode):
    shape = (2, 3, 14, 7)
    path = tmp_path / ("m%d.onnx" % opset)
    export(model, shape, path, opset)
    x = np.random.RandomState(0).randn(*shape).astype(np.float32)
    got = run_forward(cnnc, path, x, tmp_path)
    with torch.no_grad():
        ref = model(torch.from_numpy(x)).numpy()
    assert got.shape == ref.shape
    if mode == "nearest":
        np.testing.assert_array_equal(got, ref)
    else:
        err = np.abs(got - ref).max() / np.abs(ref).max()
        assert err < 1e-5, "rel err %.3g" % err


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("case", list(FORWARD))
def test_forward_matches_torch(cnnc, tmp_path, case, opset):
    kw = FORWARD[case]
    compare_forward(cnnc, tmp_path, Interp(kw), opset, kw["mode"])


@pytest.mark.parametrize("opset", [9, 10, 13])
def test_nn_upsample_nearest(cnnc, tmp_path, opset):
    """nn.Upsample(scale_factor=2): Upsample at opset 9, Resize-10 at 10,
    Resize-13 (asymmetric, floor) at 13."""
    compare_forward(cnnc, tmp_path, nn.Upsample(scale_factor=2), opset, "nearest")


def test_nn_upsample_bilinear(cnnc, tmp_path):
    compare_forward(cnnc, tmp_path, nn.Upsample(scale_factor=2, mode="bilinear"), 13,
                    "linear")


class UNetFPN(nn.Module):
    """Encoder (conv, BN, max-pool) and a decoder that upsamples twice:
    bilinear (half_pixel) into a concatenation with the skip (U-Net), and
    nearest (an FPN lateral addition), then a bilinear align_corners head
    upsampled by a size; every convolution in front of an upsampling learns
    through its gradient."""

    def __init__(self):
        super().__init__()
        self.e1 = nn.Conv2d(3, 8, 3, padding=1)
        self.b1 = nn.BatchNorm2d(8)
        self.e2 = nn.Conv2d(8, 16, 3, padding=1)
        self.e3 = nn.Conv2d(16, 16, 3, padding=1)
        self.lat = nn.Conv2d(16, 8, 1)
        self.d1 = nn.Conv2d(16 + 8, 8, 3, padding=1)
        self.head = nn.Conv2d(8, 4, 1)
        self.fc = nn.Linear(4, 10)

    def forward(self, x):
        s1 = torch.relu(self.b1(self.e1(x)))                  # 12 x 12
        s2 = torch.relu(self.e2(F.max_pool2d(s1, 2)))         # 6 x 6
        s3 = torch.relu(self.e3(F.max_pool2d(s2, 2)))         # 3 x 3
        p2 = self.lat(s2) + F.interpolate(self.lat(s3), scale_factor=2, mode="nearest")
        u = F.interpolate(torch.cat([s2, p2], 1), scale_factor=2, mode="bilinear",
                          align_corners=False)                # 12 x 12
        d = torch.relu(self.d1(u)) + s1
        h = F.interpolate(self.head(d), size=(17, 17), mode="bilinear",
                          align_corners=True)
        return self.fc(h.mean(dim=(2, 3)))


def test_unet_gradients_match_autograd(cnnc, tmp_path):
    torch.manual_seed(0)
    model = UNetFPN()
    shape = (2, 3, 12, 12)
    onnx_path = tmp_path / "unet.onnx"
    tc.export_training(model, onnx_path, shape)
    x, y = tc.random_batch(shape, 10, seed=1)
    opt = {"kind": "none"}
    run = tc.cnnc_train_fixed(cnnc, onnx_path, x, y, opt, 1, tmp_path)
    assert len(run.losses) == 1, run.stdout
    ref_loss, ref = tc.torch_step_from(model, {}, x, y, opt, 1)
    measured, failures = tc.check_step(run.state, ref, model, opt, 1, TOL,
                                       loss=run.losses[0], ref_loss=ref_loss,
                                       groups=["grads", "buffers"])
    print("\nMEASURED resize grads: loss %.2e grads %.2e" % (
        measured["loss"]["loss"], tc.worst(measured["grads"])[1]))
    assert not failures, "\n".join(failures)
    # e3 only learns through the nearest upsampling.
    assert np.abs(run.state["e3.weight.grad"]).max() > 0


def test_unet_three_sgd_steps(cnnc, tmp_path):
    torch.manual_seed(0)
    model = UNetFPN()
    shape = (2, 3, 12, 12)
    onnx_path = tmp_path / "unet.onnx"
    tc.export_training(model, onnx_path, shape)
    x, y = tc.random_batch(shape, 10, seed=2)
    opt = {"kind": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 1e-4}
    runs = tc.run_steps(cnnc, onnx_path, x, y, opt, 3, tmp_path)
    measured, failures = tc.check_chain(runs, model, x, y, opt, TOL)
    s = tc.summarize(measured)
    print("\nMEASURED resize 3 SGD steps: %s" % {k: "%.2e" % v for k, v in s.items()})
    assert not failures, "\n".join(failures)


def test_layout_keeps_the_numerics(cnnc, tmp_path):
    """The step before and after cnn-layout (NHWC resize and resize_grad)."""
    cnnc_opt = require_tool("cnnc-opt")
    torch.manual_seed(0)
    model = UNetFPN()
    shape = (2, 3, 12, 12)
    onnx_path = tmp_path / "unet.onnx"
    tc.export_training(model, onnx_path, shape)
    x, y = tc.random_batch(shape, 10, seed=1)
    xp, yp = tmp_path / "x.npy", tmp_path / "y.npy"
    np.save(xp, x)
    np.save(yp, y)

    def run(*args):
        p = subprocess.run([str(a) for a in args], capture_output=True, text=True,
                           timeout=600)
        assert p.returncode == 0, "%s\n%s" % (" ".join(map(str, args)), p.stderr[-3000:])
        return p.stdout

    step = tmp_path / "step.mlir"
    nhwc = tmp_path / "step_nhwc.mlir"
    run(cnnc, onnx_path, "--train", "--optimizer", "none", "--batch", 2, "--emit", "mlir",
        "-o", step)
    run(cnnc_opt, step, "--cnn-layout", "-o", nhwc)
    assert re.search(r"cnn\.resize_grad .*layout = #cnn\.layout<NHWC>", nhwc.read_text())
    out = {}
    for name, mlir in (("nchw", step), ("nhwc", nhwc)):
        state = tmp_path / ("%s.cnnw" % name)
        text = run(cnnc, mlir, "--train", "--run-reference", "--input", xp, "--labels", yp,
                   "--steps", 1, "--optimizer", "none", "--save-state", state)
        out[name] = (float(re.search(r"step 1 loss (\S+)", text).group(1)),
                     read_cnnw(str(state)))
    (l0, s0), (l1, s1) = out["nchw"], out["nhwc"]
    assert abs(l0 - l1) <= 1e-5 * abs(l0)
    for k, v in s0.items():
        a, b = np.asarray(s1[k], np.float64), np.asarray(v, np.float64)
        err = np.abs(a - b).max() / max(np.abs(b).max(), 1e-30)
        assert err <= 1e-5, "%s: %.3g" % (k, err)


class SegmentationLogits(nn.Module):
    """A torchvision segmentation model's per-pixel output averaged over
    the image: N x classes logits for the classification step."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"].mean(dim=(2, 3))


# fcn_resnet50 is left out: at 64x64 and batch 2 its deep layers' gradients
# are ill-conditioned (PyTorch f32 vs f64 differ by 0.26 on
# backbone.layer3.4.conv2, as cnnc does), so 1e-4 would measure rounding.
@pytest.mark.parametrize("name", ["lraspp_mobilenet_v3_large",
                                  "deeplabv3_mobilenet_v3_large"])
def test_torchvision_segmentation_gradients(cnnc, tmp_path, name):
    """LRASPP (bilinear upsampling of its scale branch and of the head to
    the input size) and DeepLabV3 (ASPP's pooled branch upsampled from 1 x 1,
    the head to the input size): step-1 gradients vs autograd f64."""
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    ctor = getattr(torchvision.models.segmentation, name)
    kw = dict(weights=None, weights_backbone=None, num_classes=10)
    if name.startswith("deeplab"):
        kw["aux_loss"] = False
    model = SegmentationLogits(ctor(**kw))
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    shape = (2, 3, 64, 64)
    onnx_path = tmp_path / "seg.onnx"
    tc.export_training(model, onnx_path, shape)
    assert any(n.op_type == "Resize" for n in onnx.load(str(onnx_path)).graph.node)
    x, y = tc.random_batch(shape, 10, seed=1)
    opt = {"kind": "none"}
    run = tc.cnnc_train_fixed(cnnc, onnx_path, x, y, opt, 1, tmp_path)
    ref_loss, ref = tc.torch_step_from(model, {}, x, y, opt, 1)
    measured, failures = tc.check_step(run.state, ref, model, opt, 1, TOL,
                                       loss=run.losses[0], ref_loss=ref_loss,
                                       groups=["grads"])
    print("\nMEASURED %s: loss %.2e grads %.2e" % (
        name, measured["loss"]["loss"], tc.worst(measured["grads"])[1]))
    assert not failures, "\n".join(failures)


def test_f16_nhwc_step_close_to_f32(cnnc, tmp_path):
    """The GPU pipeline's forms on the reference interpreter: the step after
    cnn-layout and cnn-precision (NHWC resize/resize_grad on f16 tensors,
    f32 arithmetic, f16 rounding on store) against the f32 step: the loss
    and every gradient within 1e-2 (||f16 - f32|| / ||f32|| per tensor)."""
    from cnnc.cnnw import write_cnnw
    cnnc_opt = require_tool("cnnc-opt")
    torch.manual_seed(0)
    model = UNetFPN()
    shape = (2, 3, 12, 12)
    onnx_path = tmp_path / "unet.onnx"
    tc.export_training(model, onnx_path, shape)
    x, y = tc.random_batch(shape, 10, seed=1)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)

    def run(*args):
        p = subprocess.run([str(a) for a in args], capture_output=True, text=True,
                           timeout=600)
        assert p.returncode == 0, "%s\n%s" % (" ".join(map(str, args)), p.stderr[-3000:])
        return p.stdout

    step = tmp_path / "step.mlir"
    run(cnnc, onnx_path, "--train", "--optimizer", "none", "--batch", 2, "--emit", "mlir",
        "-o", step)
    run(cnnc_opt, step, "--cnn-layout", "--cnn-precision=init-scale=16", "-o",
        tmp_path / "step16.mlir")
    ir = (tmp_path / "step16.mlir").read_text()
    assert re.search(r"cnn\.resize_grad .*layout = #cnn\.layout<NHWC>.*xf16>", ir)
    w = read_cnnw(str(tmp_path / "step.mlir.cnnw"))
    write_cnnw(str(tmp_path / "w32.cnnw"), w)
    write_cnnw(str(tmp_path / "w16.cnnw"), dict(w, loss_scale=np.array(16.0, np.float32)))
    out = {}
    for tag, mlir, weights in (("f32", step, "w32.cnnw"), ("f16", tmp_path / "step16.mlir",
                                                          "w16.cnnw")):
        state = tmp_path / ("%s.cnnw" % tag)
        text = run(cnnc, mlir, "--train", "--optimizer", "none", "--run-reference",
                   "--steps", 1, "--input", tmp_path / "x.npy", "--labels",
                   tmp_path / "y.npy", "--weights", tmp_path / weights,
                   "--save-state", state)
        out[tag] = (float(re.search(r"step 1 loss (\S+)", text).group(1)),
                    read_cnnw(str(state)))
    (l32, s32), (l16, s16) = out["f32"], out["f16"]
    assert abs(l16 - l32) <= 1e-2 * abs(l32), (l16, l32)
    grads = [k for k in s32 if k.endswith(".grad")]
    assert len(grads) == len(list(model.parameters()))
    errs = {}
    for k in grads:
        a, b = np.asarray(s16[k], np.float64), np.asarray(s32[k], np.float64)
        # e1's bias feeds BatchNorm, which removes it: its exact gradient is
        # 0 (f32 leaves ~1e-9 of rounding), so it is measured against the
        # scale of its weight's gradient instead.
        scale = np.linalg.norm(s32["e1.weight.grad"]) if k == "e1.bias.grad" else \
            np.linalg.norm(b)
        errs[k] = np.linalg.norm(a - b) / max(scale, 1e-30)
    worst = max(errs, key=errs.get)
    print("\nMEASURED resize f16 NHWC vs f32: loss %.2e, worst gradient %s %.2e" % (
        abs(l16 - l32) / abs(l32), worst, errs[worst]))
    assert errs[worst] <= 1e-2, errs
