#!/usr/bin/env python3
"""Comparisons of bench/device-dp.sh's exactness checks (part E).

A run is named by a spec:
  exe:LOG:CKPT   an executable's output (its `step N loss X` lines) and the
                 checkpoint it wrote (--checkpoint, .cnnw)
  run:PREFIX     PREFIX.json ({"losses": [...]}) and PREFIX.npz (a
                 state_dict), as torch_ref.py and compile_torchrun.py write

Subcommands (each prints one line; the exit code is the verdict):
  diff NAME A B [--keys INIT.npz] [--diffs FILE]
      the max relative loss difference over the steps and the max relative
      (max|a-b| / max|b| per tensor) and absolute weight difference, over
      the float tensors of INIT.npz (the model's parameters and BN
      statistics) or all float tensors both have; recorded in FILE (JSON)
      under NAME. Exit 0 (information).
  tol NAME --rel X [--losses-only] [--steps K] [--diffs FILE]
      exit 1 unless NAME's loss and weight differences are both <= X
      (--losses-only: the losses alone; --steps K: the first K steps' losses)
  bound OURS THEIRS [--factor 2] [--floor 1e-6] [--first-step TOL] [--diffs FILE]
      exit 1 unless OURS' loss and weight differences are each no larger
      than max(factor x THEIRS', floor) (common.within_bound), and (with
      --first-step) OURS' first-step loss difference is <= TOL.
      Why both: training a ResNet on 16 images a rank is chaotic, so a
      rounding-level difference grows to 1e-2..1e-1 within 10 steps on
      either side, and two such maxima agree only to a factor of about 2;
      the first step, before any update, is where an error in the global
      batch's statistics shows (about 1e-2 for per-rank statistics
      against about 1e-7 of rounding).
  same A B
      exit 1 unless the losses of A and B are identical (e.g. two ranks)
"""
import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import common  # noqa: E402


def load(spec):
    """(losses list, state dict or None) of a run spec."""
    kind, _, rest = spec.partition(":")
    if kind == "exe":
        log, _, ckpt = rest.rpartition(":")
        if not log:
            log, ckpt = ckpt, ""
        with open(log, errors="replace") as f:
            steps = common.parse_steps(f.read())
        losses = [steps[k] for k in sorted(steps)]
        state = None
        if ckpt:
            from cnnc.cnnw import read_cnnw
            state = dict(read_cnnw(ckpt))
        return losses, state
    if kind == "run":
        losses = common.load_json(rest + ".json")["losses"]
        state = None
        if os.path.exists(rest + ".npz"):
            with np.load(rest + ".npz") as z:
                state = {k: z[k] for k in z.files}
        return losses, state
    raise ValueError("bad run spec %r (exe:LOG:CKPT or run:PREFIX)" % spec)


def init_keys(path):
    with np.load(path) as z:
        return [k for k in z.files if z[k].dtype.kind == "f"]


def diff(a, b, keys=None):
    la, sa = a
    lb, sb = b
    loss, at = common.loss_diff(la, lb)
    out = {"loss_rel": loss, "loss_step": at + 1, "losses_a": la, "losses_b": lb,
           "loss_rel_steps": [common.loss_diff([x], [y])[0] for x, y in zip(la, lb)]}
    if sa is not None and sb is not None:
        if keys is not None:
            missing = [k for k in keys if k not in sa or k not in sb]
            keys = [k for k in keys if k in sa and k in sb]
            out["w_missing"] = missing
        rel, ab, key, n = common.state_diff(sa, sb, keys)
        out.update({"w_rel": rel, "w_abs": ab, "w_key": key, "w_tensors": n})
    return out


def record(path, name, value):
    data = common.load_json(path) if path and os.path.exists(path) else {}
    data[name] = value
    if path:
        common.save_json(path, data)


def describe(name, d):
    s = "%s: max rel loss diff %.3g (step %d)" % (name, d["loss_rel"], d["loss_step"])
    if len(d.get("loss_rel_steps", [])) > 1:
        s += " [per step %s]" % " ".join("%.1e" % v for v in d["loss_rel_steps"])
    if "w_rel" in d:
        s += ", weights max rel %.3g (%s), max |dw| %.3g over %d tensors" % (
            d["w_rel"], d["w_key"], d["w_abs"], d["w_tensors"])
    if d.get("w_missing"):
        s += " (%d tensors missing on one side, e.g. %s)" % (len(d["w_missing"]),
                                                          d["w_missing"][0])
    return s


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("diff")
    p.add_argument("name")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--keys", help="init .npz whose float tensors are compared")
    p.add_argument("--diffs")
    p = sub.add_parser("tol")
    p.add_argument("name")
    p.add_argument("--rel", type=float, required=True)
    p.add_argument("--losses-only", action="store_true")
    p.add_argument("--steps", type=int, help="judge the first K steps' losses")
    p.add_argument("--diffs", required=True)
    p = sub.add_parser("bound")
    p.add_argument("ours")
    p.add_argument("theirs")
    p.add_argument("--factor", type=float, default=2.0)
    p.add_argument("--floor", type=float, default=1e-6)
    p.add_argument("--first-step", type=float)
    p.add_argument("--diffs", required=True)
    p = sub.add_parser("same")
    p.add_argument("a")
    p.add_argument("b")
    args = ap.parse_args(argv)

    if args.cmd == "diff":
        d = diff(load(args.a), load(args.b), init_keys(args.keys) if args.keys else None)
        record(args.diffs, args.name, d)
        print(describe(args.name, d))
        return 0
    if args.cmd == "same":
        la, lb = load(args.a)[0], load(args.b)[0]
        ok = la == lb and len(la) > 0
        print("%s losses %s %s" % (args.a, "==" if ok else "!=", args.b))
        if not ok:
            print("  %s\n  %s" % (la, lb))
        return 0 if ok else 1
    data = common.load_json(args.diffs)
    if args.cmd == "tol":
        d = data[args.name]
        steps = d["loss_rel_steps"][:args.steps] if args.steps else d["loss_rel_steps"]
        worst = max(steps)
        what = "losses of steps 1-%d" % len(steps)
        ok = True
        if not args.losses_only:
            ok = "w_rel" in d
            worst = max(worst, d.get("w_rel", 0.0))
            what += " and weights"
        ok = ok and worst <= args.rel
        print("%s: worst of the %s %.3g, tolerance %.3g: %s" % (
            args.name, what, worst, args.rel, "within" if ok else "EXCEEDED"))
        return 0 if ok else 1
    ours, theirs = data[args.ours], data[args.theirs]
    ok = True
    parts = []
    for key, what in (("loss_rel", "loss"), ("w_rel", "weights")):
        if key not in ours or key not in theirs:
            ok = False
            parts.append("%s: missing" % what)
            continue
        good = common.within_bound(ours[key], theirs[key], args.factor, args.floor)
        ok &= good
        parts.append("%s %.3g vs bound max(%g x %.3g, %g) %s" % (
            what, ours[key], args.factor, theirs[key], args.floor, "ok" if good else "EXCEEDED"))
    if args.first_step is not None:
        first = ours.get("loss_rel_steps", [float("inf")])[0]
        good = first <= args.first_step
        ok &= good
        parts.append("first step %.3g (<= %g: %s)" % (first, args.first_step,
                                                     "ok" if good else "EXCEEDED"))
    print("%s against %s: %s" % (args.ours, args.theirs, "; ".join(parts)))
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, ValueError, KeyError) as e:
        # A run that failed left no output: one line, not a traceback.
        print("compare.py %s: error: %s: %s" % (" ".join(sys.argv[1:3]), type(e).__name__, e))
        sys.exit(2)
