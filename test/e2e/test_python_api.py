"""The Python entry (cnnc.compile / Trainer / compare) against torch.optim.

Runs on the CPU reference interpreter (libcnnc_reference.so, in process), the
path every machine without a GPU takes; test/gpu/check_python_api.py runs the
same API on the GPU. Each compile uses a fresh cache directory unless the test
is about the cache.
"""
import copy
import os
import shutil
import subprocess
import sys
import time
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import cnnc
import cnnc.api
import cnnc.export
from cnnc.export import SimpleCNN
from cnnc.tools import find_library, find_tool

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True)
def build_and_cache(tmp_path, monkeypatch):
    if find_tool("cnnc") is None or find_library("libcnnc_reference.so") is None:
        pytest.skip("cnnc / libcnnc_reference.so not built")
    monkeypatch.setenv("CNNC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CNNC_ASSUME_NO_GPU", "1")
    return tmp_path


class BasicBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + x)


class TinyResNet(nn.Module):
    """A stem (conv-BN-ReLU), one residual basic block, global pooling, fc."""

    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.block = BasicBlock(8)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, classes)

    def forward(self, x):
        x = self.block(F.relu(self.bn(self.stem(x))))
        return self.fc(torch.flatten(self.pool(x), 1))


MODELS = {"simplecnn": (SimpleCNN, (4, 3, 32, 32)), "resnet_block": (TinyResNet, (4, 3, 16, 16))}


def make(name, seed=0):
    torch.manual_seed(seed)
    cls, shape = MODELS[name]
    model = cls()
    x = torch.randn(*shape)
    y = torch.randint(0, 10, (shape[0],))
    return model, x, y


def torch_step(model, opt, x, y, label_smoothing=0.0):
    model.train()
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y, label_smoothing=label_smoothing)
    loss.backward()
    opt.step()
    return loss.item()


def max_rel(a, b):
    a, b = a.double(), b.double()
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-6)).item()


def assert_state_close(trainer, model, tol=1e-4):
    sd = trainer.state_dict()
    ref = model.state_dict()
    assert list(sd) == list(ref)
    for k, v in ref.items():
        if v.is_floating_point():
            err = max_rel(sd[k], v)
            assert err < tol, "%s: relative error %.3g" % (k, err)
        else:
            assert torch.equal(sd[k], v), k


OPTIMIZERS = {
    "sgd_momentum": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=5e-4),
    "sgd_nesterov": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True),
    "adamw": lambda p: torch.optim.AdamW(p, lr=1e-3, weight_decay=1e-2),
    "adam": lambda p: torch.optim.Adam(p, lr=1e-3, betas=(0.8, 0.99), eps=1e-7,
                                       weight_decay=1e-4),
}


def adam_well_conditioned(opt64, model64):
    """Per parameter name: the elements where Adam's update is well
    conditioned (as cnnc.train_check.adam_mask): where sqrt(v_hat) is near
    eps an update amplifies the gradient's f32 rounding error by up to
    lr / (4 eps), so PyTorch's own f32 run lies 1e-2 from f64 there (SimpleCNN's
    fc1). Kept: sqrt(v_hat) >= 100 eps, or v == 0 (no gradient yet)."""
    group = opt64.param_groups[0]
    b2, eps = group["betas"][1], group["eps"]
    out = {}
    for name, p in model64.named_parameters():
        st = opt64.state[p]
        v = st["exp_avg_sq"] / (1 - b2 ** int(st["step"]))
        out[name] = (v.sqrt() >= 100 * eps) | (st["exp_avg_sq"] == 0)
    return out


# (model, seed): seed 0 of the residual block puts a pre-ReLU value at 2e-7
# in step 2, where f32 rounding decides the ReLU mask (cnnc.compare showed
# it); seed 1 has no such kink, so any difference is cnnc's.
SEEDS = {"simplecnn": 0, "resnet_block": 1}


