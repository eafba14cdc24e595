#!/usr/bin/env python3
"""Train torchvision's ResNet-18 with cnnc on CIFAR-10-format data (the
binary batches `data_batch_*.bin` / `test_batch.bin`: one label byte, then
3x32x32 bytes per image) from a torch DataLoader.

    python3 examples/train_cifar.py --data cifar-10-batches-bin [--epochs 10]
    python3 examples/train_cifar.py            # the bundled digits (scripts/prepare-data.sh)

Augmentation (random crop with 4 pixels of padding, horizontal flip),
normalization, the cosine schedule and the saving are plain PyTorch; cnnc
compiles and runs the training step. Outputs in --out: loss.png and the
trained weights as the module's own state_dict (resnet18.pt).
"""
import argparse
import glob
import os
import sys

# common puts the checkout's python/ on sys.path (no install needed).
from common import (HERE, add_training_args, evaluate, pick_device, plot_losses, save_weights, train)

import numpy as np
import torch
import torchvision

import cnnc

RECORD = 1 + 3 * 32 * 32
MEAN = torch.tensor([0.4914, 0.4822, 0.4465]).view(3, 1, 1)
STD = torch.tensor([0.2470, 0.2435, 0.2616]).view(3, 1, 1)


class CifarBinary(torch.utils.data.Dataset):
    """CIFAR-10 binary batch files as (image float[3,32,32], label)."""

    def __init__(self, files, augment):
        chunks = []
        for f in files:
            raw = np.fromfile(f, dtype=np.uint8)
            if raw.size == 0 or raw.size % RECORD:
                raise ValueError("%s: %d bytes is not a whole number of %d-byte CIFAR-10 records"
                                 % (f, raw.size, RECORD))
            chunks.append(raw.reshape(-1, RECORD))
        data = np.concatenate(chunks)
        self.labels = torch.from_numpy(data[:, 0].astype(np.int64))
        self.images = torch.from_numpy(data[:, 1:].reshape(-1, 3, 32, 32).copy())
        if int(self.labels.max()) > 9:
            raise ValueError("label %d in %s: CIFAR-10 has 10 classes" % (int(self.labels.max()), files))
        self.augment = augment

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        x = self.images[i].float().div_(255)
        if self.augment:
            x = torch.nn.functional.pad(x, (4, 4, 4, 4))
            dy, dx = torch.randint(0, 9, (2,)).tolist()
            x = x[:, dy:dy + 32, dx:dx + 32]
            if torch.rand(()) < 0.5:
                x = x.flip(2)
        return (x - MEAN) / STD, self.labels[i]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=os.path.join(HERE, "..", "data", "generated", "digits"),
                    help="folder with data_batch_*.bin and test_batch.bin")
    add_training_args(ap, epochs=5, batch=128, weight_decay=5e-4, workers=2, out="runs/cifar")
    args = ap.parse_args()

    train_files = sorted(glob.glob(os.path.join(args.data, "data_batch_*.bin")))
    test_files = sorted(glob.glob(os.path.join(args.data, "test_batch.bin")))
    if not train_files:
        sys.exit("error: no data_batch_*.bin in %s (scripts/prepare-data.sh makes the bundled "
                 "digits)" % args.data)
    device = pick_device(args.device)
    try:
        train_set = CifarBinary(train_files, augment=True)
        test_set = CifarBinary(test_files, augment=False) if test_files else None
    except ValueError as e:
        sys.exit("error: %s" % e)
    loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch, shuffle=True,
                                         drop_last=True, num_workers=args.workers,
                                         pin_memory=device == "cuda")
    model = torchvision.models.resnet18(num_classes=10)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                          weight_decay=args.weight_decay, nesterov=True)
    steps = args.epochs * len(loader)
    if args.max_steps is not None:
        steps = min(steps, args.max_steps)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(steps, 1))
    print("%d training images, batch %d, %d steps on %s" % (len(train_set), args.batch, steps, device))
    trainer = cnnc.compile(model, torch.randn(args.batch, 3, 32, 32), optimizer=opt, device=device)
    print("compiled (%s backend%s)" % (trainer.backend, ", cache hit" if trainer.cache_hit else ""))

    losses = train(trainer, loader, sched, device, args.epochs, steps)
    os.makedirs(args.out, exist_ok=True)
    plot_losses(losses, os.path.join(args.out, "loss.png"), "ResNet-18 on %s" % os.path.basename(os.path.abspath(args.data)))
    save_weights(trainer, model, os.path.join(args.out, "resnet18.pt"))
    print("first loss %.4f, last loss %.4f over %d steps" % (losses[0], losses[-1], len(losses)))
    if test_set is not None:
        if len(test_set) >= args.batch:
            test = torch.utils.data.DataLoader(test_set, batch_size=args.batch, drop_last=True)
            print("test top-1 accuracy: %.3f" % evaluate(trainer, test, device))
    print("wrote %s and %s" % (os.path.join(args.out, "loss.png"),
                               os.path.join(args.out, "resnet18.pt")))


if __name__ == "__main__":
    main()
