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

  python3 bench/dp/torch_ref.py one --work DIR --out DIR/pt_one
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
    model = prepare.resnet18() if name == "resnet18" else prepare.nobn_model()
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
    ap.add_argument("mode", choices=["one", "ddp"])
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True, help="output prefix (.json, .npz)")
    ap.add_argument("--model", default="resnet18", choices=["resnet18", "nobn"])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                    help="cpu: mode one only (tests on machines without a GPU)")
    args = ap.parse_args(argv)
    if args.device == "cpu" and args.mode != "one":
        ap.error("--device cpu runs mode one only")
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


if __name__ == "__main__":
    sys.exit(main())