@pytest.mark.parametrize("model_name", sorted(MODELS))
@pytest.mark.parametrize("opt_name", ["sgd_momentum", "adamw"])
def test_three_steps_match_torch_optim(model_name, opt_name):
    """Losses and every parameter/buffer after 3 steps vs torch.optim, in
    float64 (the exact answer, so the error measured is cnnc's f32 error)."""
    model, x, y = make(model_name, SEEDS[model_name])
    ref = copy.deepcopy(model).double()
    trainer = cnnc.compile(model, x, optimizer=OPTIMIZERS[opt_name](model.parameters()))
    assert trainer.backend == "reference"
    ref_opt = OPTIMIZERS[opt_name](ref.parameters())
    for k in range(3):
        xk = x + 0.1 * k  # a different batch each step
        loss = trainer.step(xk, y)
        ref_loss = torch_step(ref, ref_opt, xk.double(), y)
        assert isinstance(loss, float)
        assert abs(loss - ref_loss) <= 1e-4 * max(1.0, abs(ref_loss)), (k, loss, ref_loss)
    sd, ref_sd = trainer.state_dict(), ref.state_dict()
    assert list(sd) == list(ref_sd)
    mask = adam_well_conditioned(ref_opt, ref) if opt_name == "adamw" else {}
    lr = ref_opt.param_groups[0]["lr"]
    for name, v in ref_sd.items():
        if not v.is_floating_point():
            assert torch.equal(sd[name], v), name
            continue
        got = sd[name].double()
        if name in mask:
            # Ill-conditioned elements: within the bound of Adam's steps.
            assert ((got - v).abs()[~mask[name]] <= 2 * 3 * lr).all(), name
            got, v = got[mask[name]], v[mask[name]]
            if v.numel() == 0:
                continue
        err = max_rel(got, v)
        assert err < 1e-4, "%s: relative error %.3g" % (name, err)
    # The module itself is untouched until sync_to.
    fc = "fc1" if model_name == "simplecnn" else "fc"
    assert not torch.equal(model.state_dict()[fc + ".weight"], sd[fc + ".weight"])


@pytest.mark.parametrize("opt_name", ["sgd_nesterov", "adam"])
def test_other_optimizer_settings(opt_name):
    """Nesterov, Adam with its own betas/eps/weight decay (on the residual
    block, where Adam's update is well conditioned everywhere)."""
    model, x, y = make("resnet_block", seed=1)
    ref = copy.deepcopy(model)
    trainer = cnnc.compile(model, x, optimizer=OPTIMIZERS[opt_name](model.parameters()))
    ref_opt = OPTIMIZERS[opt_name](ref.parameters())
    for _ in range(2):
        trainer.step(x, y)
        torch_step(ref, ref_opt, x, y)
    assert_state_close(trainer, ref)


def test_label_smoothing():
    model, x, y = make("simplecnn", seed=2)
    ref = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    trainer = cnnc.compile(model, x, optimizer=opt, label_smoothing=0.1)
    loss = trainer.step(x, y)
    ref_loss = torch_step(ref, torch.optim.SGD(ref.parameters(), lr=0.1), x, y,
                          label_smoothing=0.1)
    assert abs(loss - ref_loss) < 1e-5
    assert_state_close(trainer, ref)


