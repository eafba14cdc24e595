#!/usr/bin/env python3
"""Where a CUDA step's gradients leave PyTorch's: one SGD step (lr 1, no
momentum) of a test net on the GPU, every parameter's update against
PyTorch's on the same GPU, worst first (a diagnostic, not a check).

  python3 test/gpu/diag_grads.py NET [--precision fp32] [--layout nhwc]
NET: nf_resnet | nfnet_l0 | dm_nfnet (test/e2e/timm_family_layers.py),
resnet_block (check_python_api.py's residual block, batch 32 at 32x32: its
AdamW state is further from float64 than PyTorch's, session 34), or
timm:MODEL (a timm model, random init, 10 classes, batch 8 at 64x64; the
GPU machine has timm). In f32 the same step in float64 on the CPU is a third
column: each gradient's error from it, cnnc's and PyTorch's on the GPU. With --precision fp16 the reference step is PyTorch
AMP (autocast f16 + channels_last, no scaler): an update of 0 everywhere in
cnnc's column means its loss scaling skipped the step; a second PyTorch run
with GradScaler at cnnc's starting scale (65536) then says whether PyTorch's
scaler skips that step too, and which parameters' scaled gradients are not
finite.
Environment toggles of the runtime (CNNRT_CONV_FUSION=split,
CNNRT_CONV_GRAPH=0) narrow the kernel at fault."""
import argparse
import copy
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("net")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--layout", default="nhwc")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--optim", default="sgd", choices=["sgd", "adamw"],
                    help="adamw: check_python_api's 3 AdamW steps instead of one "
                    "SGD step (f32 only), each parameter's distance from float64")
    a = ap.parse_args()
    import torch
    import cnnc
    import timm_family_layers as tl
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    if a.net.startswith("timm:"):
        import timm
        model = timm.create_model(a.net[5:], pretrained=False, num_classes=10).to(a.device)
        x = torch.randn(8, 3, 64, 64, device=a.device)
        y = torch.randint(0, 10, (8,), device=a.device)
    elif a.net == "resnet_block":
        sys.path.insert(0, HERE)
        import check_python_api
        model = check_python_api.models()["resnet_block"]().to(a.device)
        x = torch.randn(32, 3, 32, 32, device=a.device)
        y = torch.randint(0, 10, (32,), device=a.device)
    else:
        model = tl.NFNetTiny(a.net).to(a.device)
        x = torch.randn(4, 3, 29, 29, device=a.device)
        y = torch.randint(0, 10, (4,), device=a.device)
    if a.optim == "adamw":
        return adamw_steps(a, torch, cnnc, model, x, y)
    ref = copy.deepcopy(model)
    model_for_scaler = copy.deepcopy(model)
    amp = a.precision == "fp16"
    exact = None
    if not amp:
        # The same step in float64 on the CPU: which of the two f32 steps
        # is off, not only how far apart they are.
        exact = copy.deepcopy(model).cpu().double()
        opt64 = torch.optim.SGD(exact.parameters(), lr=1.0)
        e0 = {n: p.detach().clone() for n, p in exact.named_parameters()}
        torch.nn.functional.cross_entropy(exact(x.cpu().double()), y.cpu()).backward()
        opt64.step()
        g64 = {n: (e0[n] - p.detach()) for n, p in exact.named_parameters()}
    trainer = cnnc.compile(model, x, optimizer=torch.optim.SGD(model.parameters(), lr=1.0),
                           precision=a.precision, layout=a.layout, cache=False,
                           device=a.device)
    trainer.step(x, y)
    trainer.sync_to(model)
    opt = torch.optim.SGD(ref.parameters(), lr=1.0)
    p0 = {n: p.detach().clone() for n, p in ref.named_parameters()}
    if amp:
        ref = ref.to(memory_format=torch.channels_last)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.cross_entropy(
                ref(x.contiguous(memory_format=torch.channels_last)), y)
        loss.float().backward()
    else:
        torch.nn.functional.cross_entropy(ref(x), y).backward()
    opt.step()
    if amp:
        scaler_verdict(torch, model_for_scaler, x, y)
    def rel(g, r):
        return ((g - r).abs().max() / r.abs().max().clamp_min(1e-30)).item()

    rows = []
    got = dict(model.named_parameters())
    for n, p in ref.named_parameters():
        g_ref = (p0[n] - p.detach()).double()
        g = (p0[n] - got[n].detach()).double()
        vs64 = ""
        if exact is not None:
            r64 = g64[n].to(g.device)
            vs64 = "  %10.3g %10.3g" % (rel(g, r64), rel(g_ref, r64))
        rows.append((rel(g, g_ref), n, g_ref.abs().max().item(), g.abs().max().item(), vs64))
    rows.sort(reverse=True)
    print("%s %s %s: gradient rel err, worst first (param, |g| torch, |g| cnnc%s)" %
          (a.net, a.precision, a.layout,
           ", cnnc and torch vs float64" if exact is not None else ""))
    for err, n, gr, gc, vs64 in rows[:a.top]:
        print("  %10.3g  %-40s %10.3g %10.3g%s" % (err, n, gr, gc, vs64))


