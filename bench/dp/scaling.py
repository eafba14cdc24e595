#!/usr/bin/env python3
"""The scaling table of bench/device-dp.sh part S (and N's img/s), from the
runs' logs in one directory:

  cnnc-<model>-g<N>.log      the executable on N GPUs (`done:` and, for
                             N > 1, the `data parallel:` line)
  cnnc-<model>-g<N>-sb.log   the same with --sync-bn
  ddp-<model>-g<N>.log       ddp_bench.py's `DDP <model> world N ...: X img/s`
  ddpc-<model>-g<N>.log      the same with --compile (`DDP+compile(mode) ...`)

Prints a markdown table: model, GPUs, cnnc steady img/s, cnnc whole-run
img/s, scaling vs 1 GPU (steady, whole run), efficiency (scaling / N,
steady and whole run: issue 36 asks >= 0.97 and >= 0.95 on 4 GPUs), DDP
img/s, DDP under torch.compile img/s where it ran, cnnc / the faster of the
two (steady); then the --sync-bn overhead (plain
steady img/s / sync-bn steady img/s - 1) where both were run. A run whose
log has no figures is shown as "failed".

  python3 bench/dp/scaling.py LOGDIR [--json FILE]
"""
import argparse
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import common  # noqa: E402

NAME_RE = re.compile(r"^(cnnc|ddpc|ddp)-(.+)-g(\d+)(-sb)?\.log$")
DDP_RE = re.compile(r"^DDP(?:\+compile\(\S+\))? \S+ world (\d+) .*?: ([0-9.]+) img/s", re.M)


def collect(logdir):
    """{(model, gpus, sync_bn): {"steady", "whole", "ddp"}} from the logs."""
    runs = {}
    for name in sorted(os.listdir(logdir)):
        m = NAME_RE.match(name)
        if not m:
            continue
        kind, model, gpus, sb = m.group(1), m.group(2), int(m.group(3)), bool(m.group(4))
        with open(os.path.join(logdir, name), errors="replace") as f:
            text = f.read()
        r = runs.setdefault((model, gpus, sb), {"steady": None, "whole": None, "ddp": None,
                                                "ddpc": None, "cnnc_ran": False,
                                                "ddp_ran": False, "ddpc_ran": False})
        r[kind + "_ran"] = True
        if kind == "cnnc":
            r["steady"], r["whole"] = common.throughput(text)
        else:
            d = DDP_RE.findall(text)
            r[kind] = float(d[-1][1]) if d else None
    return runs


def fmt(v, spec="{:,.0f}", ran=True):
    if not ran:
        return "-"
    return "failed" if v is None else spec.format(v)


def ratio(a, b):
    return a / b if a and b else None


def table(runs):
    lines = ["| model | GPUs | cnnc steady img/s | cnnc whole-run img/s | scaling steady "
             "| scaling whole run | efficiency steady | efficiency whole run | DDP img/s "
             "| DDP + torch.compile img/s | cnnc / best DDP |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    models = sorted({k[0] for k in runs})
    for model in models:
        base = runs.get((model, 1, False), {})
        for gpus in sorted({k[1] for k in runs if k[0] == model and not k[2]}):
            r = runs[(model, gpus, False)]
            s_steady = ratio(r["steady"], base.get("steady"))
            s_whole = ratio(r["whole"], base.get("whole"))
            eff = s_steady / gpus if s_steady else None
            eff_whole = s_whole / gpus if s_whole else None
            c, d, dc = r["cnnc_ran"], r["ddp_ran"], r["ddpc_ran"]
            best = max([v for v in (r["ddp"], r["ddpc"]) if v] or [None]) \
                if (d or dc) else None
            lines.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                model, gpus, fmt(r["steady"], ran=c), fmt(r["whole"], ran=c),
                fmt(s_steady, "{:.2f}x", c), fmt(s_whole, "{:.2f}x", c),
                fmt(eff, "{:.3f}", c), fmt(eff_whole, "{:.3f}", c), fmt(r["ddp"], ran=d),
                fmt(r["ddpc"], ran=dc), fmt(ratio(r["steady"], best), "{:.2f}x", c and (d or dc))))
    sb_lines = []
    for (model, gpus, sb), r in sorted(runs.items()):
        if not sb:
            continue
        plain = runs.get((model, gpus, False), {})
        over = ratio(plain.get("steady"), r["steady"])
        sb_lines.append("| %s | %d | %s | %s | %s |" % (
            model, gpus, fmt(plain.get("steady"), ran=plain.get("cnnc_ran", False)),
            fmt(r["steady"]),
            fmt(None if over is None else (over - 1.0) * 100.0, "{:+.1f} %")))
    if sb_lines:
        lines += ["", "| model | GPUs | plain steady img/s | --sync-bn steady img/s "
                  "| sync-bn overhead |", "|---|---|---|---|---|"] + sb_lines
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logdir", nargs="?")
    ap.add_argument("--json", help="also write the figures as JSON")
    ap.add_argument("--show", nargs="+", metavar="LOG",
                    help="instead: print each executable log's steady and whole-run img/s")
    args = ap.parse_args(argv)
    if args.show:
        for log in args.show:
            with open(log, errors="replace") as f:
                steady, whole = common.throughput(f.read())
            print("%s: steady %s img/s, whole run %s img/s" % (
                os.path.basename(log), fmt(steady), fmt(whole)))
        return 0
    if not args.logdir:
        ap.error("LOGDIR is required without --show")
    runs = collect(args.logdir)
    if not runs:
        print("no cnnc-*/ddp-* logs in %s" % args.logdir)
        return 1
    print(table(runs))
    if args.json:
        common.save_json(args.json, {"%s g%d%s" % (m, g, " sync-bn" if sb else ""): r
                                     for (m, g, sb), r in runs.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
