#!/usr/bin/env python3
"""GPU checks of newly added ops against PyTorch on the same GPU.

Each check builds a small network around the op, compiles its training
step for the GPU through the Python entry (cnnc.compile, `cnnc --emit lib`
+ nvcc) and compares with PyTorch on the GPU (TF32 off on both sides):

* the forward output (trainer.eval vs model.eval() logits), which passes
  through the op's forward kernel;
* 3 SGD steps: the losses and every parameter afterwards, which pass
  through the op's backward kernel (the parameters in front of the op only
  learn through its gradient).

Precisions/layouts: fp32 NCHW and fp32 NHWC (tolerance: 1e-4 on losses and
eval, 1e-3 on parameters, or four times the drift between PyTorch on the
GPU and on the CPU where that is larger, as check_python_api.py) and the
GPU default fp16 NHWC (f16 storage, f32 math: the eval logits within 2e-2
of PyTorch f32; the 3 steps against PyTorch AMP with GradScaler, 2e-2 on
losses and 3e-2 on parameters or four times PyTorch's own AMP-vs-f32
difference where that is larger).

Ops covered: the activations and normalizations of issue 32 (ELU, SELU,
CELU, Softplus, Mish, PReLU, maximum/minimum, GlobalMaxPool, LogSoftmax;
GroupNorm, InstanceNorm, ECA's Conv1d + Expand, BatchNorm1d, GRN's ReduceL2),
a few per network; cnn.resize / cnn.resize_grad (F.interpolate nearest and
bilinear, align_corners both ways, scale factors and sizes, up and down);
upsample + concat (--only resize_concat: cnn-fuse's fused_resize_concat and
channel-range resize_grad, resized channels first and second, their
eight-channel "vec8" forms and the one-channel ones);
cnn.softmax over a dimension that is not the last (over the channels and
the height of N x C x H x W, ResNeSt's radix softmax, selective kernels'
N x 2 x C x 1 x 1) and its gradient; weight standardization (timm's
ScaledStdConv2d in an NF-ResNet block, StdConv2d + GroupNorm in a BiT block:
BatchNormalization on the 1 x C x L weight, the learned gain); timm's
TF-"same" padding and NF-ResNet / NFNet / dm-NFNet blocks (--only timm).

Prints PASS/FAIL per case; exit 0: all passed, 1: a case failed, 77: no
CUDA GPU (ctest's skip).

  python3 test/gpu/check_new_ops.py --cnnc build/bin/cnnc [--only resize] [--quick]
"""
import argparse
import copy
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gpucheck_common import require_gpu  # noqa: E402

RESULTS = []


def report(ok, what):
    print(("PASS  " if ok else "FAIL  ") + what, flush=True)
    RESULTS.append((ok, what))


def rel(a, b):
    a, b = a.double().cpu(), b.double().cpu()
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-12)).item()


# ---------------------------------------------------------------------------
# cnn.resize
# ---------------------------------------------------------------------------

# name -> F.interpolate keyword arguments (applied to a 4 x 12 x 10 map)
RESIZE_CASES = {
    "nearest_scale2": dict(scale_factor=2, mode="nearest"),
    "nearest_size": dict(size=(17, 23), mode="nearest"),
    "nearest_down": dict(size=(5, 7), mode="nearest"),
    "bilinear_scale2": dict(scale_factor=2, mode="bilinear", align_corners=False),
    "bilinear_scale1.7": dict(scale_factor=1.7, mode="bilinear", align_corners=False),
    "bilinear_align_corners": dict(scale_factor=2, mode="bilinear", align_corners=True),
    "bilinear_size": dict(size=(19, 13), mode="bilinear", align_corners=False),
    "bilinear_down": dict(size=(7, 6), mode="bilinear", align_corners=False),
    "upsample_module": "nn.Upsample(scale_factor=4, mode='bilinear')",
}


