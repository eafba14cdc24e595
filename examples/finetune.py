#!/usr/bin/env python3
"""Fine-tune a pretrained torchvision ResNet-18 with cnnc, as PyTorch users
do it: a new head trained on a frozen backbone (its BatchNorm in eval mode)
first, then the whole network with the backbone at a tenth of the head's
learning rate, no weight decay on BatchNorm and biases, gradients clipped
to a global norm, and several micro-batches accumulated per update.

    python3 examples/finetune.py --weights resnet18.pt [--data DIR]

--weights is a state_dict file (torch.save(model.state_dict(), path), e.g.
torchvision's ImageNet weights saved once); its fc layer is replaced by a
new one for the data's classes. --make-weights PATH writes a stand-in
(a randomly initialized ResNet-18's state_dict) for trying this without a
download. --data is an ImageFolder directory; without it, torchvision's
FakeData (random images, 10 classes).

Unfreezing changes the compiled step (a frozen backbone has no weight
gradients and no optimizer state): the script calls cnnc.compile again,
which takes the model's current weights and the optimizer's state (sync_to
wrote it back). Outputs in --out: the fine-tuned state_dict and the
optimizer's state_dict (finetuned.pt, both as torch.save'd dicts, which
`torch.load` + `load_state_dict` resume from).
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

import torch  # noqa: E402
import torchvision  # noqa: E402
import torchvision.transforms as T  # noqa: E402

import cnnc  # noqa: E402


def batches(loader):
    while True:  # epochs without end; the phases count the steps
        for x, y in loader:
            yield x, y


def run_phase(name, trainer, data, steps, accumulate, sched):
    """`steps` optimizer steps of `accumulate` micro-batches each."""
    losses = []
    for _ in range(steps):
        for _ in range(accumulate):
            x, y = next(data)
            losses.append(float(trainer.step(x, y)))
        sched.step()
    print("%s: first loss %.4f, last loss %.4f over %d steps (%d micro-batches)" %
          (name, losses[0], losses[-1], steps, len(losses)), flush=True)
    return losses


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--weights", help="pretrained ResNet-18 state_dict file")
    ap.add_argument("--make-weights", metavar="PATH",
                    help="write a stand-in pretrained state_dict to PATH and use it")
    ap.add_argument("--data", help="ImageFolder directory (default: FakeData)")
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--frozen-steps", type=int, default=20,
                    help="optimizer steps with the backbone frozen")
    ap.add_argument("--steps", type=int, default=50, help="optimizer steps after unfreezing")
    ap.add_argument("--accumulate", type=int, default=2, help="micro-batches per update")
    ap.add_argument("--lr", type=float, default=0.05, help="the head's learning rate")
    ap.add_argument("--clip", type=float, default=1.0, help="max global gradient norm")
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda if present)")
    ap.add_argument("--out", default="finetune-out")
    args = ap.parse_args()
    if args.make_weights:
        torch.save(torchvision.models.resnet18().state_dict(), args.make_weights)
        args.weights = args.make_weights
    if not args.weights:
        ap.error("--weights (or --make-weights) is required")
    if args.accumulate > 1 and args.device != "cpu" and torch.cuda.is_available():
        precision = "fp32"  # accumulation is fp32 only
    else:
        precision = None

    tf = T.Compose([T.RandomResizedCrop(args.image_size, scale=(0.5, 1.0)),
                    T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    if args.data:
        dataset = torchvision.datasets.ImageFolder(args.data, tf)
        classes = len(dataset.classes)
    else:
        classes = 10
        dataset = torchvision.datasets.FakeData(
            size=512, image_size=(3, args.image_size, args.image_size),
            num_classes=classes, transform=T.Compose(tf.transforms[1:]), random_offset=0)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch, shuffle=True,
                                         drop_last=True, num_workers=0)
    data = batches(loader)
    example = next(iter(loader))[0]

    # The pretrained network with a new head.
    model = torchvision.models.resnet18()
    model.load_state_dict(torch.load(args.weights))
    model.fc = torch.nn.Linear(model.fc.in_features, classes)
    common = dict(clip_grad_norm=args.clip, accumulate=args.accumulate,
                  device=args.device, precision=precision)

    # Phase 1: only the head trains; the backbone is frozen, its BatchNorm
    # uses (and keeps) the pretrained running statistics.
    model.train()
    for name, p in model.named_parameters():
        p.requires_grad_(name.startswith("fc."))
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.eval()
    opt = torch.optim.SGD(model.fc.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0)
    trainer = cnnc.compile(model, example, optimizer=opt, **common)
    print("compiled the frozen-backbone step (%s, cache hit: %s)" %
          (trainer.backend, trainer.cache_hit), flush=True)
    first = run_phase("frozen backbone", trainer, data, args.frozen_steps, args.accumulate, sched)
    trainer.sync_to(model)  # the head's weights and its momentum back into model and opt

    # Phase 2: everything trains; the backbone at a tenth of the head's LR,
    # no weight decay on its 1-D parameters (BatchNorm, biases), BatchNorm
    # back in training mode. A new step: compile again.
    model.train()
    for p in model.parameters():
        p.requires_grad_(True)
    backbone = [(n, p) for n, p in model.named_parameters() if not n.startswith("fc.")]
    opt.add_param_group({"params": [p for _, p in backbone if p.dim() > 1],
                         "lr": args.lr / 10, "weight_decay": 1e-4})
    opt.add_param_group({"params": [p for _, p in backbone if p.dim() <= 1],
                         "lr": args.lr / 10, "weight_decay": 0.0})
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, args.steps))
    trainer = cnnc.compile(model, example, optimizer=opt, **common)
    print("compiled the full step (3 param groups)", flush=True)
    rest = run_phase("unfrozen", trainer, data, args.steps, args.accumulate, sched)
    trainer.sync_to(model)

    losses = first + rest
    print("first loss %.4f, last loss %.4f over %d steps" %
          (losses[0], losses[-1], args.frozen_steps + args.steps))
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "finetuned.pt")
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, path)
    print("saved %s (model and optimizer state_dicts)" % path)


if __name__ == "__main__":
    main()
