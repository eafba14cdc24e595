#!/usr/bin/env python3
"""GPU check of issue 33's optimizer recipes in the CUDA step through
cnnc.compile, against PyTorch on the same GPU (TF32 off): frozen layers
(requires_grad=False), three param groups with per-group LambdaLR
schedules (the group LRs are state tensors written before each step),
gradient clipping by global norm (cnn.clip_divisor: one multi-tensor
sum-of-squares kernel, then the divisor) and gradient accumulation
(cnn.accumulate_grad / accumulation_step), and the optimizer state that
sync_to writes back into the torch optimizer.

A conv-BN net, batch 32, 16x16 images:

  - fp32 NCHW and NHWC, SGD (momentum, weight decay) and AdamW, each case
    alone and all together (frozen conv1 + three groups + clip 0.3 +
    accumulate 2), 4 optimizer steps: every micro-batch loss within 1e-4
    relative, parameters and the optimizer's state within 1e-3;
  - fp16 NHWC (the default): frozen + groups + clipping after unscaling,
    and accumulate 2 (one loss scale for both micro-steps, f32 sums):
    losses within 2e-2 of PyTorch f32, parameters within max(5e-2, 3 x
    PyTorch AMP's own distance from f32, AMP accumulating as cnnc does).

Then the state round trip on the GPU: torch.save of the model's and the
optimizer's state_dict after 2 steps, loaded in a new process, continued:
the uninterrupted run's losses to the printed digit (fp32; f16 would also
need the loss scale, which is not torch optimizer state).

FINETUNE_DATA_SEED picks the batches (1); FINETUNE_ONLY runs the cases whose
name contains it. On an H200 (2026-11-26) "frozen conv1 (sgd, fp32 nhwc)"
failed with seed 1 only (bn1.bias |diff| 5e-7, conv2's momentum 2.4e-4:
one ReLU/max-pool decision taken the other way, which a CPU analysis put at
a 1-6 % chance per run), and passed at 2e-6 with seeds 2, 3 and 4.

Exit 0: all passed; 1: a check failed; 77: no CUDA GPU (ctest skip).

  python3 test/gpu/check_finetune_optim.py
"""
import copy
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    torch = None

from gpucheck_common import FAILURES, check, tensor_rel as rel  # noqa: E402,F401
# The batches' seed (FINETUNE_DATA_SEED) and a case filter (FINETUNE_ONLY, a
# substring of "what (kind, precision layout)"), to look at one case again.
DATA_SEED = int(os.environ.get("FINETUNE_DATA_SEED", "1"))
ONLY = os.environ.get("FINETUNE_ONLY", "")


def worst_of(pairs):
    """(largest rel, its name, its absolute difference) over (name, got, want)."""
    best = (0.0, "-", 0.0)
    for name, a, b in pairs:
        r = rel(a, b)
        if r > best[0]:
            best = (r, name, (a.double().cpu() - b.double().cpu()).abs().max().item())
    return best


def make_net():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 16, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(16)
            self.conv2 = nn.Conv2d(16, 32, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(32)
            self.fc = nn.Linear(32, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
            x = F.relu(self.bn2(self.conv2(x)))
            return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))
    torch.manual_seed(0)
    return Net().cuda()


def groups(m):
    decay = [p for n, p in m.named_parameters() if not n.startswith("fc") and p.dim() > 1]
    no_decay = [p for n, p in m.named_parameters() if not n.startswith("fc") and p.dim() <= 1]
    return [{"params": decay, "lr": 0.01},
            {"params": no_decay, "lr": 0.01, "weight_decay": 0.0},
            {"params": list(m.fc.parameters())}]


