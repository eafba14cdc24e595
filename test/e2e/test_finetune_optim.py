"""Fine-tuning's optimizer recipes through cnnc.compile vs PyTorch (CPU
reference path): frozen parameters (requires_grad=False), param groups
(per-group lr / weight decay / momentum / betas driven by a scheduler),
gradient clipping by global norm, gradient accumulation, and optimizer
state that round-trips with torch (sync_to writes it into the optimizer;
a new process resumes from torch.save'd state dicts).

Each case runs the same steps in PyTorch f32 on a copy of the model and
compares every loss and the final parameters and optimizer state (relative
to the tensor's largest element; f32 rounding, measured <= 1e-6)."""
import copy
import os
import subprocess
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import cnnc
from cnnc.export import SimpleCNN
from cnnc.tools import find_library, find_tool

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOL = 1e-4


@pytest.fixture(autouse=True)
def build_and_cache(tmp_path, monkeypatch):
    if find_tool("cnnc") is None or find_library("libcnnc_reference.so") is None:
        pytest.skip("cnnc / libcnnc_reference.so not built")
    monkeypatch.setenv("CNNC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CNNC_ASSUME_NO_GPU", "1")
    return tmp_path


class BNNet(nn.Module):
    """conv-BN-ReLU twice, pool, linear: BN running statistics and 1-D
    parameters for the no-decay group."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.max_pool2d(x, 2)
        x = F.relu(self.bn2(self.conv2(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def make(cls=SimpleCNN, n=4, size=32, seed=0):
    torch.manual_seed(seed)
    model = cls()
    x = torch.randn(n, 3, size, size)
    y = torch.randint(0, 10, (n,))
    return model, x, y


def rel(a, b):
    a, b = a.double(), b.double()
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-6)).item()


def torch_steps(model, opt, batches, sched=None, clip=None, accumulate=1):
    """PyTorch's loop: per optimizer step, `accumulate` micro-batches whose
    losses are divided by `accumulate`; clip_grad_norm_ before the step.
    Returns every micro-batch's (undivided) loss."""
    model.train()
    losses = []
    for i in range(0, len(batches), accumulate):
        opt.zero_grad()
        for x, y in batches[i:i + accumulate]:
            loss = F.cross_entropy(model(x), y)
            (loss / accumulate).backward()
            losses.append(loss.item())
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        if sched is not None:
            sched.step()
    return losses


def cnnc_steps(trainer, batches, sched=None, accumulate=1):
    losses = []
    for k, (x, y) in enumerate(batches):
        losses.append(float(trainer.step(x, y)))
        if sched is not None and (k + 1) % accumulate == 0:
            sched.step()
    return losses


def assert_same(model, ref, opt, ropt, losses, rlosses, tol=TOL):
    assert len(losses) == len(rlosses)
    for k, (a, b) in enumerate(zip(losses, rlosses)):
        assert abs(a - b) <= tol * max(1.0, abs(b)), "loss %d: %r vs torch %r" % (k, a, b)
    sd, rsd = model.state_dict(), ref.state_dict()
    for name, v in rsd.items():
        if v.is_floating_point():
            assert rel(sd[name], v) < tol, "%s: %.3g" % (name, rel(sd[name], v))
        else:
            assert torch.equal(sd[name], v), name
    # The optimizer state sync_to wrote back is torch's, key for key.
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        st, rst = opt.state.get(p, {}), ropt.state.get(q, {})
        assert sorted(st) == sorted(rst), name
        for key, v in rst.items():
            if v is None:
                assert st[key] is None, (name, key)
            elif key == "step":
                assert float(st[key]) == float(v), (name, key)
            else:
                assert rel(st[key], v) < tol, "%s.%s: %.3g" % (name, key, rel(st[key], v))


def freeze_conv1(model):
    for p in model.conv1.parameters():
        p.requires_grad_(False)