def resize_net(torch, kw):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        """conv -> resize -> conv (+ a skip at the resized size) -> pool ->
        linear: conv1 only learns through the resize's gradient."""

        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 8, 3, padding=1)
            self.c2 = nn.Conv2d(8, 8, 3, padding=1)
            self.fc = nn.Linear(8, 10)
            self.up = nn.Upsample(scale_factor=4, mode="bilinear") if isinstance(kw, str) \
                else None

        def forward(self, x):
            a = torch.relu(self.c1(x))
            u = self.up(a) if self.up is not None else F.interpolate(a, **kw)
            b = torch.relu(self.c2(u)) + u
            return self.fc(b.mean(dim=(2, 3)))

    return Net


def check_resize(cnnc, torch, name, kw, precision, layout):
    check_net(cnnc, torch, "resize/%s %s %s" % (name, precision, layout),
              resize_net(torch, kw), (4, 3, 12, 10), precision, layout)


def check_net(cnnc, torch, tag, net, x_shape, precision, layout):
    """The forward (eval logits) and 3 SGD steps of `net()` on a batch of
    `x_shape` against PyTorch on the same GPU (see the module docstring)."""
    torch.manual_seed(0)
    model = net().cuda()
    ref = copy.deepcopy(model)
    cpu = copy.deepcopy(model).cpu()
    x = torch.randn(*x_shape, device="cuda")
    y = torch.randint(0, 10, (x_shape[0],), device="cuda")
    opt = lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9)  # noqa: E731
    try:
        trainer = cnnc.compile(model, x, optimizer=opt(model.parameters()),
                               precision=precision, layout=layout, cache=False)
    except Exception as e:  # a compile error is this case's failure
        report(False, "%s: compile: %s" % (tag, str(e)[-600:]))
        return
    f16 = precision == "fp16"
    tol_loss, tol_param = (2e-2, 3e-2) if f16 else (1e-4, 1e-3)

    # Forward: eval() of the initial weights vs model.eval().
    logits = trainer.eval(x)
    ref.eval()
    with torch.no_grad():
        e = rel(logits.float(), ref(x))
    report(e <= tol_loss, "%s: forward (eval logits) rel %.2g <= %g" % (tag, e, tol_loss))
    ref.train()

    # Backward: 3 SGD steps. fp16 is compared with PyTorch AMP (autocast +
    # GradScaler: the same dynamic loss scaling, so a step whose f16
    # gradients overflow is skipped on both sides), within PyTorch's own
    # AMP-vs-f32 spread; fp32 with PyTorch f32 on the GPU, within its own
    # GPU-vs-CPU spread.
    ref_opt, cpu_opt = opt(ref.parameters()), opt(cpu.parameters())
    amp = copy.deepcopy(ref) if f16 else None
    amp_opt = opt(amp.parameters()) if f16 else None
    scaler = torch.amp.GradScaler("cuda") if f16 else None
    worst, drift, ours, theirs = 0.0, 0.0, [], []
    for k in range(3):
        xk = x + 0.1 * k
        loss = float(trainer.step(xk, y))
        ref_opt.zero_grad()
        ref_loss = torch.nn.functional.cross_entropy(ref(xk), y)
        ref_loss.backward()
        ref_opt.step()
        if f16:
            amp_opt.zero_grad()
            with torch.autocast("cuda", dtype=torch.float16):
                amp_loss = torch.nn.functional.cross_entropy(amp(xk), y)
            scaler.scale(amp_loss).backward()
            scaler.step(amp_opt)
            scaler.update()
            target, other = amp_loss.item(), ref_loss.item()
        else:
            cpu_opt.zero_grad()
            cpu_loss = torch.nn.functional.cross_entropy(cpu(xk.cpu()), y.cpu())
            cpu_loss.backward()
            cpu_opt.step()
            target, other = ref_loss.item(), cpu_loss.item()
        worst = max(worst, abs(loss - target) / abs(target))
        drift = max(drift, abs(other - target) / abs(target))
        ours.append("%.5f" % loss)
        theirs.append("%.5f" % target)
    bound = max(tol_loss, 4 * drift)
    report(worst <= bound, "%s: 3 losses rel %.2g <= %.2g (cnnc %s, PyTorch %s %s)" % (
        tag, worst, bound, ours, "AMP" if f16 else "f32", theirs))
    target_sd = (amp if f16 else ref).state_dict()
    other_sd = (ref if f16 else cpu).state_dict()
    sd = trainer.state_dict()
    bad = []
    noise = []
    for k, v in target_sd.items():
        err, spread = rel(sd[k].float(), v), rel(other_sd[k].to(v.device), v)
        if spread > 0.5:
            # PyTorch's own two runs disagree by more than half the value:
            # the parameter's gradient is at rounding level; said, not judged.
            noise.append("%s (PyTorch's own spread %.2g, cnnc %.2g)" % (k, spread, err))
            continue
        if err > max(tol_param, 4 * spread):
            bad.append("%s %.2g > %.2g" % (k, err, max(tol_param, 4 * spread)))
    if noise:
        print("NOTE  %s: at rounding level, not judged: %s" % (tag, "; ".join(noise)))
    report(not bad, "%s: parameters after 3 steps (gradient through the op) %s" %
           (tag, "; ".join(bad) or "ok"))


