#!/usr/bin/env python3
"""GPU check: the f16 CUDA step is the same computation in every process.

Resuming (issue 33) promises the uninterrupted run's losses to the printed
digit, so two processes running the same compiled step on the same data
must agree bitwise. Runs a child process (the conv-BN net of
check_finetune_optim.py, fp16 NHWC, SGD, 6 steps through cnnc.compile)
three times over one algorithm cache (CNNRT_ALGO_CACHE): the first tunes,
the next two read the cache. Each prints its losses (9 digits) and a
digest of the trained parameters; CNNRT_VERBOSE=1's algorithm choices are
kept in $OUT (or the work folder) to show what differed.

Checks: the two cached runs agree bitwise (the resume contract), and the
tuning run agrees with them; every conv+GenStats graph a cached run takes
carries the reproducibility probe's verdict ("reproduced=<runs>" in its
choice line). This is issue 37's acceptance test: since the probe, the
default CNNRT_DETERMINISTIC=1 may run cuDNN's conv+GenStats graphs again
(session 25 had turned them off), and the tuning run's per-plan verdicts
and choices are printed. If a check fails, the same is run with the cuDNN graph
plans and fused forms off (CNNRT_CONV_GRAPH=0 CNNRT_CONV_FUSION=split) to
narrow the cause (printed, not judged).

Exit 0: passed; 1: a check failed; 77: no CUDA GPU.

  python3 test/gpu/check_determinism.py [--precision fp16] [--layout nhwc]
"""
import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = r"""
import sys, torch
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2])
import cnnc
from check_finetune_optim import make_net
precision, layout = sys.argv[3], sys.argv[4]
torch.backends.cudnn.allow_tf32 = False
torch.manual_seed(0)
model = make_net()
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-3)
g = torch.Generator(device="cuda").manual_seed(1)
batches = [(torch.randn(32, 3, 16, 16, device="cuda", generator=g),
            torch.randint(0, 10, (32,), device="cuda", generator=g)) for _ in range(6)]
trainer = cnnc.compile(model, batches[0][0], opt, device="cuda", precision=precision,
                       layout=layout)
for x, y in batches:
    print("loss %.9g" % float(trainer.step(x, y)))
trainer.sync_to(model)
print("digest %.12g" % sum(float(p.double().abs().sum()) for p in model.state_dict().values()
                           if p.is_floating_point()))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--layout", default="nhwc")
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None or not torch.cuda.is_available():
        print("no CUDA GPU: skipped")
        return 77
    work = tempfile.mkdtemp(prefix="cnnc-determinism-")
    keep = os.environ.get("OUT", work)
    script = os.path.join(work, "child.py")
    with open(script, "w") as f:
        f.write(CHILD)
    failures = []
    base = dict(os.environ, CNNC_CACHE_DIR=os.path.join(work, "compile"), CNNRT_VERBOSE="1")

    def run(tag, cache, **env):
        e = dict(base, CNNRT_ALGO_CACHE=os.path.join(work, cache), **env)
        r = subprocess.run([sys.executable, script, os.path.join(HERE, "..", "..", "python"),
                            HERE, a.precision, a.layout], env=e, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True)
        choices = sorted(l for l in r.stderr.splitlines() if l.startswith("cnnrt:"))
        with open(os.path.join(keep, "determinism-%s.choices" % tag), "w") as f:
            f.write("\n".join(choices) + "\n")
        out = r.stdout.split()
        if r.returncode != 0:
            print(r.stderr[-2000:])
            failures.append("the %s run failed (exit %d)" % (tag, r.returncode))
        print("%-10s %s" % (tag, " ".join(out[1::2])), flush=True)
        return out, [c.replace(" (cached)", "") for c in choices]

    tune, tune_c = run("tune", "algos.txt")
    stats = [c for c in tune_c if "conv+genstats" in c and " -> " in c]
    print("conv+genstats: %d graph, %d split; candidate plans: %d reproduce, %d do not" % (
        sum(c.endswith("-> graph") for c in stats), sum(c.endswith("-> split") for c in stats),
        sum(" reproduces bitwise " in c for c in tune_c),
        sum(" ms does not reproduce: " in c for c in tune_c)), flush=True)
    for c in tune_c:
        if " ms does not reproduce: " in c:
            print("  " + c)
    cached1, c1 = run("cached-1", "algos.txt")
    cached2, c2 = run("cached-2", "algos.txt")
    if not cached1 or cached1 != cached2:
        failures.append("two processes reading one algorithm cache differ")
    if c1 != c2:
        failures.append("their algorithm choices differ (%s)" %
                        [x for x in c1 if x not in c2][:3])
    if tune != cached1:
        failures.append("the tuning process differs from the cached ones")
    unprobed = [c for c in c1 + c2 if "conv+genstats" in c and ": graph" in c
                and "reproduced=" not in c]
    if unprobed:
        failures.append("a conv+GenStats graph ran without the probe's verdict: %s" % unprobed[0])
    if failures:
        # Narrow the cause: each runtime choice off alone, two processes each.
        for tag, env in (("split", dict(CNNRT_CONV_GRAPH="0", CNNRT_CONV_FUSION="split")),
                         ("nofusion", dict(CNNRT_CONV_FUSION="split")),
                         ("nograph", dict(CNNRT_CONV_GRAPH="0"))):
            r1, _ = run(tag + "-1", "algos-%s.txt" % tag, **env)
            r2, _ = run(tag + "-2", "algos-%s.txt" % tag, **env)
            print("with %s: two processes %s" %
                  (" ".join("%s=%s" % kv for kv in env.items()),
                   "agree" if r1 == r2 else "still differ"))
    for f in failures:
        print("FAIL  " + f)
    print("determinism (%s %s): %s" % (a.precision, a.layout,
                                       "ok" if not failures else "FAILED"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
