#!/usr/bin/env python3
"""GPU check of the cross-entropy kernels with ignore_index (issue 32,
part 3): softmaxXentLossPartial/Finish (per-block sums and counts of the
non-ignored rows, then their mean) and xentCountValid + softmaxXentGrad
(one warp per row, the count taken on the device).

The GPU's Python binding takes one label per image, so this runs them on
classification labels with ignored entries (the per-pixel path flattens
N x C x H x W logits to the same 2-D rows): SimpleCNN, batch 64, labels
with ~25 % set to ignore_index (255, and PyTorch's default -100), label
smoothing 0 and 0.1, 3 SGD steps (momentum, weight decay) through
cnnc.compile on CUDA tensors against PyTorch on the same GPU (TF32 off):

  - fp32 NCHW: losses within 1e-4 relative, parameters within 1e-3;
  - fp16 NHWC (the default): losses within 2e-2, parameters within 5e-2;
  - every label ignored: the loss is NaN (PyTorch's 0/0) and the weights
    do not move (zero gradient; momentum and weight decay still apply,
    so this step uses plain SGD without them).

Exit 0: all passed; 1: a check failed; 77: no CUDA GPU (ctest skip).

  python3 test/gpu/check_ignore_index.py
"""
import copy
import math
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = None

from gpucheck_common import FAILURES, check, tensor_rel  # noqa: E402


def rel(a, b):
    return tensor_rel(a, b)


def run(precision, layout, ignore_index, smoothing, loss_tol, param_tol):
    import cnnc
    from cnnc.export import SimpleCNN
    torch.manual_seed(0)
    model = SimpleCNN(10).cuda()
    x = torch.randn(64, 3, 32, 32, device="cuda")
    y = torch.randint(0, 10, (64,), device="cuda")
    y[torch.rand(64, device="cuda") < 0.25] = ignore_index
    ref = copy.deepcopy(model).cuda().train()
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    trainer = cnnc.compile(model, x, opt, device="cuda", precision=precision,
                           layout=layout, ignore_index=ignore_index,
                           label_smoothing=smoothing)
    what = "%s %s ignore_index=%d smoothing=%.1f" % (precision, layout, ignore_index,
                                                     smoothing)
    worst = 0.0
    for _ in range(3):
        got = float(trainer.step(x, y))
        ref_opt.zero_grad()
        want = F.cross_entropy(ref(x), y, ignore_index=ignore_index,
                               label_smoothing=smoothing)
        want.backward()
        ref_opt.step()
        worst = max(worst, abs(got - want.item()) / abs(want.item()))
    check(worst <= loss_tol, "%s: losses within %.0e (%.2e)" % (what, loss_tol, worst))
    sd = trainer.state_dict()
    err = max(rel(sd[n], p.detach()) for n, p in ref.named_parameters())
    check(err <= param_tol, "%s: parameters within %.0e (%.2e)" % (what, param_tol, err))


def all_ignored():
    import cnnc
    from cnnc.export import SimpleCNN
    torch.manual_seed(0)
    model = SimpleCNN(10).cuda()
    x = torch.randn(16, 3, 32, 32, device="cuda")
    y = torch.full((16,), -100, dtype=torch.int64, device="cuda")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    trainer = cnnc.compile(model, x, torch.optim.SGD(model.parameters(), lr=0.1),
                           device="cuda", precision="fp32", layout="nchw")
    loss = float(trainer.step(x, y))
    check(math.isnan(loss), "every label ignored: NaN loss (%r)" % loss)
    sd = trainer.state_dict()
    moved = [n for n, _ in model.named_parameters()
             if not torch.equal(sd[n].cpu(), before[n].cpu())]
    check(not moved, "every label ignored: no parameter moves (%s)" % moved[:3])


def main():
    if torch is None or not torch.cuda.is_available():
        print("no CUDA GPU: skipped")
        return 77
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    os.environ.setdefault("CNNC_CACHE_DIR", tempfile.mkdtemp(prefix="cnnc-ii-"))
    for ignore_index in (255, -100):
        for smoothing in (0.0, 0.1):
            run("fp32", "nchw", ignore_index, smoothing, 1e-4, 1e-3)
    run("fp16", "nhwc", 255, 0.1, 2e-2, 5e-2)
    all_ignored()
    print("%d failure(s)" % len(FAILURES))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
