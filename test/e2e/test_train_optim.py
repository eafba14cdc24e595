"""Three training steps: cnnc's optimizers and BN statistics vs torch.optim.

    cnnc model.onnx --train --optimizer sgd|adam|adamw [hyper-parameters] \
         --run-reference --steps K --input x.npy --labels y.npy --save-state s.cnnw

(the same fixed batch every step). Compared with PyTorch in float64
(torch.optim.SGD / Adam / AdamW on the model's own modules, model.train()),
as max|cnnc - torch| / max|torch| per tensor (python/cnnc/train_check.py):
the loss of every step, every parameter, the optimizer state
(`<p>.momentum_buffer`, `<p>.exp_avg`, `<p>.exp_avg_sq`) and the BN running
statistics.

How: cnnc runs with --steps 1, 2 and 3. Step k of cnnc is compared with one
torch.optim step (step number k) applied to cnnc's own state after k - 1
steps (the exported model for k = 1): the "chained" check. Every step's
forward, loss, backward, update and BN statistics are held to 1e-4 (measured:
<= 3e-5), however the trajectory amplifies rounding. Comparing whole
3-step trajectories is only done where they are well conditioned (the
SimpleCNN losses of every optimizer; ResNet-18 SGD's losses and BN running
statistics, see test_resnet18_bn_running_stats_trajectory) because they are
not in general: ResNet-18 overfitting 4 images at lr 0.05 / AdamW lr 1e-3
drives the loss to 0.02 / 0.004 in 3 steps, and PyTorch's own f32 run then
lies up to 1e-2 (SGD+Nesterov: 3e-2) from its f64 run; cnnc, also f32, lies
up to 3e-2 from it, while each of its steps agrees with an exact step from
its own state to 3e-5. Measured (python/cnnc/train_check.py pieces): exact
f64 steps 2 and 3 started from cnnc's state after step 1 land as far from
the exact 3-step trajectory as cnnc does (SGD: params 1.60e-3, momentum
1.0e-2; AdamW: params 2.8e-2) and within 2e-6 (SGD) of cnnc: the whole
deviation is the trajectory amplifying step 1's f32 rounding (7.5e-6) by
~200.

Adam: where sqrt(v_hat) is near eps (1e-8) the update amplifies gradient
rounding by up to lr / (4 eps); those elements (0.1% of ResNet-18's at step 1)
are held only to the bound of one Adam step (train_check.adam_mask).

AdamW's weight_decay is passed explicitly (torch's default is 0.01).
"""
import functools
import os
import sys
import time

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")
pytest.importorskip("onnx")
from cnnc import train_check as tc  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

TOL = 1e-4
SGD = dict(kind="sgd", lr=0.05, momentum=0.9, weight_decay=5e-4)
OPTIMIZERS = {
    "sgd": SGD,
    "sgd_nesterov": dict(SGD, nesterov=True),
    "adamw": dict(kind="adamw", lr=1e-3, weight_decay=0.01),
    # Cheap extra coverage on SimpleCNN: dampening, coupled Adam weight decay,
    # non-default betas/eps.
    "sgd_dampening": dict(kind="sgd", lr=0.05, momentum=0.8, dampening=0.3,
                          weight_decay=0.0),
    "adam": dict(kind="adam", lr=2e-3, betas=(0.8, 0.99), eps=1e-9,
                 weight_decay=1e-3),
    # AdamW's decoupled decay moves a parameter by lr * wd * p per step: at
    # wd 0.01 that is 1e-5 of p, below the tolerance, so a wrong or missing
    # decay would pass the case above unnoticed (checked: torch with
    # wd 0.02 against cnnc with 0.01 passes). At wd 1.0 half or no decay
    # is off by 5e-4 / 1e-3 (checked: both fail).
    "adamw_strong_decay": dict(kind="adamw", lr=1e-3, weight_decay=1.0),
    # Learning rates where the plain 3-step trajectory (not only each step)
    # is well conditioned, so it can be held to 1e-4: at SimpleCNN's lr 0.05,
    # PyTorch's own f32 run is 3.2e-4 away from its f64 run after 3 steps (at
    # 0.01: 1.2e-7).
    "sgd_lr1e-2": dict(SGD, lr=1e-2),
    "sgd_lr5e-3": dict(SGD, lr=5e-3),
    "adamw_lr1e-4": dict(kind="adamw", lr=1e-4, weight_decay=0.01),  # f32 vs f64: 3.8e-5
}
MODELS = {
    "simplecnn": dict(shape=(8, 3, 32, 32)),
    # batch 4 at 64x64: the last stage has 16 values per BN channel.
    "resnet18": dict(shape=(4, 3, 64, 64)),
}
CASES = [("simplecnn", o) for o in OPTIMIZERS] + \
        [("resnet18", o) for o in ("sgd", "sgd_nesterov", "adamw")]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """model name -> (torch model with the exported state, onnx path, x, y)."""
    cache = {}

    def get(name):
        if name not in cache:
            d = tmp_path_factory.mktemp(name)
            shape = MODELS[name]["shape"]
            model = tc.make_model(name, num_classes=10, seed=0)
            tc.export_training(model, d / (name + ".onnx"), shape)
            x, y = tc.random_batch(shape, 10, seed=1)
            cache[name] = (model, d / (name + ".onnx"), x, y)
        return cache[name]
    return get


