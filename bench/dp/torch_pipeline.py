#!/usr/bin/env python3
"""PyTorch's own pipeline API (torch.distributed.pipelining, PyTorch >= 2.4;
written for 2.11) on the split cnnc chose: the baseline of bench/device-dp.sh
part P's throughput table (issue 38, docs/pipeline-parallel.md).

A torchvision ResNet cut by hand, as that API needs: the model is a list of
units (`stem` = conv1, bn1, relu, maxpool; every residual block `layerI.J`;
`head` = avgpool, flatten, fc), and `--stage-starts` names the first unit of
stages 1 .. S-1. Each process (torchrun --nproc-per-node S, rank = stage)
builds its stage's units as one nn.Sequential, wraps it in a
`PipelineStage` and runs `ScheduleGPipe` (or `Schedule1F1B`) over M
micro-batches of `--micro-batch` images: synthetic data, one fixed batch on
the GPU (as the executable's `--data synthetic`), 1000 classes, SGD with
momentum 0.9 (lr 0.01; the fused kernel where this PyTorch has it), the
gradients averaged over the M micro-batches (the schedule's scale_grads),
one update a step.

  f32:  TF32 off (as the f32 rows of docs/benchmarks.md), NCHW.
  --amp: torch.autocast(float16) inside each stage's forward, the model in
        channels_last (each stage's output made NCHW-contiguous before it is
        sent: the receiving stage's buffer is a plain contiguous tensor). No
        GradScaler: its skip decision is per process, so one stage could skip
        a step another applies. Its arithmetic is done here instead, the
        skip agreed by all stages (the finite flag all-reduced, MAX of
        "found inf", as cnnc takes the minimum of the stages' finite flags):
        the loss scaled by S (init 65536) in the loss function, the
        gradients unscaled and checked by torch._amp_foreach_non_finite_
        check_and_unscale_ (GradScaler's own kernel), the step skipped and S
        halved on an overflow, S doubled after 2000 good steps.

`--warmup` steps (shape inference, cuDNN autotuning, NCCL connections), then
`--steps` timed between two synchronizations of all stages. The last stage
prints (part P greps it):

  torch pipelining <schedule> <model> S=<S> M=<M> micro-batch <B> <f32|amp>: <X> img/s (<N> steps timed, <T> s, loss <L>)

  torchrun --standalone --nproc-per-node 2 bench/dp/torch_pipeline.py \\
      --model resnet50 --stage-starts layer3.2 --micro-batch 32 --micro-batches 8 [--amp]

`--from-cnnc-cuda FILE` (no GPU, no torch.distributed): reads the CUDA source
`cnnc --pipeline-stages S ... --emit cuda` wrote, takes each stage's
parameters from its tensor table (namespace cnnc_stage<s>), and prints the
`--stage-starts` value of the same cut: stage s starts at the earliest unit
of its parameters; a cut inside a residual block (the stage lacks the
block's conv1.weight) keeps that block whole on the earlier stage and says
so on stderr. `--describe` (no GPU) prints each stage's units and
parameter count for a `--stage-starts`.
"""
import argparse
import datetime
import os
import re
import sys
import time


