"""The OSA / effective-SE VoVNet of test_osa_ese.py (issue 32), without
pytest so that the GPU checks (test/gpu/check_vs_torch.py, models
vovnet_ese_timm and vovnet_ese_hs) import it too."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ConvBnRelu(nn.Module):
    def __init__(self, cin, cout, k=3, stride=1):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, stride, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


class SepConvBnRelu(nn.Module):
    """timm's SeparableConvNormAct: depthwise 3x3, pointwise 1x1, BN, ReLU."""

    def __init__(self, cin, cout):
        super().__init__()
        self.dw = nn.Conv2d(cin, cin, 3, 1, 1, groups=cin, bias=False)
        self.pw = nn.Conv2d(cin, cout, 1, bias=False)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        return F.relu(self.bn(self.pw(self.dw(x))))


class EffectiveSE(nn.Module):
    def __init__(self, c, gate):
        super().__init__()
        self.fc = nn.Conv2d(c, c, 1, bias=True)
        self.gate = gate
        self.hs = nn.Hardsigmoid()

    def forward(self, x):
        se = self.fc(x.mean((2, 3), keepdim=True))
        se = F.relu6(se + 3.) / 6. if self.gate == "timm" else self.hs(se)
        return x * se


class OSA(nn.Module):
    def __init__(self, cin, mid, cout, layers, residual, gate):
        super().__init__()
        self.residual = residual
        self.convs = nn.ModuleList(
            SepConvBnRelu(cin if i == 0 else mid, mid) for i in range(layers))
        self.concat = ConvBnRelu(cin + layers * mid, cout, k=1)
        self.ese = EffectiveSE(cout, gate)

    def forward(self, x):
        out, h = [x], x
        for c in self.convs:
            h = c(h)
            out.append(h)
        y = self.ese(self.concat(torch.cat(out, 1)))
        return y + x if self.residual else y


class VoVNetESE(nn.Module):
    """Channels 12 and 52 (not multiples of 8) and 16/24/40 (multiples)."""

    def __init__(self, gate, num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(ConvBnRelu(3, 16), ConvBnRelu(16, 16, stride=2))
        self.stage1 = OSA(16, 12, 24, 3, False, gate)
        self.stage1b = OSA(24, 12, 24, 2, True, gate)
        self.pool = nn.MaxPool2d(3, 2, ceil_mode=True)
        self.stage2 = OSA(24, 16, 40, 3, False, gate)
        self.fc = nn.Linear(40, num_classes)

    def forward(self, x):
        x = self.pool(self.stage1b(self.stage1(self.stem(x))))
        return self.fc(self.stage2(x).mean((2, 3)))
