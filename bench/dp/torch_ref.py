#!/usr/bin/env python3
"""PyTorch's own data-parallel difference, the bound of bench/device-dp.sh's
exactness checks (part E b): ResNet-18 from prepare.py's initial state on
prepare.py's batches, f32 (TF32 off), SGD with momentum.

  one:  one process, the whole global batch (2B) per step, plain BatchNorm
  ddp:  under torchrun (2 processes): DistributedDataParallel +
        nn.SyncBatchNorm, rank r trains on rows [r*B, (r+1)*B) of each global
        batch (the executable's shards)

Writes PREFIX.json (per-step losses: the global batch's mean loss; under DDP
the mean of the ranks' losses, all-reduced) and PREFIX.npz (the final
state_dict, rank 0).

  accumulate: one process, --micro M micro-batches of the executable's batch
        stream per step (global batch M x B, B = prepare.py's --batch, the
        stream of the pipelined executable: bench/device-dp.sh part P), each
        micro-batch's loss / M backward, one SGD step; the reported loss is
        the mean of the M micro-losses (what a pipelined step prints). Run on
        cuda and on cpu it gives PyTorch's own spread for micro-batched
        BatchNorm, the bound of part P b. With --amp: torch.autocast f16
        and a GradScaler (init 65536, scaler.step/update once per M
        micro-batches), against the f32 run PyTorch's AMP-vs-f32 spread,
        the bound of part P f.

  python3 bench/dp/torch_ref.py one --work DIR --out DIR/pt_one
  python3 bench/dp/torch_ref.py accumulate --micro 4 --steps 5 --work DIR --out DIR/pt_acc
  torchrun --standalone --nproc-per-node 2 bench/dp/torch_ref.py ddp --work DIR --out DIR/pt_ddp
"""
import argparse
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import common  # noqa: E402
import prepare  # noqa: E402


def exact_f32():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def load_model(work, name, device):
    model = prepare.resnet(name) if name.startswith("resnet") else prepare.nobn_model()
    init = np.load(os.path.join(work, name + "_init.npz"))
    model.load_state_dict({k: torch.from_numpy(init[k]) for k in init.files})
    return model.to(device)


def inputs(work):
    x = np.load(os.path.join(work, "data_x.npy"))
    y = np.load(os.path.join(work, "data_y.npy"))
    return x, y, np.load(os.path.join(work, "batches.npy")), common.load_json(
        os.path.join(work, "meta.json"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["one", "ddp", "accumulate"])
    ap.add_argument("--micro", type=int, default=4, help="accumulate: micro-batches a step")
    ap.add_argument("--perturb", type=float, default=0.0,
                    help="accumulate: multiply each initial weight by 1 + PERTURB x N(0, 1) "
                         "(fixed generator): PyTorch's own spread from rounding-level changes")
    ap.add_argument("--steps", type=int, default=0,
                    help="accumulate: steps (default: as many as the data gives)")
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True, help="output prefix (.json, .npz)")
    ap.add_argument("--model", default="resnet18", choices=["resnet18", "resnet152", "nobn"])
    ap.add_argument("--amp", action="store_true",
                    help="accumulate: torch.autocast(float16) + GradScaler (cuda)")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                    help="cpu: modes one and accumulate (PyTorch's CPU-vs-GPU spread; tests)")
    args = ap.parse_args(argv)
    if args.device == "cpu" and args.mode == "ddp":
        ap.error("--device cpu runs modes one and accumulate only")
    exact_f32()
    x, y, batches, meta = inputs(args.work)
    rank, world = 0, 1
    if args.mode == "ddp":
        import torch.distributed as dist
        dist.init_process_group("nccl")
        rank, world = dist.get_rank(), dist.get_world_size()
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    device = (torch.device("cpu") if args.device == "cpu"
              else torch.device("cuda", torch.cuda.current_device()))
    model = load_model(args.work, args.model, device)
    if args.mode == "ddp":
        model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index])
    opt = torch.optim.SGD(model.parameters(), lr=meta["lr"], momentum=meta["momentum"])
    model.train()
    if args.mode == "accumulate":
        if args.perturb:
            with torch.no_grad():
                g = torch.Generator().manual_seed(7)
                for p in model.parameters():
                    p.mul_(1 + args.perturb * torch.randn(p.shape, generator=g).to(device))
        return accumulate(args, model, opt, x, y, meta, device)
    gb = batches.shape[1]
    b = gb // world
    losses = []
    for s in range(meta["steps"]):
        rows = batches[s, rank * b:(rank + 1) * b]
        xb = torch.from_numpy(x[rows]).to(device)
        yb = torch.from_numpy(y[rows]).to(device)
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        report = loss.detach().clone()
        if world > 1:
            torch.distributed.all_reduce(report)
            report /= world
        losses.append(float(report))
    if rank == 0:
        net = model.module if world > 1 else model
        sd = {k: v.detach().cpu().numpy() for k, v in net.state_dict().items()}
        np.savez(args.out + ".npz", **sd)
        common.save_json(args.out + ".json", {"losses": losses, "mode": args.mode,
                                              "world": world, "torch": torch.__version__})
        print("%s %s world %d: losses %s" % (args.model, args.mode, world,
                                             " ".join("%.7g" % v for v in losses)))
    if world > 1:
        torch.distributed.destroy_process_group()
    return 0


def accumulate(args, model, opt, x, y, meta, device):
    b, m = meta["batch"], args.micro
    n = x.shape[0]
    steps = args.steps or n // (b * m)
    rows_all = common.stream_batches(n, b * m, steps, seed=0)
    losses = []
    scaler = torch.amp.GradScaler("cuda", init_scale=65536.0) if args.amp else None
    for s in range(steps):
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for k in range(m):
            rows = rows_all[s, k * b:(k + 1) * b]
            xb = torch.from_numpy(x[rows]).to(device)
            yb = torch.from_numpy(y[rows]).to(device)
            with torch.autocast("cuda", dtype=torch.float16, enabled=args.amp):
                loss = F.cross_entropy(model(xb), yb)
            if scaler:
                scaler.scale(loss / m).backward()
            else:
                (loss / m).backward()
            total += float(loss)
        if scaler:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        losses.append(total / m)
    common.save_json(args.out + ".json", {"losses": losses, "mode": "accumulate",
                                          "micro": m, "device": args.device,
                                          "perturb": args.perturb, "amp": args.amp,
                                          "torch": torch.__version__})
    print("%s accumulate %d x %d on %s: losses %s" % (args.model, m, b, args.device,
                                                      " ".join("%.7g" % v for v in losses)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
