"""Two timm families rebuilt in plain torch (timm is not installed on the CI
machine): TensorFlow-"same" padding (timm/layers/padding.py, conv2d_same.py,
pool2d_same.py: tf_efficientnet_*, tf_mobilenetv3_*) and the NF-ResNet /
NFNet block (timm/models/nfnet.py: nf_resnet*, nfnet_l0, dm_nfnet_*).
One copy for the CPU test (test_timm_families.py) and the GPU check
(test/gpu/check_new_ops.py can import it the same way as std_conv_layers).

The "same" padding is computed from the input's size at run time, with
timm's tensor arithmetic (ceil of a division, clamp at 0), so torch.onnx
exports it as a Ceil/Sub/Mul/Clip/Div/Cast/Concat/Reshape/Slice chain into
a Pad: cnnc folds it when the input shape is static.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from std_conv_layers import ScaledStdConv2d


def get_same_padding(x, kernel_size, stride, dilation):
    if isinstance(x, torch.Tensor):
        return torch.clamp(((x / stride).ceil() - 1) * stride
                           + (kernel_size - 1) * dilation + 1 - x, min=0)
    return max((math.ceil(x / stride) - 1) * stride
               + (kernel_size - 1) * dilation + 1 - x, 0)


def pad_same(x, kernel_size, stride, dilation=(1, 1), value=0.0):
    ih, iw = x.size()[-2:]
    pad_h = get_same_padding(ih, kernel_size[0], stride[0], dilation[0])
    pad_w = get_same_padding(iw, kernel_size[1], stride[1], dilation[1])
    return F.pad(x, (pad_w // 2, pad_w - pad_w // 2, pad_h // 2,
                     pad_h - pad_h // 2), value=value)


class Conv2dSame(nn.Conv2d):
    """timm's Conv2dSame: TF "SAME" padding computed per call."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, padding=0, **kwargs)

    def forward(self, x):
        x = pad_same(x, self.weight.shape[-2:], self.stride, self.dilation)
        return F.conv2d(x, self.weight, self.bias, self.stride, (0, 0),
                        self.dilation, self.groups)


class MaxPool2dSame(nn.MaxPool2d):
    """timm's MaxPool2dSame: pads with -inf, as TF does."""

    def forward(self, x):
        k, s = (self.kernel_size,) * 2, (self.stride,) * 2
        x = pad_same(x, k, s, value=-float("inf"))
        return F.max_pool2d(x, self.kernel_size, self.stride, (0, 0),
                            self.dilation, self.ceil_mode)


