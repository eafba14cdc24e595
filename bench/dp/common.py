"""Shared pieces of bench/device-dp.sh's Python checks (bench/dp/*.py).

CPU-only and torch-free (numpy only), so that test/e2e/test_dp_bench.py can
check the parsers and comparators on any machine:

* `stream_batches`: the sample indices of each global batch as the
  executable's data loader (runtime/src/data/Loader.cpp, StreamLoader)
  draws them: per epoch a Fisher-Yates permutation from
  std::mt19937_64(seed + 0x9E3779B97F4A7C15 * epoch), batches crossing an
  epoch end continue in the next epoch. PyTorch then trains on exactly the
  batches the executable trains on.
* `parse_steps`, `parse_done`, `parse_dp_line`: the executable's output.
* `loss_diff`, `state_diff`: the comparisons of two runs.
"""
import json
import re

import numpy as np

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


class MT19937_64:
    """std::mt19937_64 (the C++ standard's parameters), enough of it for the
    loader's permutations: operator() returns the next 64-bit value."""

    def __init__(self, seed):
        self.mt = [0] * 312
        self.mt[0] = seed & MASK64
        for i in range(1, 312):
            prev = self.mt[i - 1]
            self.mt[i] = (6364136223846793005 * (prev ^ (prev >> 62)) + i) & MASK64
        self.index = 312

    def _twist(self):
        mt = self.mt
        for i in range(312):
            x = (mt[i] & 0xFFFFFFFF80000000) | (mt[(i + 1) % 312] & 0x7FFFFFFF)
            xa = x >> 1
            if x & 1:
                xa ^= 0xB5026F5AA96619E9
            mt[i] = mt[(i + 156) % 312] ^ xa
        self.index = 0

    def __call__(self):
        if self.index >= 312:
            self._twist()
        y = self.mt[self.index]
        self.index += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y & MASK64


def permutation(n, seed, epoch):
    """The loader's permutation of n samples in `epoch` (StreamLoader::makePerm)."""
    perm = list(range(n))
    if n < 2:
        return perm
    rng = MT19937_64((seed + GOLDEN * epoch) & MASK64)
    for i in range(n - 1, 0, -1):
        j = rng() % (i + 1)
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def stream_batches(n, global_batch, steps, seed=0):
    """Sample indices (a steps x global_batch int array) of the global
    batches the executable trains on (StreamLoader::plan); rank r of N
    takes row slice [r * B, (r + 1) * B) of each."""
    out = np.empty((steps, global_batch), dtype=np.int64)
    epoch, cursor, perm = 0, 0, permutation(n, seed, 0)
    for s in range(steps):
        for g in range(global_batch):
            if cursor >= n:
                epoch, cursor = epoch + 1, 0
                perm = permutation(n, seed, epoch)
            out[s, g] = perm[cursor]
            cursor += 1
    return out


# --------------------------------------------------------------------------
# The executable's output
# --------------------------------------------------------------------------

# cnnrt::progressLine: "step N loss X epoch E lr L img/s R eta H:MM:SS [scale S]"
STEP_RE = re.compile(r"^step (\d+) loss (\S+)", re.M)
# "done: %lld steps, final loss %.6g, steady img/s %lld, start-up %.1f s,
#  mean img/s %lld (whole run), peak GPU memory %lld MiB" (older runtimes
# print no steady figure and no start-up: "mean img/s N, peak ...").
DONE_RE = re.compile(r"^done: (\d+) steps, final loss (\S+?),(.*)$", re.M)
# "data parallel: steady img/s per rank [a, b], total S; whole run per rank
#  [c, d], total W; start-up T s (slowest rank)"; older runtimes:
# "data parallel: img/s per rank [a, b], total S".
# "steady img/s per rank n/a; whole run ..." when the run had one logged
# interval (no steady rate).
DP_RE = re.compile(r"^data parallel: (?:steady )?img/s per rank (?:\[[^\]]*\], total (\d+)|n/a)"
                   r"(?:; whole run per rank \[[^\]]*\], total (\d+))?"
                   r"(?:; start-up ([0-9.]+) s)?", re.M)


def parse_steps(text):
    """{step: loss} of the progress lines."""
    return {int(s): float(v) for s, v in STEP_RE.findall(text)}


def _num(pattern, text, cast=float):
    m = re.search(pattern, text)
    return cast(m.group(1)) if m else None


