"""`cnnc --train --run-reference`: errors for bad input, training on the digits.

* Bad input exits non-zero with exactly one clear line on stderr: a model
  whose logits depend on no parameter, an unknown --optimizer, training
  without data.
* SimpleCNN on the bundled digits (scripts/make_digits.py, CIFAR-10 binary
  format with a test split), 20 Adam steps of batch 32 on the CPU reference
  interpreter: the loss falls (mean of the last 5 steps below the mean of the
  first 5) and the held-out accuracy line is printed.
"""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
from cnnc import train_check as tc  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module")
def simplecnn32(tmp_path_factory):
    """SimpleCNN exported in training mode for batch 32."""
    path = tmp_path_factory.mktemp("simplecnn") / "simplecnn.onnx"
    tc.export_training(tc.make_model("simplecnn", seed=0), path, (32, 3, 32, 32))
    return path


def one_error_line(r):
    """The single stderr line of a failed run (asserts there is exactly one
    and that nothing reached stdout)."""
    assert r.returncode != 0, "expected a failure; stdout:\n" + r.stdout[-2000:]
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, "expected one error line, got:\n" + r.stderr
    assert "error" in lines[0], lines[0]
    assert "step " not in r.stdout, r.stdout
    return lines[0]


def constant_logits_onnx(path):
    """A model with a parameter (fc.weight, used by a dead MatMul) whose
    logits Relu(input) depend on no parameter."""
    from onnx import TensorProto, helper, numpy_helper
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, [4, 10])
    y = helper.make_tensor_value_info("logits", TensorProto.FLOAT, [4, 10])
    w = numpy_helper.from_array(np.ones((10, 10), np.float32), "fc.weight")
    nodes = [helper.make_node("MatMul", ["input", "fc.weight"], ["unused"]),
             helper.make_node("Relu", ["input"], ["logits"])]
    graph = helper.make_graph(nodes, "constant_logits", [x], [y], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
              str(path))


def test_error_logits_independent_of_parameters(cnnc, tmp_path):
    path = tmp_path / "constant_logits.onnx"
    constant_logits_onnx(path)
    x, y = tc.random_batch((4, 10), 10)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    r = tc.run_cnnc(cnnc, path, "--train", "--run-reference", "--steps", 1,
                    "--input", tmp_path / "x.npy", "--labels", tmp_path / "y.npy")
    line = one_error_line(r)
    print("\nMEASURED error line:", line)
    assert "do not depend on any parameter" in line, line


def test_error_unknown_optimizer(cnnc, simplecnn32):
    r = tc.run_cnnc(cnnc, simplecnn32, "--train", "--optimizer", "foo",
                    "--run-reference", "--steps", 1, "--data", "synthetic")
    line = one_error_line(r)
    print("\nMEASURED error line:", line)
    assert "'foo'" in line and "optimizer" in line, line
    for name in ("sgd", "adam", "adamw", "none"):
        assert name in line, "the message should list the choices: " + line


def test_error_training_without_data(cnnc, simplecnn32):
    r = tc.run_cnnc(cnnc, simplecnn32, "--train", "--run-reference", "--steps", 2)
    line = one_error_line(r)
    print("\nMEASURED error line:", line)
    assert "--data" in line, line


def test_digits_loss_falls_and_accuracy_printed(cnnc, simplecnn32, tmp_path):
    src = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"
    if not os.path.exists(src):
        pytest.skip("python3-sklearn's digits (%s) are not installed" % src)
    digits = tmp_path / "digits"
    subprocess.run([sys.executable, os.path.join(REPO, "scripts", "make_digits.py"),
                    "--out", str(digits)], check=True, capture_output=True)
    r = tc.run_cnnc(cnnc, simplecnn32, "--train", "--optimizer", "adam", "--lr", "0.001",
                    "--run-reference", "--steps", 20, "--batch", 32, "--data", digits)
    assert r.returncode == 0, r.stderr
    steps = [(int(i), float(v)) for i, v in tc.STEP_RE.findall(r.stdout)]
    assert [i for i, _ in steps] == list(range(1, 21)), r.stdout
    for line in r.stdout.splitlines():
        if line.startswith("step "):  # cnnrt::progressLine
            assert re.fullmatch(r"step \d+ loss ([-+0-9.e]+|nan) epoch [0-9.]+ lr [-+0-9.e]+ "
                                r"img/s \d+ eta \d+:\d\d:\d\d", line), line
    losses = [v for _, v in steps]
    assert all(np.isfinite(losses)), losses
    first, last = np.mean(losses[:5]), np.mean(losses[-5:])
    m = tc.ACC_RE.search(r.stdout)
    assert m, "no 'eval step N epoch E: top-1 <pct>% (<correct>/<total>) ...' line:\n" + r.stdout
    pct, correct, total = float(m.group(1)), int(m.group(2)), int(m.group(3))
    print("\nMEASURED digits: mean loss steps 1-5 %.4f, steps 16-20 %.4f; %s" %
          (first, last, m.group(0)))
    assert last < first, losses
    assert 0 < total <= 297 and 0 <= correct <= total, m.group(0)
    assert abs(pct - 100.0 * correct / total) < 0.01, m.group(0)
