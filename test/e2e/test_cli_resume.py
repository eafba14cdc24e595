"""Checkpoint and resume on the CPU path (`cnnc --train --run-reference` and
`cnnc train` without a GPU), with the executable's flags and meaning:
--checkpoint FILE at the end (and every --checkpoint-every K steps, "{step}"
in FILE), --resume FILE continuing to the same --steps.

* SimpleCNN (batch 4) on 10 shuffled .npy images, Adam with a cosine
  schedule, 7 steps: a batch crosses each epoch boundary. Stopping after step
  3 or 6 and resuming in a new process prints the losses of the
  uninterrupted run to the last printed digit (safetensors and .cnnw).
* The checkpoint is a safetensors file torch loads (cnnc.load_state_dict)
  with __step__ and __loader__ entries.
* Errors: a weights file that is not a checkpoint, a checkpoint of another
  model, --checkpoint outside a training run, --checkpoint-every without
  --checkpoint, a run already complete (a note, not an error).
* `cnnc train` without a GPU takes the same flags.
* --log-json records (llvm::json) parse and match the printed lines.
"""
import json
import os
import re
import shutil
import sys

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
from cnnc import train_check as tc  # noqa: E402
from cnnc.safetensors import load_state_dict, read_safetensors  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("resume")
    tc.export_training(tc.make_model("simplecnn", seed=0), d / "m.onnx", (4, 3, 32, 32))
    rng = np.random.default_rng(0)
    np.save(d / "x.npy", rng.integers(0, 256, (10, 3, 32, 32), dtype=np.uint8))
    np.save(d / "y.npy", rng.integers(0, 5, 10).astype(np.int32))  # both models
    tc.export_training(tc.make_model("simplecnn", num_classes=5, seed=0), d / "m5.onnx",
                       (4, 3, 32, 32))
    return d


def train(cnnc, d, *extra, model="m.onnx", steps=7):
    return tc.run_cnnc(cnnc, d / model, "--train", "--run-reference", "--optimizer", "adam",
                       "--lr", "0.01", "--steps", steps, "--lr-schedule", "cosine",
                       "--data", d / "x.npy", "--labels", d / "y.npy", "--seed", 3, *extra)


def losses(stdout):
    """step -> the loss as printed."""
    return dict(re.findall(r"^step (\d+) loss (\S+)", stdout, re.M))


def test_resume_equals_uninterrupted_run(cnnc, setup):
    d = setup
    full = train(cnnc, d)
    assert full.returncode == 0, full.stderr
    want = losses(full.stdout)
    assert len(want) == 7
    r = train(cnnc, d, "--checkpoint", d / "ck-{step}.safetensors", "--checkpoint-every", 3)
    assert r.returncode == 0, r.stderr
    assert losses(r.stdout) == want  # checkpointing does not change the run
    assert all((d / ("ck-%d.safetensors" % k)).exists() for k in (3, 6, 7))
    for k in (3, 6):
        # A new process, and a --seed the checkpoint overrides.
        r = tc.run_cnnc(cnnc, d / "m.onnx", "--train", "--run-reference", "--optimizer",
                        "adam", "--lr", "0.01", "--steps", 7, "--lr-schedule", "cosine",
                        "--data", d / "x.npy", "--labels", d / "y.npy",
                        "--resume", d / ("ck-%d.safetensors" % k))
        assert r.returncode == 0, r.stderr
        got = losses(r.stdout)
        print("\nMEASURED resume from step %d:" % k, got, "uninterrupted:", want)
        assert sorted(got, key=int) == [str(s) for s in range(k + 1, 8)], r.stdout
        assert got == {s: want[s] for s in got}
        assert "using the checkpoint's data seed 3" in r.stderr


def test_resume_cnnw_and_checkpoint_contents(cnnc, setup, tmp_path):
    d = setup
    want = losses(train(cnnc, d).stdout)
    # (The schedule spans --steps: the first run goes to 7 as well.)
    r = train(cnnc, d, "--checkpoint", tmp_path / "ck-{step}.cnnw", "--checkpoint-every", 4)
    assert r.returncode == 0, r.stderr
    r = train(cnnc, d, "--resume", tmp_path / "ck-4.cnnw", "--checkpoint",
              tmp_path / "end.safetensors")
    assert r.returncode == 0, r.stderr
    assert losses(r.stdout) == {s: want[s] for s in ("5", "6", "7")}
    tensors, meta = read_safetensors(tmp_path / "end.safetensors")
    assert meta == {"format": "pt"}
    assert tensors["__step__"].tolist() == [7]
    seed, epoch, cursor = tensors["__loader__"].tolist()
    assert (seed, epoch, cursor) == (3, 2, 8)  # 7 batches of 4 = 28 = 2 x 10 + 8
    model = tc.make_model("simplecnn", seed=0)
    model.load_state_dict(load_state_dict(tmp_path / "end.safetensors"), strict=True)
    assert {k + ".exp_avg" for k, _ in model.named_parameters()} <= set(tensors)


def one_error(r):
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.returncode != 0 and len(lines) == 1, r.stderr
    return lines[0]