def run_both(make_opt, batches, prepare=None, cls=SimpleCNN, sched=None, clip=None,
             accumulate=1, size=32):
    model, _, _ = make(cls, size=size)
    if prepare:
        prepare(model)
    ref = copy.deepcopy(model)
    opt, ropt = make_opt(model), make_opt(ref)
    s = r = None
    if sched:
        s, r = sched(opt), sched(ropt)
    kwargs = {}
    if clip is not None:
        kwargs["clip_grad_norm"] = clip
    if accumulate != 1:
        kwargs["accumulate"] = accumulate
    trainer = cnnc.compile(model, batches[0][0], optimizer=opt, **kwargs)
    losses = cnnc_steps(trainer, batches, s, accumulate)
    rlosses = torch_steps(ref, ropt, batches, r, clip, accumulate)
    trainer.sync_to(model)
    assert_same(model, ref, opt, ropt, losses, rlosses)
    return trainer, model, ref


def batches_of(n, size=32, seed=1, batch=4):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(batch, 3, size, size, generator=g),
             torch.randint(0, 10, (batch,), generator=g)) for _ in range(n)]


# ---------------------------------------------------------------------------
# 1. Frozen parameters
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_frozen_layers_match_torch(kind):
    """conv1 frozen (requires_grad=False, still in the optimizer as torch
    allows): it keeps its weights, gets no state, the rest trains as in
    torch."""
    def make_opt(m):
        if kind == "sgd":
            return torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-3)
        # eps 1e-3: with 1e-8, SimpleCNN's fc1 elements with sqrt(v_hat) ~ eps
        # amplify f32 rounding by lr / (4 eps), in PyTorch's f32 run as in
        # cnnc's (test_python_api.adam_well_conditioned).
        return torch.optim.Adam(m.parameters(), lr=1e-3, eps=1e-3)
    trainer, model, _ = run_both(make_opt, batches_of(3), prepare=freeze_conv1)
    before = make()[0]
    assert torch.equal(model.conv1.weight, before.conv1.weight)
    assert not any(n.startswith("conv1.") for n in trainer.optimizer_state())


def test_frozen_parameters_outside_the_optimizer_and_without_one():
    """A frozen parameter need not be in the optimizer; without an optimizer
    (plain SGD at lr) frozen parameters stay as they were too."""
    model, x, y = make()
    freeze_conv1(model)
    ref = copy.deepcopy(model)
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.SGD(trainable, lr=0.05)
    trainer = cnnc.compile(model, x, optimizer=opt)
    ropt = torch.optim.SGD([p for p in ref.parameters() if p.requires_grad], lr=0.05)
    losses = cnnc_steps(trainer, [(x, y)] * 3)
    rlosses = torch_steps(ref, ropt, [(x, y)] * 3)
    trainer.sync_to(model)
    assert_same(model, ref, opt, ropt, losses, rlosses)
    model2, _, _ = make()
    freeze_conv1(model2)
    t2 = cnnc.compile(model2, x, lr=0.05)
    t2.step(x, y)
    t2.sync_to(model2)
    assert torch.equal(model2.conv1.weight, make()[0].conv1.weight)
    assert not torch.equal(model2.fc2.weight, make()[0].fc2.weight)


# ---------------------------------------------------------------------------
# 2. Param groups
# ---------------------------------------------------------------------------

def three_groups(m):
    """A backbone at a tenth of the head's LR, no decay on the 1-D
    parameters, the head with Nesterov momentum."""
    decay, no_decay = [], []
    for name, p in m.named_parameters():
        if name.startswith("fc"):
            continue
        (no_decay if p.dim() <= 1 else decay).append(p)
    return [{"params": decay, "lr": 0.01},
            {"params": no_decay, "lr": 0.01, "weight_decay": 0.0, "momentum": 0.5},
            {"params": list(m.fc.parameters()), "nesterov": True}]


def test_three_param_groups_sgd_with_a_scheduler():
    """Three groups with their own lr / weight_decay / momentum / nesterov,
    and a LambdaLR with one lambda per group: every group's LR is read at
    every step, as torch's optimizer reads it."""
    lambdas = [lambda e: 0.5 ** e, lambda e: 1.0 + e, lambda e: 1.0 / (1 + e)]
    run_both(lambda m: torch.optim.SGD(three_groups(m), lr=0.1, momentum=0.9,
                                       weight_decay=5e-3),
             batches_of(4, size=16), cls=BNNet, size=16,
             sched=lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambdas))


