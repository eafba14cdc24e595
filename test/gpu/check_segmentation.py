#!/usr/bin/env python3
"""GPU check of dense prediction (issue 32 part 3): torchvision's
fcn_resnet50 (aux head), deeplabv3_resnet50 (aux head) and
lraspp_mobilenet_v3_large, 5 classes, 2 x 3 x 64 x 64, f32 (NCHW), random
weights, per-pixel labels with ~10 % void (ignore_index 255), loss CE(out) +
0.5 CE(aux) as torchvision's segmentation reference, 3 SGD steps (lr 0.01,
momentum 0.9, weight decay 5e-4):

  - through cnnc.compile(..., device="cuda") and through the generated
    executable (`./train --data DIR` with train_x.npy / train_y.npy masks and
    a validation split val_x.npy / val_y.npy), the per-step losses against
    PyTorch on the same GPU, within max(4 x PyTorch's own CPU-vs-GPU spread,
    1e-4) relative (as check_vs_torch.py bounds them);
  - the executable's `--eval` prints mIoU and pixel accuracy (the eval line
    and the done line).

Exit 0: all passed; 1: a check failed; 77: no CUDA GPU (ctest skip).

  python3 test/gpu/check_segmentation.py [--cnnc build/bin/cnnc]
      [--models fcn_resnet50,deeplabv3_resnet50,lraspp_mobilenet_v3_large]
"""
import argparse
import copy
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gpucheck_common import FAILURES, check, losses_of, require_gpu, run  # noqa: E402

import numpy as np  # noqa: E402

LR, MOMENTUM, WD, STEPS, CLASSES, IGNORE, AUX = 0.01, 0.9, 5e-4, 3, 5, 255, 0.5
SHAPE = (2, 3, 64, 64)


def build(name, torch):
    import torchvision.models.segmentation as seg
    torch.manual_seed(0)
    kw = dict(weights=None, weights_backbone=None, num_classes=CLASSES)
    if name != "lraspp_mobilenet_v3_large":
        kw["aux_loss"] = True
    return getattr(seg, name)(**kw).train()


def loss_of(out, y, F):
    loss = F.cross_entropy(out["out"], y, ignore_index=IGNORE)
    if "aux" in out:
        loss = loss + AUX * F.cross_entropy(out["aux"], y, ignore_index=IGNORE)
    return loss


def torch_losses(model, x, y, device, torch, F):
    m = copy.deepcopy(model).to(device)
    opt = torch.optim.SGD(m.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WD)
    out = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = loss_of(m(x.to(device)), y.to(device), F)
        loss.backward()
        opt.step()
        out.append(loss.item())
    return out


def rel_err(a, b):
    return max(abs(p - q) / max(abs(q), 1e-30) for p, q in zip(a, b))


def check_model(name, args, torch, F, cnnc):
    model = build(name, torch)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(*SHAPE, generator=g)
    y = torch.randint(0, CLASSES, (SHAPE[0],) + SHAPE[2:], generator=g)
    y[torch.rand(y.shape, generator=g) < 0.1] = IGNORE
    ref = torch_losses(model, x, y, "cuda", torch, F)
    cpu = torch_losses(model, x, y, "cpu", torch, F)
    bound = max(4 * rel_err(cpu, ref), 1e-4)
    print("%s: torch-gpu %s torch-cpu %s bound %.1e" % (name, ref, cpu, bound), flush=True)

    # cnnc.compile on the GPU.
    try:
        m = copy.deepcopy(model).cuda()
        opt = torch.optim.SGD(m.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WD)
        tr = cnnc.compile(m, x.cuda(), opt, device="cuda", precision="fp32", layout="nchw",
                          ignore_index=IGNORE,
                          aux_loss_weight=AUX if name != "lraspp_mobilenet_v3_large" else None)
        got = [float(tr.step(x.cuda(), y.cuda())) for _ in range(STEPS)]
        err = rel_err(got, ref)
        check(err <= bound, "%s cnnc.compile(cuda) losses %s rel %.1e <= %.1e"
              % (name, got, err, bound))
    except Exception as e:  # a refusal is a failure of this check, not a crash
        check(False, "%s cnnc.compile(cuda): %s: %s" % (name, type(e).__name__,
                                                         str(e).splitlines()[0]))

    # The executable, from .npy masks, with a validation split.
    from cnnc.export import export_for_training
    work = os.path.join(args.work, name)
    os.makedirs(work, exist_ok=True)
    onnx = os.path.join(work, name + ".onnx")
    export_for_training(model, x, onnx)
    exe = os.path.join(work, "train")
    try:
        run([args.cnnc, onnx, "--train", "--optimizer", "sgd", "--lr", str(LR), "--momentum",
             str(MOMENTUM), "--weight-decay", str(WD), "--precision", "fp32", "--layout", "nchw",
             "--ignore-index", str(IGNORE), "--aux-loss-weight", str(AUX), "-o", exe])
        data = os.path.join(work, "data")
        os.makedirs(data, exist_ok=True)
        np.save(os.path.join(data, "train_x.npy"), x.numpy())
        np.save(os.path.join(data, "train_y.npy"), y.numpy())
        np.save(os.path.join(data, "val_x.npy"), x.numpy())
        np.save(os.path.join(data, "val_y.npy"), y.numpy())
        ckpt = os.path.join(work, "after.cnnw")
        out, _ = run([exe, "--data", data, "--steps", str(STEPS), "--lr", str(LR),
                      "--log-every", "1", "--checkpoint", ckpt])
        got = losses_of(out)
        err = rel_err(got, ref) if len(got) == STEPS else float("inf")
        check(err <= bound, "%s executable losses %s rel %.1e <= %.1e" % (name, got, err, bound))
        # mIoU through the step's eval function (@forward without the aux
        # heads): checked apart so that the losses above are judged either
        # way (its numbers against PyTorch: check_dense_eval.py).
        out, _ = run([exe, "--data", data, "--steps", str(STEPS), "--lr", str(LR),
                      "--log-every", "1", "--eval"])
        m = re.search(r"^eval step \d+ epoch \S+: mIoU (\S+)% pixel acc (\S+)%", out, re.M)
        check(m is not None and "mIoU" in out.splitlines()[-1],
              "%s executable prints mIoU (eval and done lines): %s"
              % (name, m.group(0) if m else out[-500:]))
    except Exception as e:
        check(False, "%s executable: %s" % (name, str(e)[-1500:]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cnnc", default=os.path.join(HERE, "..", "..", "build", "bin", "cnnc"))
    ap.add_argument("--models", default="fcn_resnet50,deeplabv3_resnet50,"
                                        "lraspp_mobilenet_v3_large")
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    torch = require_gpu("check_segmentation")
    import torch.nn.functional as F
    import cnnc
    args.work = args.work or tempfile.mkdtemp(prefix="check_segmentation_")
    for name in args.models.split(","):
        check_model(name, args, torch, F, cnnc)
    print("%d failed" % len(FAILURES))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