def test_eval_matches_model_eval():
    model, x, y = make("resnet_block")
    ref = copy.deepcopy(model)
    trainer = cnnc.compile(model, x, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for _ in range(2):  # BN running statistics move away from their init
        trainer.step(x, y)
        torch_step(ref, ref_opt, x, y)
    logits = trainer.eval(x)
    ref.eval()
    with torch.no_grad():
        expected = ref(x)
    assert logits.shape == expected.shape
    assert max_rel(logits, expected) < 1e-4
    # Inference mode is not training mode: the batch-statistics output differs.
    ref.train()
    with torch.no_grad():
        assert max_rel(logits, ref(x)) > 1e-3


def test_state_dict_names_and_num_batches_tracked():
    model, x, y = make("resnet_block")
    trainer = cnnc.compile(model, x, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    sd = trainer.state_dict()
    assert list(sd) == list(model.state_dict())
    for k, v in model.state_dict().items():
        assert sd[k].dtype == v.dtype and sd[k].shape == v.shape, k
    trainer.step(x, y)
    trainer.step(x, y)
    sd = trainer.state_dict()
    assert int(sd["bn.num_batches_tracked"]) == 2
    assert int(sd["block.bn2.num_batches_tracked"]) == 2


def test_load_state_dict_and_sync_to_round_trip():
    model, x, y = make("simplecnn")
    ref = copy.deepcopy(model)
    trainer = cnnc.compile(model, x, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    trainer.step(x, y)
    trainer.sync_to(model)
    for k, v in trainer.state_dict().items():
        assert torch.equal(model.state_dict()[k], v), k
    assert not torch.equal(model.fc2.weight, ref.fc2.weight)
    # Back to the initial weights: the next step is torch's first step.
    trainer.load_state_dict(ref.state_dict())
    for k, v in trainer.state_dict().items():
        assert torch.equal(ref.state_dict()[k], v), k
    # strict: a missing name is an error
    partial = dict(ref.state_dict())
    partial.pop("fc2.bias")
    with pytest.raises(KeyError, match="fc2.bias"):
        trainer.load_state_dict(partial)
    with pytest.raises(ValueError, match="shape"):
        bad = dict(ref.state_dict())
        bad["fc2.bias"] = torch.zeros(3)
        trainer.load_state_dict(bad)


def test_compile_takes_the_models_current_weights():
    """A cache hit must not bring back the weights of the first compile."""
    model, x, y = make("simplecnn")
    cnnc.compile(model, x, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    with torch.no_grad():
        model.fc2.bias.fill_(0.5)
    trainer = cnnc.compile(model, x, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    assert trainer.cache_hit
    assert torch.equal(trainer.state_dict()["fc2.bias"], torch.full((10,), 0.5))


@pytest.mark.parametrize("opt_name", ["sgd_momentum", "adam"])
def test_compile_continues_the_optimizers_state(opt_name):
    """Compiled after torch.optim took a step: the momentum buffers (Adam's
    moments and step count) carry over, so the next step is torch's."""
    model, x, y = make("resnet_block", seed=1)
    opt = OPTIMIZERS[opt_name](model.parameters())
    torch_step(model, opt, x, y)
    ref = copy.deepcopy(model).double()
    ref_opt = OPTIMIZERS[opt_name](ref.parameters())
    ref_opt.load_state_dict(opt.state_dict())
    trainer = cnnc.compile(model, x, optimizer=opt)
    assert trainer.steps == 1  # SGD keeps no count: "not the first step"
    loss = trainer.step(x + 0.1, y)
    ref_loss = torch_step(ref, ref_opt, (x + 0.1).double(), y)
    assert abs(loss - ref_loss) < 1e-4
    sd = trainer.state_dict()
    for k, v in ref.state_dict().items():
        if v.is_floating_point():
            assert max_rel(sd[k], v) < 1e-4, k
    state = trainer.optimizer_state()
    key = "fc.weight." + ("momentum_buffer" if opt_name == "sgd_momentum" else "exp_avg")
    assert key in state


def test_set_lr_changes_the_update():
    model, x, y = make("simplecnn")
    ref = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    trainer = cnnc.compile(model, x, optimizer=opt)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    trainer.set_lr(0.0)  # no update at all
    trainer.step(x, y)
    for k, v in trainer.state_dict().items():
        if k.endswith("weight"):
            assert torch.equal(v, model.state_dict()[k]), k
    for g in ref_opt.param_groups:
        g["lr"] = 0.0
    torch_step(ref, ref_opt, x, y)  # keeps the momentum buffers in step
    trainer.set_lr(0.03)
    for g in ref_opt.param_groups:
        g["lr"] = 0.03
    trainer.step(x, y)
    torch_step(ref, ref_opt, x, y)
    assert_state_close(trainer, ref)
    # A torch scheduler on the optimizer drives the trainer too.
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    ref_sched = torch.optim.lr_scheduler.StepLR(ref_opt, step_size=1, gamma=0.5)
    with warnings.catch_warnings():  # "scheduler.step() before optimizer.step()"
        warnings.simplefilter("ignore")
        sched.step()
        ref_sched.step()
    assert trainer.current_lr() == pytest.approx(0.015)
    trainer.step(x, y)
    torch_step(ref, ref_opt, x, y)
    assert_state_close(trainer, ref)
    with pytest.raises(ValueError):
        trainer.set_lr(-1.0)


def test_cache_hit_on_second_compile(monkeypatch):
    model, x, y = make("resnet_block")
    t0 = time.time()
    first = cnnc.compile(model, x, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    cold = time.time() - t0
    assert not first.cache_hit
    assert os.path.isdir(first.artifact_dir)

    def no_export(*args, **kwargs):
        raise AssertionError("a cache hit must not export again")

    monkeypatch.setattr(cnnc.export, "export_for_training", no_export)
    t0 = time.time()
    second = cnnc.compile(model, x, optimizer=torch.optim.SGD(model.parameters(), lr=0.5))
    warm = time.time() - t0
    assert second.cache_hit and second.artifact_dir == first.artifact_dir
    assert warm < cold
    # The learning rate is not part of the key; everything baked in is (a
    # miss exports again, which the patched exporter turns into an error).
    with pytest.raises(cnnc.CompileError, match="must not export"):
        cnnc.compile(model, x, optimizer=torch.optim.SGD(model.parameters(), lr=0.1,
                                                         momentum=0.5))
    with pytest.raises(cnnc.CompileError, match="must not export"):
        cnnc.compile(model, torch.randn(2, 3, 16, 16),
                     optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    with pytest.raises(cnnc.CompileError, match="must not export"):
        cnnc.compile(model, x, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                     cache=False)


def test_world_size_from_the_launcher_and_cpu_refusal(monkeypatch):
    """Under torchrun (WORLD_SIZE > 1) the step is data parallel; the CPU
    reference step cannot be, and says so before exporting anything."""
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert cnnc.world_size() == 1
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert cnnc.world_size() == 2
    model, x, _ = make("simplecnn")
    with pytest.raises(cnnc.CompileError, match=r"world size 2 .*needs the GPU step"):
        cnnc.compile(model, x, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                     device="cpu", cache=False)
    monkeypatch.setenv("WORLD_SIZE", "two")
    with pytest.raises(cnnc.CompileError, match="WORLD_SIZE='two' is not a number"):
        cnnc.world_size()


def gpu_step_source(model, x, root, **extra_flags):
    """The CUDA source of the GPU step library compile would build for
    `model` (SGD, fp16 NHWC, sm_90a, plus `extra_flags`), built into `root`."""
    flags, _ = cnnc.optimizer_flags(torch.optim.SGD(model.parameters(), lr=0.1), model)
    flags.update({"label-smoothing": 0.0, "precision": "fp16", "layout": "nhwc",
                  "arch": "sm_90a"}, **extra_flags)
    os.makedirs(str(root), exist_ok=True)
    artifact = cnnc.api._build(model, x, flags, "cuda", find_tool("cnnc"), ["test"], str(root),
                               verbose=False)
    with open(os.path.join(artifact, "libstep.so.cu")) as f:
        return f.read()


@pytest.mark.skipif(not os.path.exists("/usr/local/cuda/bin/nvcc") and not shutil.which("nvcc"),
                    reason="nvcc not installed")
def test_gpu_step_library_under_torchrun_all_reduces(build_and_cache):
    """What compile builds under torchrun with 2 ranks: the step library with
    its NCCL all-reduces (cnnc --gpus 2) and the C API. (Running it needs two
    GPUs: bench/device-dp.sh part E c.)"""
    model, x, _ = make("simplecnn")
    source = gpu_step_source(model, x, build_and_cache / "cache-dp", gpus=2)
    assert "cnnrt::dist::allReduce" in source and "&cnnrt::dist::kHooks" in source


@pytest.mark.skipif(not os.path.exists("/usr/local/cuda/bin/nvcc") and not shutil.which("nvcc"),
                    reason="nvcc not installed")
def test_sync_batch_norm_model_under_torchrun(build_and_cache, monkeypatch):
    """A model with torch.nn.SyncBatchNorm under torchrun: compile exports it
    (SyncBatchNorm as plain BatchNorm, same names) and builds the step with
    --sync-bn, whose BatchNorm statistics are all-reduced (the forward's mean
    and variance, the backward's sums: 3 collectives before the gradients')."""
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1),
                                torch.nn.SyncBatchNorm(8), torch.nn.ReLU(),
                                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                torch.nn.Linear(8, 10))
    x = torch.randn(4, 3, 8, 8)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    monkeypatch.setenv("WORLD_SIZE", "2")
    built = {}

    def fake_build(m, ex, flags, kind, *rest):
        built["flags"] = dict(flags)
        raise cnnc.CompileError("stop here")
    monkeypatch.setattr(cnnc.api, "_build", fake_build)
    monkeypatch.setattr(cnnc.api, "_has_gpu", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: (9, 0))
    with pytest.raises(cnnc.CompileError, match="stop here"):
        cnnc.compile(model, x, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                     cache=False)
    assert built["flags"].get("sync-bn") is True and built["flags"]["gpus"] == 2
    monkeypatch.undo()
    source = gpu_step_source(model, x, build_and_cache / "cache-syncbn", gpus=2,
                             **{"sync-bn": True})
    # The BN's forward collective comes first: bucket 0, the rank's sum and
    # sum of squares of its 8 channels added up over the ranks; the
    # backward's sums of the gradient next.
    assert "all-reduce bucket 0: 2 tensors, 64 bytes (sum)" in source, source[:2000]
    assert "all-reduce bucket 1: 2 tensors, 64 bytes (sum)" in source
    # The module itself is untouched (still SyncBatchNorm, same state).
    assert isinstance(model[1], torch.nn.SyncBatchNorm)
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_sync_batch_norm_model_on_one_process_is_batch_norm(monkeypatch):
    """World size 1: SyncBatchNorm is BatchNorm (as in PyTorch); the CPU
    step of a SyncBatchNorm model gives the BatchNorm model's losses."""
    monkeypatch.delenv("WORLD_SIZE", raising=False)

    def net(bn):
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), bn(8),
                                   torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                                   torch.nn.Flatten(), torch.nn.Linear(8, 10))
    torch.manual_seed(1)
    x, y = torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,))
    losses = []
    for bn in (torch.nn.BatchNorm2d, torch.nn.SyncBatchNorm):
        m = net(bn)
        t = cnnc.compile(m, x, optimizer=torch.optim.SGD(m.parameters(), lr=0.1),
                         device="cpu", cache=False)
        losses.append([float(t.step(x, y)) for _ in range(3)])
    assert losses[0] == losses[1], losses


def test_decoupled_weight_decay_key_of_newer_torch():
    """torch >= 2.6 puts decoupled_weight_decay in Adam's and AdamW's groups
    (found on the GPU machine's torch 2.11): True means AdamW's update."""
    model, _, _ = make("simplecnn")
    for cls, value, kind in [(torch.optim.Adam, True, "adamw"),
                             (torch.optim.Adam, False, "adam"),
                             (torch.optim.AdamW, True, "adamw")]:
        opt = cls(model.parameters(), lr=1e-3, weight_decay=0.01)
        opt.param_groups[0]["decoupled_weight_decay"] = value
        flags, _ = cnnc.optimizer_flags(opt, model)
        assert flags["optimizer"] == kind and flags["weight-decay"] == 0.01


def test_unsupported_optimizer_settings_are_rejected():
    model, x, _ = make("simplecnn")
    P = model.parameters
    cases = [
        (torch.optim.Adam(P(), amsgrad=True), "amsgrad"),
        (torch.optim.SGD(P(), lr=0.1, maximize=True), "maximize"),
        (torch.optim.RMSprop(P(), lr=0.1), "RMSprop"),
        (torch.optim.SGD(list(model.fc2.parameters()), lr=0.1), "not in the optimizer"),
    ]
    for opt, message in cases:
        with pytest.raises(cnnc.UnsupportedOptimizerError, match=message):
            cnnc.compile(model, x, optimizer=opt)
    # Param groups and frozen parameters train (test_finetune_optim.py).


def test_wrong_inputs_are_clear_errors():
    model, x, y = make("simplecnn")
    trainer = cnnc.compile(model, x, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    with pytest.raises(ValueError, match=r"input of shape \(3, 3, 32, 32\).*compiled for "
                                         r"\(4, 3, 32, 32\).*drop_last"):
        trainer.step(x[:3], y[:3])
    with pytest.raises(ValueError, match="input of shape"):
        trainer.eval(torch.randn(4, 3, 28, 28))
    with pytest.raises(ValueError, match="labels of shape"):
        trainer.step(x, y[:2])
    with pytest.raises(TypeError, match="integer"):
        trainer.step(x, y.float())
    with pytest.raises(ValueError, match="not a class"):
        trainer.step(x, torch.tensor([0, 1, 10, 2]))
    with pytest.raises(TypeError, match="floating-point"):
        trainer.step(torch.zeros(4, 3, 32, 32, dtype=torch.int64), y)
    with pytest.raises(ValueError, match="4-D"):
        cnnc.compile(model, torch.randn(4, 3 * 32 * 32))
    with pytest.raises(TypeError, match="nn.Module"):
        cnnc.compile(lambda t: t, x)
    # The weights are untouched by the failed calls.
    assert trainer.steps == 0


def test_cuda_device_without_gpu_is_a_clear_error():
    model, x, _ = make("simplecnn")
    with pytest.raises(cnnc.CompileError, match="no GPU"):
        cnnc.compile(model, x, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                     device="cuda")


@pytest.mark.skipif(not os.path.exists("/usr/local/cuda/bin/nvcc") and not shutil.which("nvcc"),
                    reason="nvcc not installed")
def test_gpu_step_library_builds_with_the_c_api(build_and_cache):
    """The GPU path's build (what compile does on a GPU machine): cnnc --emit
    lib with the optimizer's flags; the library exports every function the
    Python side binds with ctypes. (Running it needs a GPU:
    test/gpu/check_python_api.py.)"""
    import ctypes
    model, x, _ = make("simplecnn")
    flags, _ = cnnc.optimizer_flags(torch.optim.AdamW(model.parameters(), lr=1e-3), model)
    flags.update({"label-smoothing": 0.0, "precision": "fp16", "layout": "nhwc",
                  "arch": "sm_80"})
    root = str(build_and_cache / "cache")
    os.makedirs(root, exist_ok=True)
    artifact = cnnc.api._build(model, x, flags, "cuda", find_tool("cnnc"), ["test"], root,
                               verbose=False)
    lib_path = os.path.join(artifact, "libstep.so")
    assert os.path.exists(lib_path) and os.path.exists(lib_path + ".cnnw")
    with open(lib_path + ".cu") as f:
        source = f.read()
    assert "cnnrt_model_spec(void)" in source and "int main(" not in source
    assert "exp_avg_sq" in source  # AdamW's state: the optimizer flags arrived
    lib = ctypes.CDLL(lib_path)
    for name in cnnc.api._cuda_api_signatures(ctypes):
        assert hasattr(lib, name), name


def test_compare_reports_layers(monkeypatch):
    model, x, y = make("resnet_block")
    report = cnnc.compare(model, x, y)
    assert report.ok, report
    by_module = {r.module: r.name for r in report.activations}
    assert by_module["stem"] == "/stem/Conv"
    assert by_module["block.conv2"] == "/block/conv2/Conv"
    assert by_module["block"] == "/block/Relu_1"  # the block's functional add + ReLU
    assert by_module["fc"] == "/fc/Gemm"
    assert {r.name for r in report.gradients} == {n for n, _ in model.named_parameters()}
    assert report.first_mismatch is None
    # A tolerance no f32 computation meets reports a first mismatch (without
    # the allowance for PyTorch f32's own error against float64).
    strict = cnnc.compare(model, x, y, rtol=1e-12, noise_factor=0)
    assert not strict.ok and strict.first_mismatch is not None
    assert "first mismatch" in str(strict)
    # An error in one layer's output is reported at that layer (the ones
    # before it still agree).
    real_trace = cnnc.api._ReferenceBackend.trace

    def perturbed(self, inp):
        return [(n, op, v + 1e-2 * v.abs().max() if n == "/block/conv2/Conv" else v)
                for n, op, v in real_trace(self, inp)]

    monkeypatch.setattr(cnnc.api._ReferenceBackend, "trace", perturbed)
    bad = cnnc.compare(model, x, y)
    assert not bad.ok
    assert (bad.first_mismatch.name, bad.first_mismatch.module) == ("/block/conv2/Conv",
                                                                    "block.conv2")
    assert "first mismatch: /block/conv2/Conv (module block.conv2" in str(bad)


def test_pip_install_into_a_venv(tmp_path):
    """`pip install --no-deps --no-build-isolation ./python` into a
    --system-site-packages venv, offline; the installed package finds the
    build it was installed from without any environment variable."""
    src = tmp_path / "python"
    shutil.copytree(os.path.join(REPO, "python"), src,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__",
                                                  "_install_config.py"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True)
    build_dir = os.path.dirname(os.path.dirname(find_tool("cnnc")))
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "CNNC", "CNNC_BUILD_DIR")}
    env["PIP_NO_INDEX"] = "1"
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-deps",
                    "--no-build-isolation", str(src)], check=True, env=dict(env, CNNC_BUILD_DIR=build_dir),
                   cwd=str(tmp_path))
    code = ("import cnnc, cnnc.tools as t, torch; "
            "print(cnnc.__file__); print(t.find_tool('cnnc')); "
            "print(t.find_library('libcnnc_reference.so')); "
            "from cnnc.export import SimpleCNN; m = SimpleCNN(); x = torch.randn(2, 3, 32, 32); "
            "tr = cnnc.compile(m, x, optimizer=torch.optim.SGD(m.parameters(), lr=0.1)); "
            "print(tr.step(x, torch.tensor([1, 2])))")
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code], env=env, cwd=str(tmp_path),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split("\n")
    assert lines[0].startswith(str(venv)), lines
    assert os.path.samefile(lines[1], find_tool("cnnc"))
    assert lines[2].endswith("libcnnc_reference.so")
    assert float(lines[3]) > 0


