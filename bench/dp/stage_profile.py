#!/usr/bin/env python3
"""Each pipeline stage's kernels against the same kernels on one GPU.

Reads CNNRT_PROFILE_JSON files (runtime/src/ProfileJson.h: a profiled
step's launch milliseconds summed by ONNX location): ONE, the unsplit
step on one GPU at the micro-batch size (`--accumulate M`: its profiled
step is one micro-batch), and STAGE files, one per pipeline stage
(`FILE.rank<r>`, stage r: its profiled step runs all M micro-batches).
For each stage, the locations it launched are split into those the
one-GPU step also has (the stage's share of the model: pipeline ms per
micro-batch against one-GPU ms) and those it alone has (the pipeline's own
work: transfers, the loss-scale flag's all-reduce across the stages).
Says where a pipeline slot's time beyond a quarter of the one-GPU step
goes, per stage:

  python3 bench/dp/stage_profile.py --one acc.json --micro-batches 16 \\
      pipe.json.rank0 pipe.json.rank1 pipe.json.rank2 pipe.json.rank3
"""
import argparse
import json
import re
import sys


def load(path):
    with open(path) as f:
        d = json.load(f)
    if not isinstance(d, dict) or d.get("format") != "cnnrt-profile" or \
            not isinstance(d.get("by_location"), dict):
        raise ValueError("%s is not a CNNRT_PROFILE_JSON file" % path)
    out = {}
    for loc, v in d["by_location"].items():
        if not isinstance(v, dict) or not isinstance(v.get("ms"), (int, float)) \
                or v["ms"] < 0:
            raise ValueError("%s: location %r has no time" % (path, loc))
        out[loc] = (float(v["ms"]), int(v.get("launches", 0)))
    return out


def stage_of(path, index):
    m = re.search(r"\.rank(\d+)$", path)
    return int(m.group(1)) if m else index


def compare(one, stages, m):
    """Rows per stage: (stage, shared locations, pipeline ms per
    micro-batch on them, one-GPU ms on them, the stage's own locations'
    ms per step, the three largest of them, the three locations whose
    time per micro-batch grew most)."""
    rows = []
    for stage, prof in stages:
        shared = [loc for loc in prof if loc in one]
        own = sorted(((prof[loc][0], loc) for loc in prof if loc not in one), reverse=True)
        pipe_ms = sum(prof[loc][0] for loc in shared) / m
        one_ms = sum(one[loc][0] for loc in shared)
        grew = sorted(((prof[loc][0] / m - one[loc][0], loc) for loc in shared), reverse=True)
        rows.append({"stage": stage, "shared": len(shared), "pipe_ms_per_mb": pipe_ms,
                     "one_gpu_ms": one_ms, "own_ms_per_step": sum(t for t, _ in own),
                     "own_top": own[:3], "grew_top": grew[:3]})
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--one", required=True, help="the one-GPU --accumulate M step's profile")
    ap.add_argument("--micro-batches", type=int, required=True)
    ap.add_argument("stages", nargs="+", help="each stage's profile (FILE.rank<r>)")
    args = ap.parse_args(argv)
    if args.micro_batches < 1:
        ap.error("--micro-batches: expected a number >= 1")
    try:
        one = load(args.one)
        stages = sorted((stage_of(p, i), load(p)) for i, p in enumerate(args.stages))
    except (OSError, ValueError) as e:
        print("stage_profile.py: error: %s" % e, file=sys.stderr)
        return 2
    total_one = sum(t for t, _ in one.values())
    print("one GPU, one micro-batch: %.3f ms over %d locations" % (total_one, len(one)))
    covered = set()
    for r in compare(one, stages, args.micro_batches):
        covered.update(loc for loc in dict(stages)[r["stage"]] if loc in one)
        ratio = r["pipe_ms_per_mb"] / r["one_gpu_ms"] if r["one_gpu_ms"] else float("nan")
        print("stage %d: %d shared locations, %.3f ms per micro-batch against %.3f ms on one "
              "GPU (x%.3f); its own launches %.3f ms per step" % (
                  r["stage"], r["shared"], r["pipe_ms_per_mb"], r["one_gpu_ms"], ratio,
                  r["own_ms_per_step"]))
        if r["own_top"]:
            print("  own: " + "; ".join("%s %.3f ms" % (loc, t) for t, loc in r["own_top"]))
        if r["grew_top"]:
            print("  grew most per micro-batch: " + "; ".join(
                "%s %+.3f ms" % (loc, d) for d, loc in r["grew_top"]))
    missing = sum(t for loc, (t, _) in one.items() if loc not in covered)
    print("one-GPU locations no stage launched: %.3f ms" % missing)
    return 0


if __name__ == "__main__":
    sys.exit(main())
