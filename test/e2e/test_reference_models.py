"""torchvision resnet18 through the reference interpreter vs PyTorch.

The network is written out as cnn ops (eval form with batch_norm, train form
with batch_norm_train + softmax_cross_entropy), and every conv shape of the
network is checked backward (conv2d_bwd_data / conv2d_bwd_filter) against
autograd. Run times are printed (pytest -s), never asserted.
"""
import os
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_reference_harness import Fn, assert_close, run_text  # noqa: E402

torchvision = pytest.importorskip("torchvision")
torch.set_num_threads(1)
TOL = 1e-5


def conv_attrs(conv):
    ph, pw = conv.padding
    return {"strides": conv.stride, "padding": (ph, pw, ph, pw),
            "dilations": conv.dilation, "groups": conv.groups}


def conv_out(shape, conv):
    n, _, h, w = shape
    kh, kw = conv.kernel_size
    (sh, sw), (ph, pw), (dh, dw) = conv.stride, conv.padding, conv.dilation
    return (n, conv.out_channels, (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1,
            (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1)


class Emitter:
    """Writes a torchvision ResNet as cnn ops; parameters become arguments."""

    def __init__(self, model, input_shape, train, labels=None):
        self.fn = Fn("resnet")
        self.train = train
        self.inputs = []
        self.extra_returns = []
        self.x = self.arg(np.zeros(input_shape, np.float32), "input")
        self.model = model
        self.labels = labels

    def arg(self, array, name):
        array = np.asarray(array)
        dtype = {np.dtype(np.float32): "f32", np.dtype(np.int64): "i64"}[
            array.dtype]
        v = self.fn.arg(array.shape, dtype, {"cnn.param": name})
        self.inputs.append(array)
        return v

    def param(self, tensor, name):
        return self.arg(tensor.detach().numpy().astype(np.float32), name)

    def conv(self, x, conv, name):
        w = self.param(conv.weight, name + ".weight")
        return self.fn.op("conv2d", [x, w], conv_attrs(conv),
                          [conv_out(x.shape, conv)])

    def bn(self, x, bn, name):
        args = [x, self.param(bn.weight, name + ".weight"),
                self.param(bn.bias, name + ".bias"),
                self.param(bn.running_mean, name + ".running_mean"),
                self.param(bn.running_var, name + ".running_var")]
        c = x.shape[1]
        if not self.train:
            return self.fn.op("batch_norm", args, {"epsilon": bn.eps})
        y, _, _, rm, rv = self.fn.op(
            "batch_norm_train", args,
            {"epsilon": bn.eps, "momentum": bn.momentum},
            [x.shape, (c,), (c,), (c,), (c,)])
        self.extra_returns += [rm, rv]
        return y

    def relu(self, x):
        return self.fn.op("relu", [x])

    def block(self, x, blk, name):
        out = self.relu(self.bn(self.conv(x, blk.conv1, name + ".conv1"),
                                blk.bn1, name + ".bn1"))
        out = self.bn(self.conv(out, blk.conv2, name + ".conv2"), blk.bn2,
                      name + ".bn2")
        if blk.downsample is not None:
            x = self.bn(self.conv(x, blk.downsample[0], name + ".downsample.0"),
                        blk.downsample[1], name + ".downsample.1")
        return self.relu(self.fn.op("add", [out, x]))

    def emit(self):
        m, f = self.model, self.fn
        x = self.relu(self.bn(self.conv(self.x, m.conv1, "conv1"), m.bn1,
                              "bn1"))
        n, c, h, w = x.shape
        oh, ow = (h + 2 - 3) // 2 + 1, (w + 2 - 3) // 2 + 1
        x = f.op("max_pool2d", [x], {"kernel": (3, 3), "strides": (2, 2),
                                     "padding": (1, 1, 1, 1),
                                     "ceil_mode": False}, [(n, c, oh, ow)])
        for li in range(1, 5):
            for bi, blk in enumerate(getattr(m, f"layer{li}")):
                x = self.block(x, blk, f"layer{li}.{bi}")
        x = f.op("global_avg_pool", [x], None, [(n, x.shape[1], 1, 1)])
        x = f.op("flatten", [x], {"axis": 1}, [(n, x.shape[1])])
        fcw = self.param(m.fc.weight, "fc.weight")
        fcb = self.param(m.fc.bias, "fc.bias")
        logits = f.op("matmul", [x, fcw], {"transpose_rhs": True},
                      [(n, fcw.shape[0])])
        logits = f.op("bias_add", [logits, fcb])
        returns = [logits]
        if self.labels is not None:
            lab = self.arg(self.labels, "labels")
            returns.append(f.op("softmax_cross_entropy", [logits, lab],
                                {"label_smoothing": 0.1}, [()]))
        return f.text(returns + self.extra_returns), returns


def make_model(seed=0):
    torch.manual_seed(seed)
    model = torchvision.models.resnet18(num_classes=10)
    # Non-trivial BN statistics and affine parameters.
    g = torch.Generator().manual_seed(seed + 1)
    for mod in model.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            c = mod.num_features
            mod.weight.data = 0.5 + torch.rand(c, generator=g)
            mod.bias.data = 0.2 * torch.randn(c, generator=g)
            mod.running_mean.data = 0.1 * torch.randn(c, generator=g)
            mod.running_var.data = 0.5 + torch.rand(c, generator=g)
    return model


def test_resnet18_eval_forward():
    model = make_model().eval()
    x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(3))
    em = Emitter(model, x.shape, train=False)
    text, _ = em.emit()
    em.inputs[0] = x.numpy()
    outs, err = run_text(text, em.inputs, extra_args=["--time"])
    print("\nresnet18 eval forward 1x3x64x64:", err.strip())
    with torch.no_grad():
        want = model(x)
    assert_close(outs[0], want, TOL, "logits")


def test_resnet18_train_forward_and_running_stats():
    model = make_model(seed=5).train()
    gen = torch.Generator().manual_seed(4)
    # At 32x32 layer4 normalizes 2 values per channel, which is so
    # ill-conditioned that torch f32 itself is 2e-3 off its f64 result.
    x = torch.randn(2, 3, 64, 64, generator=gen)
    labels = torch.randint(0, 10, (2,), generator=gen)
    em = Emitter(model, x.shape, train=True, labels=labels.numpy())
    text, _ = em.emit()
    em.inputs[0] = x.numpy()
    outs, err = run_text(text, em.inputs, extra_args=["--time"])
    print("\nresnet18 train forward 2x3x64x64:", err.strip())
    with torch.no_grad():
        logits = model(x)
        loss = F.cross_entropy(logits, labels, label_smoothing=0.1)
    assert_close(outs[0], logits, TOL, "logits")
    assert_close(outs[1], loss, TOL, "loss")
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    # The emitter visits BNs in module order except that each block's
    # downsample BN comes after bn2, which is also the module order.
    stats = outs[2:]
    assert len(stats) == 2 * len(bns)
    for i, bn in enumerate(bns):
        assert_close(stats[2 * i], bn.running_mean, TOL, f"bn{i} running_mean")
        assert_close(stats[2 * i + 1], bn.running_var, TOL,
                     f"bn{i} running_var")


def resnet18_conv_shapes(n, hw):
    """(input shape, conv module) for every conv of resnet18 at n x 3 x hw^2."""
    model = torchvision.models.resnet18(num_classes=10)
    shapes = []
    hooks = [m.register_forward_hook(
        lambda mod, inp, out: shapes.append((tuple(inp[0].shape), mod)))
        for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    with torch.no_grad():
        model(torch.zeros(n, 3, hw, hw))
    for h in hooks:
        h.remove()
    return shapes


@pytest.mark.parametrize("n,hw", [(4, 64)])
def test_resnet18_conv_backward_shapes(n, hw):
    fn = Fn("conv_backward")
    inputs, returns, wants = [], [], []
    g = np.random.default_rng(9)
    for xshape, conv in resnet18_conv_shapes(n, hw):
        x = g.standard_normal(xshape).astype(np.float32)
        w = (0.1 * g.standard_normal(conv.weight.shape)).astype(np.float32)
        tx = torch.tensor(x, requires_grad=True)
        tw = torch.tensor(w, requires_grad=True)
        y = F.conv2d(tx, tw, stride=conv.stride, padding=conv.padding)
        dy = g.standard_normal(y.shape).astype(np.float32)
        y.backward(torch.tensor(dy))
        ax, aw, ady = fn.arg(x.shape), fn.arg(w.shape), fn.arg(dy.shape)
        attrs = conv_attrs(conv)
        returns.append(fn.op("conv2d_bwd_data", [ady, aw], attrs, [x.shape]))
        returns.append(fn.op("conv2d_bwd_filter", [ax, ady], attrs,
                             [w.shape]))
        inputs += [x, w, dy]
        wants += [tx.grad, tw.grad]
    outs, err = run_text(fn.text(returns), inputs, extra_args=["--time"])
    print(f"\nresnet18 conv backward (all 20 convs) {n}x3x{hw}x{hw}:",
          err.strip())
    for i, (o, want) in enumerate(zip(outs, wants)):
        assert_close(o, want, TOL, f"conv #{i // 2} "
                     f"{'bwd_data' if i % 2 == 0 else 'bwd_filter'}")
