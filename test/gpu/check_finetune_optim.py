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
  - eval-mode BatchNorm (bn1.eval(), frozen-BN fine-tuning) alone and all
    five recipes together (SGD, fp32 NCHW and NHWC);
  - fp16 NHWC (the default), SGD and AdamW: each recipe alone (frozen conv1,
    three groups, clipping after unscaling, eval-mode bn1, accumulate 2:
    one loss scale for both micro-steps, f32 sums), frozen + groups + clip,
    and all five together: losses within 2e-2 of PyTorch f32, parameters
    within max(5e-2, 3 x PyTorch AMP's own distance from f32, AMP doing the
    same recipe).

Then the state round trip on the GPU: torch.save of the model's and the
optimizer's state_dict after 2 steps, loaded in a new process, continued:
the uninterrupted run's losses to the printed digit (fp32); in fp16 also
the GradScaler's state (cnnc.compile(..., scaler=)), from a scale of 2^30
whose overflowing steps the resumed run must skip as the uninterrupted one.

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
        accumulate=1, loss_tol=1e-4, param_tol=1e-3, adam_decay=1e-2, eval_bn=False):
    import cnnc
    if ONLY and ONLY not in "%s (%s, %s %s)" % (what, kind, precision, layout):
        return
    model = make_net()
    if frozen:
        for p in model.conv1.parameters():
            p.requires_grad_(False)
    if eval_bn:  # frozen-BN fine-tuning: bn1 normalizes with its running statistics
        model.bn1.eval()
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
                                          accumulate, eval_bn).items()
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


def amp_reference(make_opt, lambdas, batches, frozen, clip, accumulate=1, eval_bn=False):
    """PyTorch AMP (autocast f16, GradScaler, clipping after unscale_; with
    accumulate k, k scaled backward passes per update as the AMP recipe
    does) on the same start, batches and schedule; returns its state_dict."""
    m = make_net()
    if frozen:
        for p in m.conv1.parameters():
            p.requires_grad_(False)
    if eval_bn:
        m.bn1.eval()
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
kind, path, phase, k, n, layout, precision = (sys.argv[2], sys.argv[3], sys.argv[4],
                                              int(sys.argv[5]), int(sys.argv[6]),
                                              sys.argv[7], sys.argv[9])
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
# fp16: a scale of 2^30 overflows the f16 gradients, so the first steps are
# skipped and halve it (GradScaler's rule); the steps after the save point
# are still skipped only if the resumed step starts from the saved scale.
scaler = None
if precision == "fp16":
    scaler = (torch.amp.GradScaler("cuda", init_scale=2.0 ** 30) if hasattr(torch, "amp")
              and hasattr(torch.amp, "GradScaler")
              else torch.cuda.amp.GradScaler(init_scale=2.0 ** 30))
g = torch.Generator(device="cuda").manual_seed(1)
batches = [(torch.randn(32, 3, 16, 16, device="cuda", generator=g),
            torch.randint(0, 10, (32,), device="cuda", generator=g)) for _ in range(n)]
if phase.startswith("resume"):
    ckpt = torch.load(path)
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["opt"])
    if scaler is not None:
        scaler.load_state_dict(ckpt["scaler"])
    if phase == "resume_without_scaler":
        scaler = None
trainer = cnnc.compile(model, batches[0][0], opt, device="cuda", precision=precision,
                       layout=layout, scaler=scaler)
todo = range(k) if phase == "save" else range(k, n) if phase.startswith("resume") else range(n)
for i in todo:
    print("loss %.6f" % float(trainer.step(*batches[i])))
trainer.sync_to(model)
if scaler is not None:
    sd = scaler.state_dict()
    print("scale %g tracker %d" % (sd["scale"], sd["_growth_tracker"]))
