#!/usr/bin/env python3
"""ResNet's 7x7 stride-2 stem convolution on the GPU through PyTorch (cuDNN,
benchmark mode, f16, channels_last), batch 128 at 224x224: the forward and the
filter gradient for the input channels padded to 3, 4, 8, and for the
space-to-depth form (the input regrouped into 2x2 blocks: 115x115x12, padded
to 16 channels; a 4x4 stride-1 convolution with the 8x8-padded filter), which
computes the same output. Prints ms per call (CUDA events, median of 50)."""
import torch
import torch.nn.functional as F

torch.backends.cudnn.benchmark = True
N = 128


def timed(fn, reps=50):
    for _ in range(5):
        fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(True), torch.cuda.Event(True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[len(times) // 2]


def case(label, c, hw, k, stride, pad):
    x = torch.randn(N, c, hw, hw, device="cuda", dtype=torch.half).to(
        memory_format=torch.channels_last)
    w = torch.randn(64, c, k, k, device="cuda", dtype=torch.half).to(
        memory_format=torch.channels_last)
    y = F.conv2d(x, w, stride=stride, padding=pad)
    dy = torch.randn_like(y)
    fwd = timed(lambda: F.conv2d(x, w, stride=stride, padding=pad))
    wgrad = timed(lambda: torch.ops.aten.convolution_backward(
        dy, x, w, None, [stride] * 2, [pad] * 2, [1, 1], False, [0, 0], 1,
        [False, False, True]))
    print("%-34s out %s  fwd %.3f ms  wgrad %.3f ms" % (label, tuple(y.shape), fwd, wgrad))


case("7x7 s2, C=3", 3, 224, 7, 2, 3)
case("7x7 s2, C=4", 4, 224, 7, 2, 3)
case("7x7 s2, C=8", 8, 224, 7, 2, 3)
case("space-to-depth 4x4 s1, C=12", 12, 115, 4, 1, 0)
case("space-to-depth 4x4 s1, C=16", 16, 115, 4, 1, 0)

# The two forms agree (f32 on the GPU): the 7x7 stride-2 convolution of x and
# the 4x4 stride-1 convolution of the space-to-depth input.
x = torch.randn(2, 3, 224, 224, device="cuda")
w = torch.randn(64, 3, 7, 7, device="cuda")
ref = F.conv2d(x, w, stride=2, padding=3)
xp = F.pad(x, (3, 3, 3, 3))  # 230 x 230
xs = xp.reshape(2, 3, 115, 2, 115, 2).permute(0, 3, 5, 1, 2, 4).reshape(2, 12, 115, 115)
w8 = F.pad(w, (0, 1, 0, 1))  # 8 x 8
ws = w8.reshape(64, 3, 4, 2, 4, 2).permute(0, 3, 5, 1, 2, 4).reshape(64, 12, 4, 4)
got = F.conv2d(xs, ws)
print("space-to-depth vs 7x7: max |diff| %.2e (max |ref| %.2e)" % (
    (got - ref).abs().max().item(), ref.abs().max().item()))

x = torch.randn(N, 64, 112, 112, device="cuda", dtype=torch.half).to(
    memory_format=torch.channels_last).requires_grad_()
y = F.max_pool2d(x, 3, 2, 1)
dy = torch.randn_like(y)
print("max_pool2d 3x3 s2: fwd %.3f ms, fwd+bwd %.3f ms" % (
    timed(lambda: F.max_pool2d(x, 3, 2, 1)),
    timed(lambda: torch.autograd.grad(F.max_pool2d(x, 3, 2, 1), x, dy))))