@pytest.fixture(scope="module")
def runs(cnnc, exported, tmp_path_factory):
    """(model, optimizer) -> cnnc runs with --steps 1, 2, 3 (cached)."""

    @functools.lru_cache(maxsize=None)
    def get(name, opt_name):
        model, onnx_path, x, y = exported(name)
        d = tmp_path_factory.mktemp("%s_%s" % (name, opt_name))
        t0 = time.time()
        r = tc.run_steps(cnnc, onnx_path, x, y, OPTIMIZERS[opt_name], 3, d)
        return r, time.time() - t0
    return get


@pytest.mark.parametrize("name,opt_name", CASES)
def test_three_steps_chained(exported, runs, name, opt_name):
    model, _, x, y = exported(name)
    opt = OPTIMIZERS[opt_name]
    steps, t_cnnc = runs(name, opt_name)
    # The flags reached the step: the state holds exactly the optimizer's
    # tensors under their torch names.
    state = steps[-1].state
    want = set(tc.names_of(model, opt["kind"], "optstate"))
    have = {n for n in state if n.endswith((".momentum_buffer", ".exp_avg",
                                            ".exp_avg_sq", ".grad"))}
    assert have == want, "optimizer state names: missing %s, unexpected %s" % (
        sorted(want - have)[:5], sorted(have - want)[:5])
    for n in tc.names_of(model, opt["kind"], "params") + \
            tc.names_of(model, opt["kind"], "buffers"):
        assert n in state, "--save-state lacks %s" % n

    measured, failures = tc.check_chain(steps, model, x, y, opt, TOL)
    s = tc.summarize(measured)
    print("\nMEASURED optim %-9s %-13s chained over 3 steps: loss %.2e params %.2e "
          "optstate %.2e buffers %s%s [cnnc %.1f s for --steps 1,2,3]" %
          (name, opt_name, s["loss"], s["params"], s["optstate"],
           "%.2e" % s["buffers"] if "buffers" in s else "-",
           "; Adam elements left out at steps 1-3: %s" %
           [int(m["adam_elements_left_out"]["count"]) for m in measured]
           if "adam_elements_left_out" in s else "", t_cnnc))
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("opt_name", ["sgd", "sgd_nesterov", "adamw", "adam"])
def test_simplecnn_losses_trajectory(exported, runs, opt_name):
    """The 3 printed losses equal PyTorch's 3 losses from the same start."""
    model, _, x, y = exported("simplecnn")
    steps, _ = runs("simplecnn", opt_name)
    losses = steps[-1].losses
    ref, _ = tc.torch_train(model, x, y, OPTIMIZERS[opt_name], 3)
    errs = [abs(a - b) / abs(b) for a, b in zip(losses, ref)]
    print("\nMEASURED losses simplecnn %-13s cnnc %s torch %s max rel err %.2e" %
          (opt_name, losses, ["%.7g" % v for v in ref], max(errs)))
    assert len(losses) == 3
    assert max(errs) <= TOL, (losses, ref)


