#!/usr/bin/env python3
"""PyTorch DDP throughput, the baseline of bench/device-dp.sh part S: a
torchvision model with AMP (f16 autocast + GradScaler) and channels_last,
SGD with momentum, synthetic data (one fixed batch on the GPU, as the
executable's --data synthetic), `--batch` images per GPU. `--warmup` steps
first (cuDNN autotuning, NCCL buckets), then `--steps` timed steps between
two synchronizations; rank 0 prints

  DDP <model> world <N> batch <B>/GPU: <X> img/s total (<S> steps timed)

  torchrun --standalone --nproc-per-node N bench/dp/ddp_bench.py resnet50

--compile wraps the DDP module in torch.compile (mode `--compile-mode`,
default "default"): DDPOptimizer splits the graph at the bucket boundaries
so that the all-reduces still overlap the backward pass, as PyTorch's docs
recommend for compiled DDP. The line then reads "DDP+compile(<mode>) ...".
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torchvision


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--compile", action="store_true",
                    help="torch.compile the DDP module")
    ap.add_argument("--compile-mode", default="default",
                    help="torch.compile mode (default, reduce-overhead, max-autotune)")
    args = ap.parse_args(argv)
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    torch.backends.cudnn.benchmark = True
    model = getattr(torchvision.models, args.model)(num_classes=args.classes)
    model = model.cuda().to(memory_format=torch.channels_last)
    model = torch.nn.parallel.DistributedDataParallel(model,
                                                      device_ids=[torch.cuda.current_device()])
    if args.compile:
        model = torch.compile(model, mode=args.compile_mode)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler()
    g = torch.Generator(device="cuda").manual_seed(rank)
    x = torch.randn(args.batch, 3, args.size, args.size, device="cuda", generator=g)
    x = x.to(memory_format=torch.channels_last)
    y = torch.randint(0, args.classes, (args.batch,), device="cuda", generator=g)

    def step():
        with torch.autocast("cuda", torch.float16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    dist.barrier()
    t0 = time.time()
    for _ in range(args.steps):
        step()
    torch.cuda.synchronize()
    dist.barrier()
    seconds = time.time() - t0
    if rank == 0:
        what = "DDP+compile(%s)" % args.compile_mode if args.compile else "DDP"
        print("%s %s world %d batch %d/GPU: %.0f img/s total (%d steps timed, %.2f s)" %
              (what, args.model, world, args.batch, args.steps * args.batch * world / seconds,
               args.steps, seconds), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