def test_errors(cnnc, setup, tmp_path):
    d = setup
    # A state file without __step__/__loader__ (--save-state) is not a checkpoint.
    r = train(cnnc, d, "--save-state", tmp_path / "s.safetensors", steps=1)
    assert r.returncode == 0, r.stderr
    line = one_error(train(cnnc, d, "--resume", tmp_path / "s.safetensors"))
    assert "is not a checkpoint" in line, line
    # A checkpoint of another model (5 classes): its fc2 differs, and the
    # step's optimizer state is there but of another shape.
    r = train(cnnc, d, "--checkpoint", tmp_path / "ck.safetensors", steps=1)
    assert r.returncode == 0, r.stderr
    line = one_error(train(cnnc, d, "--resume", tmp_path / "ck.safetensors", model="m5.onnx"))
    assert "fc2.weight" in line and "wrong shape" in line, line
    line = one_error(tc.run_cnnc(cnnc, d / "m.onnx", "--train", "--resume",
                                 tmp_path / "ck.safetensors"))
    assert "--checkpoint/--resume need a training run" in line, line
    line = one_error(train(cnnc, d, "--checkpoint-every", 2))
    assert "--checkpoint-every needs" in line, line
    line = one_error(train(cnnc, d, "--resume", tmp_path / "missing.safetensors"))
    assert "cannot resume" in line and "missing.safetensors" in line, line
    # Resuming a finished run: nothing to do, said once, exit 0.
    r = train(cnnc, d, "--resume", tmp_path / "ck.safetensors", steps=1)
    assert r.returncode == 0 and "nothing to do" in r.stderr, r.stderr
    assert "step " not in r.stdout.replace("eval step", "")


def test_cnnc_train_without_gpu(cnnc, setup, tmp_path):
    d = setup
    env = dict(os.environ, CNNC_ASSUME_NO_GPU="1")
    import subprocess

    def run(*extra, steps=7):
        args = [str(cnnc), "train", str(d / "m.onnx"), "--optimizer", "adam", "--lr",
                "0.01", "--steps", str(steps), "--lr-schedule", "cosine", "--data",
                str(d / "x.npy"), "--labels", str(d / "y.npy"), "--seed", "3"]
        return subprocess.run(args + [str(a) for a in extra], capture_output=True,
                              text=True, env=env, cwd=tmp_path, timeout=300)
    want = losses(train(cnnc, d).stdout)
    r = run("--checkpoint", tmp_path / "ck-{step}.safetensors", "--checkpoint-every", 5)
    assert r.returncode == 0, r.stderr
    assert "trained state written to '%s'" % (tmp_path / "ck-{step}.safetensors") in r.stderr
    assert losses(r.stdout) == want
    r = run("--resume", tmp_path / "ck-5.safetensors", "--checkpoint", tmp_path / "c2.cnnw")
    assert r.returncode == 0, r.stderr
    assert losses(r.stdout) == {"6": want["6"], "7": want["7"]}
    r = run("--checkpoint", tmp_path / "a.cnnw", "--save-state", tmp_path / "b.cnnw")
    assert "not both" in one_error(r)


def test_log_json_records(cnnc, setup, tmp_path):
    d = setup
    log = tmp_path / "log.jsonl"
    r = train(cnnc, d, "--log-json", log)
    assert r.returncode == 0, r.stderr
    records = [json.loads(l) for l in open(log)]
    assert [x["step"] for x in records] == list(range(1, 8))
    for line, x in zip(re.findall(r"^step .*$", r.stdout, re.M), records):
        assert x["type"] == "train" and x["total_steps"] == 7
        assert line.startswith("step %d loss %.7g epoch %.2f lr %.6g " %
                               (x["step"], x["loss"], x["epoch"], x["lr"])), (line, x)
        assert set(x) == {"type", "step", "total_steps", "epoch", "loss", "lr",
                          "img_per_s", "eta_s"}


@pytest.mark.skipif(not os.path.exists("/usr/local/cuda/bin/nvcc") and not shutil.which("nvcc"),
                    reason="nvcc not found")
def test_executable_reads_cpu_checkpoint(cnnc, setup, tmp_path):
    """A checkpoint the CPU path wrote passes the executable's checks (names,
    shapes, step, data position; the f16 NHWC step converts the public
    layout); without a GPU it then exits 3, on a GPU it trains. A truncated
    one is one error, exit 1, before the GPU is touched."""
    import subprocess
    d = setup
    r = tc.run_cnnc(cnnc, d / "m.onnx", "--optimizer", "adam", "--lr", "0.01",
                    "-o", tmp_path / "train", "--arch", "sm_80")
    assert r.returncode == 0, r.stderr
    r = train(cnnc, d, "--checkpoint", tmp_path / "ck-{step}.safetensors",
              "--checkpoint-every", 3)
    assert r.returncode == 0, r.stderr

    def run(*args):
        return subprocess.run([str(tmp_path / "train"), "--data", str(d / "x.npy"), "--labels",
                               str(d / "y.npy"), "--steps", "7"] + [str(a) for a in args],
                              capture_output=True, text=True, timeout=300)
    r = run("--resume", tmp_path / "ck-3.safetensors")
    assert r.returncode in (0, 3), r.stderr
    if r.returncode == 3:
        assert "no CUDA GPU" in r.stderr and "cannot resume" not in r.stderr, r.stderr
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes((tmp_path / "ck-3.safetensors").read_bytes()[:-100])
    r = run("--resume", cut)
    assert r.returncode == 1, r.stderr
    assert "cannot resume" in r.stderr and "run past the end of the data" in r.stderr, r.stderr
