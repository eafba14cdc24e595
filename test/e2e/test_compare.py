"""cnnc.compare on a torchvision ResNet-18 (CPU reference interpreter): no
false positives (hooked outputs copied before ReLU(inplace=True) overwrites
them; f32 noise judged against PyTorch float64), a perturbed weight found,
rows worst first."""
import copy

import pytest
import torch

import cnnc
from cnnc.tools import find_library, find_tool


@pytest.fixture(autouse=True)
def build_and_cache(tmp_path, monkeypatch):
    if find_tool("cnnc") is None or find_library("libcnnc_reference.so") is None:
        pytest.skip("cnnc / libcnnc_reference.so not built")
    monkeypatch.setenv("CNNC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CNNC_ASSUME_NO_GPU", "1")


@pytest.fixture(scope="module")
def resnet18():
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10)
    g = torch.Generator().manual_seed(1)
    # Pretrained-like BN statistics, so the inference forward is not the
    # training one.
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.data = 0.1 * torch.randn(m.num_features, generator=g)
            m.running_var.data = 0.5 + torch.rand(m.num_features, generator=g)
    x = torch.randn(2, 3, 32, 32, generator=g)
    y = torch.randint(0, 10, (2,), generator=g)
    return model, x, y


def test_resnet18_has_no_false_positive(resnet18):
    model, x, y = resnet18
    report = cnnc.compare(model, x, y)
    assert report.ok, report
    rows = {d.module: d for d in report.activations}
    # bn1 is followed by ReLU(inplace=True): without the copy its hooked
    # output was the ReLU's and differed by ~1 from cnnc's BatchNorm output.
    assert rows["bn1"].rel_err < 1e-5, rows["bn1"]
    assert all(d.torch_err >= 0 for d in report.gradients)
    text = str(report)
    assert "f32-vs-f64" in text and "torch float64" in text
    # Worst first: the printed gradient rows are in decreasing error order
    # relative to what each is allowed.
    grad_lines = text.split("gradients (training mode):")[1].splitlines()[1:len(report.gradients) + 1]
    by_name = {d.name: d for d in report.gradients}
    ratios = [by_name[line.split()[0]].rel_err / by_name[line.split()[0]].allowed
              for line in grad_lines]
    assert ratios == sorted(ratios, reverse=True)


def test_resnet18_perturbed_weight_is_reported(resnet18, monkeypatch):
    model, x, y = resnet18
    # cnnc computes with a perturbed layer3.0.conv2 weight (the module keeps
    # the original): its output and everything after it must be flagged.
    real_set = cnnc.api._ReferenceBackend.set

    def perturbed(self, t, value):
        if t.name == "layer3.0.conv2.weight":
            value = value * 1.01
        return real_set(self, t, value)

    monkeypatch.setattr(cnnc.api._ReferenceBackend, "set", perturbed)
    report = cnnc.compare(model, x, y)
    assert not report.ok
    d = report.first_mismatch
    assert d.module == "layer3.0.conv2", d
    assert "first mismatch: %s (module layer3.0.conv2" % d.name in str(report)
    flagged = [r for r in report.activations if not r.ok]
    assert flagged and flagged[0].module == "layer3.0.conv2"
    # The layers before it still agree.
    assert all(r.ok for r in report.activations if r.module.startswith(("layer1", "layer2")))