def run(what, kind, precision, layout, frozen=False, grouped=False, clip=None,
        accumulate=1, loss_tol=1e-4, param_tol=1e-3, adam_decay=1e-2):
    import cnnc
    if ONLY and ONLY not in "%s (%s, %s %s)" % (what, kind, precision, layout):
        return
    model = make_net()
    if frozen:
        for p in model.conv1.parameters():
            p.requires_grad_(False)
    ref = copy.deepcopy(model)

    def make_opt(m):
        params = groups(m) if grouped else m.parameters()
        if kind == "sgd":
            return torch.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=1e-3)
        return torch.optim.AdamW(params, lr=2e-3, eps=1e-3, weight_decay=adam_decay)
    opt, ropt = make_opt(model), make_opt(ref)
    lambdas = ([lambda e: 0.5 ** e, lambda e: 1.0 + e, lambda e: 1.0] if grouped
               else [lambda e: 0.7 ** e])
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambdas)
    rsched = torch.optim.lr_scheduler.LambdaLR(ropt, lambdas)
    g = torch.Generator(device="cuda").manual_seed(DATA_SEED)
    batches = [(torch.randn(32, 3, 16, 16, device="cuda", generator=g),
                torch.randint(0, 10, (32,), device="cuda", generator=g))
               for _ in range(4 * accumulate)]
    kwargs = {"accumulate": accumulate}
    if clip is not None:
        kwargs["clip_grad_norm"] = clip
    trainer = cnnc.compile(model, batches[0][0], opt, device="cuda", precision=precision,
                           layout=layout, **kwargs)
    worst = 0.0
    for i in range(0, len(batches), accumulate):
        ropt.zero_grad()
        for x, y in batches[i:i + accumulate]:
            got = float(trainer.step(x, y))
            loss = F.cross_entropy(ref(x), y)
            (loss / accumulate).backward()
            worst = max(worst, abs(got - loss.item()) / abs(loss.item()))
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(ref.parameters(), clip)
        ropt.step()
        sched.step()
        rsched.step()
    name = "%s (%s, %s %s)" % (what, kind, precision, layout)
    check(worst <= loss_tol, "%s: losses within %.0e (%.2e)" % (name, loss_tol, worst))
    trainer.sync_to(model)
    err, at, diff = worst_of((n, model.state_dict()[n], v) for n, v in ref.state_dict().items()
                             if v.is_floating_point())
    if precision == "fp16":
        # The bound is PyTorch's own f16 spread: AMP + GradScaler (clipping
        # after unscale_) against the same f32 reference, times 3, as
        # check_vs_torch bounds AMP. (AdamW with eps 1e-3 and bn1.bias
        # gradients of ~1e-3 turns f16 gradient noise into parameter noise.)
        amp_err, amp_at, _ = worst_of(
            (n, v, ref.state_dict()[n])
            for n, v in amp_reference(make_opt, lambdas, batches, frozen, clip,
                                          accumulate).items()
            if v.is_floating_point())
        bound = max(param_tol, 3 * amp_err)
        check(err <= bound, "%s: parameters and buffers within max(%.0e, 3 x PyTorch AMP's "
              "%.2e (%s)) (%.2e: %s, |diff| %.1e)" % (name, param_tol, amp_err, amp_at, err, at,
                                                      diff))
    else:
        check(err <= param_tol, "%s: parameters and buffers within %.0e (%.2e: %s, |diff| %.1e)" %
              (name, param_tol, err, at, diff))
    if precision == "fp32":
        names = {id(q): n for n, q in ref.named_parameters()}
        serr, at, diff = worst_of(
            ("%s.%s" % (names[id(q)], key), opt.state[p][key], v)
            for p, q in zip(model.parameters(), ref.parameters())
            for key, v in ropt.state.get(q, {}).items()
            if isinstance(v, torch.Tensor) and v.dim() > 0)
        check(serr <= param_tol, "%s: optimizer state within %.0e (%.2e: %s, |diff| %.1e)" %
              (name, param_tol, serr, at, diff))
    if frozen:
        check(torch.equal(model.conv1.weight.cpu(), make_net().conv1.weight.cpu()),
              "%s: the frozen conv1 did not move" % name)


def amp_reference(make_opt, lambdas, batches, frozen, clip, accumulate=1):
    """PyTorch AMP (autocast f16, GradScaler, clipping after unscale_; with
    accumulate k, k scaled backward passes per update as the AMP recipe
    does) on the same start, batches and schedule; returns its state_dict."""
    m = make_net()
    if frozen:
        for p in m.conv1.parameters():
            p.requires_grad_(False)
    opt = make_opt(m)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambdas)
    scaler = torch.amp.GradScaler("cuda")
    for i in range(0, len(batches), accumulate):
        opt.zero_grad()
        for x, y in batches[i:i + accumulate]:
            with torch.autocast("cuda", torch.float16):
                loss = F.cross_entropy(m(x), y) / accumulate
            scaler.scale(loss).backward()
        if clip is not None:
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(m.parameters(), clip)
        scaler.step(opt)
        scaler.update()
        sched.step()
    return m.state_dict()


