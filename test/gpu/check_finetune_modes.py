#!/usr/bin/env python3
"""GPU check of BatchNorm modules in eval mode (issue 33, frozen-BN
fine-tuning): cnn.batch_norm {use_running_stats} in the CUDA training step
(the inference-form kernel in the forward, two more and per-channel sums in
the backward; running statistics returned unchanged).

A conv-BN-ReLU residual net with a BatchNorm1d head, batch 32, through
cnnc.compile on CUDA tensors against PyTorch on the same GPU (TF32 off),
3 SGD steps (momentum, weight decay), in two mode sets: bn1 and bn3 in eval
mode, and the whole model in eval() (Dropout off):

  - fp32 NCHW: losses within 1e-4 relative, parameters within 1e-3;
  - fp16 NHWC (the default): losses within 2e-2, parameters within 5e-2;
  - the eval-mode modules' running statistics and num_batches_tracked are
    exactly what they were, the training-mode ones' moved.

Exit 0: all passed; 1: a check failed; 77: no CUDA GPU (ctest skip).

  python3 test/gpu/check_finetune_modes.py
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

from gpucheck_common import FAILURES, check, tensor_rel  # noqa: E402


def rel(a, b):
    return tensor_rel(a, b)


def make_net():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 16, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(16)
            self.conv2 = nn.Conv2d(16, 16, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(16)
            self.bn3 = nn.BatchNorm1d(16)
            self.drop = nn.Dropout(0.5)
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            y = F.relu(self.bn1(self.conv1(x)))
            y = F.relu(self.bn2(self.conv2(y)) + y)
            return self.fc(self.drop(self.bn3(y.mean((2, 3)))))

    torch.manual_seed(0)
    model = Net()
    g = torch.Generator().manual_seed(1)
    for m in model.modules():  # pretrained-like statistics
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            c = m.num_features
            m.weight.data = 1 + 0.3 * torch.randn(c, generator=g)
            m.bias.data = 0.2 * torch.randn(c, generator=g)
            m.running_mean.data = 0.3 * torch.randn(c, generator=g)
            m.running_var.data = 0.5 + torch.rand(c, generator=g)
    return model


def run(modes, precision, layout, loss_tol, param_tol):
    import cnnc
    model = make_net()
    if modes == "some":
        model.bn1.eval()
        model.bn3.eval()
        model.drop.p = 0.0  # cnnc draws its own masks
        frozen = ("bn1", "bn3")
    else:
        model.eval()
        frozen = ("bn1", "bn2", "bn3")
    model = model.cuda()
    g = torch.Generator(device="cuda").manual_seed(2)
    x = torch.randn(32, 3, 16, 16, device="cuda", generator=g)
    y = torch.randint(0, 10, (32,), device="cuda", generator=g)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    ref = copy.deepcopy(model)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    trainer = cnnc.compile(model, x, opt, device="cuda", precision=precision, layout=layout)
    tag = "%s BN eval, %s %s" % (modes, precision, layout)
    for k in range(3):
        ref_opt.zero_grad()
        want = F.cross_entropy(ref(x), y)
        want.backward()
        ref_opt.step()
        got = float(trainer.step(x, y))
        err = abs(got - want.item()) / abs(want.item())
        check(err <= loss_tol, "%s: step %d loss %.6f vs torch %.6f (%.2g)" %
              (tag, k + 1, got, want.item(), err))
    sd, want_sd = trainer.state_dict(), ref.state_dict()
    worst = max((rel(sd[n], v), n) for n, v in want_sd.items()
                if v.is_floating_point() and "running" not in n)
    check(worst[0] <= param_tol, "%s: parameters within %.2g (worst %s %.2g)" %
          (tag, param_tol, worst[1], worst[0]))
    for name in frozen:
        same = all(torch.equal(sd["%s.%s" % (name, b)].cpu(), before["%s.%s" % (name, b)].cpu())
                   for b in ("running_mean", "running_var", "num_batches_tracked"))
        check(same, "%s: %s running statistics unchanged" % (tag, name))
    if modes == "some":
        check(rel(sd["bn2.running_mean"], before["bn2.running_mean"]) > 1e-3,
              "%s: bn2 (training mode) running mean moved" % tag)


def main():
    if torch is None or not torch.cuda.is_available():
        print("no CUDA GPU: skipped")
        return 77
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    os.environ.setdefault("CNNC_CACHE_DIR", tempfile.mkdtemp(prefix="cnnc-finetune-"))
    for modes in ("some", "all"):
        run(modes, "fp32", "nchw", 1e-4, 1e-3)
        run(modes, "fp16", "nhwc", 2e-2, 5e-2)
    print("%d failure(s)" % len(FAILURES))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