class ScaledStdConv2dSame(ScaledStdConv2d):
    """timm's ScaledStdConv2dSame (dm_nfnet_*): the weight standardization
    of ScaledStdConv2d on a TF-"same"-padded input."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, padding=0, **kwargs)

    def forward(self, x):
        x = pad_same(x, self.weight.shape[-2:], self.stride, self.dilation)
        return super().forward(x)


class SqueezeExcite(nn.Module):
    """timm's SqueezeExcite (EfficientNet form: reduce conv, act, expand
    conv, sigmoid gate)."""

    def __init__(self, chs, rd, act=nn.SiLU):
        super().__init__()
        self.conv_reduce = nn.Conv2d(chs, rd, 1)
        self.act = act()
        self.conv_expand = nn.Conv2d(rd, chs, 1)

    def forward(self, x):
        s = x.mean((2, 3), keepdim=True)
        return x * torch.sigmoid(self.conv_expand(self.act(self.conv_reduce(s))))


class TFInvertedResidual(nn.Module):
    """An EfficientNet MBConv with timm's tf_ padding: 1x1 expand, depthwise
    Conv2dSame (stride 2: the asymmetric pad), SE, 1x1 project, BN."""

    def __init__(self, cin, cout, k, stride, expand=4, act=nn.SiLU):
        super().__init__()
        mid = cin * expand
        self.conv_pw = nn.Conv2d(cin, mid, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(mid, eps=1e-3, momentum=0.01)
        self.conv_dw = Conv2dSame(mid, mid, k, stride=stride, groups=mid,
                                  bias=False)
        self.bn2 = nn.BatchNorm2d(mid, eps=1e-3, momentum=0.01)
        self.act = act()
        self.se = SqueezeExcite(mid, max(1, cin // 4))
        self.conv_pwl = nn.Conv2d(mid, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout, eps=1e-3, momentum=0.01)
        self.has_skip = stride == 1 and cin == cout

    def forward(self, x):
        y = self.act(self.bn1(self.conv_pw(x)))
        y = self.act(self.bn2(self.conv_dw(y)))
        y = self.bn3(self.conv_pwl(self.se(y)))
        return y + x if self.has_skip else y


class TFEfficientNetTiny(nn.Module):
    """tf_efficientnet / tf_mobilenetv3 in miniature: a stride-2
    Conv2dSame stem, a MaxPool2dSame (timm's tf_ pooling), MBConv blocks with
    5x5 and 3x3 stride-2 depthwise Conv2dSame (odd input sizes: the padding
    differs left and right), SiLU and hard-swish."""

    def __init__(self, classes=10):
        super().__init__()
        self.conv_stem = Conv2dSame(3, 16, 3, stride=2, bias=False)
        self.bn1 = nn.BatchNorm2d(16, eps=1e-3, momentum=0.01)
        self.pool = MaxPool2dSame(3, 2)
        self.blocks = nn.Sequential(
            TFInvertedResidual(16, 16, 3, 1),
            TFInvertedResidual(16, 24, 5, 2, act=nn.Hardswish),
            TFInvertedResidual(24, 24, 3, 1, expand=2))
        self.fc = nn.Linear(24, classes)

    def forward(self, x):
        x = self.pool(F.silu(self.bn1(self.conv_stem(x))))
        return self.fc(self.blocks(x).mean((2, 3)))


# timm's _nonlin_gamma (from DeepMind's nfnets): the activation's variance
# correction.
NONLIN_GAMMA = {"relu": 1.7139588594436646, "silu": 1.7881293296813965,
                "gelu": 1.7015043497085571}
ACTS = {"relu": F.relu, "silu": F.silu, "gelu": F.gelu}


class GammaAct(nn.Module):
    """timm's GammaAct (gamma_in_act: dm_nfnet_*): act(x) * gamma."""

    def __init__(self, act, gamma):
        super().__init__()
        self.act, self.gamma = ACTS[act], gamma

    def forward(self, x):
        return self.act(x).mul_(self.gamma)


class DownsampleAvg(nn.Module):
    """timm's DownsampleAvg: AvgPool2d(2, ceil_mode, count_include_pad=False)
    then a 1x1 conv."""

    def __init__(self, cin, cout, stride, conv):
        super().__init__()
        self.pool = (nn.AvgPool2d(2, stride, ceil_mode=True,
                                  count_include_pad=False)
                     if stride > 1 else nn.Identity())
        self.conv = conv(cin, cout, 1)

    def forward(self, x):
        return self.conv(self.pool(x))


class NFSqueezeExcite(nn.Module):
    """timm's SEModule (the NF nets' attn_layer 'se'): 1x1 convs with bias,
    ReLU, sigmoid gate."""

    def __init__(self, chs, rd):
        super().__init__()
        self.fc1 = nn.Conv2d(chs, rd, 1)
        self.fc2 = nn.Conv2d(rd, chs, 1)

    def forward(self, x):
        s = x.mean((2, 3), keepdim=True)
        return x * torch.sigmoid(self.fc2(F.relu(self.fc1(s))))


class NormFreeBlock(nn.Module):
    """timm's NormFreeBlock (reg=False): x * beta after the activation, an
    average-pool downsample where the shape changes, grouped 3x3 convs, the
    NFNet extra conv, SE times attn_gain after conv3, the skipinit gain (a
    0-d parameter, starting at 0) and out * alpha + shortcut."""

    def __init__(self, cin, cout, mid, stride, alpha, beta, act, conv,
                 groups=1, extra_conv=False, attn=False, skipinit=False):
        super().__init__()
        self.alpha, self.beta, self.attn_gain = alpha, beta, 2.0
        self.downsample = (DownsampleAvg(cin, cout, stride, conv)
                           if cin != cout or stride != 1 else None)
        self.act = act
        self.conv1 = conv(cin, mid, 1)
        self.conv2 = conv(mid, mid, 3, stride=stride, groups=groups)
        self.conv2b = (conv(mid, mid, 3, groups=groups) if extra_conv
                       else None)
        self.conv3 = conv(mid, cout, 1, gain_init=1.0 if skipinit else 0.0)
        self.attn_last = NFSqueezeExcite(cout, max(1, cout // 4)) if attn else None
        self.skipinit_gain = (nn.Parameter(torch.tensor(0.)) if skipinit
                              else None)

    def forward(self, x):
        out = self.act(x) * self.beta
        shortcut = x if self.downsample is None else self.downsample(out)
        out = self.conv1(out)
        out = self.conv2(self.act(out))
        if self.conv2b is not None:
            out = self.conv2b(self.act(out))
        out = self.conv3(self.act(out))
        if self.attn_last is not None:
            out = self.attn_gain * self.attn_last(out)
        if self.skipinit_gain is not None:
            out.mul_(self.skipinit_gain)
        return out * self.alpha + shortcut


class NFNetTiny(nn.Module):
    """An NF-ResNet / NFNet in miniature, per timm's NormFreeNet.

    `variant` "nf_resnet": ReLU, gamma in the ScaledStdConv2d, a 7x7/2 stem
    with max pool. "nfnet_l0": SiLU, a deep (quad) 3x3 stem, grouped convs,
    extra conv, SE. "dm_nfnet": GELU with gamma in the activation
    (GammaAct), ScaledStdConv2dSame (TF padding), skipinit."""

    def __init__(self, variant, classes=10):
        super().__init__()
        act_name = {"nf_resnet": "relu", "nfnet_l0": "silu",
                    "dm_nfnet": "gelu"}[variant]
        gamma = NONLIN_GAMMA[act_name]
        conv_cls = ScaledStdConv2dSame if variant == "dm_nfnet" else ScaledStdConv2d
        if variant == "dm_nfnet":
            act = GammaAct(act_name, gamma)

            def conv(*a, **k):
                return conv_cls(*a, eps=1e-5, **k)
        else:
            act = ACTS[act_name]

            def conv(*a, **k):
                return conv_cls(*a, gamma=gamma, eps=1e-5, **k)
        self.act = act
        if variant == "nf_resnet":
            self.stem = nn.Sequential(conv(3, 16, 7, stride=2),
                                      nn.MaxPool2d(3, stride=2, padding=1))
        else:
            self.stem = nn.Sequential(conv(3, 4, 3, stride=2), _Act(act),
                                      conv(4, 8, 3), _Act(act),
                                      conv(8, 16, 3, stride=2))
        groups = 1 if variant == "nf_resnet" else 2
        kw = dict(act=act, conv=conv, groups=groups,
                  extra_conv=variant != "nf_resnet",
                  attn=variant != "nf_resnet", skipinit=variant == "dm_nfnet")
        alpha = 0.2
        self.stages = nn.Sequential(
            NormFreeBlock(16, 24, 8, 1, alpha, 1.0, **kw),
            NormFreeBlock(24, 32, 8, 2, alpha, 1.0, **kw),
            NormFreeBlock(32, 32, 8, 1, alpha, 1.0 / (1 + alpha ** 2) ** 0.5, **kw))
        self.fc = nn.Linear(32, classes)

    def forward(self, x):
        x = self.act(self.stages(self.stem(x)))
        return self.fc(x.mean((2, 3)))


class _Act(nn.Module):
    def __init__(self, act):
        super().__init__()
        self.fn = act

    def forward(self, x):
        return self.fn(x)
