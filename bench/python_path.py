#!/usr/bin/env python3
"""The Python entry's speed (issue 10), side by side in one run on the GPU.

One training loop: a torch DataLoader over batches already on the GPU,
ResNet-50 (10 classes), batch 128 at 224x224, SGD momentum 0.9. Timed:

  cnnc.compile   trainer.step(x, y) (the step library through the C API,
                 zero-copy CUDA tensors on PyTorch's stream; the loss comes
                 back as a 0-d CUDA tensor, not read by the loop, as
                 PyTorch's loops below do not read theirs)
  cnnc exe       the standalone executable of the same ONNX graph
                 (bench/bench.py's runner: --data synthetic, its own report)
  eager AMP      PyTorch eager, AMP (f16) + channels_last
  compile AMP    torch.compile, AMP (f16) + channels_last

Target: the Python path within 3 % of the executable's ms/step.

  python3 bench/python_path.py --cnnc .carry/cnnc [--model resnet50]
        [--batch 128] [--steps 40] [--no-compile]
Prints a markdown table for docs/benchmarks.md.
"""
import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))

import torch  # noqa: E402

import bench  # noqa: E402
from cnnc.export import build_model  # noqa: E402


def gpu_loader(batch, hw, batches=8):
    """A DataLoader whose batches are CUDA tensors (indexing a dataset that
    lives on the GPU: no host copies in the loop)."""
    g = torch.Generator(device="cpu").manual_seed(0)
    x = torch.rand(batches * batch, 3, hw, hw, generator=g).cuda()
    y = torch.randint(0, 10, (batches * batch,), generator=g).cuda()
    ds = torch.utils.data.TensorDataset(x, y)
    return torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=False,
                                       drop_last=True)


def timed(loop_fn, loader, steps):
    """ms per step of loop_fn(x, y) over `steps` batches (after 5 warm-up
    steps), best of three."""
    it = iter(loader)

    def batch():
        nonlocal it
        try:
            return next(it)
        except StopIteration:
            it = iter(loader)
            return next(it)

    for _ in range(5):
        loop_fn(*batch())
    best = float("inf")
    for _ in range(3):
        torch.cuda.synchronize()
        t0 = time.time()
        for _ in range(steps):
            loop_fn(*batch())
        torch.cuda.synchronize()
        best = min(best, 1000.0 * (time.time() - t0) / steps)
    return best


def cnnc_python(args, loader):
    import cnnc
    model = build_model(args.model, 10, seed=0).cuda()
    x0 = torch.rand(args.batch, 3, args.hw, args.hw, device="cuda")
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    t0 = time.time()
    trainer = cnnc.compile(model, x0, optimizer=opt)
    compile_s = time.time() - t0
    torch.cuda.reset_peak_memory_stats()
    ms = timed(lambda x, y: trainer.step(x, y), loader, args.steps)
    return ms, compile_s


def torch_loop(args, loader, compiled):
    torch.backends.cudnn.benchmark = True
    model = build_model(args.model, 10, seed=0).cuda().train()
    model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda")
    fwd = torch.compile(model) if compiled else model

    def step(x, y):
        x = x.contiguous(memory_format=torch.channels_last)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.cross_entropy(fwd(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    t0 = time.time()
    step(*next(iter(loader)))
    torch.cuda.synchronize()
    warm = time.time() - t0
    return timed(step, loader, args.steps), warm


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--cnnc", required=True)
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--hw", type=int, default=224)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--work", default="/tmp/cnnc-python-path")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    args = ap.parse_args()
    os.environ["CNNC"] = os.path.abspath(args.cnnc)
    os.environ.setdefault("CNNC_CACHE_DIR", tempfile.mkdtemp(prefix="cnnc-cache-"))
    print("GPU:", torch.cuda.get_device_name(0), "| torch", torch.__version__, flush=True)
    loader = gpu_loader(args.batch, args.hw)
    rows = []
    ms, comp = cnnc_python(args, loader)
    rows.append(("cnnc.compile (Python, C API)", ms, comp))
    print(rows[-1], flush=True)
    bargs = argparse.Namespace(work=args.work, steps=args.steps, cnnc=args.cnnc,
                               profile=False)
    ms_exe, _, comp_exe, _ = bench.run_cnnc(args.model, args.batch, args.hw, bargs, "")
    rows.append(("cnnc executable", ms_exe, comp_exe))
    print(rows[-1], flush=True)
    ms_amp, warm = torch_loop(args, loader, compiled=False)
    rows.append(("PyTorch eager AMP+channels_last", ms_amp, warm))
    print(rows[-1], flush=True)
    if not args.no_compile:
        ms_c, warm = torch_loop(args, loader, compiled=True)
        rows.append(("torch.compile AMP+channels_last", ms_c, warm))
        print(rows[-1], flush=True)
    print("\n| %s batch %d | ms/step | img/s | compile/warm-up s | vs cnnc.compile |" %
          (args.model, args.batch))
    print("|---|---|---|---|---|")
    for label, t, c in rows:
        print("| %s | %.2f | %.0f | %.1f | %.3fx |" % (label, t, 1000.0 * args.batch / t, c,
                                                     t / ms))
    gap = 100.0 * (ms - ms_exe) / ms_exe
    print("Python path vs executable: %+.1f %% (target: within 3 %%)" % gap)
    return 0 if abs(gap) <= 3.0 else 1


if __name__ == "__main__":
    sys.exit(main())