@pytest.mark.parametrize("kind", ["adam", "adamw"])
def test_three_param_groups_adam(kind):
    """Per-group lr, weight decay, betas and eps under Adam and AdamW."""
    cls = torch.optim.Adam if kind == "adam" else torch.optim.AdamW

    def make_opt(m):
        g = three_groups(m)
        g[1].update(betas=(0.8, 0.99), eps=1e-6)
        g[2].update(lr=3e-3, weight_decay=0.05)
        return cls(g, lr=1e-3, weight_decay=1e-2)
    run_both(make_opt, batches_of(3, size=16), cls=BNNet, size=16)


def test_no_bn_weight_decay_recipe_as_groups_matches_the_flag():
    """cnnc --no-bn-weight-decay and the torch groups that say the same
    (decay on the weights of rank >= 2 only) build the same step."""
    model, x, _ = make(BNNet, size=16)
    decay = [p for p in model.parameters() if p.dim() > 1]
    no_decay = [p for p in model.parameters() if p.dim() <= 1]
    opt = torch.optim.SGD([{"params": decay}, {"params": no_decay, "weight_decay": 0.0}],
                          lr=0.1, momentum=0.9, weight_decay=1e-4)
    flags, _ = cnnc.optimizer_flags(opt, model)
    groups = flags["param-groups"]["groups"]
    assert len(groups) == 1 and groups[0]["weight_decay"] == 0.0
    assert sorted(groups[0]["params"]) == sorted(
        n for n, p in model.named_parameters() if p.dim() <= 1)


# ---------------------------------------------------------------------------
# 5. State that round-trips with PyTorch
# ---------------------------------------------------------------------------

RESUME_SCRIPT = r"""
import sys, torch, torch.nn.functional as F
sys.path.insert(0, sys.argv[1])
import cnnc
from cnnc.export import SimpleCNN
kind, path, phase, k, n = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
torch.manual_seed(0)
model = SimpleCNN()
def make_opt(m):
    groups = [{"params": list(m.conv1.parameters()) + list(m.conv2.parameters()), "lr": 0.02},
              {"params": list(m.fc1.parameters()) + list(m.fc2.parameters())}]
    if kind == "sgd":
        return torch.optim.SGD(groups, lr=0.05, momentum=0.9, weight_decay=1e-3)
    return torch.optim.AdamW(groups, lr=2e-3, weight_decay=1e-2)
opt = make_opt(model)
g = torch.Generator().manual_seed(1)
batches = [(torch.randn(4, 3, 32, 32, generator=g), torch.randint(0, 10, (4,), generator=g))
           for _ in range(n)]
if phase == "resume":
    ckpt = torch.load(path)
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["opt"])
trainer = cnnc.compile(model, batches[0][0], optimizer=opt)
todo = range(k) if phase == "save" else range(k, n) if phase == "resume" else range(n)
for i in todo:
    print("%.6f" % float(trainer.step(*batches[i])))
trainer.sync_to(model)
if phase == "save":
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, path)
"""


@pytest.mark.parametrize("kind", ["sgd", "adamw"])
def test_save_load_in_a_new_process_resumes_exactly(kind, tmp_path):
    """torch.save({"model": m.state_dict(), "opt": opt.state_dict()}) after 2
    steps, loaded in a new process into a new model and optimizer,
    compiled and continued: the losses are the uninterrupted run's to the
    printed digit (the optimizer state went through torch's state_dict)."""
    script = tmp_path / "resume.py"
    script.write_text(RESUME_SCRIPT)
    ckpt = str(tmp_path / "ckpt.pt")
    env = dict(os.environ)

    def run(phase):
        out = subprocess.run([sys.executable, str(script), os.path.join(REPO, "python"), kind,
                              ckpt, phase, "2", "5"], env=env, check=True,
                             stdout=subprocess.PIPE, universal_newlines=True).stdout
        return out.split()
    whole = run("whole")
    first = run("save")
    saved = torch.load(ckpt)["opt"]
    assert len(saved["state"]) == 8  # every parameter has torch's state
    key = "momentum_buffer" if kind == "sgd" else "exp_avg"
    assert all(st[key] is not None for st in saved["state"].values())
    if kind == "adamw":
        assert all(float(st["step"]) == 2 for st in saved["state"].values())
    rest = run("resume")
    assert len(whole) == 5 and first + rest == whole, (whole, first, rest)


