"""The torch optimizer as cnnc compiles and drives it (cnnc.compile).

What a torch.optim optimizer says becomes cnnc's optimizer flags plus a
--param-groups file (lib/Driver/ParamGroups.cpp):

- parameters with requires_grad=False are frozen: no gradient, no update,
  no optimizer state (cnn.frozen);
- param group 0 takes the command-line settings and the step's run-time
  learning rate; each further group k gets its own settings (lr,
  weight_decay, momentum/dampening/nesterov, betas/eps) and its LR as the
  state tensor "optimizer.group<k>.lr", which the trainer writes from
  param_groups[k]["lr"] before a step whenever it changed (so a scheduler
  drives every group, as in torch).

The optimizer is also the source and the sink of the optimizer state:
compile reads its momentum buffers / Adam moments / step, and
Trainer.sync_to writes them back (write_state) so that
optimizer.state_dict() is what torch would hold.
"""
import torch

_SGD_KEYS = ("lr", "momentum", "dampening", "weight_decay", "nesterov")
_ADAM_KEYS = ("lr", "betas", "eps", "weight_decay", "decoupled_weight_decay")
# Flags that change how torch computes, not what: ignored.
_IRRELEVANT = {"foreach", "differentiable", "capturable", "fused", "params",
               "initial_lr", "maximize", "amsgrad", "name"}

#: torch.optim's per-parameter state that cnnc holds as "<param>.<key>".
STATE_KEYS = {"sgd": ("momentum_buffer",), "adam": ("exp_avg", "exp_avg_sq"),
              "adamw": ("exp_avg", "exp_avg_sq")}


def group_lr_name(k):
    """The state tensor holding param group k's learning rate (k >= 1)."""
    return "optimizer.group%d.lr" % k


def _kind(optimizer, error):
    if isinstance(optimizer, torch.optim.AdamW):
        kind = "adamw"
    elif isinstance(optimizer, torch.optim.Adam):
        kind = "adam"
    elif isinstance(optimizer, torch.optim.SGD):
        kind = "sgd"
    else:
        raise error("cnnc supports torch.optim.SGD, Adam and AdamW, not %s"
                    % type(optimizer).__name__)
    first = optimizer.param_groups[0]
    # torch >= 2.6: Adam(decoupled_weight_decay=True) is AdamW, and AdamW is
    # an Adam whose groups say so.
    if kind in ("adam", "adamw") and "decoupled_weight_decay" in first:
        kind = "adamw" if first["decoupled_weight_decay"] else "adam"
    return kind


def _group_settings(kind, group, k, error):
    """cnnc's settings of one torch param group (checked)."""
    for key in group:
        if key not in _IRRELEVANT and key not in _SGD_KEYS + _ADAM_KEYS:
            hint = ""
            if key in ("max_lr", "min_lr", "max_momentum", "base_momentum"):
                hint = (" (torch.optim.lr_scheduler.OneCycleLR/CyclicLR put it "
                        "there: cnnc follows schedules of the learning rate only, "
                        "not of momentum; use LambdaLR, CosineAnnealingLR, StepLR "
                        "and the like)")
            raise error("optimizer setting '%s' (param group %d) is not supported "
                        "by cnnc%s" % (key, k, hint))
    if group.get("maximize", False):
        raise error("maximize=True (param group %d) is not supported" % k)
    if group.get("amsgrad", False):
        raise error("amsgrad=True (param group %d) is not supported" % k)
    if kind in ("adam", "adamw") and bool(group.get("decoupled_weight_decay", kind == "adamw")) \
            != (kind == "adamw"):
        raise error("param group %d sets decoupled_weight_decay=%r unlike group 0: cnnc "
                    "compiles one of Adam and AdamW" % (k, group["decoupled_weight_decay"]))
    s = {"weight_decay": float(group.get("weight_decay", 0.0))}
    if kind == "sgd":
        s.update(momentum=float(group.get("momentum", 0.0)),
                 dampening=float(group.get("dampening", 0.0)),
                 nesterov=bool(group.get("nesterov", False)))
        if s["nesterov"] and (s["momentum"] <= 0 or s["dampening"] != 0):
            raise error("nesterov needs momentum > 0 and zero dampening (param group %d)" % k)
    else:
        beta1, beta2 = group["betas"]
        s.update(betas=[float(beta1), float(beta2)], eps=float(group["eps"]))
    return s


