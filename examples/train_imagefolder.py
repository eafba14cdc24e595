#!/usr/bin/env python3
"""Train torchvision's ResNet-18 with cnnc on an ImageFolder of JPEG/PNG
images, from a torch DataLoader.

    python3 examples/train_imagefolder.py --data DIR [--epochs 5] [--batch 64]
    python3 examples/train_imagefolder.py --make-demo /tmp/shapes --epochs 2

DIR is torchvision's ImageFolder layout: one sub-folder per class
(DIR/<class>/*.jpg), or DIR/train/<class>/... and DIR/val/<class>/... for a
held-out set. `--make-demo DIR` first writes a small folder of generated
JPEG and PNG images (four classes of coloured shapes) there.

The model is compiled once for the batch shape (cnnc.compile exports it in
training mode); the loop, the augmentation, the schedule and the saving are
plain PyTorch. Outputs in --out: the loss curve (loss.png) and the trained
weights as the module's own state_dict (resnet18.pt).
"""
import argparse
import math
import os
import sys

# common puts the checkout's python/ on sys.path (no install needed).
from common import (add_training_args, evaluate, pick_device, plot_losses, save_weights, train)

import torch
import torchvision
from torchvision import transforms

import cnnc

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def make_demo(root, per_class=48, seed=0):
    """Four classes of generated pictures (red discs, green horizontal bars,
    blue squares, yellow triangles on noisy backgrounds), 3/4 JPEG and 1/4
    PNG, of varying sizes, split into train/ and val/."""
    import random

    from PIL import Image, ImageDraw

    rng = random.Random(seed)
    classes = {"disc": (220, 40, 40), "bars": (40, 200, 60),
               "square": (40, 70, 230), "triangle": (230, 210, 40)}
    for split, n in (("train", per_class), ("val", per_class // 4)):
        for name, colour in classes.items():
            d = os.path.join(root, split, name)
            os.makedirs(d, exist_ok=True)
            for i in range(n):
                w, h = rng.randint(80, 160), rng.randint(80, 160)
                bg = tuple(rng.randint(0, 90) for _ in range(3))
                img = Image.new("RGB", (w, h), bg)
                draw = ImageDraw.Draw(img)
                s = rng.randint(min(w, h) // 3, min(w, h) * 2 // 3)
                x, y = rng.randint(0, w - s), rng.randint(0, h - s)
                c = tuple(min(255, max(0, v + rng.randint(-30, 30))) for v in colour)
                if name == "disc":
                    draw.ellipse([x, y, x + s, y + s], fill=c)
                elif name == "bars":
                    for k in range(0, s, max(4, s // 5)):
                        draw.rectangle([x, y + k, x + s, y + k + max(2, s // 10)], fill=c)
                elif name == "square":
                    draw.rectangle([x, y, x + s, y + s], fill=c)
                else:
                    draw.polygon([(x, y + s), (x + s, y + s), (x + s // 2, y)], fill=c)
                ext = "png" if i % 4 == 3 else "jpg"
                img.save(os.path.join(d, "%s_%03d.%s" % (name, i, ext)), quality=90)
    return root


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", help="ImageFolder root (DIR/<class>/ or DIR/train, DIR/val)")
    src.add_argument("--make-demo", metavar="DIR", help="write a small demo folder there and train on it")
    ap.add_argument("--image-size", type=int, default=224)
    add_training_args(ap, epochs=3, batch=32, weight_decay=1e-4, workers=4,
                      out="runs/imagefolder")
    args = ap.parse_args()

    root = make_demo(args.make_demo) if args.make_demo else args.data
    if not os.path.isdir(root):
        sys.exit("error: %s is not a folder" % root)
    train_dir, val_dir = root, None
    if os.path.isdir(os.path.join(root, "train")):
        train_dir = os.path.join(root, "train")
        if os.path.isdir(os.path.join(root, "val")):
            val_dir = os.path.join(root, "val")
    device = pick_device(args.device)
    size = args.image_size

    train_tf = transforms.Compose([
        transforms.RandomResizedCrop(size), transforms.RandomHorizontalFlip(),
        transforms.ToTensor(), transforms.Normalize(MEAN, STD)])
    eval_tf = transforms.Compose([
        transforms.Resize(int(size * 256 / 224)), transforms.CenterCrop(size),
        transforms.ToTensor(), transforms.Normalize(MEAN, STD)])
    train_set = torchvision.datasets.ImageFolder(train_dir, train_tf)
    pin = device == "cuda"
    # drop_last: the step is compiled for one batch shape.
    loader = torch.utils.data.DataLoader(
        train_set, batch_size=args.batch, shuffle=True, drop_last=True,
        num_workers=args.workers, pin_memory=pin, persistent_workers=args.workers > 0)

    model = torchvision.models.resnet18(num_classes=len(train_set.classes))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                          weight_decay=args.weight_decay)
    steps = args.epochs * len(loader)
    if args.max_steps is not None:
        steps = min(steps, args.max_steps)
    # Linear warmup over the first 10 % of the steps, then cosine decay.
    warm = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warm if s < warm
        else 0.5 * (1 + math.cos(math.pi * (s - warm) / max(1, steps - warm))))
    print("%d training images in %d classes, batch %d at %dx%d, %d steps on %s"
          % (len(train_set), len(train_set.classes), args.batch, size, size, steps, device))
    trainer = cnnc.compile(model, torch.randn(args.batch, 3, size, size), optimizer=opt,
                           device=device)
    print("compiled (%s backend%s)" % (trainer.backend, ", cache hit" if trainer.cache_hit else ""))

    losses = train(trainer, loader, sched, device, args.epochs, steps)
    os.makedirs(args.out, exist_ok=True)
    plot_losses(losses, os.path.join(args.out, "loss.png"), "ResNet-18 on %s" % os.path.basename(root.rstrip("/")))
    save_weights(trainer, model, os.path.join(args.out, "resnet18.pt"))
    print("first loss %.4f, last loss %.4f over %d steps" % (losses[0], losses[-1], len(losses)))
    if val_dir is not None:
        val_set = torchvision.datasets.ImageFolder(val_dir, eval_tf)
        if len(val_set) >= args.batch:
            val = torch.utils.data.DataLoader(val_set, batch_size=args.batch, drop_last=True,
                                              num_workers=args.workers)
            print("held-out top-1 accuracy: %.3f" % evaluate(trainer, val, device))
    print("wrote %s and %s" % (os.path.join(args.out, "loss.png"),
                               os.path.join(args.out, "resnet18.pt")))


if __name__ == "__main__":
    main()
