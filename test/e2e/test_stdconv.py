"""Weight standardization (timm's ScaledStdConv2d of the NF-ResNets and
StdConv2d of BiT's ResNetV2) vs PyTorch on the CPU reference path.

Both compute the convolution's weight as F.batch_norm of the weight viewed
as 1 x out_channels x fan_in (training mode, no running statistics; the NF
form scales it by the learned gain * gamma / sqrt(fan_in)); torch exports
that as a BatchNormalization on a 1 x C x L tensor between reshapes, its
scale a computed Mul of the gain, its running statistics computed from the
weight. The layers below are timm's (timm/layers/std_conv.py) in plain torch.

Each case trains 3 SGD steps (momentum 0.9, weight decay 5e-4, as timm's
recipes) and compares every loss and every parameter with PyTorch's own 3
steps in float64; cnnc must train exactly PyTorch's parameters. The NF
block's last convolution starts with gain 0, as timm's NormFreeBlock
(skipinit=False): the parameters in front of it (conv1.bias, ...) learn
only once the gain has moved, so a gain folded into a constant (it was:
gain * scale, both initializers or constants, was folded at import) leaves
them at their initial values (nf_resnet26: stages.0.0.conv1.bias off by
100 % after 3 steps).
"""
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from cnnc import train_check as tc  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from std_conv_layers import ScaledStdConv2d, StdConv2d  # noqa: E402,F401

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

TOL = 1e-4
SHAPE = (4, 3, 12, 12)
CLASSES = 10
OPT = {"kind": "sgd", "lr": 0.01, "momentum": 0.9, "weight_decay": 5e-4}


class NFBlock(nn.Module):
    """timm's NormFreeBlock (pre-activation bottleneck): x * beta -> act ->
    conv1 (1x1) -> act -> conv2 (3x3, stride) -> act -> conv3 (1x1, gain
    0); out * alpha + shortcut (a 1x1 ScaledStdConv2d where the shape
    changes)."""

    def __init__(self, cin, cout, mid, stride=1, alpha=0.2, beta=1.0):
        super().__init__()
        self.alpha, self.beta = alpha, beta
        conv = lambda *a, **k: ScaledStdConv2d(*a, gamma=1.7139, **k)  # noqa: E731
        self.downsample = (conv(cin, cout, 1, stride=stride)
                           if stride != 1 or cin != cout else None)
        self.conv1 = conv(cin, mid, 1)
        self.conv2 = conv(mid, mid, 3, stride=stride)
        self.conv3 = conv(mid, cout, 1, gain_init=0.0)

    def forward(self, x):
        out = F.relu(x) * self.beta
        shortcut = x if self.downsample is None else self.downsample(out)
        out = self.conv1(out)
        out = self.conv2(F.relu(out))
        out = self.conv3(F.relu(out))
        return out * self.alpha + shortcut


class NFNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = ScaledStdConv2d(3, 16, 3, gamma=1.7139)
        self.stages = nn.Sequential(NFBlock(16, 24, 8, stride=2),
                                    NFBlock(24, 24, 8, beta=1 / 1.02))
        self.fc = nn.Linear(24, CLASSES)

    def forward(self, x):
        return self.fc(F.relu(self.stages(self.stem(x))).mean(dim=(2, 3)))


class BiTBlock(nn.Module):
    """timm's PreActBottleneck of ResNetV2 (BiT): GroupNorm + ReLU before
    each StdConv2d (no bias), a StdConv2d projection shortcut."""

    def __init__(self, cin, cout, mid, stride=1):
        super().__init__()
        self.norm1 = nn.GroupNorm(4, cin)
        self.downsample = (StdConv2d(cin, cout, 1, stride=stride)
                           if stride != 1 or cin != cout else None)
        self.conv1 = StdConv2d(cin, mid, 1)
        self.norm2 = nn.GroupNorm(4, mid)
        self.conv2 = StdConv2d(mid, mid, 3, stride=stride)
        self.norm3 = nn.GroupNorm(4, mid)
        self.conv3 = StdConv2d(mid, cout, 1)

    def forward(self, x):
        x_preact = F.relu(self.norm1(x))
        shortcut = x if self.downsample is None else self.downsample(x_preact)
        x = self.conv1(x_preact)
        x = self.conv2(F.relu(self.norm2(x)))
        x = self.conv3(F.relu(self.norm3(x)))
        return x + shortcut


class BiTNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = StdConv2d(3, 16, 3)
        self.stages = nn.Sequential(BiTBlock(16, 24, 8, stride=2),
                                    BiTBlock(24, 24, 8))
        self.norm = nn.GroupNorm(4, 24)
        self.fc = nn.Linear(24, CLASSES)

    def forward(self, x):
        return self.fc(F.relu(self.norm(self.stages(self.stem(x)))).mean(dim=(2, 3)))


def _init(model):
    """Non-trivial gains (except timm's zero-initialized last gain), biases
    and GroupNorm affine parameters."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, ScaledStdConv2d):
                if m.gain.abs().sum() > 0:
                    m.gain.uniform_(0.5, 1.5)
            if isinstance(m, nn.GroupNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
    return model


CASES = {"nf_block": NFNet, "bit_block": BiTNet}


@pytest.mark.parametrize("case", list(CASES))
def test_stdconv_trains_as_pytorch(cnnc, tmp_path, case):
    torch.manual_seed(0)
    model = _init(CASES[case]())
    onnx_path = tmp_path / (case + ".onnx")
    x, y = tc.export_case(model, SHAPE, CLASSES, onnx_path)
    run = tc.cnnc_train_fixed(cnnc, onnx_path, x, y, OPT, 3, tmp_path)
    assert len(run.losses) == 3, run.stdout + run.stderr
    # Exactly PyTorch's parameters are trained (the gains among them).
    trained = tc.trained_parameters(run.state)
    assert trained == {n for n, _ in model.named_parameters()}, sorted(trained)
    failures = tc.check_trains_like_torch(run, model, x, y, OPT, 3, TOL, case)
    assert not failures, "\n".join(failures)
