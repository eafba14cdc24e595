#!/usr/bin/env python3
"""GPU check of the executable's dense validation (issue 32 part 3): a tiny
FCN (conv -> BN -> ReLU -> 1x1 conv to 5 classes, 8 x 8 pixels) with and
without an auxiliary head, compiled f32 NCHW with --ignore-index 255, trains
3 SGD steps with `./train --data DIR --eval --checkpoint after.cnnw
--log-json log.json` (train_x/train_y and val_x/val_y .npy; 5 validation
images at batch 2, so the last batch is padded). PyTorch then loads the
checkpoint's weights and running statistics into the same module and
computes the confusion matrix over the same validation images in eval mode
(aux head unused, BN running statistics), pixels labelled 255 left out.

Pass: the executable's per-class IoU and mIoU (its JSON eval record) equal
PyTorch's within 1e-6, or, where PyTorch's top two logits of some pixel are
closer than 1e-4 (an arg-max a rounding difference may flip), within the
IoU change those pixels can make. Exit 0: all passed; 1: a check failed;
77: no CUDA GPU (ctest skip).

  python3 test/gpu/check_dense_eval.py [--cnnc build/bin/cnnc] [--work DIR]
"""
import argparse
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gpucheck_common import FAILURES, check, require_gpu, run  # noqa: E402

import numpy as np  # noqa: E402

CLASSES, IGNORE, BATCH, VAL, STEPS = 5, 255, 2, 5, 3


def tiny_fcn(torch, aux):
    nn = torch.nn

    class TinyFCN(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 8, 3, padding=1)
            self.b1 = nn.BatchNorm2d(8)
            self.head = nn.Conv2d(8, CLASSES, 1)
            self.aux = nn.Conv2d(8, CLASSES, 1) if aux else None

        def forward(self, x):
            f = torch.relu(self.b1(self.c1(x)))
            if self.aux is None:
                return self.head(f)
            return self.head(f), self.aux(f)

    torch.manual_seed(0)
    return TinyFCN()


def torch_iou(model, x, y, torch):
    """Per-class IoU as the runtime's (NaN for a class in neither target nor
    prediction), and the pixels whose top-2 logits are within 1e-4."""
    model.eval()
    with torch.no_grad():
        out = model(torch.from_numpy(x))
    out = out[0] if isinstance(out, tuple) else out
    pred = out.argmax(1).numpy()
    top2 = torch.topk(out, 2, dim=1).values
    keep = y != IGNORE
    close = int(((top2[:, 0] - top2[:, 1]).numpy() < 1e-4)[keep].sum())
    conf = np.zeros((CLASSES, CLASSES), np.int64)
    np.add.at(conf, (y[keep], pred[keep]), 1)
    tp = np.diag(conf).astype(np.float64)
    union = conf.sum(0) + conf.sum(1) - np.diag(conf)
    iou = np.where(union > 0, tp / np.maximum(union, 1), np.nan)
    return iou, close, int(keep.sum())


def check_model(aux, args, torch):
    from cnnc.export import export_for_training
    from cnnc.safetensors import load_state_dict
    name = "tiny_fcn_aux" if aux else "tiny_fcn"
    work = os.path.join(args.work, name)
    os.makedirs(os.path.join(work, "data"), exist_ok=True)
    model = tiny_fcn(torch, aux)
    g = np.random.default_rng(1)
    x = g.standard_normal((BATCH, 3, 8, 8), dtype=np.float32)
    onnx = os.path.join(work, name + ".onnx")
    export_for_training(model, torch.from_numpy(x), onnx)
    exe = os.path.join(work, "train")
    try:
        run([args.cnnc, onnx, "--train", "--optimizer", "sgd", "--lr", "0.1",
             "--precision", "fp32", "--layout", "nchw", "--ignore-index", str(IGNORE), "-o", exe])
        data = os.path.join(work, "data")
        tx = g.standard_normal((6, 3, 8, 8), dtype=np.float32)
        ty = g.integers(0, CLASSES, (6, 8, 8)).astype(np.int64)
        vx = g.standard_normal((VAL, 3, 8, 8), dtype=np.float32)
        vy = g.integers(0, CLASSES, (VAL, 8, 8)).astype(np.int64)
        ty[g.random(ty.shape) < 0.1] = IGNORE
        vy[g.random(vy.shape) < 0.1] = IGNORE
        for stem, a in (("train_x", tx), ("train_y", ty), ("val_x", vx), ("val_y", vy)):
            np.save(os.path.join(data, stem + ".npy"), a)
        ckpt, log = os.path.join(work, "after.cnnw"), os.path.join(work, "log.json")
        out, _ = run([exe, "--data", data, "--steps", str(STEPS), "--eval",
                      "--checkpoint", ckpt, "--log-json", log])
        evals = [r for r in map(json.loads, open(log)) if "miou" in r and "iou" in r]
        check(len(evals) >= 1 and "mIoU" in out, "%s executable --eval prints mIoU: %s"
              % (name, [ln for ln in out.splitlines() if "mIoU" in ln][-1:]))
        if not evals:
            return
        got = np.array([np.nan if v is None else v for v in evals[-1]["iou"]], np.float64)
        # The checkpoint holds every parameter and running statistic (not
        # BN's num_batches_tracked, which eval mode does not read).
        missing = model.load_state_dict(load_state_dict(ckpt), strict=False).missing_keys
        check(all(k.endswith("num_batches_tracked") for k in missing),
              "%s checkpoint loads into the module (missing %s)" % (name, missing))
        want, close, pixels = torch_iou(model, vx, vy, torch)
        # One flipped arg-max moves an IoU by at most about 1 / (its union).
        tol = 1e-6 if close == 0 else 2.0 * close / max(1, pixels // CLASSES)
        both = ~np.isnan(want)
        ok = (np.array_equal(np.isnan(got), np.isnan(want))
              and np.all(np.abs(got[both] - want[both]) <= tol)
              and abs(evals[-1]["miou"] - np.nanmean(want)) <= tol)
        check(ok, "%s mIoU %.6f vs torch %.6f, per class %s vs %s (tol %.1e, %d near-tie "
              "pixels of %d)" % (name, evals[-1]["miou"], np.nanmean(want), got.round(6),
                                 want.round(6), tol, close, pixels))
    except Exception as e:  # a refusal or crash is a failed check, reported
        check(False, "%s: %s" % (name, str(e)[-1500:]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cnnc", default=os.path.join(HERE, "..", "..", "build", "bin", "cnnc"))
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    torch = require_gpu("check_dense_eval")
    args.work = args.work or tempfile.mkdtemp(prefix="check_dense_eval_")
    for aux in (False, True):
        check_model(aux, args, torch)
    print("%d failed" % len(FAILURES))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
