#!/usr/bin/env python3
"""cnnc.compile under torchrun (bench/device-dp.sh part E c, and part N's
two-node torchrun): every rank builds ResNet-18 with nn.SyncBatchNorm from
prepare.py's initial state through the Python entry (which sees WORLD_SIZE
and builds with cnnc --gpus N --sync-bn on cuda:LOCAL_RANK), f32 NCHW, SGD
with momentum, and trains on its shard (rows [r*B, (r+1)*B)) of prepare.py's
global batches, the batches torch_ref.py trains on.

Writes PREFIX.rank<r>.json (the losses trainer.step returned: the mean over
the global batch) on every rank and PREFIX.rank0.npz (trainer.state_dict())
on rank 0. The compiled step is cached per rank (CNNC_CACHE_DIR/rank<r>) so
that the ranks' concurrent builds do not share a directory.

  torchrun --standalone --nproc-per-node 2 bench/dp/compile_torchrun.py \
      --work DIR --out DIR/cnnc_tr
"""
import argparse
import os
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import common  # noqa: E402
import torch_ref  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True, help="output prefix")
    ap.add_argument("--model", default="resnet18", choices=["resnet18", "nobn"])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                    help="cpu: one process on the reference interpreter (tests)")
    args = ap.parse_args(argv)
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    base = os.environ.get("CNNC_CACHE_DIR") or os.path.join(args.work, "cache")
    os.environ["CNNC_CACHE_DIR"] = os.path.join(base, "rank%d" % rank)
    import cnnc
    torch_ref.exact_f32()
    x, y, batches, meta = torch_ref.inputs(args.work)
    if args.device == "cpu":
        if world > 1:
            ap.error("--device cpu runs one process (the CPU step is not data parallel)")
        device = torch.device("cpu")
    else:
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
    model = torch_ref.load_model(args.work, args.model, device)
    if world > 1:
        model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)
    b = batches.shape[1] // world
    opt = torch.optim.SGD(model.parameters(), lr=meta["lr"], momentum=meta["momentum"])
    t0 = time.time()
    trainer = cnnc.compile(model, torch.from_numpy(x[:b]).to(device), optimizer=opt,
                           precision="fp32", layout="nchw", device=device.type)
    print("rank %d of %d: compiled in %.1f s (cnnc flags %s)" %
          (rank, world, time.time() - t0, trainer.info["flags"]), flush=True)
    losses = []
    for s in range(meta["steps"]):
        rows = batches[s, rank * b:(rank + 1) * b]
        xb = torch.from_numpy(x[rows]).to(device)
        yb = torch.from_numpy(y[rows]).to(device)
        losses.append(float(trainer.step(xb, yb)))
    common.save_json("%s.rank%d.json" % (args.out, rank),
                     {"losses": losses, "rank": rank, "world": world})
    print("rank %d of %d: losses %s" % (rank, world, " ".join("%.7g" % v for v in losses)),
          flush=True)
    if rank == 0:
        sd = {k: v.detach().cpu().numpy() for k, v in trainer.state_dict().items()}
        np.savez(args.out + ".rank0.npz", **sd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