def test_sync_to_state_is_what_torch_holds_after_each_phase():
    """sync_to twice (after 1 and 3 steps): the optimizer's state_dict is
    torch's each time (Adam's step counts included)."""
    model, x, y = make()
    ref = copy.deepcopy(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-3)  # (see above)
    ropt = torch.optim.Adam(ref.parameters(), lr=1e-3, eps=1e-3)
    trainer = cnnc.compile(model, x, optimizer=opt)
    assert opt.state_dict()["state"] == {}
    trainer.sync_to(model)
    assert opt.state_dict()["state"] == {}  # no step yet: torch holds none
    losses = cnnc_steps(trainer, [(x, y)])
    rlosses = torch_steps(ref, ropt, [(x, y)])
    trainer.sync_to(model)
    assert_same(model, ref, opt, ropt, losses, rlosses)
    losses += cnnc_steps(trainer, [(x, y)] * 2)
    rlosses += torch_steps(ref, ropt, [(x, y)] * 2)
    trainer.sync_to(model)
    assert_same(model, ref, opt, ropt, losses, rlosses)


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------

def test_settings_cnnc_cannot_honour_are_errors():
    model, x, _ = make()
    P = model.parameters
    cases = [
        (torch.optim.Adam([{"params": list(model.conv1.parameters()), "amsgrad": True},
                           {"params": [p for n, p in model.named_parameters()
                                       if not n.startswith("conv1")]}]),
         "amsgrad=True \\(param group 0\\)"),
        (torch.optim.SGD([{"params": list(model.conv1.parameters())},
                          {"params": [p for n, p in model.named_parameters()
                                      if not n.startswith("conv1")], "maximize": True}], lr=0.1),
         "maximize=True \\(param group 1\\)"),
        (torch.optim.SGD(list(model.fc2.parameters()), lr=0.1),
         "'conv1.weight' is not in the optimizer"),
        (torch.optim.SGD([{"params": list(P()), "nesterov": True}], lr=0.1),
         "nesterov needs momentum"),
    ]
    for opt, message in cases:
        with pytest.raises(cnnc.UnsupportedOptimizerError, match=message):
            cnnc.compile(model, x, optimizer=opt)


def test_adam_state_at_different_steps_is_an_error():
    """Adam state for some parameters only (a layer unfrozen after some
    steps): torch's bias correction counts per parameter, cnnc's once."""
    model, x, y = make()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    freeze_conv1(model)
    trainer = cnnc.compile(model, x, optimizer=opt)
    trainer.step(x, y)
    trainer.sync_to(model)
    for p in model.conv1.parameters():
        p.requires_grad_(True)
    with pytest.raises(ValueError, match="different steps.*no state for 'conv1.weight'"):
        cnnc.compile(model, x, optimizer=opt)


def test_unfreezing_with_sgd_recompiles_and_continues():
    """Frozen conv1 for 2 steps, then unfrozen with a lower LR (a new param
    group, a recompile) for 2 more: the same as torch's loop doing the same
    (SGD without dampening: a missing momentum buffer is a zero one)."""
    model, x, y = make()
    ref = copy.deepcopy(model)
    batches = batches_of(4)
    rest = lambda m: [p for n, p in m.named_parameters() if not n.startswith("conv1")]  # noqa
    losses, rlosses = [], []
    for m, o, out, run in ((model, None, losses, "cnnc"), (ref, None, rlosses, "torch")):
        freeze_conv1(m)
        o = torch.optim.SGD(rest(m), lr=0.05, momentum=0.9)
        if run == "cnnc":
            t = cnnc.compile(m, x, optimizer=o)
            out += cnnc_steps(t, batches[:2])
            t.sync_to(m)
        else:
            out += torch_steps(m, o, batches[:2])
        for p in m.conv1.parameters():
            p.requires_grad_(True)
        o.add_param_group({"params": list(m.conv1.parameters()), "lr": 0.005})
        if run == "cnnc":
            t = cnnc.compile(m, x, optimizer=o)
            out += cnnc_steps(t, batches[2:])
            t.sync_to(m)
            opt = o
        else:
            out += torch_steps(m, o, batches[2:])
            ropt = o
    assert_same(model, ref, opt, ropt, losses, rlosses)