def translate(optimizer, model, error):
    """(flags, lr, spec): cnnc's optimizer flags for group 0, its LR, and the
    --param-groups spec ({"frozen": [...], "groups": [...]}, None when there
    is nothing to say), or `error` naming the setting cnnc cannot honour."""
    kind = _kind(optimizer, error)
    groups = optimizer.param_groups
    settings = [_group_settings(kind, g, k, error) for k, g in enumerate(groups)]
    name_of = {id(p): n for n, p in model.named_parameters()}
    group_of = {}
    for k, g in enumerate(groups):
        for p in g["params"]:
            if id(p) not in name_of:
                raise error("param group %d holds a tensor that is not a parameter of "
                            "the model" % k)
            group_of[id(p)] = k
    frozen = []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            frozen.append(name)  # torch skips it: no grad, no update, no state
        elif id(p) not in group_of:
            raise error("parameter '%s' is not in the optimizer (and has "
                        "requires_grad=True): cnnc trains every parameter that "
                        "requires a gradient; freeze it with "
                        "requires_grad_(False) or add it to a param group" % name)
    flags = {"optimizer": kind, "weight-decay": settings[0]["weight_decay"]}
    if kind == "sgd":
        flags.update(momentum=settings[0]["momentum"], dampening=settings[0]["dampening"],
                     nesterov=settings[0]["nesterov"])
    else:
        flags.update(beta1=settings[0]["betas"][0], beta2=settings[0]["betas"][1],
                     eps=settings[0]["eps"])
    spec_groups = []
    for k, g in enumerate(groups[1:], 1):
        names = [name_of[id(p)] for p in g["params"] if p.requires_grad]
        # Every group k >= 1 keeps its index (its LR state is group<k>), even
        # when it is empty or frozen: then it is simply not listed.
        entry = dict(settings[k], params=names, lr=float(g["lr"]), index=k)
        spec_groups.append(entry)
    spec = None
    if frozen or spec_groups:
        spec = {"frozen": frozen, "groups": spec_groups}
    lr = groups[0]["lr"]
    return flags, float(lr), spec


def param_groups_json(spec):
    """The --param-groups file's object for `spec` (translate's). Group
    indices are positional in the file: empty groups fill the gaps."""
    if spec is None:
        return None
    groups = []
    for g in spec["groups"]:
        while len(groups) < g["index"] - 1:
            groups.append({"params": []})
        groups.append({k: v for k, v in g.items() if k != "index"})
    return {"frozen": list(spec["frozen"]), "groups": groups}


class GroupLRs:
    """Writes each param group's LR (k >= 1) into the step's state before a
    step, when it changed (a scheduler, or the user, set it): on the GPU a
    one-element write queued on the session's stream, with no host
    synchronization."""

    def __init__(self, optimizer, state, backend):
        self._opt, self._backend = optimizer, backend
        self._targets = []
        if optimizer is not None:
            for k in range(1, len(optimizer.param_groups)):
                t = state.get(group_lr_name(k))
                if t is not None:
                    self._targets.append((k, t))
        self._written = {}

    def sync(self):
        for k, t in self._targets:
            lr = float(self._opt.param_groups[k]["lr"])
            if self._written.get(k) != lr:
                self._backend.set_scalar(t, lr)
                self._written[k] = lr


