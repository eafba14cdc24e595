"""The CPU-checkable pieces of bench/device-dp.sh (bench/dp/): what the
device call cannot afford to find broken.

* bench/dp/common.py's std::mt19937_64 and the executable loader's batch
  order (StreamLoader: per-epoch Fisher-Yates, batches crossing epochs):
  the C++ standard's check value, and end to end against the CPU reference
  interpreter, which uses the same StreamLoader: `cnnc --run-reference`
  on prepare.py's .npy data gives the losses of PyTorch (torch_ref.py one
  --device cpu) trained on the batches stream_batches names, step by step.
* the parsers of the executable's `done:` and `data parallel:` lines, the
  new format (steady and whole run) and the old one (mean only);
* the comparators (loss_diff, state_diff, within_bound) and compare.py's
  verdicts on synthetic runs, including a run that stopped early;
* scaling.py's table on sample logs.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DP = os.path.join(REPO, "bench", "dp")
sys.path.insert(0, DP)

import common  # noqa: E402

PY = sys.executable


def run_py(script, *args):
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    return subprocess.run([PY, os.path.join(DP, script), *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=300)


def test_mt19937_64_check_value():
    # [rand.predef]: the 10000th invocation of a default-constructed
    # std::mt19937_64 (seed 5489) produces 9981545732273789042.
    rng = common.MT19937_64(5489)
    for _ in range(9999):
        rng()
    assert rng() == 9981545732273789042


def test_stream_batches_cross_epochs():
    # 10 samples, global batch 4: batch 3 takes the last 2 of epoch 0 and
    # the first 2 of epoch 1 (its own permutation).
    b = common.stream_batches(10, 4, 3, seed=7)
    p0, p1 = common.permutation(10, 7, 0), common.permutation(10, 7, 1)
    assert list(b[0]) == p0[:4] and list(b[1]) == p0[4:8]
    assert list(b[2]) == p0[8:] + p1[:2]
    assert sorted(p0) == list(range(10)) and p0 != p1


def test_loader_order_matches_the_reference_interpreter(cnnc, tmp_path):
    """cnnc's CPU reference interpreter (the executable's StreamLoader) and
    PyTorch on stream_batches' batches give the same losses: the BN-free
    net, 2 epochs of 3 batches of 8 (an epoch boundary inside a batch)."""
    pytest.importorskip("torch")
    pytest.importorskip("onnx")
    w = tmp_path / "e"
    r = run_py("prepare.py", "--work", w, "--batch", 4, "--size", 8, "--steps", 3,
               "--models", "nobn")
    assert r.returncode == 0, r.stderr[-3000:]
    # Drop two samples so that the batches cross the epoch end.
    x, y = np.load(w / "data_x.npy")[:22], np.load(w / "data_y.npy")[:22]
    np.save(w / "data_x.npy", x)
    np.save(w / "data_y.npy", y)
    np.save(w / "batches.npy", common.stream_batches(22, 8, 6, seed=0))
    meta = common.load_json(w / "meta.json")
    meta["steps"] = 6
    common.save_json(w / "meta.json", meta)
    r = run_py("torch_ref.py", "one", "--work", w, "--out", w / "pt", "--model", "nobn",
               "--device", "cpu")
    assert r.returncode == 0, r.stderr[-3000:]
    ref = subprocess.run(
        [cnnc, str(w / "nobn.onnx"), "--train", "--optimizer", "sgd", "--lr", "0.01",
         "--momentum", "0.9", "--batch", "8", "--run-reference", "--data", str(w / "data_x.npy"),
         "--labels", str(w / "data_y.npy"), "--steps", "6", "--seed", "0", "--log-every", "1"],
        capture_output=True, text=True, timeout=300)
    assert ref.returncode == 0, ref.stderr[-3000:]
    steps = common.parse_steps(ref.stdout)
    ours = [steps[k] for k in sorted(steps)]
    theirs = common.load_json(w / "pt.json")["losses"]
    worst, at = common.loss_diff(ours, theirs)
    assert worst < 1e-5, (at, ours, theirs)
    # A different order would not match: the check can fail.
    x2 = x[::-1].copy()
    np.save(w / "data_x.npy", x2)
    r = run_py("torch_ref.py", "one", "--work", w, "--out", w / "pt2", "--model", "nobn",
               "--device", "cpu")
    assert common.loss_diff(ours, common.load_json(w / "pt2.json")["losses"])[0] > 1e-4


def test_compile_torchrun_script_on_one_cpu_process(cnnc, tmp_path):
    """compile_torchrun.py's own logic (inputs, shards, trainer.step, the
    files it writes) in one process on the CPU reference step: the BN-free
    net's losses and final state equal PyTorch's on the same batches."""
    pytest.importorskip("torch")
    pytest.importorskip("onnx")
    w = tmp_path / "e"
    r = run_py("prepare.py", "--work", w, "--batch", 4, "--size", 8, "--steps", 3,
               "--models", "nobn")
    assert r.returncode == 0, r.stderr[-3000:]
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"), CNNC=str(cnnc),
               CNNC_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("WORLD_SIZE", None)
    r = subprocess.run([PY, os.path.join(DP, "compile_torchrun.py"), "--work", str(w),
                        "--out", str(w / "tr"), "--model", "nobn", "--device", "cpu"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert (w / "tr.rank0.json").exists() and (w / "tr.rank0.npz").exists()
    r = run_py("torch_ref.py", "one", "--work", w, "--out", w / "pt", "--model", "nobn",
               "--device", "cpu")
    assert r.returncode == 0, r.stderr[-3000:]
    diffs = tmp_path / "d.json"
    r = run_py("compare.py", "diff", "cpu", "run:%s" % (w / "tr.rank0"), "run:%s" % (w / "pt"),
               "--keys", w / "nobn_init.npz", "--diffs", diffs)
    assert r.returncode == 0, r.stdout + r.stderr
    d = json.load(open(diffs))["cpu"]
    assert len(d["losses_a"]) == 3 and d["w_tensors"] == 8, d
    assert d["loss_rel"] < 1e-6 and d["w_rel"] < 1e-6, d  # measured 0 and 9e-8


NEW = """step 20 loss 6.9 epoch 0.00 lr 0.01 img/s 27100 eta 0:00:01
done: 200 steps, final loss 6.90776, steady img/s 27067, start-up 7.4 s, mean img/s 24807 (whole run), peak GPU memory 31245 MiB
data parallel: steady img/s per rank [6767, 6766, 6768, 6766], total 27067; whole run per rank [6202, 6201, 6202, 6202], total 24807; start-up 7.4 s (slowest rank)
"""
OLD = """done: 60 steps, final loss 6.9, mean img/s 12551, peak GPU memory 30000 MiB
data parallel: img/s per rank [6276, 6275], total 12551
"""


def test_parse_done_and_data_parallel_lines():
    d = common.parse_done(NEW)
    assert (d["steps"], d["steady"], d["whole"], d["startup"], d["peak_mib"]) == \
        (200, 27067, 24807, 7.4, 31245)
    assert not d["steady_is_mean"]
    assert common.parse_dp_line(NEW) == (27067, 24807, 7.4)
    assert common.throughput(NEW) == (27067, 24807)
    d = common.parse_done(OLD)
    assert d["steady_is_mean"] and d["steady"] == d["whole"] == 12551
    assert common.parse_dp_line(OLD) == (12551, None, None)
    assert common.throughput(OLD) == (12551, 12551)
    one = "done: 200 steps, final loss 6.9, steady img/s 7051, start-up 6.0 s, " \
          "mean img/s 7025 (whole run), peak GPU memory 30000 MiB\n"
    assert common.throughput(one) == (7051, 7025)
    assert common.throughput("cnnrt: error: out of memory\n") == (None, None)
    single = ("done: 20 steps, final loss 6.9, steady img/s n/a, start-up 0.0 s, mean img/s 20100 "
              "(whole run), peak GPU memory 1 MiB\n"
              "data parallel: steady img/s per rank n/a; whole run per rank [10050, 10050], "
              "total 20100; start-up 0.0 s (slowest rank)\n")
    assert common.parse_dp_line(single) == (None, 20100, 0.0)
    assert common.throughput(single) == (20100, 20100)
    assert common.parse_steps(NEW) == {20: 6.9}


def test_comparators():
    assert common.loss_diff([1.0, 2.0], [1.0, 2.0]) == (0.0, 0)
    v, at = common.loss_diff([1.0, 2.002, 3.0], [1.0, 2.0, 3.0])
    assert at == 1 and abs(v - 1e-3) < 1e-12
    assert common.loss_diff([1.0, float("nan")], [1.0, 2.0])[0] == float("inf")
    with pytest.raises(ValueError):
        common.loss_diff([1.0], [1.0, 2.0])  # a run that stopped early
    a = {"w": np.ones((2, 3), np.float32), "b": np.zeros(3, np.float32), "__step": np.int64(3)}
    b = {"w": np.ones((2, 3), np.float32) * 1.001, "b": np.zeros(3, np.float32)}
    rel, ab, key, n = common.state_diff(a, b)
    assert key == "w" and n == 2 and abs(rel - 0.001 / 1.001) < 1e-6 and abs(ab - 0.001) < 1e-6
    b["w"] = b["w"].reshape(1, 2, 1, 3)  # unit dimensions may differ
    assert common.state_diff(a, b)[2] == "w"
    b["w"] = b["w"].reshape(3, 2)  # another layout of the same size may not
    with pytest.raises(ValueError, match="shapes"):
        common.state_diff(a, b)
    b["w"] = b["w"].reshape(2, 3)
    with pytest.raises(KeyError):
        common.state_diff(a, b, keys=["w", "missing"])
    assert common.within_bound(2.9e-4, 1.5e-4, factor=2) is True
    assert common.within_bound(3.1e-4, 1.5e-4, factor=2) is False
    assert common.within_bound(9e-7, 0.0) is True and common.within_bound(2e-6, 0.0) is False


def write_run(prefix, losses, state):
    common.save_json(str(prefix) + ".json", {"losses": losses})
    np.savez(str(prefix) + ".npz", **state)


def test_compare_cli_verdicts(tmp_path):
    w = {"w": np.linspace(1, 2, 12, dtype=np.float32).reshape(3, 4)}
    write_run(tmp_path / "one", [2.3, 2.2, 2.1], w)
    write_run(tmp_path / "ddp", [2.3, 2.2 * (1 + 1e-4), 2.1], {"w": w["w"] * (1 + 2e-4)})
    write_run(tmp_path / "ours", [2.3, 2.2 * (1 + 3e-4), 2.1], {"w": w["w"] * (1 + 1e-4)})
    write_run(tmp_path / "bad", [2.3 * 1.01, 2.2, 2.1], w)
    diffs = tmp_path / "d.json"
    for name, a in (("theirs", "ddp"), ("ours", "ours"), ("bad", "bad")):
        r = run_py("compare.py", "diff", name, "run:%s" % (tmp_path / a),
                   "run:%s" % (tmp_path / "one"), "--diffs", diffs)
        assert r.returncode == 0, r.stdout + r.stderr
    d = json.load(open(diffs))
    assert abs(d["ours"]["loss_rel"] - 3e-4) < 1e-9 and d["ours"]["loss_step"] == 2
    # 3e-4 against 2 x 1e-4: beyond; against 3 x 1e-4: within.
    assert run_py("compare.py", "bound", "ours", "theirs", "--factor", 2,
                  "--diffs", diffs).returncode == 1
    r = run_py("compare.py", "bound", "ours", "theirs", "--factor", 3.5, "--first-step", 1e-5,
               "--diffs", diffs)
    assert r.returncode == 0, r.stdout
    # The first step catches what the bound would let through.
    assert run_py("compare.py", "bound", "bad", "bad", "--first-step", 1e-5,
                  "--diffs", diffs).returncode == 1
    assert run_py("compare.py", "tol", "theirs", "--rel", 1e-3, "--diffs", diffs).returncode == 0
    assert run_py("compare.py", "tol", "theirs", "--rel", 1e-5, "--diffs", diffs).returncode == 1
    # The losses alone (the weights differ by 2e-4), or only the first step.
    assert run_py("compare.py", "tol", "theirs", "--rel", 1.5e-4, "--losses-only",
                  "--diffs", diffs).returncode == 0
    assert run_py("compare.py", "tol", "ours", "--rel", 1e-5, "--losses-only", "--steps", 1,
                  "--diffs", diffs).returncode == 0
    assert run_py("compare.py", "tol", "ours", "--rel", 1e-5, "--losses-only", "--steps", 2,
                  "--diffs", diffs).returncode == 1
    assert run_py("compare.py", "same", "run:%s" % (tmp_path / "one"),
                  "run:%s" % (tmp_path / "one")).returncode == 0
    assert run_py("compare.py", "same", "run:%s" % (tmp_path / "one"),
                  "run:%s" % (tmp_path / "ddp")).returncode == 1
    # A run that left nothing: one error line, exit 2.
    r = run_py("compare.py", "diff", "x", "run:%s" % (tmp_path / "none"),
               "run:%s" % (tmp_path / "one"), "--diffs", diffs)
    assert r.returncode == 2 and "error" in r.stdout and "Traceback" not in r.stderr


def test_compare_reads_executable_logs_and_checkpoints(tmp_path):
    from cnnc.cnnw import write_cnnw
    w = {"w": np.arange(6, dtype=np.float32)}
    write_cnnw(str(tmp_path / "a.cnnw"), w)
    write_cnnw(str(tmp_path / "b.cnnw"), {"w": w["w"] + 1e-3})
    (tmp_path / "a.log").write_text("data: x\nstep 1 loss 2.5 epoch 0.1\nstep 2 loss 2.4 epoch 0.2\n")
    (tmp_path / "b.log").write_text("step 1 loss 2.5 epoch 0.1\nstep 2 loss 2.4 epoch 0.2\n")
    diffs = tmp_path / "d.json"
    r = run_py("compare.py", "diff", "exe", "exe:%s:%s" % (tmp_path / "a.log", tmp_path / "a.cnnw"),
               "exe:%s:%s" % (tmp_path / "b.log", tmp_path / "b.cnnw"), "--diffs", diffs)
    assert r.returncode == 0, r.stdout + r.stderr
    d = json.load(open(diffs))["exe"]
    assert d["loss_rel"] == 0 and abs(d["w_abs"] - 1e-3) < 1e-6


def test_scaling_table(tmp_path):
    logs = {
        "cnnc-resnet50-g1.log": "done: 200 steps, final loss 6.9, steady img/s 7000, start-up 6.0 s, "
                                "mean img/s 6800 (whole run), peak GPU memory 1 MiB\n",
        "cnnc-resnet50-g4.log": NEW,
        "cnnc-resnet50-g4-sb.log": NEW.replace("27067", "25000"),
        "ddp-resnet50-g1.log": "DDP resnet50 world 1 batch 128/GPU: 4058 img/s total\n",
        "ddp-resnet50-g4.log": "DDP resnet50 world 4 batch 128/GPU: 13801 img/s total\n",
        "ddpc-resnet50-g4.log": "DDP+compile(default) resnet50 world 4 batch 128/GPU: "
                                "14500 img/s total\n",
        "cnnc-resnet18-g1.log": "cnnrt: error: out of memory\n",
    }
    for k, v in logs.items():
        (tmp_path / k).write_text(v)
    r = run_py("scaling.py", tmp_path, "--json", tmp_path / "s.json")
    assert r.returncode == 0, r.stdout + r.stderr
    # The scaling table's rows (12 bars; the sync-bn table has 6).
    rows = {tuple(c.strip() for c in l.split("|")[1:3]): l for l in r.stdout.splitlines()
            if l.startswith("| resnet") and l.count("|") == 12}
    r50x4 = rows[("resnet50", "4")]
    assert "27,067" in r50x4 and "24,807" in r50x4 and "13,801" in r50x4
    assert "14,500" in r50x4
    # 27067 / 7000, 24807 / 6800, their quarters, 27067 / 14500 (the faster
    # PyTorch: compiled DDP here).
    assert "3.87x" in r50x4 and "3.65x" in r50x4 and "0.967" in r50x4 and "0.912" in r50x4
    assert "1.87x" in r50x4
    # Where compiled DDP did not run: "-", and cnnc / DDP (4058 eager).
    assert rows[("resnet50", "1")].split("|")[10].strip() == "-"
    assert "1.72x" in rows[("resnet50", "1")]
    assert "failed" in rows[("resnet18", "1")]
    assert "+8.3 %" in r.stdout  # 27067 / 25000 - 1
    assert json.load(open(tmp_path / "s.json"))["resnet50 g4"]["ddp"] == 13801