if phase == "save":
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                "scaler": scaler.state_dict() if scaler is not None else None}, path)
"""


def resume(kind, layout, precision="fp32"):
    """torch.save of the model's and the optimizer's state_dict (fp16: and
    the GradScaler's, cnnc.compile(..., scaler=)) after k of n steps
    (sync_to wrote them), loaded into a new model, optimizer and scaler in a
    new process, compiled and continued on the GPU: the losses are the
    uninterrupted run's to the printed digit (frozen conv1, three groups),
    and in fp16 the scaler ends with the uninterrupted run's scale and
    growth tracker. fp16 starts at scale 2^30: the first steps overflow and
    are skipped, halving it each time (about a dozen until the scaled f16
    gradients fit), then it trains; saved after 6 of 20, the resumed run
    must skip the same steps, which it does only with the saved scale (a
    resume without scaler= starts at 65536 and trains at once: its losses
    differ, checked too)."""
    import subprocess
    work = tempfile.mkdtemp(prefix="cnnc-resume-")
    script = os.path.join(work, "resume.py")
    with open(script, "w") as f:
        f.write(RESUME_SCRIPT)
    ckpt = os.path.join(work, "ckpt.pt")
    k, n = ("2", "5") if precision == "fp32" else ("6", "20")

    def run(phase):
        r = subprocess.run([sys.executable, script, os.path.join(HERE, "..", "..", "python"),
                            kind, ckpt, phase, k, n, layout, HERE, precision],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True)
        if r.returncode != 0:
            print(r.stderr[-2000:])
        lines = r.stdout.splitlines()
        return ([l.split()[1] for l in lines if l.startswith("loss ")],
                [l for l in lines if l.startswith("scale ")])
    (whole, whole_scale), (first, _) = run("whole"), run("save")
    rest, rest_scale = run("resume") if first else ([], [])
    name = "resume (%s, %s %s)" % (kind, precision, layout)
    check(len(whole) == int(n) and first + rest == whole,
          "%s: save after %s steps, load in a new process, continue: uninterrupted %s, "
          "resumed %s + %s" % (name, k, whole, first, rest))
    if precision == "fp16":
        # "scale S tracker T": S < 2^30, steps were skipped; T > 0, the last
        # T steps applied (the run trained once the scale fit).
        fields = whole_scale[-1].split() if whole_scale else []
        check(len(fields) == 4 and float(fields[1]) < 2.0 ** 30 and int(fields[3]) > 0,
              "%s: the uninterrupted run skipped its first steps and then trained (%s)"
              % (name, whole_scale))
        check(bool(whole_scale) and rest_scale == whole_scale,
              "%s: the scaler ends as the uninterrupted run's: %s, resumed %s"
              % (name, whole_scale, rest_scale))
        # The check discriminates: without the saved scale the losses differ.
        other, _ = run("resume_without_scaler")
        check(len(other) == len(rest) and other != rest,
              "%s: a resume without scaler= (scale 65536) takes other steps: %s vs %s"
              % (name, other, rest))


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
        # Issue 33's fifth recipe beside the four: eval-mode BatchNorm (bn1
        # in eval(): its running statistics normalize and stay), alone and
        # with the others.
        run("eval-mode bn1", "sgd", "fp32", layout, eval_bn=True)
        run("all five together", "sgd", "fp32", layout, frozen=True, grouped=True,
            clip=0.3, accumulate=2, eval_bn=True)
    # f16 NHWC (the default step): each recipe alone, then all five together,
    # against PyTorch AMP doing the same (amp_reference). Before session 24
    # frozen, groups and clipping ran only together in f16.
    f16 = dict(loss_tol=2e-2, param_tol=5e-2)
    for kind in ("sgd", "adamw"):
        run("frozen conv1", kind, "fp16", "nhwc", frozen=True, **f16)
        run("three groups", kind, "fp16", "nhwc", grouped=True, **f16)
        run("clip 0.3", kind, "fp16", "nhwc", clip=0.3, **f16)
        run("eval-mode bn1", kind, "fp16", "nhwc", eval_bn=True, **f16)
        run("frozen + groups + clip", kind, "fp16", "nhwc", frozen=True, grouped=True,
            clip=0.3, **f16)
        # f16 accumulation (the micro-steps share the loss scale, f32 sums of
        # the scaled gradients, one update per 2 micro-batches): only run on
        # the CPU reference before session 23.
        run("accumulate 2", kind, "fp16", "nhwc", accumulate=2, **f16)
        run("all five together", kind, "fp16", "nhwc", frozen=True, grouped=True,
            clip=0.3, accumulate=2, eval_bn=True, adam_decay=0.0, **f16)
    for kind in ("sgd", "adamw"):
        if not ONLY or ONLY in "resume (%s, fp32 nhwc)" % kind:
            resume(kind, "nhwc")
    # f16: the loss scale resumes too (cnnc.compile(..., scaler=GradScaler)).
    for kind in ("sgd", "adamw"):
        if not ONLY or ONLY in "resume (%s, fp16 nhwc)" % kind:
            resume(kind, "nhwc", "fp16")
    print("%d failure(s)" % len(FAILURES))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
