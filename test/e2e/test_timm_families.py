"""timm families that cnnc refused or trained wrong (issue 32), rebuilt in
plain torch (timm_family_layers.py): TF-"same" padding (tf_efficientnet_*,
tf_mobilenetv3_*: Conv2dSame and MaxPool2dSame pad by amounts computed from
the input's size, exported as Shape/Ceil/Clip/Cast/.../Pad arithmetic that
cnnc folds) and the NF-ResNet / NFNet block (weight standardization, alpha/
beta scaling, average-pool downsample, SE with attn_gain, GammaAct, the 0-d
skipinit gain) in three variants.

Each trains 3 SGD steps (momentum 0.9, weight decay 5e-4) on the CPU
reference; every loss and every parameter must match PyTorch's float64 run
to f32 accuracy, and exactly PyTorch's parameters must be trained (a
parameter folded into a constant at import trains nothing and is caught
here).
"""
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")

from cnnc import train_check as tc  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import timm_family_layers as tl  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

TOL = 1e-4
CLASSES = 10
OPT = {"kind": "sgd", "lr": 0.01, "momentum": 0.9, "weight_decay": 5e-4}
# Odd sizes: the stride-2 "same" pads differ on the two sides.
CASES = {
    "tf_efficientnet": (lambda: tl.TFEfficientNetTiny(CLASSES), (4, 3, 27, 27)),
    "nf_resnet": (lambda: tl.NFNetTiny("nf_resnet", CLASSES), (4, 3, 29, 29)),
    "nfnet_l0": (lambda: tl.NFNetTiny("nfnet_l0", CLASSES), (4, 3, 29, 29)),
    "dm_nfnet": (lambda: tl.NFNetTiny("dm_nfnet", CLASSES), (4, 3, 29, 29)),
}


def _init(model):
    """Gains and the skipinit gains away from their zero start, so that the
    parameters behind them get gradients in the first step, and BN affine
    parameters away from 1/0."""
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("gain") or name.endswith("skipinit_gain"):
                p.copy_(0.5 + torch.rand(p.shape, generator=g))
            elif name.endswith("bn1.weight") or name.endswith("bn2.weight"):
                p.copy_(0.5 + torch.rand(p.shape, generator=g))
    return model


@pytest.mark.parametrize("case", list(CASES))
def test_timm_family_trains_as_pytorch(cnnc, tmp_path, case):
    make, shape = CASES[case]
    torch.manual_seed(0)
    model = _init(make())
    onnx_path = tmp_path / (case + ".onnx")
    x, y = tc.export_case(model, shape, CLASSES, onnx_path)
    run = tc.cnnc_train_fixed(cnnc, onnx_path, x, y, OPT, 3, tmp_path)
    assert len(run.losses) == 3, run.stdout + run.stderr
    trained = tc.trained_parameters(run.state)
    assert trained == {n for n, _ in model.named_parameters()}, sorted(
        trained ^ {n for n, _ in model.named_parameters()})
    failures = tc.check_trains_like_torch(run, model, x, y, OPT, 3, TOL, case)
    assert not failures, "\n".join(failures)


def test_tf_same_padding_folds_to_pads(cnnc, tmp_path):
    """The padding arithmetic leaves no trace in the IR: each Conv2dSame /
    MaxPool2dSame is one cnn.pad with timm's amounts for the static size
    (the int form of get_same_padding; the max pool's pad value -inf)."""
    model = tl.TFEfficientNetTiny(CLASSES)
    onnx_path = tmp_path / "tf.onnx"
    tc.export_training(model, onnx_path, (4, 3, 27, 27))
    ops = {n.op_type for n in onnx.load(str(onnx_path)).graph.node}
    assert {"Ceil", "Clip", "Cast", "Pad"} <= ops, ops
    out = tc.run_cnnc(cnnc, str(onnx_path), "--emit", "mlir")
    assert out.returncode == 0, out.stderr
    pads = [line for line in out.stdout.splitlines() if "cnn.pad" in line]

    def expected(size, k, s):
        p = tl.get_same_padding(size, k, s, 1)
        return "array<i64: 0, 0, %d, %d, 0, 0, %d, %d>" % (
            p // 2, p // 2, p - p // 2, p - p // 2)

    # stem 3x3/2 on 27, pool 3/2 on 14, then the blocks' depthwise convs:
    # 3x3/1 on 7, 5x5/2 on 7, 3x3/1 on 4.
    want = [(27, 3, 2), (14, 3, 2), (7, 3, 1), (7, 5, 2), (4, 3, 1)]
    assert len(pads) == len(want), "\n".join(pads)
    for line, (size, k, s) in zip(pads, want):
        assert "pads = " + expected(size, k, s) in line, (size, k, s, line)
        assert "x%dx%dxf32>) ->" % (size, size) in line, (size, line)
    assert "value = 0xFF800000" in pads[1], pads[1]
    assert "0, 0, 0, 0, 0, 0, 1, 1" in pads[1]  # 14: asymmetric (0 / 1)
    for op in ("cnn.ceil", "cnn.clip", "cnn.cast"):
        assert op not in out.stdout


@pytest.mark.parametrize("case", ["dm_nfnet", "tf_efficientnet"])
def test_timm_family_f16_step_follows_f32(cnnc, tmp_path, case):
    """The GPU's default step (cnn-precision: f16 compute, NHWC, loss
    scaling) on the reference interpreter: the 0-d skipinit gain is reshaped
    to broadcast and its gradient reshaped back (cnn-precision once gave that
    reshape an f16 result of an f32 operand: "cannot reshape 'tensor<f32>'
    to 'tensor<1x1x1x1xf16>'"). Three steps stay within 1e-3 of the f32
    step's losses, and the skipinit gains move as in f32."""
    make, shape = CASES[case]
    torch.manual_seed(0)
    model = _init(make())
    onnx_path = tmp_path / (case + ".onnx")
    x, y = tc.export_case(model, shape, CLASSES, onnx_path)
    runs = {}
    for precision in ("fp32", "fp16"):
        d = tmp_path / precision
        d.mkdir()
        runs[precision] = tc.cnnc_train_fixed(
            cnnc, onnx_path, x, y, OPT, 3, d,
            extra=("--precision", precision, "--layout", "nhwc"))
        assert len(runs[precision].losses) == 3, runs[precision].stderr
    for a, b in zip(runs["fp16"].losses, runs["fp32"].losses):
        assert abs(a - b) <= 1e-3 * abs(b), (runs["fp16"].losses,
                                             runs["fp32"].losses)
    init = dict(model.named_parameters())
    for name in init:
        if not name.endswith("skipinit_gain"):
            continue
        moved = {p: float(runs[p].state[name].reshape(-1)[0]) - float(init[name])
                 for p in runs}
        assert moved["fp32"] != 0 and abs(moved["fp16"] - moved["fp32"]) <= (
            2e-2 * abs(moved["fp32"])), (name, moved)
