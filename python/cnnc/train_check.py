"""Training-step numerics: `cnnc --train --run-reference` vs PyTorch.

The test files test/e2e/test_train_*.py use these helpers; the module also
runs standalone and prints a table of errors (also on machines with another
torch):

    /usr/bin/python3 -m cnnc.train_check [--cnnc build/bin/cnnc] \
        --model resnet18 --batch 4 --size 64 --optimizer sgd --steps 3

Compared, per tensor, as max relative error = max|a - b| / max|b|
(b = PyTorch): the loss of every step (`step <i> loss <v>`), the gradient of
every parameter (`--optimizer none`: `<p>.grad`), every parameter
(state_dict names), BN running statistics and the optimizer state
(`<p>.momentum_buffer`, `<p>.exp_avg`, `<p>.exp_avg_sq`) of `--save-state`.

The reference is PyTorch in float64 (the exact answer up to f64 rounding, so
the measured error is cnnc's own f32 error, and it does not depend on how
many threads PyTorch's f32 kernels use). Two ways to compare K steps:

* trajectory: cnnc's state after K steps vs PyTorch's after K steps from the
  same start. Training amplifies f32 rounding (ResNet-18 overfitting 4
  images at lr 0.05: PyTorch's own f32 run lies up to 3e-2 from f64 after 3
  steps), so this is reported, and asserted only where it is well
  conditioned.
* chained (`check_chain`): for every k, cnnc's state after k steps vs ONE
  f64 PyTorch step (torch.optim, step number k) applied to cnnc's own state
  after k - 1 steps (`--steps k-1 --save-state`). Every step's forward,
  loss, backward, optimizer and BN statistics are checked to f32 accuracy
  whatever the conditioning of the trajectory.

Two conditioning facts are built in and documented where used: tensors that
are exactly zero in exact arithmetic (see `scales`) and Adam's update where
sqrt(v) ~ eps (see `adam_mask`).
"""
import argparse
import copy
import inspect
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from cnnc.cnnw import read_cnnw  # noqa: E402
from cnnc.export import build_model  # noqa: E402
from cnnc.tools import find_tool  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The progress line (cnnrt::progressLine, same on CPU and GPU):
#   step N loss X epoch E lr L img/s R eta H:MM:SS [scale S]
STEP_RE = re.compile(r"^step (\d+) loss (\S+)(?: .*)?$", re.M)
# The validation line (cnnrt::evalLine): the last one is the final accuracy.
#   eval step N epoch E: top-1 P% (c/t) top-5 Q% (c5/t)
ACC_RE = re.compile(r"^eval step \d+ epoch [0-9.]+: top-1 ([0-9.]+)% \((\d+)/(\d+)\)", re.M)


# --------------------------------------------------------------------------
# Locating and running cnnc
# --------------------------------------------------------------------------

def find_cnnc():
    """The built cnnc (cnnc.tools.find_tool), or None."""
    return find_tool("cnnc")


