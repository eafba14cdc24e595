"""One-shot-aggregation networks with an effective-SE gate (VoVNet-style,
timm's ese_vovnet*_dw) through cnnc on the CPU (issue 32).

The model: a stem, OSA blocks (a chain of depthwise-separable conv-BN-ReLU
whose outputs and the block input are concatenated, a 1x1 conv-BN-ReLU, then
eSE: x * hard_sigmoid(conv1x1(mean_hw(x)))), a residual OSA block, a
ceil-mode max pooling between stages. The gate is written both ways PyTorch
models write it: timm's ``F.relu6(x + 3.) / 6.`` (exported as Add / Relu /
Clip / Div: the broadcast constant 3 meets the SE convolution's bias) and
``nn.Hardsigmoid`` (ONNX HardSigmoid).

* against PyTorch (cnnc.compare: forward per module, every gradient, loss);
* the CUDA target's pass pipeline run on the reference interpreter (layout,
  fusion, parameter format, max-pool index, lowering, rematerialization,
  lowering choices) gives the -O0 step bit for bit, in NCHW and NHWC. Before
  the fix cnn-fuse took timm's constant 3 (tensor<1x1x1x1xf32>) for the SE
  convolution's residual and the step failed verification ("'residual' ...
  must have the result type"), so `cnnc --emit cuda` could not build it;
* `cnnc --emit cuda` builds the step in fp32 (NCHW, NHWC) and fp16.
"""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cnnc.export import export_onnx  # noqa: E402
from cnnc.tools import require_tool  # noqa: E402
from test_fuse import run_step  # noqa: E402
from osa_ese_model import VoVNetESE  # noqa: E402

torch.set_num_threads(1)


SHAPE = (2, 3, 32, 32)
GATES = ["timm", "hardsigmoid"]


def model(gate):
    torch.manual_seed(0)
    return VoVNetESE(gate)


def batch():
    rng = np.random.RandomState(0)
    return (rng.rand(*SHAPE).astype(np.float32),
            rng.randint(0, 10, size=SHAPE[0]).astype(np.int64))


@pytest.fixture(params=GATES)
def exported(request, tmp_path):
    gate = request.param
    onnx = tmp_path / ("vovnet_%s.onnx" % gate)
    export_onnx(model(gate), str(onnx), SHAPE, training=True, opset=13)
    x, y = batch()
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    return gate, onnx


@pytest.mark.parametrize("gate", GATES)
def test_matches_pytorch(gate):
    import cnnc
    x, y = batch()
    report = cnnc.compare(model(gate), torch.from_numpy(x), torch.from_numpy(y))
    print(report)
    assert report.ok, str(report)


# The CUDA target's passes after cnn-autodiff (cnn-gpu-pipeline's order)
# that the reference interpreter runs; cnn-input-format and cnn-memory-plan
# only change how the GPU stores the step, cnn-conv-stats is checked in f16
# by test_fuse.py (not bit for bit by design).
GPU_PASSES = ["--cnn-param-format", "--cnn-fuse",
              "--cnn-max-pool-index=prologue=true", "--cnn-lower-elementwise",
              "--cnn-remat=convolutions-only=true budget-percent=9",
              "--cnn-select-lowering"]


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_gpu_passes_keep_the_step(exported, tmp_path, layout):
    gate, onnx = exported
    base = tmp_path / "base.mlir"
    subprocess.run([require_tool("cnnc"), str(onnx), "--train", "-O0", "--optimizer",
                    "none", "--emit", "mlir", "-o", str(base)], check=True)
    pre = ["--cnn-layout", "--canonicalize", "--cse"] if layout == "nhwc" else []
    gpu = tmp_path / "gpu.mlir"
    p = subprocess.run([require_tool("cnnc-opt"), str(base)] + pre + GPU_PASSES +
                       ["-o", str(gpu)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    text = gpu.read_text()
    assert "cnn.fused_conv2d" in text and "cnn.concat" in text
    (l0, s0), (l1, s1) = run_step(base, tmp_path, "base"), run_step(gpu, tmp_path, "gpu")
    assert l1 == l0, (l0, l1)
    grads = [k for k in s0 if k.endswith(".grad")]
    assert len(grads) == 55
    for k in s0:
        assert np.array_equal(np.asarray(s0[k]), np.asarray(s1[k])), (gate, layout, k)


@pytest.mark.parametrize("precision,layout", [("fp32", "nchw"), ("fp32", "nhwc"),
                                              ("fp16", "nhwc")])
def test_cuda_step_builds(exported, tmp_path, precision, layout):
    gate, onnx = exported
    cu = tmp_path / "step.cu"
    p = subprocess.run([require_tool("cnnc"), str(onnx), "--train", "--optimizer", "sgd",
                        "--momentum", "0.9", "--precision", precision, "--layout", layout,
                        "--emit", "cuda", "-o", str(cu)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "trainStep" in cu.read_text()