@pytest.mark.parametrize("name,opt_name", [("simplecnn", "sgd_lr1e-2"),
                                           ("simplecnn", "adamw_lr1e-4"),
                                           ("resnet18", "sgd_lr5e-3")])
def test_parameters_after_three_steps(exported, runs, name, opt_name):
    """The plain comparison: cnnc's parameters, optimizer state and BN
    statistics after `--steps 3` equal torch.optim's after 3 steps from the
    same start (f64), within 1e-4, at learning rates where that trajectory is
    well conditioned (see OPTIMIZERS). ResNet-18 with AdamW is not at any
    learning rate: Adam moves every element by ~lr whatever its gradient's
    size, and its zero-initialized BN biases have no larger scale to hide a
    flipped step in; PyTorch's own f32 run lies 1.0e-3 from its f64 run after
    3 steps at lr 1e-4 (each step is checked by test_three_steps_chained).
    Adam/AdamW: elements where Adam's step
    amplifies gradient rounding (train_check.adam_mask: sqrt(v_hat) near
    eps; PyTorch's own f32 run moves them just as far) are held to the
    bound of three Adam steps, 3 * lr * (1 + weight decay), instead."""
    model, _, x, y = exported(name)
    opt = OPTIMIZERS[opt_name]
    steps, _ = runs(name, opt_name)
    last = steps[-1]
    ref_losses, ref = tc.torch_train(model, x, y, opt, 3)
    params = tc.names_of(model, opt["kind"], "params")
    mask = tc.adam_mask(ref, params, opt, 3) if opt["kind"] != "sgd" else None
    report = []
    for what in ("params", "optstate", "buffers"):
        names = tc.names_of(model, opt["kind"], what)
        if not names:
            continue
        m = None
        if mask is not None:
            m = {n: mask[p] for p in params for n in names if n == p or n.startswith(p + ".")}
        errs = tc.rel_errs(last.state, ref, names, tc.scales(names, ref), m)
        n, e = tc.worst(errs)
        report.append((what, e, n))
    left_out = 0
    if mask is not None:
        bound = 3 * opt["lr"] * (1 + opt.get("weight_decay", 0.0))
        for p in params:
            out = ~mask[p]
            left_out += int(out.sum())
            d = np.abs(np.asarray(last.state[p], np.float64).reshape(ref[p].shape) - ref[p])
            assert np.all(d[out] <= bound), "%s: an ill-conditioned element moved %g > %g" % (
                p, d[out].max(), bound)
    lerr = max(abs(a - b) / abs(b) for a, b in zip(last.losses, ref_losses))
    print("\nMEASURED %s %s after 3 steps: %s, losses %.2e%s" % (
        name, opt_name, ", ".join("%s %.2e (%s)" % r for r in report), lerr,
        "; %d ill-conditioned Adam elements held to the step bound" % left_out
        if mask is not None else ""))
    for what, e, n in report:
        assert e <= TOL, "%s after 3 steps: max rel err %.3g at %s" % (what, e, n)
    assert lerr <= TOL, (last.losses, ref_losses)


def test_resnet18_bn_running_stats_trajectory(exported, runs):
    """BN running statistics (and the losses) after 3 SGD steps equal
    PyTorch's 3-step run from the same start. Measured 4e-6: the statistics
    depend on the forward activations only, which stay well conditioned
    along this trajectory (the momentum buffers do not; see the module
    docstring: those are checked by the chained test)."""
    model, _, x, y = exported("resnet18")
    steps, _ = runs("resnet18", "sgd")
    last = steps[-1]
    ref_losses, ref = tc.torch_train(model, x, y, SGD, 3)
    names = tc.names_of(model, "sgd", "buffers")
    assert len(names) == 40
    errs = tc.rel_errs(last.state, ref, names, tc.scales(names, ref))
    lerr = [abs(a - b) / abs(b) for a, b in zip(last.losses, ref_losses)]
    n, e = tc.worst(errs)
    print("\nMEASURED bn-stats resnet18 sgd 3-step trajectory: running stats %.2e "
          "(worst %s), losses %.2e" % (e, n, max(lerr)))
    assert e <= TOL, tc.format_errs("BN running stats", errs)
    assert max(lerr) <= TOL, (last.losses, ref_losses)