def run_resize(cnnc, torch, quick):
    configs = [("fp32", "nchw"), ("fp32", "nhwc"), ("fp16", "nhwc")]
    cases = list(RESIZE_CASES.items())
    if quick:
        cases = [c for c in cases if c[0] in ("nearest_scale2", "bilinear_scale2",
                                              "bilinear_align_corners")]
    for name, kw in cases:
        for precision, layout in configs:
            check_resize(cnnc, torch, name, kw, precision, layout)


# ---------------------------------------------------------------------------
# cnn.softmax over a dimension that is not the last (softmaxStrided)
# ---------------------------------------------------------------------------

def softmax_net(torch, kind):
    """conv -> softmax over a middle dimension -> conv/gate -> pool -> linear:
    conv1 only learns through the softmax's gradient.

    channels: dim 1 of N x C x H x W (inner H*W); height: dim 2 (inner W);
    radix: ResNeSt's rSoftMax, dim 1 of N x radix x cardinality x C'
    (view + transpose of the pooled attention, then gating the features);
    sk: selective kernels, dim 1 of N x 2 x C x 1 x 1 weighing two branches.
    """
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 8, 3, padding=1)
            self.c2 = nn.Conv2d(8, 8, 3, padding=1)
            # The attention's 1x1 conv: 8 logits (radix 2 x cardinality 2 x
            # 2), or 2 x 8 (sk); none where the softmax is over the features.
            if kind in ("radix", "sk"):
                self.att = nn.Conv2d(8, 8 if kind == "radix" else 16, 1)
            self.fc = nn.Linear(8, 10)

        def forward(self, x):
            a = self.c1(x)
            n = a.shape[0]
            if kind in ("channels", "height"):
                p = F.softmax(a, dim=1 if kind == "channels" else 2)
                b = torch.relu(self.c2(p)) + p
            elif kind == "radix":
                h = torch.relu(a)
                g = self.att(h.mean(dim=(2, 3), keepdim=True))
                r = g.view(n, 2, 2, 2).transpose(1, 2)   # N x radix x card x C'
                r = F.softmax(r, dim=1).reshape(n, 8, 1, 1)
                b = self.c2(h * r)
            else:  # sk, as timm's SelectiveKernel: stack, weigh, sum
                h = torch.relu(a)
                paths = torch.stack([h, torch.relu(self.c2(h))], dim=1)
                g = self.att(paths.sum(1).mean(dim=(2, 3), keepdim=True))
                w = F.softmax(g.view(n, 2, 8, 1, 1), dim=1)
                b = (paths * w).sum(dim=1)
            return self.fc(b.mean(dim=(2, 3)))

    return Net


SOFTMAX_CASES = ["channels", "height", "radix", "sk"]


