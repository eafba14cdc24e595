"""Per-module train/eval modes through cnnc.compile (frozen-BN fine-tuning),
and models with several outputs, on the CPU reference interpreter.

A BatchNorm module in eval mode normalizes with its running statistics in
PyTorch's training step, leaves them (and num_batches_tracked) unchanged and
still passes gradients to its input and affine parameters; an eval-mode
Dropout is the identity. cnnc's step must do the same: compared with
torch.optim in float64 over 3 SGD steps (momentum, weight decay).
"""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import cnnc
from cnnc.tools import find_library, find_tool


@pytest.fixture(autouse=True)
def build_and_cache(tmp_path, monkeypatch):
    if find_tool("cnnc") is None or find_library("libcnnc_reference.so") is None:
        pytest.skip("cnnc / libcnnc_reference.so not built")
    monkeypatch.setenv("CNNC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CNNC_ASSUME_NO_GPU", "1")


class Net(nn.Module):
    """conv-BN-ReLU twice (the second with a residual), a BatchNorm1d on the
    pooled features, Dropout, fc."""

    def __init__(self, classes=5):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(8)
        self.bn3 = nn.BatchNorm1d(8)
        self.drop = nn.Dropout(0.5)
        self.fc = nn.Linear(8, classes)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)) + y)
        return self.fc(self.drop(self.bn3(y.mean((2, 3)))))


def make(seed=0):
    torch.manual_seed(seed)
    model = Net()
    g = torch.Generator().manual_seed(seed + 1)
    # Running statistics and affine parameters far from their initial values,
    # as in a pretrained network: a step that used the batch statistics, or
    # updated the running ones, would not come close.
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            c = m.num_features
            m.weight.data = 1 + 0.3 * torch.randn(c, generator=g)
            m.bias.data = 0.2 * torch.randn(c, generator=g)
            m.running_mean.data = 0.3 * torch.randn(c, generator=g)
            m.running_var.data = 0.5 + torch.rand(c, generator=g)
            m.num_batches_tracked.fill_(100)
    x = torch.randn(4, 3, 8, 8, generator=g)
    y = torch.randint(0, 5, (4,), generator=g)
    return model, x, y


def rel(a, b):
    a, b = a.double(), b.double()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-12))


def check_against_torch(model, x, y, steps=3):
    """cnnc's steps vs torch.optim in float64 on a copy in the same modes."""
    ref = copy.deepcopy(model).double()
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    trainer = cnnc.compile(model, x, optimizer=opt)
    for k in range(steps):
        ref_opt.zero_grad()
        want = F.cross_entropy(ref(x.double()), y)
        want.backward()
        ref_opt.step()
        got = trainer.step(x, y)
        assert abs(got - want.item()) <= 1e-5 * abs(want.item()), (k, got, want.item())
    sd, want_sd = trainer.state_dict(), ref.state_dict()
    for name, v in want_sd.items():
        if name.endswith("num_batches_tracked"):
            assert int(sd[name]) == int(v), (name, int(sd[name]), int(v))
        else:
            assert rel(sd[name], v) < 1e-4, (name, rel(sd[name], v))
    return trainer, sd


def test_some_batch_norms_in_eval_mode_match_torch():
    model, x, y = make()
    model.bn1.eval()
    model.bn3.eval()
    model.drop.p = 0.0  # cnnc draws its own dropout masks
    before = {k: v.clone() for k, v in model.state_dict().items()}
    trainer, sd = check_against_torch(model, x, y)
    assert trainer.info["eval_batch_norms"] == ["bn1", "bn3"]
    # The frozen modules' statistics are exactly as they were (also after
    # sync_to); the training-mode one's moved; their affine parameters trained.
    for name in ("bn1", "bn3"):
        for buf in ("running_mean", "running_var", "num_batches_tracked"):
            assert torch.equal(sd["%s.%s" % (name, buf)], before["%s.%s" % (name, buf)])
        assert rel(sd[name + ".weight"], before[name + ".weight"]) > 1e-3
    assert rel(sd["bn2.running_mean"], before["bn2.running_mean"]) > 1e-2
    assert int(sd["bn2.num_batches_tracked"]) == 103
    synced = trainer.sync_to(copy.deepcopy(model))
    assert torch.equal(synced.bn1.running_var, before["bn1.running_var"])
    assert not synced.bn1.training and synced.bn2.training


def test_whole_model_in_eval_mode_matches_torch():
    """What PyTorch's loop computes for a model in eval(): every BatchNorm
    with its running statistics, Dropout (p = 0.5 here) off."""
    model, x, y = make(seed=1)
    model.eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    trainer, sd = check_against_torch(model, x, y)
    assert trainer.info["eval_batch_norms"] == ["bn1", "bn2", "bn3"]
    for name, v in before.items():
        if "running" in name or "tracked" in name:
            assert torch.equal(sd[name], v), name
    assert not model.training and not model.bn2.training  # modes left alone


def test_modes_are_part_of_the_cache_key():
    model, x, y = make()
    model.drop.p = 0.0
    a = cnnc.compile(model, x)
    model.bn2.eval()
    b = cnnc.compile(model, x)
    assert not b.cache_hit and a.artifact_dir != b.artifact_dir
    model.bn2.train()
    c = cnnc.compile(model, x)
    assert c.cache_hit and c.artifact_dir == a.artifact_dir
    # The two steps differ: batch statistics vs running statistics.
    assert abs(a.step(x, y) - b.step(x, y)) > 1e-3


def test_eval_batch_norm_without_running_statistics_is_an_error():
    model, x, _ = make()
    model.bn2 = nn.BatchNorm2d(8, track_running_stats=False)
    model.bn2.eval()
    with pytest.raises(cnnc.CompileError) as e:
        cnnc.compile(model, x)
    msg = str(e.value)
    assert "'bn2'" in msg and "track_running_stats=False" in msg and "eval mode" in msg
    model.bn2.train()  # in training mode it normalizes with the batch statistics
    cnnc.compile(model, x)


class TwoOutputs(nn.Module):
    """Returns (logits, features): not an auxiliary classifier."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 5, 3, padding=1)
        self.fc = nn.Linear(5, 5)

    def forward(self, x):
        f = self.conv(x).mean((2, 3))
        return self.fc(f), f


def test_tuple_output_needs_aux_loss_weight():
    torch.manual_seed(0)
    model = TwoOutputs()
    x = torch.randn(4, 3, 8, 8)
    y = torch.randint(0, 5, (4,))
    with pytest.raises(cnnc.CompileError) as e:
        cnnc.compile(model, x)
    msg = str(e.value)
    assert "aux_loss_weight=" in msg and "2 outputs" in msg
    assert "CE(logits) + aux_loss_weight" in msg
    # Given, the loss is what it says.
    trainer = cnnc.compile(model, x, aux_loss_weight=0.3)
    with torch.no_grad():
        a, b = model(x)
        want = F.cross_entropy(a, y) + 0.3 * F.cross_entropy(b, y)
    assert abs(trainer.step(x, y) - want.item()) < 1e-5


def test_compare_runs_the_backward_in_the_step_modes():
    """cnnc.compare's PyTorch backward keeps the eval-mode BatchNorms frozen,
    as the step it compares with does (in training mode it would differ)."""
    model, x, y = make()
    model.bn1.eval()
    model.drop.p = 0.0
    report = cnnc.compare(model, x, y)
    assert report.ok, report
    assert not model.bn1.training and model.bn2.training  # the module is untouched
