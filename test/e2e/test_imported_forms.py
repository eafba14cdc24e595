"""Ops the importer composes from existing cnn ops (session 28, for the ONNX
conformance set), trained as PyTorch trains them, on the CPU reference.

* LRN (AlexNet, GoogLeNet): x / (k + alpha * avg_pool(x^2))^beta over a
  size x 1 window of the channels. PyTorch's export writes
  nn.LocalResponseNorm as its parts, so an ONNX LRN node is written by hand
  (x * w -> LRN -> N x 54 logits) and the gradient of w from the imported
  step is compared with F.local_response_norm's in float64 (odd sizes:
  PyTorch's channel window is ONNX's there);
* DepthToSpace (CRD), what nn.PixelShuffle exports, as test_new_ops.py
  checks its nets: step 1 with `--optimizer none` (the loss and every
  gradient against torch.autograd in float64), then 3 SGD steps (each loss
  and the parameters after them).
"""
import subprocess
import tempfile
import os
import sys

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
import torch.nn as nn  # noqa: E402

from cnnc import train_check as tc  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

TOL = 1e-4
SHAPE = (4, 3, 12, 12)
CLASSES = 10
SGD = {"kind": "sgd", "lr": 0.05, "momentum": 0.9}


class Net(nn.Module):
    """conv(3 -> 16) -> `body` (-> C channels) -> mean over H, W -> linear."""

    def __init__(self, body, c=16):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1)
        self.body = body
        self.fc = nn.Linear(c, CLASSES)

    def forward(self, x):
        return self.fc(self.body(self.conv(x)).mean(dim=(2, 3)))


@pytest.mark.parametrize("size,alpha,beta,bias", [(5, 0.05, 0.75, 2.0),
                                                 (3, 0.5, 0.5, 1.0),
                                                 (1, 0.3, 0.6, 1.5)])
def test_lrn_gradient(cnnc, size, alpha, beta, bias):
    from onnx import helper, numpy_helper
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from test_elementwise_ops import rel, train_step_grads  # noqa: E402
    rng = np.random.default_rng(7)
    x = rng.normal(size=(2, 6, 3, 3)).astype(np.float32)
    w = rng.normal(size=(1, 6, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Mul", ["x", "w"], ["h"], name="mul"),
             helper.make_node("LRN", ["h"], ["n"], name="lrn", size=size,
                              alpha=alpha, beta=beta, bias=bias),
             helper.make_node("Reshape", ["n", "shape"], ["y"], name="flat")]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT,
                                       [2, 6, 3, 3])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"),
         numpy_helper.from_array(np.array([2, 54], np.int64), "shape")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    labels = np.array([5, 40])
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "lrn.onnx")
        onnx.save(model, path)
        forward = subprocess.run([cnnc, path], check=True, capture_output=True,
                                 text=True).stdout
    assert "cnn.avg_pool2d" in forward and "cnn.pow" in forward, forward
    loss, dw = train_step_grads(forward, x, w, labels)
    tw = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    h = torch.tensor(x, dtype=torch.float64) * tw
    n = torch.nn.functional.local_response_norm(h, size, alpha, beta, bias)
    ref = torch.nn.functional.cross_entropy(n.reshape(2, 54),
                                            torch.tensor(labels))
    ref.backward()
    assert rel(loss, ref.item()) < 2e-5, (loss, ref.item())
    assert rel(dw, tw.grad.numpy()) < 2e-5


CASES = {
    # (model, the ONNX op the export must contain)
    "pixel_shuffle": (lambda: Net(nn.Sequential(
        nn.PixelShuffle(2), nn.Conv2d(4, 8, 3, padding=1), nn.ReLU()), c=8),
        "DepthToSpace"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_matches_pytorch(cnnc, tmp_path, case):
    torch.manual_seed(0)
    build, op_type = CASES[case]
    model = build()
    onnx_path = tmp_path / (case + ".onnx")
    tc.export_training(model, onnx_path, SHAPE)
    ops = {n.op_type for n in onnx.load(str(onnx_path)).graph.node}
    assert op_type in ops, sorted(ops)
    x, y = tc.random_batch(SHAPE, CLASSES, seed=1)

    none = {"kind": "none"}
    (tmp_path / "grads").mkdir()
    run = tc.cnnc_train_fixed(cnnc, onnx_path, x, y, none, 1, tmp_path / "grads")
    ref_loss, ref = tc.torch_step_from(model, {}, x, y, none, 1)
    measured, failures = tc.check_step(run.state, ref, model, none, 1, TOL,
                                       loss=run.losses[0], ref_loss=ref_loss,
                                       groups=["grads"])

    (tmp_path / "sgd").mkdir()
    run3 = tc.cnnc_train_fixed(cnnc, onnx_path, x, y, SGD, 3, tmp_path / "sgd")
    losses, ref3 = tc.torch_train(model, x, y, SGD, 3)
    assert len(run3.losses) == 3, run3.stdout
    for k, (a, b) in enumerate(zip(run3.losses, losses), 1):
        if abs(a - b) > TOL * abs(b):
            failures.append("SGD step %d loss %.7g vs torch %.7g" % (k, a, b))
    _, f3 = tc.check_step(run3.state, ref3, model, SGD, 3, TOL,
                          groups=["params"])
    failures += f3
    gn, ge = tc.worst(measured["grads"])
    print("\nMEASURED %-14s grads %.2e (worst %s), 3 SGD step losses %s" %
          (case, ge, gn, " ".join("%.2e" % (abs(a - b) / abs(b))
                                  for a, b in zip(run3.losses, losses))))
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("size", [2, 4])
def test_lrn_even_size_window_is_onnx(cnnc, size):
    """For an even size ONNX's channel window is [c - (size/2 - 1), c +
    size/2] (PyTorch's is the mirror image): forward on the reference
    against ONNX's formula in numpy."""
    from onnx import helper
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 7, 2, 3)).astype(np.float32)
    alpha, beta, bias = 0.4, 0.75, 1.5
    node = helper.make_node("LRN", ["x"], ["y"], name="lrn", size=size,
                            alpha=alpha, beta=beta, bias=bias)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    sq = np.zeros(x.shape, np.float64)
    c = x.shape[1]
    for ch in range(c):
        lo = max(0, ch - (size - 1) // 2)
        hi = min(c - 1, ch + size // 2)
        sq[:, ch] = (x[:, lo:hi + 1].astype(np.float64) ** 2).sum(axis=1)
    ref = x / (bias + alpha / size * sq) ** beta
    with tempfile.TemporaryDirectory() as d:
        onnx.save(model, os.path.join(d, "m.onnx"))
        np.save(os.path.join(d, "x.npy"), x)
        subprocess.run([cnnc, os.path.join(d, "m.onnx"), "--run-reference",
                        "--input", os.path.join(d, "x.npy"), "--output",
                        os.path.join(d, "y.npy")], check=True)
        y = np.load(os.path.join(d, "y.npy"))
    assert np.allclose(y, ref, rtol=1e-5, atol=1e-6), np.abs(y - ref).max()