class CnncRun:
    """The result of one `cnnc --train --run-reference` process."""

    def __init__(self, args, proc, seconds, state_path):
        self.args = args
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.seconds = seconds
        self.losses = [float(v) for _, v in STEP_RE.findall(proc.stdout)]
        m = ACC_RE.search(proc.stdout)
        self.accuracy = (float(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None
        self.state = (read_cnnw(state_path)
                      if state_path and proc.returncode == 0 and os.path.exists(state_path)
                      else None)

    def check(self):
        if self.returncode != 0:
            raise AssertionError("cnnc failed (exit %d): %s\nstderr:\n%s" %
                                 (self.returncode, " ".join(map(str, self.args)),
                                  self.stderr[-4000:]))
        return self


def run_cnnc(cnnc, *args, timeout=600):
    """Runs cnnc with `args`; returns the CompletedProcess."""
    args = [str(cnnc)] + [str(a) for a in args]
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout)


def optimizer_flags(opt):
    """cnnc flags for an optimizer spec dict (see torch_optimizer)."""
    kind = opt["kind"]
    flags = ["--optimizer", kind]
    if kind == "none":
        return flags
    flags += ["--lr", repr(float(opt["lr"]))]
    if kind == "sgd":
        flags += ["--momentum", repr(float(opt.get("momentum", 0.0))),
                  "--dampening", repr(float(opt.get("dampening", 0.0))),
                  "--weight-decay", repr(float(opt.get("weight_decay", 0.0)))]
        if opt.get("nesterov"):
            flags.append("--nesterov")
    else:
        b1, b2 = opt.get("betas", (0.9, 0.999))
        wd = opt.get("weight_decay", 0.01 if kind == "adamw" else 0.0)
        flags += ["--beta1", repr(float(b1)), "--beta2", repr(float(b2)),
                  "--eps", repr(float(opt.get("eps", 1e-8))),
                  "--weight-decay", repr(float(wd))]
    return flags


def cnnc_train_fixed(cnnc, onnx_path, x, y, opt, steps, workdir,
                     label_smoothing=0.0, extra=()):
    """`cnnc onnx --train --run-reference --steps K --input x --labels y
    --save-state` with the optimizer `opt`; returns a checked CnncRun."""
    workdir = str(workdir)
    xp = os.path.join(workdir, "x.npy")
    yp = os.path.join(workdir, "y.npy")
    sp = os.path.join(workdir, "state_%s_%d.cnnw" % (opt["kind"], os.getpid()))
    np.save(xp, np.ascontiguousarray(x, dtype=np.float32))
    np.save(yp, np.ascontiguousarray(y))
    if os.path.exists(sp):
        os.remove(sp)
    args = [onnx_path, "--train", *optimizer_flags(opt), "--batch", x.shape[0],
            "--run-reference", "--steps", steps, "--input", xp, "--labels", yp,
            "--save-state", sp, *extra]
    if label_smoothing:
        args += ["--label-smoothing", repr(float(label_smoothing))]
    t0 = time.time()
    proc = run_cnnc(cnnc, *args)
    run = CnncRun([cnnc, *args], proc, time.time() - t0, sp)
    return run.check()


# --------------------------------------------------------------------------
# Models and export
# --------------------------------------------------------------------------

def make_model(name, num_classes=10, seed=0):
    """build_model with every Dropout set to p=0 (so torch and cnnc agree)."""
    model = build_model(name, num_classes=num_classes, seed=seed)
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    return model


def onnx_initializers(path):
    import onnx
    from onnx import numpy_helper
    m = onnx.load(str(path))
    return {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}


def export_training(model, path, input_shape):
    """Exports `model` in training mode (as python/cnnc/export.py does) and
    puts the exported initializer values back into the model.

    Tracing a training-mode graph runs the model once, which moves the BN
    running statistics; re-loading the initializers makes torch start from
    exactly the state cnnc imports. Returns the names of the initializers
    that are model state (parameters and buffers)."""
    model.train()
    x = torch.randn(*input_shape)
    kwargs = {}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        # torch >= 2.9 defaults to the dynamo exporter: an inference graph
        # with BatchNorm folded away. Training graphs need the legacy one.
        kwargs["dynamo"] = False
    torch.onnx.export(model, (x,), str(path), input_names=["input"],
                      output_names=["logits"],
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, **kwargs)
    inits = onnx_initializers(path)
    sd = model.state_dict()
    names = []
    with torch.no_grad():
        for k, v in sd.items():
            if k in inits:
                v.copy_(torch.from_numpy(np.array(inits[k])).to(v.dtype))
                names.append(k)
    params = [n for n, _ in model.named_parameters()]
    missing = [n for n in params if n not in inits]
    if missing:
        raise AssertionError("parameters missing from the ONNX initializers "
                             "(renamed by the exporter?): %s" % missing[:5])
    return names


def random_batch(shape, num_classes, seed=1, label_dtype=np.int64):
    g = np.random.RandomState(seed)
    x = g.standard_normal(shape).astype(np.float32)
    y = g.randint(0, num_classes, size=(shape[0],)).astype(label_dtype)
    return x, y


# --------------------------------------------------------------------------
# PyTorch side
# --------------------------------------------------------------------------

def torch_optimizer(params, opt):
    kind = opt["kind"]
    if kind == "sgd":
        return torch.optim.SGD(params, lr=opt["lr"], momentum=opt.get("momentum", 0.0),
                               dampening=opt.get("dampening", 0.0),
                               weight_decay=opt.get("weight_decay", 0.0),
                               nesterov=opt.get("nesterov", False))
    if kind == "adam":
        return torch.optim.Adam(params, lr=opt["lr"], betas=opt.get("betas", (0.9, 0.999)),
                                eps=opt.get("eps", 1e-8),
                                weight_decay=opt.get("weight_decay", 0.0))
    if kind == "adamw":
        return torch.optim.AdamW(params, lr=opt["lr"], betas=opt.get("betas", (0.9, 0.999)),
                                 eps=opt.get("eps", 1e-8),
                                 weight_decay=opt.get("weight_decay", 0.01))
    if kind == "none":
        return None
    raise ValueError("unknown optimizer %r" % kind)


def classification_loss(out, y, loss_fn, aux_weight=None):
    """loss_fn on the logits; for models with auxiliary classifiers
    (GoogLeNet, Inception-v3 in training mode return a tuple: the main logits
    first) CE(main) + aux_weight * sum CE(aux), as cnnc computes it (None:
    cnnc's default --aux-loss-weight, asked of the compiler)."""
    if isinstance(out, (tuple, list)):
        if aux_weight is None:
            from cnnc import pipeline_options
            aux_weight = pipeline_options.default("aux-loss-weight")
        main, *aux = [o for o in out if o is not None]
        return loss_fn(main, y) + aux_weight * sum(loss_fn(a, y) for a in aux)
    return loss_fn(out, y)


def torch_train(model, x, y, opt, steps, label_smoothing=0.0,
                dtype=torch.float64):
    """Runs `steps` training steps on the fixed batch (x, y) with a copy of
    `model` in `dtype`. Returns (losses, state) with state named like cnnc's
    --save-state: parameters, buffers, '<p>.grad' (optimizer 'none', the
    gradients of the last step) and the optimizer state."""
    m = copy.deepcopy(model).to(dtype)
    m.train()
    xt = torch.from_numpy(np.asarray(x)).to(dtype)
    yt = torch.from_numpy(np.asarray(y).astype(np.int64))
    loss_fn = nn.CrossEntropyLoss(label_smoothing=label_smoothing)
    named = list(m.named_parameters())
    optim = torch_optimizer([p for _, p in named], opt)
    losses = []
    for _ in range(steps):
        for _, p in named:
            p.grad = None
        loss = classification_loss(m(xt), yt, loss_fn)
        loss.backward()
        losses.append(float(loss))
        if optim is not None:
            optim.step()
    state = {}
    for k, v in m.state_dict().items():
        if k.endswith("num_batches_tracked"):
            continue
        state[k] = v.detach().double().numpy().copy()
    for n, p in named:
        if opt["kind"] == "none":
            state[n + ".grad"] = p.grad.detach().double().numpy().copy()
        elif optim is not None:
            for key, v in optim.state[p].items():
                if torch.is_tensor(v) and v.dim() > 0:
                    state["%s.%s" % (n, key)] = v.detach().double().numpy().copy()
    return losses, state


def torch_step_from(model, state, x, y, opt, step, label_smoothing=0.0,
                    dtype=torch.float64):
    """One PyTorch training step (number `step`, 1-based) in `dtype`,
    starting from a cnnc --save-state dict `state` (parameters, buffers and
    optimizer state after step - 1). Returns (loss, new state): the exact
    answer to "what does torch.optim make of cnnc's own previous state"."""
    m = copy.deepcopy(model).to(dtype)
    m.train()
    with torch.no_grad():
        for k, v in m.state_dict().items():
            if k in state:
                v.copy_(torch.from_numpy(np.asarray(state[k], np.float64)).to(dtype))
    named = list(m.named_parameters())
    optim = torch_optimizer([p for _, p in named], opt)
    if step > 1 and optim is not None:
        for n, p in named:
            st = optim.state[p]
            keys = (["momentum_buffer"] if opt["kind"] == "sgd"
                    else ["exp_avg", "exp_avg_sq"])
            for key in keys:
                st[key] = torch.from_numpy(
                    np.asarray(state["%s.%s" % (n, key)], np.float64)).to(dtype).clone()
            if opt["kind"] != "sgd":
                st["step"] = torch.tensor(float(step - 1))
    for _, p in named:
        p.grad = None
    loss = classification_loss(
        m(torch.from_numpy(np.asarray(x)).to(dtype)),
        torch.from_numpy(np.asarray(y).astype(np.int64)),
        nn.CrossEntropyLoss(label_smoothing=label_smoothing))
    loss.backward()
    if optim is not None:
        optim.step()
    out = {k: v.detach().double().numpy().copy() for k, v in m.state_dict().items()
           if not k.endswith("num_batches_tracked")}
    for n, p in named:
        out[n + ".grad"] = p.grad.detach().double().numpy().copy()
        if optim is not None:
            for key, v in optim.state[p].items():
                if torch.is_tensor(v) and v.dim() > 0:
                    out["%s.%s" % (n, key)] = v.detach().double().numpy().copy()
    return float(loss), out


class TorchRefs:
    """PyTorch's answer for one case, computed in f32 and in f64.

    Both are PyTorch's result: f64 is the exact answer up to f64 rounding,
    f32 is what torch.optim users get. Where they differ by more than the
    tolerance the problem itself is ill-conditioned in f32 (measured and
    reported as `torch_f32_vs_f64`)."""

    def __init__(self, model, x, y, opt, steps, label_smoothing=0.0):
        self.losses64, self.ref64 = torch_train(model, x, y, opt, steps,
                                                label_smoothing, torch.float64)
        self.losses32, self.ref32 = torch_train(model, x, y, opt, steps,
                                                label_smoothing, torch.float32)
        self.opt = opt

    def refs(self):
        return {"torch-f32": self.ref32, "torch-f64": self.ref64}


# --------------------------------------------------------------------------
# Comparison
# --------------------------------------------------------------------------

def max_rel_err(a, b):
    """max|a - b| / max|b| (0 when both are all zero; inf on a shape mismatch)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.size != b.size:
        return float("inf")
    a = a.reshape(b.shape)
    if not np.all(np.isfinite(a)):
        return float("inf")
    d = np.max(np.abs(a - b)) if b.size else 0.0
    s = np.max(np.abs(b)) if b.size else 0.0
    if s == 0.0:
        return 0.0 if d == 0.0 else float("inf")
    return float(d / s)


def module_of(name):
    """'layer1.0.bn1.weight.grad' -> 'layer1.0.bn1'."""
    parts = name.split(".")
    for suffix in ("grad", "momentum_buffer", "exp_avg", "exp_avg_sq"):
        if parts[-1] == suffix:
            parts = parts[:-1]
            break
    return ".".join(parts[:-1])


def scales(names, ref64):
    """The denominator of the relative error of each tensor: max|ref|, except
    for tensors that are zero in exact arithmetic, up to f32 noise carried in
    from the start (max|f64| <= 1e-6 x the largest sibling of the same module
    and kind). Any f32 computation gives rounding noise there, so their
    scale is the module's largest sibling. Examples in mobilenet_v2 at its
    initialization: the projection BN biases feed a 1x1 conv and another
    BatchNorm, which removes any per-channel shift, so their gradient is
    exactly 0 (f64: ~1e-16; f32: ~1e-7 x the BN weight's); the BN after each
    expansion conv sees inputs of exactly zero batch mean (a 1x1 conv of
    BN outputs with zero bias), so its running_mean stays at the ~1e-9 noise
    of the exported value; its scale is then the running_var's (~1)."""
    out = {}
    kind = lambda n: n.rsplit(".", 1)[-1] if n.endswith(
        (".grad", ".momentum_buffer", ".exp_avg", ".exp_avg_sq")) else ""
    for n in names:
        s = float(np.max(np.abs(ref64[n]))) if ref64[n].size else 0.0
        sib = [float(np.max(np.abs(ref64[m]))) for m in names
               if m != n and module_of(m) == module_of(n) and kind(m) == kind(n)
               and ref64[m].size]
        sib = max(sib) if sib else 0.0
        out[n] = sib if s <= 1e-6 * sib else s
    return out


def rel_errs(state, ref, names, scale, mask=None):
    """{name: max|state - ref| / scale[name]} over the elements where
    mask[name] is true (all where mask is None or lacks the name)."""
    missing = [n for n in names if n not in state]
    if missing:
        raise AssertionError("--save-state lacks %d expected tensors, e.g. %s; "
                             "it has: %s" % (len(missing), missing[:5],
                                             sorted(state)[:20]))
    out = {}
    for n in names:
        a = np.asarray(state[n], dtype=np.float64)
        b = np.asarray(ref[n], dtype=np.float64)
        if a.size != b.size or not np.all(np.isfinite(a)):
            out[n] = float("inf")
            continue
        d = np.abs(a.reshape(b.shape) - b)
        if mask is not None and n in mask:
            d = d[mask[n]]
        dmax = float(d.max()) if d.size else 0.0
        out[n] = 0.0 if dmax == 0.0 else (dmax / scale[n] if scale[n] else float("inf"))
    return out


def adam_mask(ref, params, opt, step, k=100.0):
    """Per parameter: the elements where Adam's step `step` is well
    conditioned, from the f64 reference state after that step.

    Adam moves an element by lr * m_hat / (sqrt(v_hat) + eps). Where
    sqrt(v_hat) is near eps the step amplifies the gradient's rounding error
    by up to lr / (4 eps) = 2.5e4 (torch's lr 1e-3, eps 1e-8): in SimpleCNN
    a gradient element of 1.6e-8 off by 1e-9 (f32) moves fc1.weight by 2e-5,
    ~1e-3 of its scale; PyTorch's own f32 run shows the same. Kept: elements
    with sqrt(v_hat) >= k * eps (amplification <= lr / (eps k^2) = 10 for
    k = 100) or v == 0 (gradient exactly 0 so far: no update). The rest
    are checked only against the bound of Adam's step (see check_step)."""
    b2 = opt.get("betas", (0.9, 0.999))[1]
    eps = opt.get("eps", 1e-8)
    out = {}
    for n in params:
        v = np.asarray(ref[n + ".exp_avg_sq"], np.float64)
        out[n] = (np.sqrt(v / (1.0 - b2 ** step)) >= k * eps) | (v == 0.0)
    return out


def worst(errs):
    """(name, err) of the largest error."""
    n = max(errs, key=lambda k: errs[k])
    return n, errs[n]


def names_of(model, opt_kind, what):
    """The --save-state names of `what` ('params', 'grads', 'buffers',
    'optstate') for `model` (a torch module)."""
    params = [n for n, _ in model.named_parameters()]
    if what == "params":
        return params
    if what == "grads":
        return [n + ".grad" for n in params]
    if what == "buffers":
        return [n for n, _ in model.named_buffers()
                if not n.endswith("num_batches_tracked")]
    if what == "optstate":
        if opt_kind == "sgd":
            return [n + ".momentum_buffer" for n in params]
        if opt_kind in ("adam", "adamw"):
            return [n + s for n in params for s in (".exp_avg", ".exp_avg_sq")]
        return []
    raise ValueError(what)


def format_errs(title, errs):
    if not errs:
        return "%-30s (none)" % title
    n, e = worst(errs)
    return "%-30s max rel err %.3g (worst: %s; %d tensors)" % (title, e, n, len(errs))


def check_step(state, ref, model, opt, step, tol, loss=None, ref_loss=None,
               groups=None):
    """Compares cnnc's `state` after step `step` with the f64 PyTorch state
    `ref` after the same step. Returns (measured, failures): measured maps
    a group ('loss', 'grads', 'params', 'optstate', 'buffers') to
    {tensor: err}; failures lists the groups over `tol`."""
    kind = opt["kind"]
    if groups is None:
        groups = (["grads"] if kind == "none" else ["params", "optstate"]) + ["buffers"]
    measured, failures = {}, []
    if loss is not None:
        e = abs(loss - ref_loss) / abs(ref_loss)
        measured["loss"] = {"loss": e}
        if e > tol:
            failures.append("step %d loss %.7g vs torch %.7g: rel err %.3g > %g" %
                            (step, loss, ref_loss, e, tol))
    for g in groups:
        names = names_of(model, kind, g)
        if not names:
            continue
        mask = None
        if g == "params" and kind in ("adam", "adamw"):
            mask = adam_mask(ref, names, opt, step)
            # The elements left out still obey the bound of one Adam step
            # (|m_hat / sqrt(v_hat)| <= ~1.2 for steps <= 3): cnnc and torch
            # lie within 3 lr of each other there.
            for n in names:
                bad = ~mask[n]
                if bad.any():
                    d = np.abs(np.asarray(state[n], np.float64).reshape(ref[n].shape)[bad]
                               - ref[n][bad]).max()
                    if d > 3 * opt["lr"]:
                        failures.append("step %d %s: an ill-conditioned Adam element "
                                        "moved %.3g from torch's (> 3 lr)" % (step, n, d))
            measured["adam_elements_left_out"] = {
                "count": float(sum(int((~m).sum()) for m in mask.values()))}
        errs = rel_errs(state, ref, names, scales(names, ref), mask)
        measured[g] = errs
        if max(errs.values()) > tol:
            failures.append("step %d %s: %s > %g" % (step, g, format_errs("", errs).strip(), tol))
    return measured, failures


def run_steps(cnnc, onnx_path, x, y, opt, steps, workdir, label_smoothing=0.0):
    """cnnc runs with --steps 1..`steps` (each with --save-state); checks
    that the losses printed by the shorter runs are those of the longest.
    Returns the list of CnncRun (index k-1: after k steps)."""
    runs = []
    for k in range(1, steps + 1):
        d = os.path.join(str(workdir), "steps%d" % k)
        os.makedirs(d, exist_ok=True)
        runs.append(cnnc_train_fixed(cnnc, onnx_path, x, y, opt, k, d,
                                     label_smoothing=label_smoothing))
    for r in runs:
        if r.losses != runs[-1].losses[:len(r.losses)]:
            raise AssertionError("--steps %d printed losses %s, --steps %d printed %s: "
                                 "runs are not deterministic" %
                                 (len(r.losses), r.losses, steps, runs[-1].losses))
    for k, r in enumerate(runs, 1):
        if len(r.losses) != k:
            raise AssertionError("--steps %d printed %d 'step <i> loss <v>' lines:\n%s"
                                 % (k, len(r.losses), r.stdout[-2000:]))
    return runs


def check_chain(runs, model, x, y, opt, tol, label_smoothing=0.0):
    """The chained comparison (module docstring): step k of cnnc (runs[k-1])
    vs one f64 torch.optim step from cnnc's state after k - 1 steps (the
    initial model for k = 1). Returns (per-step measured, failures)."""
    measured, failures = [], []
    prev = {}
    for k, run in enumerate(runs, 1):
        ref_loss, ref = torch_step_from(model, prev, x, y, opt, k, label_smoothing)
        m, f = check_step(run.state, ref, model, opt, k, tol,
                          loss=runs[-1].losses[k - 1], ref_loss=ref_loss)
        measured.append(m)
        failures += f
        prev = run.state
    return measured, failures


def summarize(measured):
    """{group: worst error over steps and tensors} of check_chain's output."""
    out = {}
    for m in (measured if isinstance(measured, list) else [measured]):
        for g, errs in m.items():
            if errs:
                out[g] = max(out.get(g, 0.0), max(errs.values()))
    return out


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cnnc", default=find_cnnc())
    ap.add_argument("--model", default="simplecnn")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--size", type=int, default=None, help="input H = W")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bn-eps", type=float, default=None,
                    help="set every BatchNorm's eps (conditioning, see tests)")
    ap.add_argument("--optimizer", default="none", choices=["none", "sgd", "adam", "adamw"])
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--dampening", type=float, default=0.0)
    ap.add_argument("--nesterov", action="store_true")
    ap.add_argument("--weight-decay", type=float, default=None)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--label-smoothing", type=float, default=0.0)
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args(argv)
    if not args.cnnc:
        ap.error("no cnnc binary found: pass --cnnc or set CNNC")
    size = args.size or (32 if args.model == "simplecnn" else 64)
    shape = (args.batch, 3, size, size)
    steps = args.steps or (1 if args.optimizer == "none" else 3)
    opt = {"kind": args.optimizer}
    if args.optimizer == "sgd":
        opt.update(lr=args.lr or 0.05, momentum=args.momentum, dampening=args.dampening,
                   nesterov=args.nesterov,
                   weight_decay=5e-4 if args.weight_decay is None else args.weight_decay)
    elif args.optimizer in ("adam", "adamw"):
        opt.update(lr=args.lr or 1e-3, eps=args.eps,
                   weight_decay=(0.01 if args.optimizer == "adamw" else 0.0)
                   if args.weight_decay is None else args.weight_decay)
    workdir = args.workdir or tempfile.mkdtemp(prefix="train_check_")
    model = make_model(args.model, num_classes=args.classes, seed=args.seed)
    if args.bn_eps is not None:
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.eps = args.bn_eps
    onnx_path = os.path.join(workdir, args.model + ".onnx")
    export_training(model, onnx_path, shape)
    x, y = random_batch(shape, args.classes, seed=args.seed + 1)
    t0 = time.time()
    runs = run_steps(args.cnnc, onnx_path, x, y, opt, steps, workdir,
                     args.label_smoothing)
    print("%s input %s, %s, %d steps; cnnc took %.1f s for --steps 1..%d" %
          (args.model, shape, opt, steps, time.time() - t0, steps))
    measured, failures = check_chain(runs, model, x, y, opt, args.tol,
                                     args.label_smoothing)
    for k, m in enumerate(measured, 1):
        for g, errs in m.items():
            if g in ("loss", "adam_elements_left_out"):
                print("chained step %d %s: %s" % (k, g, {n: "%.3g" % v for n, v in errs.items()}))
            else:
                print(format_errs("chained step %d %s" % (k, g), errs))
    # Trajectory, for information: f64 and f32 PyTorch from the same start.
    refs = TorchRefs(model, x, y, opt, steps, args.label_smoothing)
    last = runs[-1]
    print("trajectory losses: cnnc %s torch-f64 %s torch-f32 %s" % (
        ["%.7g" % v for v in last.losses], ["%.7g" % v for v in refs.losses64],
        ["%.7g" % v for v in refs.losses32]))
    groups = (["grads"] if args.optimizer == "none" else ["params", "optstate"]) + ["buffers"]
    for g in groups:
        names = names_of(model, args.optimizer, g)
        if not names:
            continue
        sc = scales(names, refs.ref64)
        print(format_errs("trajectory %s cnnc vs f64" % g,
                          rel_errs(last.state, refs.ref64, names, sc)))
        print(format_errs("trajectory %s torch-f32 vs f64" % g,
                          rel_errs(refs.ref32, refs.ref64, names, sc)))
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())