def fail(msg):
    print("torch_pipeline: error: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)


def unit_names(model):
    """The unit names of a torchvision ResNet, in forward order."""
    names = ["stem"]
    for i in range(1, 5):
        layer = getattr(model, "layer%d" % i, None)
        if layer is None:
            fail("the model has no layer%d: only torchvision ResNets are split here" % i)
        names += ["layer%d.%d" % (i, j) for j in range(len(layer))]
    return names + ["head"]


def units(model):
    """(name, module) of each unit of a torchvision ResNet, in forward order."""
    import torch.nn as nn
    out = [("stem", nn.Sequential(model.conv1, model.bn1, model.relu, model.maxpool))]
    for i in range(1, 5):
        layer = getattr(model, "layer%d" % i)
        out += [("layer%d.%d" % (i, j), block) for j, block in enumerate(layer)]
    out.append(("head", nn.Sequential(model.avgpool, nn.Flatten(1), model.fc)))
    return out


def stage_ranges(names, starts):
    """[first, last) unit indices of each stage from the first unit names of
    stages 1 .. S-1."""
    idx = []
    for s in starts:
        if s not in names:
            fail("--stage-starts: no unit '%s' (units: %s)" % (s, ", ".join(names)))
        idx.append(names.index(s))
    if any(b <= a for a, b in zip([0] + idx, idx)) or (idx and idx[0] == 0):
        fail("--stage-starts %s: the units must be in forward order, after 'stem'"
             % ",".join(starts))
    bounds = [0] + idx + [len(names)]
    return [(bounds[k], bounds[k + 1]) for k in range(len(bounds) - 1)]


def stage_params_from_cuda(text):
    """{stage: [parameter names in table order]} from the CUDA source of a
    pipelined step (one namespace cnnc_stage<s> per stage, each with its
    kTensors table: {"name", dtype, rank, {dims}, offset, bytes,
    cnnrt::Role::Param ...})."""
    heads = list(re.finditer(r"^namespace cnnc_stage(\d+) \{$", text, re.M))
    if not heads:
        fail("no 'namespace cnnc_stage<s> {' in the CUDA source: not a pipelined step's "
             "(cnnc --pipeline-stages S ... --emit cuda)")
    out = {}
    for k, h in enumerate(heads):
        body = text[h.end():heads[k + 1].start() if k + 1 < len(heads) else len(text)]
        out[int(h.group(1))] = re.findall(r'^\s*\{"([^"]+)",[^\n]*cnnrt::Role::Param\b', body, re.M)
    return out


def virtual_params(stage_params, names, chunks):
    """Interleaved stages (cnnc --pipeline-chunks V): each namespace (GPU g)
    holds the parameters of virtual stages g, g + S, ...; its units fall into
    V runs of consecutive units (forward order), run c being virtual stage
    g + c x S. Returns {virtual stage: [parameter names]}."""
    if chunks == 1:
        return stage_params
    S = len(stage_params)
    out = {}
    for g, params in stage_params.items():
        order = sorted({names.index(unit_of(p)) for p in params})
        runs, cur = [], [order[0]] if order else []
        for i in order[1:]:
            if i == cur[-1] + 1:
                cur.append(i)
            else:
                runs.append(cur)
                cur = [i]
        if cur:
            runs.append(cur)
        if len(runs) != chunks:
            fail("cnnc's stage %d holds %d runs of units (%s), not its %d chunks"
                 % (g, len(runs), "; ".join("%s..%s" % (names[r[0]], names[r[-1]])
                                            for r in runs), chunks))
        for c, run_ in enumerate(runs):
            # A unit a cut splits shows in two runs: its parameters go to the
            # run that holds them, by unit.
            units_c = {names[i] for i in run_}
            out[g + c * S] = [p for p in params if unit_of(p) in units_c]
    return out


def unit_of(param):
    """The unit a torchvision ResNet parameter belongs to."""
    m = re.match(r"(layer\d+\.\d+)\.", param)
    if m:
        return m.group(1)
    if param.startswith("fc."):
        return "head"
    if param.startswith(("conv1.", "bn1.")):
        return "stem"
    fail("parameter '%s' is in no unit of a torchvision ResNet" % param)


def starts_from_params(stage_params, names):
    """The --stage-starts of the cut whose stages own `stage_params`: stage
    s starts at the earliest unit (forward order) of its parameters; when
    it lacks that unit's first convolution (conv1.weight: cnnc cut inside
    the residual block), the block stays whole on the earlier stage and a
    note says so."""
    starts, notes = [], []
    for s in sorted(stage_params)[1:]:
        params = set(stage_params[s])
        if not params:
            fail("cnnc's stage %d owns no parameter" % s)
        unit = min((unit_of(p) for p in params), key=names.index)
        if unit not in names:
            fail("stage %d: no unit '%s' in %s" % (s, unit, ", ".join(names)))
        if unit == "stem":
            fail("cnnc's stage %d owns a parameter of the stem" % s)
        if unit != "head" and unit + ".conv1.weight" not in params:
            nxt = names[names.index(unit) + 1]
            notes.append("cnnc's cut %d|%d falls inside %s (stage %d lacks %s.conv1.weight): "
                         "%s stays whole on stage %d, stage %d starts at %s"
                         % (s - 1, s, unit, s, unit, unit, s - 1, s, nxt))
            unit = nxt
        starts.append(unit)
    return starts, notes


def self_test():
    """The cut reading on a made-up pipelined source (no torch): a cut at a
    block boundary, one inside a block, the head, and the errors."""
    names = ["stem"] + ["layer1.%d" % j for j in range(3)] + ["layer2.%d" % j for j in range(4)] + ["head"]

    def source(stages):
        text = "// prelude\n"
        for s, params in enumerate(stages):
            text += "namespace cnnc_stage%d {\nstatic const cnnrt::TensorSpec kTensors[] = {\n" % s
            for p in params:
                text += '  {"%s", cnnrt::DType::F32, 1, {8, 0, 0, 0}, 0, 32, cnnrt::Role::Param},\n' % p
            text += '  {"%s.momentum_buffer", cnnrt::DType::F32, 1, {8, 0, 0, 0}, 0, 32, ' \
                    'cnnrt::Role::OptState},\n};\n} // namespace cnnc_stage%d\n' % (params[0], s)
        return text

    block = ["conv1.weight", "bn1.weight", "conv2.weight", "bn2.weight", "conv3.weight"]
    stages = [["conv1.weight", "bn1.weight"] + ["layer1.%d.%s" % (j, b) for j in range(3) for b in block],
              # table order is not forward order: the stage's earliest unit counts
              ["layer2.1.conv1.weight", "layer2.0.conv1.weight", "layer2.0.bn1.weight"]
              + ["layer2.%d.%s" % (j, b) for j in (0, 1) for b in block[2:]],
              ["layer2.2.conv2.weight", "layer2.2.conv3.weight", "layer2.3.conv1.weight", "fc.weight"]]
    parsed = stage_params_from_cuda(source(stages))
    assert sorted(parsed) == [0, 1, 2] and parsed[0][:2] == ["conv1.weight", "bn1.weight"], parsed
    assert all(not p.endswith("momentum_buffer") for ps in parsed.values() for p in ps), parsed
    starts, notes = starts_from_params(parsed, names)
    assert starts == ["layer2.0", "layer2.3"], starts
    assert len(notes) == 1 and "falls inside layer2.2" in notes[0], notes
    assert stage_ranges(names, starts) == [(0, 4), (4, 7), (7, 9)], stage_ranges(names, starts)
    starts, notes = starts_from_params({0: ["conv1.weight"], 1: ["fc.weight", "fc.bias"]}, names)
    assert starts == ["head"] and not notes, (starts, notes)
    # Interleaved, 2 stages x 2 chunks: stage 0 holds the stem + layer1.0
    # and layer2.1.., stage 1 layer1.1..layer2.0 and the head.
    inter = {0: ["conv1.weight", "layer1.0.conv1.weight", "layer2.2.conv1.weight",
                 "layer2.3.conv1.weight"],
             1: ["layer1.1.conv1.weight", "layer1.2.conv1.weight", "layer2.0.conv1.weight",
                 "layer2.1.conv1.weight", "fc.weight"]}
    v = virtual_params(inter, names, 2)
    assert sorted(v) == [0, 1, 2, 3], v
    assert v[2] == ["layer2.2.conv1.weight", "layer2.3.conv1.weight"] and v[3] == ["fc.weight"], v
    starts, _ = starts_from_params(v, names)
    assert starts == ["layer1.1", "layer2.2", "head"], starts
    print("torch_pipeline self-test: ok")
    return 0


def build_stage(args, stage, num_stages, device):
    import torch
    import torch.nn as nn
    import torchvision
    torch.manual_seed(0)
    model = getattr(torchvision.models, args.model)(weights=None, num_classes=args.classes)
    named = units(model)
    first, last = stage_ranges([n for n, _ in named], args.starts)[stage]
    body = nn.Sequential(*[m for _, m in named[first:last]])
    return make_stage(body, args.amp, stage == num_stages - 1).to(device), \
        [n for n, _ in named[first:last]]


def make_stage(body, amp, is_last):
    """One stage's units as a module: under --amp its forward runs in
    autocast, channels_last inside, and hands the next stage a contiguous
    f16 tensor (the next stage's receive buffer is a plain contiguous
    tensor of the shape and dtype shape inference saw)."""
    import torch
    import torch.nn as nn

    class Stage(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = body.to(memory_format=torch.channels_last) if amp else body

        def forward(self, x):
            if amp:
                x = x.contiguous(memory_format=torch.channels_last)
            with torch.autocast("cuda", dtype=torch.float16, enabled=amp):
                y = self.body(x)
            if not is_last:
                y = y.contiguous()
                if amp:
                    y = y.to(torch.float16)
            return y

    return Stage()


def run(args):
    try:
        import torch
        import torch.distributed as dist
        import torch.nn.functional as F
    except ImportError as e:
        fail("PyTorch is needed: %s" % e)
    try:
        from torch.distributed.pipelining import (PipelineStage, Schedule1F1B, ScheduleGPipe,
                                                  ScheduleLoopedBFS)
    except ImportError as e:
        fail("torch.distributed.pipelining is not in PyTorch %s (2.4 or newer): %s"
             % (torch.__version__, e))
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        if var not in os.environ:
            fail("%s is not set: launch with torchrun --nproc-per-node S" % var)
    if not torch.cuda.is_available():
        fail("no CUDA device")
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    device = torch.device("cuda", local)
    # A stage that waits longer than --timeout for a peer fails (NCCL's
    # watchdog) instead of hanging the call.
    dist.init_process_group("nccl", device_id=device,
                            timeout=datetime.timedelta(seconds=args.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    V = args.chunks
    if world * V != len(args.starts) + 1:
        fail("%d processes x %d chunks for %d stages (--stage-starts %s)"
             % (world, V, len(args.starts) + 1, ",".join(args.starts)))
    if V > 1 and args.schedule != "gpipe":
        fail("--chunks %d runs the looped breadth-first schedule (cnnc's), not %s"
             % (V, args.schedule))
    if args.schedule == "1f1b" and args.micro_batches < world:
        fail("1F1B needs at least as many micro-batches (%d) as stages (%d)"
             % (args.micro_batches, world))
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    # Interleaved (--chunks V): virtual stages rank, rank + S, ... on this
    # GPU, run breadth-first (ScheduleLoopedBFS: every micro-batch through
    # chunk 0, then chunk 1; backward from the last chunk), as cnnc.
    modules, pipe_stages, stage_units = [], [], []
    for c in range(V):
        v = rank + c * world
        module, names_c = build_stage(args, v, world * V, device)
        module.train()
        modules.append(module)
        stage_units += names_c
        pipe_stages.append(PipelineStage(module, v, world * V, device))
    batch = args.micro_batch * args.micro_batches
    is_first, is_last = rank == 0, rank == world - 1
    scale = torch.full((), 65536.0 if args.amp else 1.0, device=device)

    losses = []  # the last stage's micro-batch losses of the latest step

    def loss_fn(out, target):
        # The mean over the micro-batch; the schedule averages the gradients
        # over the M micro-batches (scale_grads).
        loss = F.cross_entropy(out.float(), target)
        losses.append(loss.detach())
        return loss * scale

    if V > 1:
        schedule = ScheduleLoopedBFS(pipe_stages, n_microbatches=args.micro_batches,
                                     loss_fn=loss_fn)
    else:
        cls = Schedule1F1B if args.schedule == "1f1b" else ScheduleGPipe
        schedule = cls(pipe_stages[0], n_microbatches=args.micro_batches, loss_fn=loss_fn)
    params = [p for m in modules for p in m.parameters() if p.requires_grad]
    try:
        opt = torch.optim.SGD(params, lr=0.01, momentum=0.9, fused=True)
        fused = True
    except (TypeError, RuntimeError):
        opt = torch.optim.SGD(params, lr=0.01, momentum=0.9)
        fused = False
    g = torch.Generator(device=device).manual_seed(1234)
    x = torch.randn(batch, 3, args.size, args.size, device=device, generator=g)
    if args.amp:
        # As the AMP baselines feed it (bench/dp/ddp_bench.py); the
        # schedule's row chunks of a channels_last batch stay channels_last.
        x = x.contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, args.classes, (batch,), device=device, generator=g)
    found = torch.zeros((), device=device)
    good = 0
    skipped = 0

    def step():
        nonlocal good, skipped
        opt.zero_grad(set_to_none=True)
        losses.clear()
        if is_first:
            schedule.step(x)
        elif is_last:
            schedule.step(target=y)
        else:
            schedule.step()
        if args.amp:
            found.zero_()
            grads = [p.grad for p in params if p.grad is not None]
            torch._amp_foreach_non_finite_check_and_unscale_(grads, found, 1.0 / scale)
            dist.all_reduce(found, op=dist.ReduceOp.MAX)
            if found.item() > 0:
                skipped += 1
                good = 0
                scale.mul_(0.5)
            else:
                opt.step()
                good += 1
                if good == 2000:
                    good = 0
                    scale.mul_(2.0)
        else:
            opt.step()

    t_start = time.perf_counter()
    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    torch.cuda.synchronize()
    dist.barrier()
    seconds = time.perf_counter() - t0
    last_loss = float("nan")
    if is_last:
        if len(losses) != args.micro_batches:
            fail("the schedule returned %d losses for %d micro-batches"
                 % (len(losses), args.micro_batches))
        last_loss = float(torch.stack([l.detach().float() for l in losses]).mean())
    peak = torch.cuda.max_memory_reserved() / 2 ** 20
    print("torch pipelining: stage %d of %d: units %s..%s (%d), %d parameter tensors, peak %.0f MiB "
          "reserved, warm-up %.1f s" % (rank, world, stage_units[0], stage_units[-1],
                                        len(stage_units), len(params), peak, t0 - t_start),
          flush=True)
    if not all(torch.isfinite(p).all() for p in params):
        fail("stage %d: a parameter is not finite after %d steps" % (rank, args.warmup + args.steps))
    if is_last:
        print("torch pipelining %s %s S=%d M=%d micro-batch %d %s: %.0f img/s (%d steps timed, "
              "%.2f s, loss %.5g, %s SGD%s)"
              % ("looped-bfs V=%d" % V if V > 1 else args.schedule, args.model, world,
                 args.micro_batches, args.micro_batch,
                 "amp" if args.amp else "f32", args.steps * batch / seconds, args.steps, seconds,
                 last_loss, "fused" if fused else "foreach",
                 ", %d skipped steps" % skipped if args.amp else ""), flush=True)
    dist.destroy_process_group()
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="resnet50", help="a torchvision ResNet (resnet18 .. resnet152)")
    ap.add_argument("--stage-starts", default="",
                    help="comma-separated first unit of stages 1..S-1 (e.g. layer3.2)")
    ap.add_argument("--micro-batch", type=int, default=32)
    ap.add_argument("--micro-batches", type=int, default=8)
    ap.add_argument("--schedule", default="gpipe", choices=["gpipe", "1f1b"])
    ap.add_argument("--chunks", type=int, default=1,
                    help="interleaved stages: V chunks a process (cnnc's --pipeline-chunks); "
                         "--stage-starts then lists the S x V - 1 virtual stages' starts")
    ap.add_argument("--amp", action="store_true")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--timeout", type=int, default=120,
                    help="seconds a collective or transfer may wait for a peer")
    ap.add_argument("--from-cnnc-cuda", metavar="FILE",
                    help="print the --stage-starts of the cut in cnnc's CUDA source and exit")
    ap.add_argument("--describe", action="store_true",
                    help="print each stage's units and parameter count (CPU) and exit")
    ap.add_argument("--self-test", action="store_true",
                    help="check the cut reading on a made-up source (no torch) and exit")
    args = ap.parse_args(argv)
    if args.self_test:
        return self_test()
    args.starts = [s for s in args.stage_starts.split(",") if s]
    if args.from_cnnc_cuda:
        try:
            text = open(args.from_cnnc_cuda).read()
        except OSError as e:
            fail("--from-cnnc-cuda: %s" % e)
        try:
            import torchvision
            names = unit_names(getattr(torchvision.models, args.model)(weights=None))
        except ImportError:
            fail("torchvision is needed to list %s's units" % args.model)
        if args.chunks < 1:
            fail("--chunks must be >= 1")
        starts, notes = starts_from_params(
            virtual_params(stage_params_from_cuda(text), names, args.chunks), names)
        for n in notes:
            print("torch_pipeline: note: " + n, file=sys.stderr)
        print(",".join(starts))
        return 0
    if not args.starts:
        fail("--stage-starts is needed (S-1 unit names; --from-cnnc-cuda computes it)")
    if args.micro_batch < 1 or args.micro_batches < 1 or args.steps < 1 or args.warmup < 1:
        fail("--micro-batch, --micro-batches, --steps and --warmup must be >= 1")
    if args.describe:
        import torchvision
        model = getattr(torchvision.models, args.model)(weights=None, num_classes=args.classes)
        named = units(model)
        for s, (a, b) in enumerate(stage_ranges([n for n, _ in named], args.starts)):
            n = sum(p.numel() for _, m in named[a:b] for p in m.parameters())
            t = sum(1 for _, m in named[a:b] for _ in m.parameters())
            print("stage %d: units %s..%s (%d), %d parameter tensors, %d parameters"
                  % (s, named[a][0], named[b - 1][0], b - a, t, n))
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
