"""ONNX GlobalMaxPool trained end to end against PyTorch (issue 32).

PyTorch's exporter writes nn.AdaptiveMaxPool2d(1) as a MaxPool whose kernel
is the whole map, so test_new_ops.py's `adaptive_max_pool` case never
reaches the importer's GlobalMaxPool row (cnn.reduce_max over H and W, whose
gradient rule sends dy to the maxima). Exporters of other frameworks write
GlobalMaxPool; here the exported MaxPool node is rewritten into one, and the
model's loss, gradients and 3 SGD steps are compared with PyTorch in float64
(the same model: both are the maximum over the whole map).
"""
import subprocess

import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")

from cnnc import train_check as tc  # noqa: E402

import test_new_ops as ops  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def test_global_max_pool_trains_as_pytorch(cnnc, tmp_path):
    torch.manual_seed(0)
    model = ops.CASES["adaptive_max_pool"]()
    path = tmp_path / "gmp.onnx"
    tc.export_training(model, path, ops.SHAPE)
    m = onnx.load(str(path))
    pools = [n for n in m.graph.node if n.op_type == "MaxPool"]
    assert len(pools) == 1, [n.op_type for n in m.graph.node]
    pools[0].op_type = "GlobalMaxPool"
    del pools[0].attribute[:]
    onnx.save(m, str(path))
    ir = tmp_path / "gmp.mlir"
    subprocess.run([cnnc, str(path), "--emit", "mlir", "-o", str(ir)], check=True)
    assert "cnn.reduce_max" in ir.read_text() and "max_pool2d" not in ir.read_text()

    x, y = tc.random_batch(ops.SHAPE, ops.CLASSES, seed=1)
    none = {"kind": "none"}
    (tmp_path / "grads").mkdir()
    run = tc.cnnc_train_fixed(cnnc, path, x, y, none, 1, tmp_path / "grads")
    ref_loss, ref = tc.torch_step_from(model, {}, x, y, none, 1)
    _, failures = tc.check_step(run.state, ref, model, none, 1, ops.TOL,
                                loss=run.losses[0], ref_loss=ref_loss,
                                groups=["grads"])
    (tmp_path / "sgd").mkdir()
    run3 = tc.cnnc_train_fixed(cnnc, path, x, y, ops.SGD, 3, tmp_path / "sgd")
    losses, ref3 = tc.torch_train(model, x, y, ops.SGD, 3)
    for k, (a, b) in enumerate(zip(run3.losses, losses), 1):
        if abs(a - b) > ops.TOL * abs(b):
            failures.append("SGD step %d loss %.7g vs torch %.7g" % (k, a, b))
    failures += tc.check_step(run3.state, ref3, model, ops.SGD, 3, ops.TOL,
                              groups=["params"])[1]
    assert len(run3.losses) == 3 and not failures, "\n".join(failures)