def adamw_steps(a, torch, cnnc, model, x, y):
    """check_python_api's AdamW case (lr 1e-3, weight decay 1e-2, 3 steps on
    x + 0.1 k) for cnnc, PyTorch f32 on the GPU and on the CPU, and PyTorch
    float64 on the CPU; per parameter, each f32 run's distance from float64
    as the check measures it (max |a - b| / max |b| over the elements Adam
    conditions well, check_python_api.adam_mask), its 99th percentile
    instead of the max, and at cnnc's worst element: the float64 gradient of
    step 1 there against the largest of the tensor (an element whose
    gradient is a near-cancelling sum is where f32 runs part)."""
    sys.path.insert(0, HERE)
    import check_python_api as cpa
    if a.precision != "fp32":
        sys.exit("diag_grads: --optim adamw is f32 only")
    mk = lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=1e-2)
    runs = {"torch-gpu": copy.deepcopy(model), "torch-cpu": copy.deepcopy(model).cpu(),
            "f64": copy.deepcopy(model).cpu().double()}
    opts = {n: mk(m) for n, m in runs.items()}
    trainer = cnnc.compile(model, x, optimizer=mk(model), precision="fp32",
                           layout=a.layout, cache=False, device=a.device)
    g1 = None
    for k in range(3):
        xk = x + 0.1 * k
        trainer.step(xk, y)
        for n, m in runs.items():
            dev = next(m.parameters()).device
            xin = xk.to(dev).double() if n == "f64" else xk.to(dev)
            cpa.torch_step(m, opts[n], xin, y.to(dev))
            if n == "f64" and k == 0:
                g1 = {p: q.grad.detach().clone() for p, q in m.named_parameters()}
    trainer.sync_to(model)
    mask = cpa.adam_mask(opts["torch-gpu"], runs["torch-gpu"])
    exact = dict(runs["f64"].named_parameters())
    f32 = {"cnnc": dict(model.named_parameters())}
    f32.update({n: dict(runs[n].named_parameters()) for n in ("torch-gpu", "torch-cpu")})
    print("resnet_block AdamW, 3 steps, f32 %s: distance from float64 per parameter "
          "(max-based as check_python_api / 99th percentile), worst first" % a.layout)
    rows = []
    for name, e in exact.items():
        m = mask[name]
        e = e.detach().double().cpu()[m]
        if e.numel() == 0:
            continue
        scale = e.abs().max().clamp_min(1e-12).item()
        cells, worst_at = [], None
        for run, params in f32.items():
            d = (params[name].detach().double().cpu()[m] - e).abs()
            cells.append("%s %.2g / %.2g" % (run, d.max().item() / scale,
                                              d.quantile(0.99).item() / scale))
            if run == "cnnc":
                worst_at = d.argmax().item()
                worst = d.max().item() / scale
        g = g1[name].double().cpu()[m]
        rows.append((worst, name, cells, g[worst_at].abs().item() /
                     g.abs().max().clamp_min(1e-30).item()))
    rows.sort(reverse=True)
    for worst, name, cells, gfrac in rows[:a.top]:
        print("  %-16s %s; cnnc's worst element: |g1| %.2g of the largest" %
              (name, ", ".join(cells), gfrac))


def scaler_verdict(torch, model, x, y):
    """PyTorch AMP's own verdict on the first step: GradScaler at 65536 (its
    default and cnnc's starting scale), the parameters whose scaled f16-born
    gradients are inf/NaN, and whether scaler.step skips."""
    model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    scaler = torch.cuda.amp.GradScaler(init_scale=65536.0)
    with torch.autocast("cuda", dtype=torch.float16):
        loss = torch.nn.functional.cross_entropy(
            model(x.contiguous(memory_format=torch.channels_last)), y)
    scaler.scale(loss).backward()
    bad = [n for n, p in model.named_parameters()
           if p.grad is not None and not torch.isfinite(p.grad).all()]
    scaler.step(opt)
    scaler.update()
    print("PyTorch GradScaler(init_scale=65536): step %s, scale now %g; %d parameter(s) "
          "with non-finite scaled gradients%s" %
          ("SKIPPED" if bad else "taken", scaler.get_scale(), len(bad),
           (": " + ", ".join(bad[:6])) if bad else ""))


if __name__ == "__main__":
    main()