def test_remat_choice_reaches_the_gpu_build(monkeypatch):
    """compile(remat=...) chooses what the GPU step recomputes: None leaves
    cnnc's default, False/True/MiB become --remat-convs=false, --remat and
    --remat-mb N (and are part of the cache key); other values are a clear
    ValueError before anything is built."""
    model, x, _ = make("simplecnn")
    built = []

    def fake_build(m, ex, flags, kind, *rest):
        built.append(dict(flags))
        raise cnnc.CompileError("stop here")
    monkeypatch.setattr(cnnc.api, "_build", fake_build)
    monkeypatch.setattr(cnnc.api, "_has_gpu", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: (9, 0))
    for remat in (None, False, True, 300):
        with pytest.raises(cnnc.CompileError, match="stop here"):
            cnnc.compile(model, x, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                         remat=remat, cache=False)
    assert "remat" not in built[0]
    assert [b["remat"] for b in built[1:]] == [False, True, 300]
    assert [cnnc.api._remat_args(b.get("remat")) for b in built] == [
        [], ["--remat-convs=false"], ["--remat"], ["--remat-mb", "300"]]
    for bad in (0, -5, "all", 2.5):
        with pytest.raises(ValueError, match="remat must be None, False, True or a positive"):
            cnnc.compile(model, x, remat=bad, cache=False)
    assert len(built) == 4