def check_state(model, optimizer, kind):
    """compile's side (the trainer then loads the optimizer's momentum
    buffers / Adam moments / step): cnnc counts steps once for all
    parameters, so every trained parameter's state must be at one step count.
    A parameter without state while others have it (e.g. one unfrozen after
    some steps) is refused for Adam, whose bias correction depends on its
    own count, and for SGD with dampening (torch's first step of it does not
    damp); for SGD without dampening a missing buffer is exactly a zero one."""
    if optimizer is None or kind not in STATE_KEYS:
        return
    steps, have, missing = set(), [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        st = optimizer.state.get(p, {})
        present = [k for k in STATE_KEYS[kind] if st.get(k) is not None]
        (have if present else missing).append(name)
        if "step" in st:
            steps.add(int(float(st["step"])))
    if not have:
        return
    if kind != "sgd":
        if len(steps) > 1 or missing:
            raise ValueError(
                "the Adam state of the optimizer is at different steps for different "
                "parameters (%s%s): cnnc keeps one step count for all of them; compile "
                "a fresh optimizer or one whose parameters all took the same steps" %
                (", ".join(str(s) for s in sorted(steps)),
                 "; no state for '%s'" % missing[0] if missing else ""))
        return
    if missing and any(g.get("dampening", 0.0) != 0 for g in optimizer.param_groups):
        raise ValueError(
            "parameter '%s' has no momentum buffer while others have one, and "
            "dampening != 0: torch's first step of it would not damp; cnnc keeps one "
            "step count" % missing[0])


def write_state(trainer, params, optimizer, kind, step_count):
    """sync_to's side: the step's optimizer state back into `optimizer`, as
    torch would hold it after the same steps (torch.optim creates a
    parameter's state at its first step: none before any step). `params`:
    the compiled model's parameters by name (the optimizer's tensors)."""
    if optimizer is None or kind not in STATE_KEYS or step_count <= 0:
        return
    backend, state = trainer._backend, trainer._state
    groups = {id(p): g for g in optimizer.param_groups for p in g["params"]}
    for name, p in params.items():
        if not p.requires_grad or id(p) not in groups:
            continue
        st = optimizer.state[p]
        if kind == "sgd":
            if groups[id(p)].get("momentum", 0.0) == 0:
                st["momentum_buffer"] = None  # what torch's SGD stores
                continue
            t = state.get("%s.momentum_buffer" % name)
            st["momentum_buffer"] = backend.get(t).reshape(p.shape).to(p.device, p.dtype)
            continue
        for key in STATE_KEYS[kind]:
            t = state.get("%s.%s" % (name, key))
            st[key] = backend.get(t).reshape(p.shape).to(p.device, p.dtype)
        old = st.get("step")
        step = torch.tensor(float(step_count))
        if isinstance(old, torch.Tensor):
            step = step.to(old.device, old.dtype)
        st["step"] = step


def optimizer_step_flags(flags, clip_grad_norm, accumulate, precision):
    """compile's clip_grad_norm / accumulate into `flags` (checked)."""
    if clip_grad_norm is not None:
        if isinstance(clip_grad_norm, bool) or not float(clip_grad_norm) > 0:
            raise ValueError("clip_grad_norm must be a positive max_norm, got %r"
                             % (clip_grad_norm,))
        if flags["optimizer"] == "none":
            raise ValueError("clip_grad_norm needs an optimizer update")
        flags["clip-grad-norm"] = float(clip_grad_norm)
    if isinstance(accumulate, bool) or int(accumulate) != accumulate or accumulate < 1:
        raise ValueError("accumulate must be an integer >= 1, got %r" % (accumulate,))
    if accumulate > 1:
        flags["accumulate"] = int(accumulate)


def optimizer_step_args(flags):
    """cnnc's flags for optimizer_step_flags' settings."""
    args = []
    if "clip-grad-norm" in flags:
        args += ["--clip-grad-norm", repr(flags["clip-grad-norm"])]
    if "accumulate" in flags:
        args += ["--accumulate", str(flags["accumulate"])]
    return args
