"""Model-level forms of the ops of issue 32 ("Every CNN users train") vs
PyTorch, on the CPU reference path.

Each case is a small network around the layer under test (nn.GroupNorm,
nn.InstanceNorm2d, ECA's Conv1d, expand/expand_as (ONNX Expand of a run-time
tensor), nn.BatchNorm1d, nn.PReLU, ELU/SELU/CELU/Softplus/Mish,
torch.minimum/maximum, AdaptiveMaxPool2d(1), LogSoftmax, ConvNeXt-V2's GRN). It is exported in training mode
(train_check.export_training) and run with `cnnc --train --run-reference`:

* step 1 with `--optimizer none`: the loss, every parameter's gradient and
  the BN running statistics against torch.autograd in float64;
* 3 steps of SGD (momentum 0.9): the loss of each step, and the parameters
  and running statistics after step 3, against PyTorch's own 3 steps in
  float64 (these small nets are well conditioned: the trajectory is held to
  the same tolerance).

The errors are relative to each tensor's largest value (train_check); run
with `-s` to see them.
"""
import math
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from cnnc import train_check as tc  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

TOL = 1e-4
SHAPE = (4, 3, 12, 12)
CLASSES = 10
SGD = {"kind": "sgd", "lr": 0.05, "momentum": 0.9}


class Net(nn.Module):
    """conv(3 -> C) -> `body` -> global average pool -> linear(C -> 10)."""

    def __init__(self, body, c=16, head=None):
        super().__init__()
        self.conv = nn.Conv2d(3, c, 3, padding=1)
        self.body = body
        self.head = head
        if head is None:
            self.fc = nn.Linear(c, CLASSES)

    def forward(self, x):
        h = self.body(self.conv(x))
        if self.head is not None:
            return self.head(h)
        return self.fc(h.mean(dim=(2, 3)))


class Act(nn.Module):
    """Applies a function (torch.minimum/maximum, Mish, ...) between two convs."""

    def __init__(self, fn, c=16):
        super().__init__()
        self.fn = fn
        self.conv = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        return self.conv(self.fn(x))


def gelu_half_first(h):
    """0.5 x first, then 1 + erf(x / sqrt 2) (a division by sqrt 2)."""
    return 0.5 * h * (1 + torch.erf(h / math.sqrt(2)))


def gelu_half_last(h):
    """x times half of (erf(x * 1/sqrt 2) + 1)."""
    return h * (0.5 * (torch.erf(h * 0.7071067811865476) + 1.0))


