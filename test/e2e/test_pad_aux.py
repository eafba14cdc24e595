"""cnn.pad / cnn.pad_grad / slice gradients and auxiliary-classifier losses
vs torch.autograd, end to end (export -> import -> cnn-autodiff ->
reference interpreter), as in test_train_grads.py.

* PadNet: F.pad in the three modes PyTorch exports as ONNX Pad (constant
  with a value, reflect, replicate = "edge"), each between convolutions so
  that pad_grad's sums reach a parameter, a Pad + AveragePool pair
  (DenseNet/Inception) and a channel slice (ShuffleNet's split) whose
  gradient is a zero pad.
* DeconvNet: the ops the ONNX conformance cases brought in, in a training
  graph: ConvTranspose (stride, groups, output_padding, bias; cnn's
  conv2d_bwd_data, whose gradients are a conv2d and a conv2d_bwd_filter),
  a batched MatMul of two run-time tensors (a Gram matrix) and Pow with a
  per-channel exponent tensor (cnn.pow_tensor).
* AuxNet: a main and two auxiliary classifiers (GoogLeNet's training-mode
  outputs) with `--aux-loss-weight 0.3`: loss = CE(main) + 0.3 * sum CE(aux).
"""
import os
import sys

import numpy as np
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


class PadNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3)
        self.c2 = nn.Conv2d(8, 8, 3)
        self.c3 = nn.Conv2d(8, 8, 3)
        self.c4 = nn.Conv2d(4, 8, 3)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        x = torch.relu(self.c1(F.pad(x, (1, 2, 2, 1), mode="reflect")))
        x = torch.relu(self.c2(F.pad(x, (3, 0, 1, 4), mode="replicate")))
        x = F.avg_pool2d(F.pad(x, (1, 1, 1, 1), value=0.25), 3, stride=2)
        x = self.c3(F.pad(x, (0, 1, 1, 0), mode="reflect"))
        x = self.c4(x[:, 2:6])
        return self.fc(x.mean(dim=(2, 3)))


class DeconvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3)
        self.up = nn.ConvTranspose2d(8, 6, 3, stride=2, padding=1,
                                     output_padding=1, groups=2)
        self.register_buffer("p", torch.tensor([1.0, 2.0, 3.0, 1.0, 2.0, 3.0])
                             .view(1, 6, 1, 1))
        self.fc = nn.Linear(12, 10)

    def forward(self, x):
        x = torch.sigmoid(self.up(torch.relu(self.c1(x)))) ** self.p
        a = x.flatten(2)
        gram = torch.matmul(a, a.transpose(1, 2))
        return self.fc(torch.cat([x.mean(dim=(2, 3)), gram.mean(dim=2)], 1))


class AuxNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8, 10)
        self.aux1 = nn.Linear(8, 10)
        self.aux2 = nn.Linear(8, 10)

    def forward(self, x):
        a = torch.relu(self.c1(x))
        b = torch.relu(self.c2(a))
        main = self.fc(F.adaptive_avg_pool2d(b, 1).flatten(1))
        if not self.training:
            return main
        return (main, self.aux2(F.adaptive_avg_pool2d(b, 1).flatten(1)),
                self.aux1(F.adaptive_avg_pool2d(a, 1).flatten(1)))


@pytest.mark.parametrize("net,aux_weight", [(PadNet, None), (DeconvNet, None),
                                            (AuxNet, 0.3)])
def test_gradients_match_autograd(cnnc, tmp_path, net, aux_weight):
    torch.manual_seed(0)
    model = net()
    shape = (2, 3, 12, 12)
    onnx_path = tmp_path / "m.onnx"
    tc.export_training(model, onnx_path, shape)
    x, y = tc.random_batch(shape, 10, seed=1)
    opt = {"kind": "none"}
    extra = () if aux_weight is None else ("--aux-loss-weight", aux_weight)
    run = tc.cnnc_train_fixed(cnnc, onnx_path, x, y, opt, 1, tmp_path, extra=extra)
    assert len(run.losses) == 1, run.stdout

    # PyTorch in f64 with the same loss.
    m = model.double().train()
    for p in m.parameters():
        p.grad = None
    out = m(torch.from_numpy(x).double())
    yt = torch.from_numpy(y)
    loss = tc.classification_loss(out, yt, nn.CrossEntropyLoss(),
                                  aux_weight if aux_weight is not None else 0.4)
    loss.backward()
    ref = {n + ".grad": p.grad.numpy() for n, p in m.named_parameters()}
    measured, failures = tc.check_step(run.state, ref, m, opt, 1, TOL,
                                       loss=run.losses[0], ref_loss=float(loss),
                                       groups=["grads"])
    print("\nMEASURED %s loss %.2e grads %.2e" % (
        net.__name__, measured["loss"]["loss"], tc.worst(measured["grads"])[1]))
    assert not failures, "\n".join(failures)
    # The auxiliary heads get gradients (scaled by the weight).
    if aux_weight is not None:
        assert np.abs(run.state["aux1.weight.grad"]).max() > 0
