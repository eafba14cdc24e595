"""ONNX Ceil / Floor of constants fold at import (TF "same" padding: torch 2
exports timm's pad_same as Ceil of shape arithmetic); a run-time operand is a
clean refusal naming the op."""
import os
import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_reference_harness import find_tool  # noqa: E402

CNNC = os.path.join(os.path.dirname(find_tool()), "cnnc")

PADS = np.array([0, 0, 0.2, 1.5, 0, 0, 0.7, 1.0], np.float32)


def pad_model(op, path, runtime=False):
    """y = Pad(x, Cast<int64>(op(pads))); with `runtime`, op reads a graph
    input instead of a constant."""
    nodes = [helper.make_node(op, ["pf"], ["pr"]),
             helper.make_node("Cast", ["pr"], ["pads"], to=TensorProto.INT64),
             helper.make_node("Pad", ["x", "pads"], ["y"], mode="constant")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3, 3])]
    inits = []
    if runtime:
        inputs.append(helper.make_tensor_value_info("pf", TensorProto.FLOAT, [8]))
    else:
        nodes.insert(0, helper.make_node("Constant", [], ["pf"],
                                         value=numpy_helper.from_array(PADS)))
    g = helper.make_graph(nodes, "g", inputs,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


@pytest.mark.parametrize("op", ["Ceil", "Floor"])
def test_constant_folds(op, tmp_path):
    model = str(tmp_path / "m.onnx")
    pad_model(op, model)
    x = np.random.default_rng(0).normal(size=(1, 2, 3, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    p = subprocess.run([CNNC, model, "--run-reference", "--input",
                        str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy")],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    pads = (np.ceil if op == "Ceil" else np.floor)(PADS).astype(np.int64)
    want = np.pad(x, list(zip(pads[:4], pads[4:])))
    got = np.load(tmp_path / "y.npy")
    assert got.shape == want.shape and np.array_equal(got, want)


@pytest.mark.parametrize("op", ["Ceil", "Floor"])
def test_runtime_operand_is_refused(op, tmp_path):
    model = str(tmp_path / "m.onnx")
    pad_model(op, model, runtime=True)
    p = subprocess.run([CNNC, model, "--emit", "mlir", "-o",
                        str(tmp_path / "m.mlir")], capture_output=True, text=True)
    assert p.returncode == 1, p.stderr
    assert p.stderr.count("error:") == 1 and op in p.stderr, p.stderr