class ECA(nn.Module):
    """ECA-Net's channel attention: a Conv1d across the channels of the
    pooled features (N x 1 x C), a sigmoid gate."""

    def __init__(self, k=3):
        super().__init__()
        self.conv = nn.Conv1d(1, 1, k, padding=k // 2, bias=False)

    def forward(self, x):
        y = x.mean(dim=(2, 3), keepdim=True)                 # N x C x 1 x 1
        y = self.conv(y.squeeze(-1).transpose(-1, -2))       # N x 1 x C
        y = torch.sigmoid(y.transpose(-1, -2).unsqueeze(-1))  # N x C x 1 x 1
        return x * y


class ECAExpand(nn.Module):
    """ECA as timm's EcaModule writes it: the gate viewed back to
    N x C x 1 x 1 and `expand_as(x)` (an ONNX Expand of a run-time tensor,
    which the Mul reads through)."""

    def __init__(self, k=3):
        super().__init__()
        self.conv = nn.Conv1d(1, 1, k, padding=k // 2, bias=False)

    def forward(self, x):
        y = x.mean((2, 3)).view(x.shape[0], 1, -1)
        y = torch.sigmoid(self.conv(y)).view(x.shape[0], -1, 1, 1)
        return x * y.expand_as(x)


class ExpandRelu(nn.Module):
    """A pooled N x C x 1 x 1 map expanded to H x W that a Tanh (no
    broadcasting) consumes: the Expand is a real broadcast, its gradient a
    sum over H, W."""

    def __init__(self, c=16):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 1)

    def forward(self, x):
        g = self.conv(x.mean((2, 3), keepdim=True))
        return torch.tanh(g.expand(-1, -1, x.shape[2], x.shape[3])) * x + x


class BN1dSeq(nn.Module):
    """BatchNorm1d over N x C x L (the spatial positions as a sequence)."""

    def __init__(self, c=16):
        super().__init__()
        self.bn = nn.BatchNorm1d(c)

    def forward(self, x):
        n, c, h, w = x.shape
        return F.relu(self.bn(x.flatten(2))).reshape(n, c, h, w)


class BN1dHead(nn.Module):
    """linear -> BatchNorm1d over N x C -> ReLU -> linear."""

    def __init__(self, c=16, hidden=24):
        super().__init__()
        self.fc1 = nn.Linear(c, hidden)
        self.bn = nn.BatchNorm1d(hidden)
        self.fc2 = nn.Linear(hidden, CLASSES)

    def forward(self, h):
        return self.fc2(F.relu(self.bn(self.fc1(h.mean(dim=(2, 3))))))


class MaxPoolHead(nn.Module):
    """AdaptiveMaxPool2d(1) (exported as GlobalMaxPool) -> linear."""

    def __init__(self, c=16):
        super().__init__()
        self.pool = nn.AdaptiveMaxPool2d(1)
        self.fc = nn.Linear(c, CLASSES)

    def forward(self, h):
        return self.fc(torch.flatten(self.pool(h), 1))


class LogSoftmaxHead(nn.Module):
    """Log-probabilities as the output: cnnc's cross-entropy of them is
    PyTorch's (log_softmax is idempotent under softmax)."""

    def __init__(self, c=16):
        super().__init__()
        self.fc = nn.Linear(c, CLASSES)

    def forward(self, h):
        return F.log_softmax(self.fc(h.mean(dim=(2, 3))), dim=1)


class GRN(nn.Module):
    """ConvNeXt-V2's global response normalization (channels first): the L2
    norm over H, W (torch.norm -> ReduceL2), divided by its channel mean."""

    def __init__(self, c=16):
        super().__init__()
        self.gamma = nn.Parameter(0.1 * torch.randn(1, c, 1, 1))
        self.beta = nn.Parameter(0.1 * torch.randn(1, c, 1, 1))

    def forward(self, x):
        gx = torch.norm(x, p=2, dim=(2, 3), keepdim=True)
        nx = gx / (gx.mean(dim=1, keepdim=True) + 1e-6)
        return self.gamma * (x * nx) + self.beta + x


class SamePadConv(nn.Module):
    """TF "same" padding as timm's pad_same computes it from the input's
    size (math.ceil of traced shapes: ONNX Ceil on constants), then a
    stride-2 3x3 convolution."""

    def __init__(self, c=16):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, stride=2)

    def forward(self, x):
        ih, iw = x.size()[-2:]
        pad_h = max((math.ceil(ih / 2) - 1) * 2 + 3 - ih, 0)
        pad_w = max((math.ceil(iw / 2) - 1) * 2 + 3 - iw, 0)
        x = F.pad(x, [pad_w // 2, pad_w - pad_w // 2, pad_h // 2, pad_h - pad_h // 2])
        return self.conv(x)


def affine_init(m):
    """Non-trivial affine parameters (the defaults 1 and 0 hide mistakes in
    which of them is applied where)."""
    for mod in m.modules():
        if isinstance(mod, (nn.GroupNorm, nn.InstanceNorm2d,
                            nn.BatchNorm1d)) and mod.weight is not None:
            with torch.no_grad():
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.5, 0.5)
    return m


CASES = {
    "groupnorm_1": lambda: Net(nn.Sequential(nn.GroupNorm(1, 16), nn.ReLU())),
    "groupnorm_8": lambda: Net(nn.Sequential(nn.GroupNorm(8, 16), nn.ReLU())),
    "groupnorm_C": lambda: Net(nn.Sequential(nn.GroupNorm(16, 16), nn.ReLU())),
    "instancenorm_affine": lambda: Net(nn.Sequential(
        nn.InstanceNorm2d(16, affine=True), nn.ReLU())),
    "instancenorm": lambda: Net(nn.Sequential(nn.InstanceNorm2d(16),
                                              nn.ReLU())),
    "eca_conv1d": lambda: Net(nn.Sequential(nn.ReLU(), ECA())),
    "eca_expand_as": lambda: Net(nn.Sequential(nn.ReLU(), ECAExpand())),
    "expand_relu": lambda: Net(nn.Sequential(nn.ReLU(), ExpandRelu())),
    "batchnorm1d_NCL": lambda: Net(BN1dSeq()),
    "batchnorm1d_NC": lambda: Net(nn.ReLU(), head=BN1dHead()),
    "prelu_1": lambda: Net(nn.Sequential(nn.PReLU(), Act(nn.PReLU()))),
    "prelu_C": lambda: Net(nn.Sequential(nn.PReLU(16, 0.1),
                                         Act(nn.PReLU(16)))),
    "elu": lambda: Net(nn.Sequential(nn.ELU(0.7), Act(nn.ELU()))),
    "selu": lambda: Net(nn.Sequential(nn.SELU(), Act(nn.SELU()))),
    "celu": lambda: Net(nn.Sequential(nn.CELU(0.5), Act(nn.CELU(1.5)))),
    "softplus": lambda: Net(nn.Sequential(nn.Softplus(), Act(nn.Softplus()))),
    "mish": lambda: Net(nn.Sequential(nn.Mish(), Act(nn.Mish()))),
    "minimum_maximum": lambda: Net(nn.Sequential(
        Act(lambda h: torch.maximum(h, torch.tanh(h) * 2)),
        Act(lambda h: torch.minimum(h, 0.5 - h)))),
    "adaptive_max_pool": lambda: Net(nn.ReLU(), head=MaxPoolHead()),
    "log_softmax": lambda: Net(nn.ReLU(), head=LogSoftmaxHead()),
    "grn": lambda: Net(nn.Sequential(nn.GELU(), GRN())),
    # nn.GELU and the erf form written by hand in the other associations:
    # the exporter writes all out (opset < 20), cnn-import-cleanup makes
    # each cnn.gelu again (test_gelu_forms_import_as_gelu).
    "gelu": lambda: Net(nn.Sequential(nn.GELU(), Act(nn.GELU()))),
    "gelu_tanh": lambda: Net(nn.Sequential(nn.GELU(approximate="tanh"),
                                           Act(nn.GELU(approximate="tanh")))),
    "gelu_by_hand": lambda: Net(nn.Sequential(Act(gelu_half_first),
                                              Act(gelu_half_last))),
    # nn.SiLU: Sigmoid and Mul in the export, one cnn.silu after import.
    "silu": lambda: Net(nn.Sequential(nn.SiLU(), Act(nn.SiLU()))),
    "tf_same_padding": lambda: Net(nn.Sequential(nn.ReLU(), SamePadConv())),
}


@pytest.mark.parametrize("case", list(CASES))
def test_matches_pytorch(cnnc, tmp_path, case):
    torch.manual_seed(0)
    model = affine_init(CASES[case]())
    onnx_path = tmp_path / (case + ".onnx")
    tc.export_training(model, onnx_path, SHAPE)
    x, y = tc.random_batch(SHAPE, CLASSES, seed=1)

    # Step 1: loss, gradients and BN running statistics vs autograd (f64).
    none = {"kind": "none"}
    (tmp_path / "grads").mkdir()
    run = tc.cnnc_train_fixed(cnnc, onnx_path, x, y, none, 1, tmp_path / "grads")
    ref_loss, ref = tc.torch_step_from(model, {}, x, y, none, 1)
    measured, failures = tc.check_step(run.state, ref, model, none, 1, TOL,
                                       loss=run.losses[0], ref_loss=ref_loss,
                                       groups=["grads", "buffers"])

    # Three SGD steps: every loss, then the parameters and statistics.
    (tmp_path / "sgd").mkdir()
    run3 = tc.cnnc_train_fixed(cnnc, onnx_path, x, y, SGD, 3, tmp_path / "sgd")
    losses, ref3 = tc.torch_train(model, x, y, SGD, 3)
    assert len(run3.losses) == 3, run3.stdout
    for k, (a, b) in enumerate(zip(run3.losses, losses), 1):
        if abs(a - b) > TOL * abs(b):
            failures.append("SGD step %d loss %.7g vs torch %.7g" % (k, a, b))
    m3, f3 = tc.check_step(run3.state, ref3, model, SGD, 3, TOL,
                           groups=["params", "buffers"])
    failures += f3

    s = tc.summarize(measured)
    gn, ge = tc.worst(measured["grads"])
    print("\nMEASURED %-20s loss %.2e grads %.2e (worst %s) | 3 SGD steps: "
          "losses %s params %.2e" %
          (case, s["loss"], ge, gn,
           " ".join("%.2e" % (abs(a - b) / abs(b))
                    for a, b in zip(run3.losses, losses)),
           tc.summarize(m3)["params"]))
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("case,written,op", [
    ("gelu", "Erf", "cnn.gelu"), ("gelu_by_hand", "Erf", "cnn.gelu"),
    ("gelu_tanh", "Tanh", "cnn.gelu"),
    ("silu", "Sigmoid", "cnn.silu"), ("mish", "Softplus", "cnn.mish")])
def test_activation_forms_import_as_one_op(cnnc, tmp_path, case, written, op):
    """The forms an exporter writes for GELU (Div, Erf, Add, Mul, Mul; each
    association), SiLU (Sigmoid, Mul) and, before opset 18, Mish (Softplus,
    Tanh, Mul) are one cnn.gelu / cnn.silu / cnn.mish after
    import: their gradients then read x alone, where the forms as written
    kept full-size intermediates for the backward pass (ConvNeXt-T at batch
    64: 6,164 -> 4,069 MiB; EfficientNet-B0: 3,277 -> 2,588 MiB)."""
    torch.manual_seed(0)
    onnx_path = tmp_path / (case + ".onnx")
    tc.export_training(CASES[case](), onnx_path, SHAPE)
    import onnx
    ops = [n.op_type for n in onnx.load(str(onnx_path)).graph.node]
    assert ops.count(written) == 2, ops  # the exporter wrote the form out
    out = subprocess.run([cnnc, str(onnx_path), "--emit", "mlir"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count(op + " ") == 2, out.stdout
    assert "cnn." + written.lower() not in out.stdout, out.stdout


def test_prelu_one_value_slope_is_trained(cnnc, tmp_path):
    """PyTorch's nn.PReLU() exports its one-value weight [1] unsqueezed to
    1 x 1 x 1: it is still a parameter (--save-state writes its gradient),
    not a constant folded into the graph."""
    torch.manual_seed(0)
    model = Net(nn.PReLU())
    onnx_path = tmp_path / "prelu.onnx"
    tc.export_training(model, onnx_path, SHAPE)
    x, y = tc.random_batch(SHAPE, CLASSES, seed=1)
    run = tc.cnnc_train_fixed(cnnc, onnx_path, x, y, {"kind": "none"}, 1,
                              tmp_path)
    assert "body.weight.grad" in run.state, sorted(run.state)
    assert run.state["body.weight.grad"].shape == (1,)
    assert abs(float(run.state["body.weight.grad"][0])) > 0


def test_norms_without_affine_train_no_parameters(cnnc, tmp_path):
    """BatchNorm2d(affine=False), InstanceNorm2d(affine=False) and
    GroupNorm(affine=False) have no parameters in PyTorch: their exported
    scale and bias are Constant nodes (ones, zeros) that cnnc must keep
    fixed. 3 SGD steps with weight decay (which would move a wrongly trained
    scale of ones even where its gradient is small) match PyTorch, and cnnc
    trains exactly PyTorch's parameters."""
    torch.manual_seed(0)
    model = Net(nn.Sequential(
        nn.BatchNorm2d(16, affine=False), nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1), nn.InstanceNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1), nn.GroupNorm(4, 16, affine=False),
        nn.ReLU()))
    onnx_path = tmp_path / "noaffine.onnx"
    tc.export_training(model, onnx_path, SHAPE)
    x, y = tc.random_batch(SHAPE, CLASSES, seed=1)
    opt = dict(SGD, weight_decay=0.05)
    run = tc.cnnc_train_fixed(cnnc, onnx_path, x, y, opt, 3, tmp_path)
    trained = {k[:-len(".momentum_buffer")] for k in run.state
               if k.endswith(".momentum_buffer")}
    assert trained == {n for n, _ in model.named_parameters()}, sorted(trained)
    losses, ref = tc.torch_train(model, x, y, opt, 3)
    failures = ["SGD step %d loss %.7g vs torch %.7g" % (k, a, b)
                for k, (a, b) in enumerate(zip(run.losses, losses), 1)
                if abs(a - b) > TOL * abs(b)]
    _, f = tc.check_step(run.state, ref, model, opt, 3, TOL,
                         groups=["params", "buffers"])
    assert len(run.losses) == 3 and not failures + f, "\n".join(failures + f)
