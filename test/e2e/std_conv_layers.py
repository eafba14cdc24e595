"""timm's weight-standardized convolutions (timm/layers/std_conv.py) in plain
torch: StdConv2d (BiT ResNetV2) and ScaledStdConv2d (NF-ResNet, NFNet). One
copy for the CPU test (test_stdconv.py) and the GPU check
(test/gpu/check_new_ops.py); timm is not installed on the CI machine.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def _same_padding(kernel_size, stride, dilation):
    return ((stride - 1) + dilation * (kernel_size - 1)) // 2


class StdConv2d(nn.Conv2d):
    """timm's StdConv2d (BiT ResNetV2)."""

    def __init__(self, in_channel, out_channels, kernel_size, stride=1,
                 padding=None, dilation=1, groups=1, bias=False, eps=1e-6):
        if padding is None:
            padding = _same_padding(kernel_size, stride, dilation)
        super().__init__(in_channel, out_channels, kernel_size, stride=stride,
                         padding=padding, dilation=dilation, groups=groups,
                         bias=bias)
        self.eps = eps

    def forward(self, x):
        weight = F.batch_norm(
            self.weight.reshape(1, self.out_channels, -1), None, None,
            training=True, momentum=0., eps=self.eps).reshape_as(self.weight)
        return F.conv2d(x, weight, self.bias, self.stride, self.padding,
                        self.dilation, self.groups)


class ScaledStdConv2d(nn.Conv2d):
    """timm's ScaledStdConv2d (NF-ResNet, NFNet)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1,
                 padding=None, dilation=1, groups=1, bias=True, gamma=1.0,
                 eps=1e-6, gain_init=1.0):
        if padding is None:
            padding = _same_padding(kernel_size, stride, dilation)
        super().__init__(in_channels, out_channels, kernel_size, stride=stride,
                         padding=padding, dilation=dilation, groups=groups,
                         bias=bias)
        self.gain = nn.Parameter(torch.full((self.out_channels, 1, 1, 1),
                                            gain_init))
        self.scale = gamma * self.weight[0].numel() ** -0.5
        self.eps = eps

    def forward(self, x):
        weight = F.batch_norm(
            self.weight.reshape(1, self.out_channels, -1), None, None,
            weight=(self.gain * self.scale).view(-1),
            training=True, momentum=0., eps=self.eps).reshape_as(self.weight)
        return F.conv2d(x, weight, self.bias, self.stride, self.padding,
                        self.dilation, self.groups)
