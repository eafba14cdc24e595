"""End-to-end import tests: torch 1.13 exports -> `cnnc --emit mlir`.

Run with `/usr/bin/python3 -m pytest test/e2e`. The cnnc binary comes from
$CNNC, else build/bin/cnnc (relative to the repository root).
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
pytest.importorskip("torchvision")
from cnnc.export import export_named  # noqa: E402
from cnnc.tools import require_tool  # noqa: E402


def cnnc_binary():
    return require_tool("cnnc")


def run_cnnc(*args):
    r = subprocess.run([cnnc_binary(), *map(str, args)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def op_counts(ir):
    counts = {}
    for op in re.findall(r"= (cnn\.[a-z_0-9]+)", ir):
        counts[op] = counts.get(op, 0) + 1
    return counts


@pytest.fixture(scope="module")
def resnet18_eval(tmp_path_factory):
    path = tmp_path_factory.mktemp("r18") / "resnet18.onnx"
    model, x = export_named("resnet18", str(path), batch=2)
    return path, model, x


def test_resnet18_eval_ops(resnet18_eval):
    path, _, _ = resnet18_eval
    ir = run_cnnc(path, "--emit", "mlir")
    counts = op_counts(ir)
    assert counts.get("cnn.conv2d") == 20
    assert counts.get("cnn.add") == 8          # residual connections
    assert counts.get("cnn.relu") == 17
    assert counts.get("cnn.max_pool2d") == 1
    assert counts.get("cnn.global_avg_pool") == 1
    assert counts.get("cnn.matmul") == 1
    assert "tensor<2x3x224x224xf32> {cnn.input}" in ir
    assert "-> tensor<2x1000xf32>" in ir
    # The eval export folds BN into the convolutions: conv biases, no BN.
    assert counts.get("cnn.batch_norm", 0) == 0
    assert ir.count("{cnn.param = ") == 42


def test_resnet18_ir_is_small_with_locations(resnet18_eval):
    path, _, _ = resnet18_eval
    ir = run_cnnc(path, "--print-locations")
    assert len(ir.encode()) < 200 * 1024, len(ir)
    assert "dense<" not in ir  # weights stay out of the IR
    # Node names from torch ("/layer1/layer1.0/conv1/Conv" or "Conv_12").
    assert re.search(r'loc\("[^"]*Conv[^"]*"\(#loc', ir), ir[-2000:]
    assert re.search(r'loc\("[^"]*Gemm[^"]*"\(#loc', ir)


def test_resnet18_reference_matches_torch(resnet18_eval, tmp_path):
    path, model, x = resnet18_eval
    np.save(tmp_path / "x.npy", x.numpy())
    run_cnnc(path, "--run-reference", "--input", tmp_path / "x.npy",
             "--output", tmp_path / "y.npy")
    with torch.no_grad():
        ref = model.eval()(x).numpy()
    y = np.load(tmp_path / "y.npy")
    assert y.shape == ref.shape
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)


def test_inference_export_warns_once_for_training(resnet18_eval, tmp_path):
    # torch 1.13's eval export folds every BatchNorm into the preceding
    # Conv (weights renamed "onnx::Conv_<n>") and drops Dropout: --train
    # says so once, with the export call that keeps them.
    path, _, _ = resnet18_eval
    r = subprocess.run([cnnc_binary(), str(path), "--train", "--optimizer",
                        "none", "--emit", "mlir", "-o", tmp_path / "s.mlir"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    warnings = [l for l in r.stderr.splitlines() if "warning:" in l]
    assert len(warnings) == 1, r.stderr
    assert "onnx::Conv_" in warnings[0] and "folded a BatchNorm" in warnings[0]
    assert "training=torch.onnx.TrainingMode.TRAINING" in warnings[0]
    assert "do_constant_folding=False" in warnings[0]
    # Importing for inference says nothing.
    r = subprocess.run([cnnc_binary(), str(path)], capture_output=True,
                       text=True)
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr


def test_training_export_does_not_warn(tmp_path):
    path = tmp_path / "simplecnn_train.onnx"
    export_named("simplecnn", str(path), batch=2, training=True)
    r = subprocess.run([cnnc_binary(), str(path), "--train", "--optimizer",
                        "none", "--emit", "mlir", "-o", tmp_path / "s.mlir"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "warning" not in r.stderr, r.stderr


def test_resnet18_training_export(tmp_path):
    path = tmp_path / "resnet18_train.onnx"
    export_named("resnet18", str(path), batch=2, training=True)
    ir = run_cnnc(path)
    counts = op_counts(ir)
    assert counts.get("cnn.conv2d") == 20
    assert counts.get("cnn.batch_norm") == 20
    assert counts.get("cnn.bias_add") == 1   # only the fc layer
    assert ir.count("{cnn.buffer = ") == 40  # running mean and var
    assert '{cnn.param = "layer1.0.bn1.weight"}' in ir
    assert '{cnn.buffer = "layer1.0.bn1.running_var"}' in ir


@pytest.mark.parametrize("training", [False, True])
def test_simplecnn(tmp_path, training):
    path = tmp_path / "simplecnn.onnx"
    model, x = export_named("simplecnn", str(path), batch=4,
                            training=training)
    ir = run_cnnc(path, "--batch", 4)
    counts = op_counts(ir)
    assert counts.get("cnn.conv2d") == 2
    assert counts.get("cnn.max_pool2d") == 2
    assert counts.get("cnn.matmul") == 2
    assert counts.get("cnn.bias_add") == 4
    assert counts.get("cnn.relu") == 3
    # view(size(0), -1) is folded to one static reshape.
    assert counts.get("cnn.reshape") == 1
    assert "(tensor<4x32x8x8xf32>) -> tensor<4x2048xf32>" in ir
    for name in ["conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
                 "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]:
        assert '{cnn.param = "%s"}' % name in ir

    # -o writes IR + weights; the reference run matches PyTorch.
    out = tmp_path / "simplecnn.mlir"
    run_cnnc(path, "-o", out)
    assert os.path.getsize(str(out) + ".cnnw") > 4 * 2048 * 128
    np.save(tmp_path / "x.npy", x.numpy())
    run_cnnc(out, "--run-reference", "--input", tmp_path / "x.npy",
             "--output", tmp_path / "y.npy")
    with torch.no_grad():
        ref = model.eval()(x).numpy()
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), ref, rtol=1e-4,
                               atol=1e-5)


def test_dynamic_batch(tmp_path):
    path = tmp_path / "simplecnn_dyn.onnx"
    export_named("simplecnn", str(path), batch=2, dynamic_batch=True)
    r = subprocess.run([cnnc_binary(), str(path)], capture_output=True,
                       text=True)
    assert r.returncode == 1
    assert "dynamic dimension 'batch' of input 'input' needs --batch N" in r.stderr
    ir = run_cnnc(path, "--batch", 16)
    assert "tensor<16x3x32x32xf32> {cnn.input}" in ir
    assert "-> tensor<16x10xf32>" in ir