def parse_done(text):
    """The last `done:` line as a dict (steps, final_loss, steady, whole,
    startup, peak_mib; None where the line lacks a figure), or None.
    `steady` falls back to the whole-run mean when the runtime prints no
    steady figure (then `steady_is_mean` is True)."""
    found = DONE_RE.findall(text)
    if not found:
        return None
    steps, loss, rest = found[-1]
    d = {"steps": int(steps), "final_loss": float(loss),
         "steady": _num(r"steady img/s (\d+)", rest, int),
         "whole": _num(r"mean img/s (\d+)", rest, int),
         "startup": _num(r"start-up ([0-9.]+) s", rest),
         "peak_mib": _num(r"peak GPU memory (\d+) MiB", rest, int)}
    d["steady_is_mean"] = d["steady"] is None
    if d["steady"] is None:
        d["steady"] = d["whole"]
    return d


def parse_dp_line(text):
    """The `data parallel: ... img/s per rank` line: (steady total, whole
    total, start-up s); whole is None on runtimes without it; None if absent."""
    found = DP_RE.findall(text)
    if not found:
        return None
    s, w, t = found[-1]
    if not s and not w:
        return None
    return (int(s) if s else None), (int(w) if w else None), (float(t) if t else None)


def throughput(text):
    """(steady img/s, whole-run img/s) of a run's output, all ranks
    together: the data-parallel line's totals where there is one, else
    the `done:` line's. (None, None) when neither is there."""
    dp = parse_dp_line(text)
    done = parse_done(text)
    steady = whole = None
    if done:
        steady, whole = done["steady"], done["whole"]
    if dp:
        if dp[1] is not None:
            whole = dp[1]
        elif done is None or done["steady_is_mean"]:
            whole = dp[0]  # an old runtime: one figure for the whole run
        # No steady rate (one logged interval): the whole run's, as done: does.
        steady = dp[0] if dp[0] is not None else whole
    return steady, whole


# --------------------------------------------------------------------------
# Comparisons
# --------------------------------------------------------------------------

def loss_diff(a, b):
    """Max relative difference |a - b| / max(|b|, 1e-12) over the steps both
    have; (value, step index). Lists of unequal length are an error (a run
    that stopped early must not pass on its prefix)."""
    if len(a) != len(b) or not a:
        raise ValueError("loss lists differ in length or are empty: %d vs %d" % (len(a), len(b)))
    worst, at = 0.0, 0
    for i, (x, y) in enumerate(zip(a, b)):
        d = abs(float(x) - float(y)) / max(abs(float(y)), 1e-12)
        if not d <= worst:  # NaN counts as the worst
            worst, at = (d if d == d else float("inf")), i
    return worst, at


def state_diff(a, b, keys=None):
    """Max over tensors of max|a - b| / max|b| (relative to the tensor's
    scale) and of max|a - b| (absolute), over `keys` (default: the float
    tensors both have, without '__' bookkeeping entries). Returns
    (max_rel, max_abs, worst_key, number compared). A key missing on one
    side or a shape mismatch is an error."""
    if keys is None:
        keys = [k for k in a if k in b and not k.startswith("__")
                and np.asarray(a[k]).dtype.kind == "f"]
    if not keys:
        raise ValueError("no tensors to compare")
    max_rel = max_abs = 0.0
    worst = None
    for k in keys:
        if k not in a or k not in b:
            raise KeyError("tensor %s missing on one side" % k)
        x = np.asarray(a[k], dtype=np.float64)
        y = np.asarray(b[k], dtype=np.float64)
        if x.shape != y.shape:
            # Only unit dimensions may differ (a bias stored as [C] or
            # [1, C, 1, 1]); the same size in another layout is not the
            # same tensor.
            if tuple(d for d in x.shape if d != 1) != tuple(d for d in y.shape if d != 1):
                raise ValueError("%s: shapes %s vs %s" % (k, x.shape, y.shape))
            x = x.reshape(y.shape)
        d = float(np.abs(x - y).max()) if x.size else 0.0
        scale = float(np.abs(y).max()) if y.size else 0.0
        r = d / scale if scale > 0 else (0.0 if d == 0 else float("inf"))
        if not (d == d):
            d = r = float("inf")
        if r > max_rel or worst is None:
            worst = k if r >= max_rel else worst
        max_rel, max_abs = max(max_rel, r), max(max_abs, d)
    return max_rel, max_abs, worst, len(keys)


def within_bound(ours, theirs, factor=2.0, floor=1e-6):
    """The exactness verdict: our difference no larger than factor x
    PyTorch's own (DDP vs one process), or below `floor`."""
    return ours <= max(factor * theirs, floor)


def save_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)


def load_json(path):
    with open(path) as f:
        return json.load(f)
