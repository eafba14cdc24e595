#!/usr/bin/env python3
"""Inputs of bench/device-dp.sh's exactness checks (part E), all from fixed
seeds, into --work:

  data_x.npy, data_y.npy   float32 N x 3 x S x S images (used as they are:
                           the executable does not rescale float .npy data)
                           and int64 labels; N = steps x 2B, so the ten
                           steps are one epoch
  batches.npy              the sample indices of each global batch (2B) in
                           the order the executable's loader draws them
                           (common.stream_batches, --seed 0): PyTorch trains
                           on the same batches as the executable
  resnet18.onnx            ResNet-18 (torchvision, 10 classes) exported for
                           training (dynamo=False) at batch B; cnnc --batch
                           2B makes the one-GPU step from the same file
  resnet18_init.npz        its initial state (the exported initializers;
                           parameters and BN buffers by state_dict name)
  resnet152.onnx, resnet152_init.npz
                           the same for ResNet-152 (--models resnet152: part
                           P's deep model at a size that fits one GPU)
  nobn.onnx, nobn_init.npz a small net without BatchNorm (NoBN below)
  meta.json                B, S, steps, lr, momentum

Usage: python3 bench/dp/prepare.py --work DIR [--batch 16] [--size 32] [--steps 10]
"""
import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import common  # noqa: E402


def nobn_model(num_classes=10):
    """Convolutions, ReLU, a strided convolution, global average pooling and
    a linear layer: nothing whose result depends on how the batch is split,
    so N ranks x B must equal 1 x N*B to rounding."""
    import torch.nn as nn
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, num_classes))


class SkipNet:
    """A BatchNorm-free net with a long skip connection (a U-Net's in
    miniature): the stem's output is added back after six more
    convolutions, so on 3 or more pipeline stages it crosses several cuts
    and the stages between relay it (cnn-pipeline-split). Without
    BatchNorm the pipelined step equals --accumulate M to rounding."""

    @staticmethod
    def build(num_classes=10):
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU())
                self.body = nn.Sequential(*[m for _ in range(6)
                                            for m in (nn.Conv2d(16, 16, 3, padding=1),
                                                      nn.ReLU())])
                self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                          nn.Linear(16, num_classes))

            def forward(self, x):
                s = self.stem(x)
                return self.head(self.body(s) + s)

        return Net()


def resnet18(num_classes=10, seed=0):
    return resnet("resnet18", num_classes, seed)


def resnet(name, num_classes=10, seed=0):
    """A torchvision ResNet (resnet18, resnet152) from a fixed seed."""
    import torch
    import torchvision
    torch.manual_seed(seed)
    return getattr(torchvision.models, name)(weights=None, num_classes=num_classes)


def save_state(model, path):
    np.savez(path, **{k: v.detach().cpu().numpy() for k, v in model.state_dict().items()})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", required=True)
    ap.add_argument("--batch", type=int, default=16, help="per-rank batch B")
    ap.add_argument("--size", type=int, default=32, help="image height and width")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--models", default="resnet18,nobn",
                    help="which models to export (comma-separated; empty: data only)")
    args = ap.parse_args(argv)
    os.makedirs(args.work, exist_ok=True)
    gb = args.batch * args.ranks
    n = args.steps * gb
    rng = np.random.RandomState(1234)
    x = rng.standard_normal((n, 3, args.size, args.size)).astype(np.float32)
    y = rng.randint(0, 10, size=n).astype(np.int64)
    np.save(os.path.join(args.work, "data_x.npy"), x)
    np.save(os.path.join(args.work, "data_y.npy"), y)
    np.save(os.path.join(args.work, "batches.npy"),
            common.stream_batches(n, gb, args.steps, seed=0))
    common.save_json(os.path.join(args.work, "meta.json"),
                     {"batch": args.batch, "ranks": args.ranks, "size": args.size,
                      "steps": args.steps, "lr": args.lr, "momentum": args.momentum})
    models = [m for m in args.models.split(",") if m]
    unknown = set(models) - {"resnet18", "resnet152", "nobn", "skipnet"}
    if unknown:
        ap.error("unknown model(s) %s (resnet18, resnet152, nobn, skipnet)"
                 % ", ".join(sorted(unknown)))
    if models:
        import torch
        from cnnc.train_check import export_training
        shape = (args.batch, 3, args.size, args.size)
        for name in models:
            if name.startswith("resnet"):
                m = resnet(name)
            elif name == "skipnet":
                torch.manual_seed(0)
                m = SkipNet.build()
            else:
                torch.manual_seed(0)
                m = nobn_model()
            export_training(m, os.path.join(args.work, name + ".onnx"), shape)
            save_state(m, os.path.join(args.work, name + "_init.npz"))
    print("prepared %s: %d samples %dx%d, global batch %d, %d steps"
          % (args.work, n, args.size, args.size, gb, args.steps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