def run_softmax(cnnc, torch, quick):
    configs = [("fp32", "nchw"), ("fp32", "nhwc"), ("fp16", "nhwc")]
    cases = SOFTMAX_CASES[:1] + SOFTMAX_CASES[2:3] if quick else SOFTMAX_CASES
    for kind in cases:
        for precision, layout in configs:
            check_net(cnnc, torch, "softmax/%s %s %s" % (kind, precision, layout),
                      softmax_net(torch, kind), (4, 3, 12, 10), precision, layout)


# ---------------------------------------------------------------------------
# The activations and normalizations of issue 32, several per network (one
# compile per precision/layout covers many ops)
# ---------------------------------------------------------------------------

def activations_net(torch):
    """ELU, SELU, CELU, Softplus, Mish, PReLU (one slope and per channel),
    torch.maximum/minimum of two branches, GlobalMaxPool (adaptive max pool
    to 1) and LogSoftmax in front of the classifier: every parameter learns
    through them."""
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 8, 3, padding=1)
            self.c2 = nn.Conv2d(8, 8, 3, padding=1)
            self.c3 = nn.Conv2d(8, 8, 3, padding=1)
            self.p1, self.p8 = nn.PReLU(), nn.PReLU(8)
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            a = F.elu(self.c1(x), alpha=0.7)
            b = F.selu(self.c2(a)) + F.celu(a, alpha=1.3)
            c = self.p8(self.c3(F.softplus(b))) + F.mish(a)
            d = torch.maximum(self.p1(c), b) - torch.minimum(a, c)
            g = torch.cat([F.adaptive_max_pool2d(d, 1), d.mean(dim=(2, 3), keepdim=True)], 1)
            return F.log_softmax(self.fc(g.flatten(1)), dim=1) * 2.0

    return Net


def norms_net(torch):
    """GroupNorm (8 groups and 2), InstanceNorm2d (affine), ECA attention
    (Conv1d over the pooled channels, expand_as onto the features),
    BatchNorm1d on N x C x L and ConvNeXt-V2's GRN (an L2 norm over H, W)."""
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 16, 3, padding=1)
            self.gn8, self.gn2 = nn.GroupNorm(8, 16), nn.GroupNorm(2, 16)
            self.c2 = nn.Conv2d(16, 16, 3, padding=1)
            self.inorm = nn.InstanceNorm2d(16, affine=True)
            self.eca = nn.Conv1d(1, 1, 3, padding=1, bias=False)
            self.bn1d = nn.BatchNorm1d(16)
            self.gamma = nn.Parameter(0.1 * torch.randn(1, 16, 1, 1))
            self.beta = nn.Parameter(0.1 * torch.randn(1, 16, 1, 1))
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            a = torch.relu(self.gn8(self.c1(x)))
            # The ReLU keeps gn2's bias from being a per-channel shift that
            # the InstanceNorm after c2 removes (a zero gradient in exact
            # arithmetic, rounding noise on both sides).
            b = self.inorm(self.c2(torch.relu(self.gn2(a))))
            y = b.mean(dim=(2, 3)).unsqueeze(1)                 # N x 1 x C
            y = torch.sigmoid(self.eca(y)).transpose(1, 2).unsqueeze(-1)
            b = b * y.expand_as(b)
            gx = torch.norm(b, p=2, dim=(2, 3), keepdim=True)  # GRN
            nx = gx / (gx.mean(dim=1, keepdim=True) + 1e-6)
            b = self.gamma * (b * nx) + self.beta + b
            seq = self.bn1d(b.flatten(2))                       # N x C x L
            return self.fc(seq.mean(dim=2))

    return Net


def run_activations(cnnc, torch, quick):
    for precision, layout in [("fp32", "nchw"), ("fp32", "nhwc"), ("fp16", "nhwc")]:
        check_net(cnnc, torch, "activations %s %s" % (precision, layout),
                  activations_net(torch), (4, 3, 12, 10), precision, layout)


def run_norms(cnnc, torch, quick):
    for precision, layout in [("fp32", "nchw"), ("fp32", "nhwc"), ("fp16", "nhwc")]:
        check_net(cnnc, torch, "norms %s %s" % (precision, layout),
                  norms_net(torch), (4, 3, 12, 10), precision, layout)


