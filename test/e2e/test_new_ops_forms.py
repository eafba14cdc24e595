"""Forms of issue 32's ops that test_new_ops.py's models do not reach,
trained end to end against PyTorch in float64 on the CPU reference (loss and
every gradient of step 1, then 3 SGD steps: losses and parameters).

* ONNX GlobalMaxPool. PyTorch's exporter writes nn.AdaptiveMaxPool2d(1) as
  a MaxPool whose kernel is the whole map, so the importer's GlobalMaxPool
  row (cnn.reduce_max over H and W, whose gradient sends dy to the maxima)
  is never reached from PyTorch. Exporters of other frameworks write it;
  here the exported MaxPool node is rewritten into one (the same function).
* The softmax gradient inside a model: selective kernels and split
  attention (softmax over the radix, axis 1 of N x R x C x 1 x 1, weighting
  R branches). test_gradient_rules.py checks the rule on IR; here it is the
  exported model, its Softmax between convolutions.
* ReduceMin (torch.amin) and ReduceL1 (torch.norm(p=1)), imported as
  -reduce_max(-x) and reduce_sum(|x|), in a channel gate.
"""
import subprocess

import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
import torch.nn as nn  # noqa: E402

from cnnc import train_check as tc  # noqa: E402

import test_new_ops as ops  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def check_against_pytorch(cnnc, tmp_path, model, path):
    x, y = tc.random_batch(ops.SHAPE, ops.CLASSES, seed=1)
    none = {"kind": "none"}
    (tmp_path / "grads").mkdir()
    run = tc.cnnc_train_fixed(cnnc, path, x, y, none, 1, tmp_path / "grads")
    ref_loss, ref = tc.torch_step_from(model, {}, x, y, none, 1)
    _, failures = tc.check_step(run.state, ref, model, none, 1, ops.TOL,
                                loss=run.losses[0], ref_loss=ref_loss,
                                groups=["grads"])
    (tmp_path / "sgd").mkdir()
    run3 = tc.cnnc_train_fixed(cnnc, path, x, y, ops.SGD, 3, tmp_path / "sgd")
    losses, ref3 = tc.torch_train(model, x, y, ops.SGD, 3)
    assert len(run3.losses) == 3, run3.stdout
    for k, (a, b) in enumerate(zip(run3.losses, losses), 1):
        if abs(a - b) > ops.TOL * abs(b):
            failures.append("SGD step %d loss %.7g vs torch %.7g" % (k, a, b))
    failures += tc.check_step(run3.state, ref3, model, ops.SGD, 3, ops.TOL,
                              groups=["params"])[1]
    assert not failures, "\n".join(failures)


def test_global_max_pool_trains_as_pytorch(cnnc, tmp_path):
    torch.manual_seed(0)
    model = ops.CASES["adaptive_max_pool"]()
    path = tmp_path / "gmp.onnx"
    tc.export_training(model, path, ops.SHAPE)
    m = onnx.load(str(path))
    pools = [n for n in m.graph.node if n.op_type == "MaxPool"]
    assert len(pools) == 1, [n.op_type for n in m.graph.node]
    pools[0].op_type = "GlobalMaxPool"
    del pools[0].attribute[:]
    onnx.save(m, str(path))
    ir = tmp_path / "gmp.mlir"
    subprocess.run([cnnc, str(path), "--emit", "mlir", "-o", str(ir)], check=True)
    assert "cnn.reduce_max" in ir.read_text() and "max_pool2d" not in ir.read_text()
    check_against_pytorch(cnnc, tmp_path, model, path)


class RadixAttention(nn.Module):
    """timm's SelectiveKernel / SplitAttn attention: R branches (3x3 convs of
    different dilation), their sum pooled, a 1x1 conv to R x C logits, a
    softmax over R, the branches weighted and summed."""

    def __init__(self, c=16, radix=2):
        super().__init__()
        self.radix = radix
        self.paths = nn.ModuleList(
            nn.Conv2d(c, c, 3, padding=d + 1, dilation=d + 1) for d in range(radix))
        self.fc = nn.Conv2d(c, radix * c, 1)

    def forward(self, x):
        n, c = x.shape[:2]
        branches = torch.stack([torch.relu(p(x)) for p in self.paths], 1)
        attn = self.fc(branches.sum(1).mean((2, 3), keepdim=True))
        attn = torch.softmax(attn.view(n, self.radix, c, 1, 1), dim=1)
        return (branches * attn).sum(1)


@pytest.mark.parametrize("radix", [2, 4])
def test_radix_softmax_attention_trains_as_pytorch(cnnc, tmp_path, radix):
    torch.manual_seed(0)
    model = ops.Net(RadixAttention(radix=radix))
    path = tmp_path / "sk.onnx"
    tc.export_training(model, path, ops.SHAPE)
    assert any(n.op_type == "Softmax" for n in onnx.load(str(path)).graph.node)
    check_against_pytorch(cnnc, tmp_path, model, path)


class MinL1Gate(nn.Module):
    """torch.amin (ONNX ReduceMin) and torch.norm(p=1) (ReduceL1) over H, W
    as a channel gate: reduce_max of the negated input and reduce_sum of
    |x| in cnnc, trained through both."""

    def forward(self, x):
        lo = torch.amin(x, dim=(2, 3), keepdim=True)
        l1 = torch.norm(x, p=1, dim=(2, 3), keepdim=True) / (x.shape[2] * x.shape[3])
        return x * torch.sigmoid(l1 + lo)


def test_reduce_min_and_l1_train_as_pytorch(cnnc, tmp_path):
    torch.manual_seed(0)
    model = ops.Net(nn.Sequential(nn.Tanh(), MinL1Gate()))
    path = tmp_path / "minl1.onnx"
    tc.export_training(model, path, ops.SHAPE)
    kinds = {n.op_type for n in onnx.load(str(path)).graph.node}
    assert {"ReduceMin", "ReduceL1"} <= kinds, kinds
    check_against_pytorch(cnnc, tmp_path, model, path)