# ---------------------------------------------------------------------------
# 3. Gradient clipping by global norm
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("kind,max_norm", [("sgd", 0.5), ("sgd", 1e3), ("adamw", 0.25)])
def test_clip_grad_norm_matches_torch(kind, max_norm):
    """clip_grad_norm=max_norm equals torch.nn.utils.clip_grad_norm_ before
    every step: active (0.5, 0.25: SimpleCNN's gradient norm is ~2-4 here)
    and inactive (1e3: coefficient 1)."""
    def make_opt(m):
        if kind == "sgd":
            return torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        return torch.optim.AdamW(m.parameters(), lr=1e-3, eps=1e-3, weight_decay=0.01)
    model, x, y = make()
    model.zero_grad()
    F.cross_entropy(model(x), y).backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf")).item()
    assert (norm > max_norm) == (max_norm < 1), norm  # the case is what it says
    run_both(make_opt, batches_of(3), clip=max_norm)


def test_clip_with_frozen_layers_and_groups():
    """The global norm is over the trained gradients only (frozen ones have
    none, as in torch), with three param groups."""
    def make_opt(m):
        return torch.optim.SGD(three_groups(m), lr=0.1, momentum=0.9, weight_decay=1e-3)
    run_both(make_opt, batches_of(3, size=16), cls=BNNet, size=16, clip=0.3,
             prepare=freeze_conv1)


def test_non_positive_clip_norm_is_an_error():
    model, x, _ = make()
    for bad in (0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="clip_grad_norm must be a positive max_norm"):
            cnnc.compile(model, x, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                         clip_grad_norm=bad)


# ---------------------------------------------------------------------------
# 4. Gradient accumulation
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_accumulation_matches_torchs_loop(kind, k):
    """accumulate=k: k trainer.step calls (micro-batches) are one optimizer
    step on the mean of their gradients, as torch's loop of k backward
    passes of loss / k; BN running statistics (BNNet) update at every
    micro-batch; 2 optimizer steps with a StepLR stepped per optimizer
    step."""
    def make_opt(m):
        if kind == "sgd":
            return torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)
        return torch.optim.Adam(m.parameters(), lr=1e-3, eps=1e-3)
    trainer, model, ref = run_both(
        make_opt, batches_of(2 * k, size=16), cls=BNNet, size=16, accumulate=k,
        sched=lambda o: torch.optim.lr_scheduler.StepLR(o, 1, gamma=0.5))
    assert int(model.bn1.num_batches_tracked) == 2 * k


def test_accumulation_clipping_groups_and_frozen_together():
    """All of it at once: frozen conv1, three groups with a scheduler,
    clipping of the accumulated gradient (torch clips after the k backward
    passes), accumulate=2, 2 optimizer steps."""
    lambdas = [lambda e: 0.5 ** e, lambda e: 1.0 + e, lambda e: 1.0]

    def make_opt(m):
        return torch.optim.SGD(three_groups(m), lr=0.1, momentum=0.9, weight_decay=1e-3)
    run_both(make_opt, batches_of(4, size=16), cls=BNNet, size=16, clip=0.2,
             accumulate=2, prepare=freeze_conv1,
             sched=lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambdas))


def test_accumulation_errors():
    model, x, _ = make()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="accumulate must be an integer >= 1"):
            cnnc.compile(model, x, optimizer=opt, accumulate=bad)


def test_accumulation_counts_optimizer_steps():
    """trainer.steps counts optimizer steps (k calls are one), and a
    sync_to between two updates writes torch's state of the last update."""
    model, x, y = make()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-3)
    trainer = cnnc.compile(model, x, optimizer=opt, accumulate=3)
    for k in range(7):
        trainer.step(x, y)
    assert trainer.steps == 2
    trainer.sync_to(model)
    assert all(float(st["step"]) == 2 for st in opt.state.values())