# ---------------------------------------------------------------------------
# Weight standardization: timm's ScaledStdConv2d (NF-ResNet) and StdConv2d
# (BiT ResNetV2), a BatchNormalization on the 1 x C x L weight
# ---------------------------------------------------------------------------

def stdconv_layers(torch):
    """timm's StdConv2d and ScaledStdConv2d (test/e2e/std_conv_layers.py, shared
    with the CPU test), the latter with NF-ResNet's gamma for ReLU."""
    import functools
    sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
    from std_conv_layers import ScaledStdConv2d, StdConv2d
    return StdConv2d, functools.partial(ScaledStdConv2d, gamma=1.7139)


def nf_net(torch):
    """An NF-ResNet pre-activation bottleneck (x * beta -> ReLU -> 1x1 ->
    ReLU -> 3x3 stride 2 -> ReLU -> 1x1 with gain 0 as timm initializes it;
    out * alpha + a ScaledStdConv2d shortcut) behind a ScaledStdConv2d stem.
    The last gain starts at 0, so conv1/conv2 learn only through it."""
    nn, F = torch.nn, torch.nn.functional
    _, SConv = stdconv_layers(torch)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = SConv(3, 16, 3)
            self.down = SConv(16, 24, 1, stride=2)
            self.conv1 = SConv(16, 8, 1)
            self.conv2 = SConv(8, 8, 3, stride=2)
            self.conv3 = SConv(8, 24, 1, gain_init=0.0)
            self.fc = nn.Linear(24, 10)

        def forward(self, x):
            x = self.stem(x)
            out = F.relu(x) * 0.98
            shortcut = self.down(out)
            out = self.conv3(F.relu(self.conv2(F.relu(self.conv1(out)))))
            out = out * 0.2 + shortcut
            return self.fc(F.relu(out).mean(dim=(2, 3)))

    return Net


def bit_net(torch):
    """A BiT ResNetV2 pre-activation bottleneck: GroupNorm + ReLU before each
    StdConv2d (no bias), a StdConv2d projection shortcut."""
    nn, F = torch.nn, torch.nn.functional
    Conv, _ = stdconv_layers(torch)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = Conv(3, 16, 3)
            self.norm1 = nn.GroupNorm(4, 16)
            self.down = Conv(16, 24, 1, stride=2)
            self.conv1 = Conv(16, 8, 1)
            self.norm2 = nn.GroupNorm(4, 8)
            self.conv2 = Conv(8, 8, 3, stride=2)
            self.norm3 = nn.GroupNorm(4, 8)
            self.conv3 = Conv(8, 24, 1)
            self.norm = nn.GroupNorm(4, 24)
            self.fc = nn.Linear(24, 10)

        def forward(self, x):
            pre = F.relu(self.norm1(self.stem(x)))
            out = self.conv1(pre)
            out = self.conv2(F.relu(self.norm2(out)))
            out = self.conv3(F.relu(self.norm3(out))) + self.down(pre)
            return self.fc(F.relu(self.norm(out)).mean(dim=(2, 3)))

    return Net


def run_stdconv(cnnc, torch, quick):
    for precision, layout in [("fp32", "nchw"), ("fp32", "nhwc"), ("fp16", "nhwc")]:
        for name, net in [("nf", nf_net), ("bit", bit_net)]:
            check_net(cnnc, torch, "stdconv/%s %s %s" % (name, precision, layout),
                      net(torch), (4, 3, 16, 16), precision, layout)


