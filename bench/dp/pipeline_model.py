#!/usr/bin/env python3
"""A timed model of an emitted pipeline step (`cnnc ... --pipeline-stages S
--emit cuda -o step.cu`): where its stages would wait, without a GPU.

  python3 bench/dp/pipeline_model.py step.cu [--op-us 7] [--gbps 100 50]
                                             [--latency-us 20]

Each stage's `trainStep` is read in order: every statement that launches
work costs `--op-us` on the compute stream (a crude unit: ResNet-50 f16 at
micro-batch 32 averages ~7 us a launch); `sendAsync` / `recvAsync` issue a
transfer on the stream of their link (the compiler's `link`); a
`transferWait` stops the compute stream until that transfer completed. As
in test_pipeline.py's link-stream model, a link's transfers run in issue
order, and the n-th send from a to b completes with the n-th receive at b
from a once both head their streams, `--latency-us` + bytes / `--gbps`
later. Prints, per link speed, the modelled step (the last stage to
finish), each stage's compute time and its time waiting for transfers;
"deadlock" if a stage never gets through. test_pipeline.py runs the same
model (time aside) on every emitted pipeline step it checks. Session 36 found with it that a
send's wait stood before the next send to the peer (one op later when two
tensors cross a cut): ResNet-50 f16 interleaved S=4 x 2 45.6 -> 42.9 ms at
100 GB/s once the wait moved before the next send of its tag.
"""
import argparse
import collections
import re
import sys

_STEP = re.compile(r"static void trainStep\(cnnrt::Context &ctx\) \{\n(.*?)\n\}", re.S)
_XFER = re.compile(r"cnnrt::dist::(send|recv)Async\(ctx, [^,]+, (\d+)ull, (\d+), (\d+), (\d+),")
_WAIT = re.compile(r"cnnrt::dist::transferWait\(ctx, (\d+)\)")


def parse_stage(text):
    """One stage's step (its `trainStep` body, or `text` itself when it has
    none): ("ops", n), ("S"|"R", peer, event, link, bytes), ("W", event)."""
    m = _STEP.search(text)
    prog = []
    for line in (m.group(1) if m else text).split("\n"):
        t = line.strip()
        x = _XFER.match(t)
        w = _WAIT.match(t)
        if x:
            prog.append(("S" if x.group(1) == "send" else "R", int(x.group(3)),
                         int(x.group(4)), int(x.group(5)), int(x.group(2))))
        elif w:
            prog.append(("W", int(w.group(1))))
        elif line.startswith("  ") and not line.startswith("   ") and \
                re.match(r"[A-Za-z]", t) and not t.startswith("//"):
            if prog and prog[-1][0] == "ops":
                prog[-1] = ("ops", prog[-1][1] + 1)
            else:
                prog.append(("ops", 1))
    return prog


def parse(text):
    """Every stage's step of an emitted file, in stage order."""
    return [parse_stage(m.group(0)) for m in _STEP.finditer(text)]


def simulate(stages, op_us, gbps, latency_us, one_link_per_pair=False):
    """(finish time per stage, wait time per stage) in microseconds, or None
    when a stage never gets through its step or a transfer never completes
    (a deadlock). Each link of a stage is a stream (`one_link_per_pair`: one
    stream per neighbour, what the runtime had before two interleaved stages
    got a link per direction); the n-th send from a to b pairs with the n-th
    receive at b from a on the same communicator (the neighbours' pair
    link, or link 2 between the first and the last stage)."""
    n = len(stages)
    pc, now, waited = [0] * n, [0.0] * n, [0.0] * n
    queue = collections.defaultdict(list)  # (stage, stream) -> transfer ids
    issued, complete, size = {}, {}, {}
    sends, recvs = collections.defaultdict(list), collections.defaultdict(list)

    def head_time(tid):
        at, stream = issued[tid]
        q = queue[(tid[0], stream)]
        i = q.index(tid)
        if i == 0:
            return at
        prev = q[i - 1]
        return max(at, complete[prev]) if prev in complete else None

    while True:
        moved = False
        for s in range(n):
            while pc[s] < len(stages[s]):
                op = stages[s][pc[s]]
                if op[0] == "ops":
                    now[s] += op[1] * op_us
                elif op[0] == "W":
                    tid = (s, op[1])
                    if tid not in complete:
                        break
                    waited[s] += max(0.0, complete[tid] - now[s])
                    now[s] = max(now[s], complete[tid])
                else:
                    kind, peer, event, link, nbytes = op
                    tid = (s, event)
                    stream = ("peer", peer) if one_link_per_pair else link
                    issued[tid], size[tid] = (now[s], stream), nbytes
                    queue[(s, stream)].append(tid)
                    comm = link == 2 and not one_link_per_pair
                    if kind == "S":
                        sends[(s, peer, comm)].append(tid)
                    else:
                        recvs[(peer, s, comm)].append(tid)
                pc[s] += 1
                moved = True
        for key, ids in sends.items():
            for k, sid in enumerate(ids):
                if sid in complete:
                    continue
                rids = recvs.get(key, [])
                if k >= len(rids):
                    break
                a, b = head_time(sid), head_time(rids[k])
                if a is None or b is None:
                    break
                complete[sid] = complete[rids[k]] = \
                    max(a, b) + latency_us + size[sid] / (gbps * 1e3)
                moved = True
        if not moved:
            break
    if any(pc[s] < len(stages[s]) for s in range(n)) or len(complete) < len(issued):
        return None
    return now, waited


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("step", help="the emitted CUDA of a pipelined step (--emit cuda)")
    ap.add_argument("--op-us", type=float, default=7.0)
    ap.add_argument("--gbps", type=float, nargs="+", default=[100.0, 50.0])
    ap.add_argument("--latency-us", type=float, default=20.0)
    args = ap.parse_args()
    try:
        with open(args.step) as f:
            text = f.read()
    except OSError as e:
        sys.exit("pipeline_model.py: cannot read %s: %s" % (args.step, e.strerror))
    stages = parse(text)
    if not stages:
        sys.exit("pipeline_model.py: no trainStep in %s (not a pipelined step?)" % args.step)
    compute = [sum(op[1] for op in prog if op[0] == "ops") * args.op_us for prog in stages]
    for gbps in args.gbps:
        result = simulate(stages, args.op_us, gbps, args.latency_us)
        if result is None:
            print("%g GB/s: deadlock" % gbps)
            continue
        finish, waited = result
        print("%g GB/s: step %.1f ms (the slowest stage's compute %.1f ms); per stage compute / "
              "waiting ms: %s" % (gbps, max(finish) / 1e3, max(compute) / 1e3,
                                  ", ".join("%.1f / %.1f" % (c / 1e3, w / 1e3)
                                            for c, w in zip(compute, waited))))


if __name__ == "__main__":
    main()
