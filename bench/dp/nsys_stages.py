#!/usr/bin/env python3
"""Per-GPU kernel time of a pipelined run from an Nsight Systems report
(exported as SQLite): where a stage's slot goes.

  python3 bench/dp/nsys_stages.py REPORT.sqlite [--tail 0.5]

For each device, over the last `--tail` fraction of its kernel timeline (the
steady steps; the first step runs uncaptured): the window's length, the sum
and the union of the compute kernels (every kernel whose name does not start
with "nccl"), the union of NCCL's kernels, the time both run at once, and
the idle time (no kernel at all). A stage that computes for less than its
window waited for a neighbour; compute kernels that take longer than on one
GPU (bench/device-dp.sh part D compares) were slowed by what ran beside them.
"""
import argparse
import sqlite3
import sys


def union(intervals):
    total, end = 0, None
    start = None
    for s, e in sorted(intervals):
        if end is None or s > end:
            if end is not None:
                total += end - start
            start, end = s, e
        else:
            end = max(end, e)
    if end is not None:
        total += end - start
    return total


def overlap(a, b):
    """Length of the intersection of two unions of intervals."""
    events = [(s, 1, 0) for s, _ in a] + [(e, -1, 0) for _, e in a]
    events += [(s, 1, 1) for s, _ in b] + [(e, -1, 1) for _, e in b]
    events.sort()
    depth = [0, 0]
    total, last = 0, None
    for t, d, k in events:
        if last is not None and depth[0] > 0 and depth[1] > 0:
            total += t - last
        depth[k] += d
        last = t
    return total


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sqlite")
    p.add_argument("--tail", type=float, default=0.5)
    a = p.parse_args(argv)
    db = sqlite3.connect(a.sqlite)
    rows = db.execute(
        "SELECT k.deviceId, k.start, k.end, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
        "JOIN StringIds s ON s.id = COALESCE(k.shortName, k.demangledName)").fetchall()
    if not rows:
        print("no kernels in the report")
        return 1
    by_dev = {}
    for dev, s, e, name in rows:
        by_dev.setdefault(dev, []).append((s, e, name))
    for dev in sorted(by_dev):
        ks = sorted(by_dev[dev])
        t0, t1 = ks[0][0], max(e for _, e, _ in ks)
        w0 = t1 - (t1 - t0) * a.tail
        ks = [(max(s, w0), e, n) for s, e, n in ks if e > w0]
        comp = [(s, e) for s, e, n in ks if not n.lower().startswith("nccl")]
        nccl = [(s, e) for s, e, n in ks if n.lower().startswith("nccl")]
        win = t1 - w0
        cu, nu = union(comp), union(nccl)
        both = overlap(comp, nccl)
        idle = win - union(comp + nccl)
        csum = sum(e - s for s, e in comp)
        top = {}
        for s, e, n in ks:
            top[n] = top.get(n, 0) + e - s
        names = sorted(top.items(), key=lambda kv: -kv[1])[:6]
        print("device %d: window %.2f ms; compute kernels %d, sum %.2f ms, union %.2f ms "
              "(%.1f%%); NCCL kernels %d, union %.2f ms, %.2f ms of it beside compute; "
              "idle %.2f ms (%.1f%%)" % (dev, win / 1e6, len(comp), csum / 1e6, cu / 1e6,
                                          100.0 * cu / win, len(nccl), nu / 1e6, both / 1e6,
                                          idle / 1e6, 100.0 * idle / win))
        print("   longest: " + "; ".join("%s %.2f ms" % (n[:48], t / 1e6) for n, t in names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