RESUME_SCRIPT = r"""
import sys, torch
sys.path.insert(0, sys.argv[1])
import cnnc
kind, path, phase, k, n, layout = (sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]),
                                   int(sys.argv[6]), sys.argv[7])
sys.path.insert(0, sys.argv[8])
from check_finetune_optim import make_net, groups
torch.backends.cudnn.allow_tf32 = False
model = make_net()
for p in model.conv1.parameters():
    p.requires_grad_(False)
if kind == "sgd":
    opt = torch.optim.SGD(groups(model), lr=0.05, momentum=0.9, weight_decay=1e-3)
else:
    opt = torch.optim.AdamW(groups(model), lr=2e-3, eps=1e-3, weight_decay=0.0)
g = torch.Generator(device="cuda").manual_seed(1)
batches = [(torch.randn(32, 3, 16, 16, device="cuda", generator=g),
            torch.randint(0, 10, (32,), device="cuda", generator=g)) for _ in range(n)]
if phase == "resume":
    ckpt = torch.load(path)
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["opt"])
trainer = cnnc.compile(model, batches[0][0], opt, device="cuda", precision="fp32",
                       layout=layout)
todo = range(k) if phase == "save" else range(k, n) if phase == "resume" else range(n)
for i in todo:
    print("%.6f" % float(trainer.step(*batches[i])))
trainer.sync_to(model)
if phase == "save":
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, path)
"""


def resume(kind, layout):
    """torch.save of the model's and the optimizer's state_dict after 2 of 5
    steps (sync_to wrote both), loaded into a new model and optimizer in a
    new process, compiled and continued on the GPU: the losses are the
    uninterrupted run's to the printed digit (frozen conv1, three groups)."""
    import subprocess
    work = tempfile.mkdtemp(prefix="cnnc-resume-")
    script = os.path.join(work, "resume.py")
    with open(script, "w") as f:
        f.write(RESUME_SCRIPT)
    ckpt = os.path.join(work, "ckpt.pt")

    def run(phase):
        r = subprocess.run([sys.executable, script, os.path.join(HERE, "..", "..", "python"),
                            kind, ckpt, phase, "2", "5", layout, HERE],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True)
        if r.returncode != 0:
            print(r.stderr[-2000:])
        return r.stdout.split()
    whole, first = run("whole"), run("save")
    rest = run("resume") if first else []
    check(len(whole) == 5 and first + rest == whole,
          "resume (%s, fp32 %s): save after 2 steps, load in a new process, continue: "
          "uninterrupted %s, resumed %s + %s" % (kind, layout, whole, first, rest))


def main():
    if torch is None or not torch.cuda.is_available():
        print("no CUDA GPU: skipped")
        return 77
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    os.environ.setdefault("CNNC_CACHE_DIR", tempfile.mkdtemp(prefix="cnnc-fo-"))
    for layout in ("nchw", "nhwc"):
        for kind in ("sgd", "adamw"):
            run("frozen conv1", kind, "fp32", layout, frozen=True)
            run("three groups", kind, "fp32", layout, grouped=True)
            run("clip 0.3", kind, "fp32", layout, clip=0.3)
            run("accumulate 2", kind, "fp32", layout, accumulate=2)
            # AdamW without decay here: with weight_decay 1e-2 this trajectory
            # has a kink (a ReLU/max-pool decision): PyTorch float64 itself
            # moves bn1.bias by 1.6e-3..4.3e-3 when the initial weights are
            # perturbed by 1e-6 (measured on the CPU; 5e-6 without decay).
            run("all together", kind, "fp32", layout, frozen=True, grouped=True, clip=0.3,
                accumulate=2, adam_decay=0.0)
    for kind in ("sgd", "adamw"):
        run("frozen + groups + clip", kind, "fp16", "nhwc", frozen=True, grouped=True,
            clip=0.3, loss_tol=2e-2, param_tol=5e-2)
        # f16 accumulation (the micro-steps share the loss scale, f32 sums of
        # the scaled gradients, one update per 2 micro-batches): only run on
        # the CPU reference before session 23.
        run("accumulate 2", kind, "fp16", "nhwc", accumulate=2, loss_tol=2e-2,
            param_tol=5e-2)
    for kind in ("sgd", "adamw"):
        if not ONLY or ONLY in "resume (%s, fp32 nhwc)" % kind:
            resume(kind, "nhwc")
    print("%d failure(s)" % len(FAILURES))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