def check_trains_like_torch(run, model, x, y, opt, steps, tol, case):
    """The failures (a list of lines; empty: none) of a cnnc run `run`
    (cnnc_train_fixed) against PyTorch training `model` on (x, y) for `steps`
    steps: per-step losses within `tol` relative, and the parameters after
    them (check_step). Prints a MEASURED line for the test log."""
    losses, ref = torch_train(model, x, y, opt, steps)
    failures = ["SGD step %d loss %.7g vs torch %.7g" % (k, a, b)
                for k, (a, b) in enumerate(zip(run.losses, losses), 1)
                if abs(a - b) > tol * abs(b)]
    measured, f = check_step(run.state, ref, model, opt, steps, tol,
                             groups=["params"])
    failures += f
    print("\nMEASURED %-16s losses %s params %.2e" % (
        case, " ".join("%.2e" % (abs(a - b) / abs(b))
                       for a, b in zip(run.losses, losses)),
        summarize(measured)["params"]))
    return failures


def export_case(model, shape, num_classes, onnx_path):
    """Exports `model` for training at `shape` and returns the fixed batch
    (x, y) the model-family tests train on (seed 1)."""
    export_training(model, onnx_path, shape)
    return random_batch(shape, num_classes, seed=1)


def trained_parameters(state):
    """The parameter names a cnnc SGD-momentum run's state trains (those
    with a momentum buffer)."""
    return {k[:-len(".momentum_buffer")] for k in state
            if k.endswith(".momentum_buffer")}