def run_timm(cnnc, torch, quick):
    """timm families rebuilt in torch (test/e2e/timm_family_layers.py, shared
    with test_timm_families.py): TF "same" padding (Conv2dSame /
    MaxPool2dSame, pads folded at import, -inf for the pool) and the NF
    nets (NF-ResNet; NFNet-L0's SiLU, grouped convs, SE; dm-NFNet's
    GammaAct, ScaledStdConv2dSame and the 0-d skipinit gain), at odd sizes."""
    import functools
    sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
    import timm_family_layers as tl
    nets = [("tf_efficientnet", tl.TFEfficientNetTiny, (4, 3, 27, 27))]
    nets += [(v, functools.partial(tl.NFNetTiny, v), (4, 3, 29, 29))
             for v in ("nf_resnet", "nfnet_l0", "dm_nfnet")]
    for precision, layout in [("fp32", "nchw"), ("fp32", "nhwc"), ("fp16", "nhwc")]:
        for name, net, shape in nets[:2] if quick else nets:
            check_net(cnnc, torch, "timm/%s %s %s" % (name, precision, layout),
                      net, shape, precision, layout)


# ---------------------------------------------------------------------------
# Upsample + concat (cnn-fuse's cnn.fused_resize_concat and resize_grad with
# channel_offset; their "vec8" forms where the channels are multiples of 8)
# ---------------------------------------------------------------------------

def resize_concat_net(torch, mode, resized_first, c_up, c_skip):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        """A U-Net decoder level: the skip (c_skip channels, full size) and
        a stride-2 feature (c_up channels) upsampled by 2 and concatenated
        with it along the channels; c2 learns only through the resize's
        gradient, read from its channels of the concat's gradient."""

        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, c_skip, 3, padding=1)
            self.c2 = nn.Conv2d(c_skip, c_up, 3, stride=2, padding=1)
            extra = {"align_corners": False} if mode == "bilinear" else {}
            self.up = nn.Upsample(scale_factor=2, mode=mode, **extra)
            self.c3 = nn.Conv2d(c_up + c_skip, 8, 3, padding=1)
            self.fc = nn.Linear(8, 10)

        def forward(self, x):
            s = torch.relu(self.c1(x))
            u = self.up(torch.relu(self.c2(s)))
            cat = torch.cat([u, s] if resized_first else [s, u], dim=1)
            return self.fc(torch.relu(self.c3(cat)).mean(dim=(2, 3)))

    return Net


# name -> (mode, resized first, resized channels, skip channels)
RESIZE_CONCAT_CASES = {
    "bilinear_first_vec8": ("bilinear", True, 16, 8),
    "nearest_second_vec8": ("nearest", False, 8, 16),
    "bilinear_second_odd": ("bilinear", False, 6, 5),
}


def run_resize_concat(cnnc, torch, quick):
    for precision, layout in [("fp32", "nchw"), ("fp32", "nhwc"), ("fp16", "nhwc")]:
        for name, args in RESIZE_CONCAT_CASES.items():
            check_net(cnnc, torch, "resize_concat/%s %s %s" % (name, precision, layout),
                      resize_concat_net(torch, *args), (4, 3, 16, 16), precision, layout)


CHECKS = {"resize": run_resize, "resize_concat": run_resize_concat,
          "softmax": run_softmax, "activations": run_activations,
          "norms": run_norms, "stdconv": run_stdconv, "timm": run_timm}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cnnc", default=os.path.join(HERE, "..", "..", "build", "bin", "cnnc"),
                    help="the cnnc binary to compile with")
    ap.add_argument("--only", default=",".join(CHECKS),
                    help="comma-separated checks to run (%s)" % ", ".join(CHECKS))
    ap.add_argument("--quick", action="store_true", help="a few cases per check")
    args = ap.parse_args()
    torch = require_gpu("check_new_ops")
    # cnnc.compile finds the compiler through $CNNC (cnnc.tools.find_tool).
    os.environ["CNNC"] = os.path.abspath(args.cnnc)
    import cnnc
    for name in args.only.split(","):
        if name not in CHECKS:
            ap.error("unknown check '%s' (have: %s)" % (name, ", ".join(CHECKS)))
        CHECKS[name](cnnc, torch, args.quick)
    failed = [w for ok, w in RESULTS if not ok]
    print("check_new_ops: %d passed, %d failed" % (len(RESULTS) - len(failed), len(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
