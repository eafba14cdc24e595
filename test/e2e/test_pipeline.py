"""Pipeline stages on the CPU reference interpreter (issue 38,
docs/pipeline-parallel.md): `cnnc --train --run-reference --pipeline-stages S
--micro-batches M` trains on M micro-batches of the model's batch per step
and must give what the unpartitioned step with `--accumulate M` gives over
the same micro-batches, bitwise (the same f32 ops in the same order): every
parameter, optimizer state and BatchNorm running statistic after the run, and
each step's loss equal to the mean of its M micro-steps' losses."""
import os
import subprocess
import sys

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
from cnnc import train_check as tc  # noqa: E402
from cnnc.cnnw import read_cnnw  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

B = 2      # the micro-batch
M = 4      # micro-batches per step
STEPS = 2  # pipelined steps (2 x M micro-steps of --accumulate)


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    src = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"
    if not os.path.exists(src):
        pytest.skip("python3-sklearn's digits (%s) are not installed" % src)
    out = tmp_path_factory.mktemp("pp") / "digits"
    subprocess.run([sys.executable, os.path.join(REPO, "scripts", "make_digits.py"),
                    "--out", str(out)], check=True, capture_output=True)
    return out


class SmallBN(torch.nn.Module):
    """conv -> BatchNorm -> relu -> pool -> linear: BatchNorm statistics per
    micro-batch."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 4)
        return self.fc(torch.flatten(x, 1))


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("pp")
    out = {}
    for name, model in (("simplecnn", tc.make_model("simplecnn", seed=0)),
                        ("smallbn", SmallBN())):
        out[name] = d / ("%s_b%d.onnx" % (name, B))
        tc.export_training(model, out[name], (B, 3, 32, 32))
    return out


def train(cnnc, model, data, out, steps, *extra):
    r = tc.run_cnnc(cnnc, model, "--train", "--run-reference", "--steps", steps,
                    "--data", data, "--seed", 3, "--save-state", out,
                    "--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9", *extra)
    assert r.returncode == 0, r.stdout + r.stderr
    steps_seen = [(int(i), float(v)) for i, v in tc.STEP_RE.findall(r.stdout)]
    assert [i for i, _ in steps_seen] == list(range(1, steps + 1)), r.stdout
    return r, np.array([v for _, v in steps_seen], np.float64)


@pytest.mark.parametrize("stages", [2, 4])
@pytest.mark.parametrize("name", ["simplecnn", "smallbn"])
def test_pipeline_equals_accumulation(cnnc, models, digits, tmp_path, name, stages):
    model = models[name]
    acc, acc_losses = train(cnnc, model, digits, tmp_path / "acc.cnnw", STEPS * M,
                            "--accumulate", M)
    pp, pp_losses = train(cnnc, model, digits, tmp_path / "pp.cnnw", STEPS,
                          "--pipeline-stages", stages, "--micro-batches", M)
    assert "pipeline plan: %d stage(s) x %d micro-batch(es)" % (stages, M) in pp.stdout, pp.stdout
    # A pipelined step reports the mean of its micro-batches' losses.
    np.testing.assert_allclose(pp_losses, acc_losses.reshape(STEPS, M).mean(axis=1),
                               rtol=1e-5)
    a, p = read_cnnw(str(tmp_path / "acc.cnnw")), read_cnnw(str(tmp_path / "pp.cnnw"))
    names = [n for n in tc.onnx_initializers(model).keys() if "num_batches" not in n]
    assert names and all(n in p for n in names), sorted(p)
    for n in names:
        np.testing.assert_array_equal(np.asarray(p[n]), np.asarray(a[n]), err_msg=n)
    # The run trained: the weights moved from the exported ones.
    init = tc.onnx_initializers(model)
    assert any(np.any(np.asarray(p[n]) != np.asarray(init[n])) for n in names)


def test_pipeline_flag_errors(cnnc, models):
    model = models["simplecnn"]
    r = tc.run_cnnc(cnnc, model, "--train", "--run-reference", "--steps", 1,
                    "--data", "synthetic", "--micro-batches", 4)
    assert r.returncode != 0
    assert "--micro-batches splits the batch of pipeline stages: give --pipeline-stages S too" in r.stderr, r.stderr
    r = tc.run_cnnc(cnnc, model, "--train", "--run-reference", "--steps", 1,
                    "--data", "synthetic", "--pipeline-stages", 2, "--micro-batches", 4,
                    "--accumulate", 2)
    assert r.returncode != 0
    assert "--accumulate 2 with pipeline stages" in r.stderr, r.stderr
