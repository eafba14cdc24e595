"""The elementwise ops of the ElementwiseOpInterface vs PyTorch (CPU, f32).

Each op is defined once, by its scalar body and derivative in CNNOps.td; this
checks both through the whole path a user's model takes: cnn-autodiff builds
the gradient from the derivative, the reference interpreter runs the forward
and backward from the scalar body, and cnn-fuse / cnn-lower-elementwise give
the same numbers. Gradients are compared with torch.autograd.
"""
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_reference_harness import find_tool  # noqa: E402

torch.set_num_threads(1)
TOOLS = pathlib.Path(find_tool()).parent
TOL = 2e-5


def ty(shape):
    return "tensor<" + "".join(f"{d}x" for d in shape) + "f32>"


# name -> (mlir op text builder, torch function)
UNARY = {
    "sigmoid": ("cnn.sigmoid %h", torch.sigmoid),
    "tanh": ("cnn.tanh %h", torch.tanh),
    "erf": ("cnn.erf %h", torch.erf),
    "exp": ("cnn.exp %h", torch.exp),
    "neg": ("cnn.neg %h", torch.neg),
    "abs": ("cnn.abs %h", torch.abs),
    "leaky_relu": ("cnn.leaky_relu %h {alpha = 0.1 : f32}",
                   lambda x: F.leaky_relu(x, 0.1)),
    "hard_sigmoid": ("cnn.hard_sigmoid %h {alpha = 0.166666672 : f32, "
                     "beta = 0.5 : f32}", F.hardsigmoid),
    "hard_swish": ("cnn.hard_swish %h", F.hardswish),
    "silu": ("cnn.silu %h", F.silu),
    "mish": ("cnn.mish %h", F.mish),
    # 10 x h: both sides of softplus' threshold inside mish.
    "mish_wide": ("cnn.mish %t", F.mish),
    "gelu": ("cnn.gelu %h", F.gelu),
    "gelu_tanh": ("cnn.gelu %h {approximate = \"tanh\"}",
                  lambda x: F.gelu(x, approximate="tanh")),
    "relu": ("cnn.relu %h", F.relu),
    "elu": ("cnn.elu %h {alpha = 0.7 : f32}", lambda x: F.elu(x, 0.7)),
    "selu": ("cnn.selu %h {alpha = 1.67326319 : f32, gamma = 1.05070102 : f32}",
             F.selu),
    "celu": ("cnn.celu %h {alpha = 0.5 : f32}", lambda x: F.celu(x, 0.5)),
    "softplus": ("cnn.softplus %h", F.softplus),
    # 10 x h: both sides of softplus' threshold (x > 20 is x itself).
    "softplus_wide": ("cnn.softplus %t", F.softplus),
    "clip": ("cnn.clip %h {min = -0.5 : f32, max = 0.75 : f32}",
             lambda x: torch.clamp(x, -0.5, 0.75)),
    "scale": ("cnn.scale %h {factor = -1.5 : f32}", lambda x: x * -1.5),
    # Positive inputs: |h| + 0.5 is built below for these.
    "sqrt": ("cnn.sqrt %p", torch.sqrt),
    "reciprocal": ("cnn.reciprocal %p", torch.reciprocal),
    "pow": ("cnn.pow %p {exponent = 2.5 : f32}", lambda x: x ** 2.5),
    "log": ("cnn.log %p", torch.log),
}


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 0, f"{cmd}\n{p.stderr}"
    return p


def train_step_grads(forward_mlir, x, w, labels, extra=()):
    """Builds the step with --optimizer none (gradients as results) and runs
    it on the reference interpreter: returns (loss, dw)."""
    with tempfile.TemporaryDirectory() as d:
        d = pathlib.Path(d)
        (d / "f.mlir").write_text(forward_mlir)
        run([str(TOOLS / "cnnc-opt"), str(d / "f.mlir"),
             "--cnn-autodiff=optimizer=none", "--cse", *extra,
             "-o", str(d / "step.mlir")])
        ins = [x, labels.astype(np.int32), np.float32(0.1), np.float32(1.0), w]
        paths = []
        for i, a in enumerate(ins):
            np.save(d / f"in{i}.npy", np.asarray(a))
            paths.append(str(d / f"in{i}.npy"))
        run([str(TOOLS / "cnnc-reference-run"), str(d / "step.mlir"),
             "--func", "train_step", "-o", str(d / "out"), *paths])
        return np.load(d / "out0.npy"), np.load(d / "out1.npy")


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.abs(a - b).max() / max(np.abs(b).max(), 1e-6)


@pytest.mark.parametrize("extra", [(), ("--cnn-fuse",),
                                   ("--cnn-lower-elementwise",)],
                         ids=["plain", "fused", "lowered"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_forward_and_gradient(name, extra):
    op_text, fn = UNARY[name]
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, size=(4, 6)).astype(np.float32)
    w = rng.uniform(-2, 2, size=(4, 6)).astype(np.float32)
    labels = rng.integers(0, 6, size=4)
    # logits = op(x * w); `p` is |x * w| + 0.5 for the ops that need x > 0,
    # `t` is 10 x w * x.
    t = ty((4, 6))
    mlir = f"""
func.func @forward(%x: {t} {{cnn.input}}, %w: {t} {{cnn.param = "w"}}) -> {t} {{
  %h = cnn.mul %x, %w : ({t}, {t}) -> {t}
  %n = cnn.neg %h : ({t}) -> {t}
  %a = cnn.relu %h : ({t}) -> {t}
  %b = cnn.relu %n : ({t}) -> {t}
  %ab = cnn.add %a, %b : ({t}, {t}) -> {t}
  %p = cnn.scale %ab {{factor = 1.0 : f32}} : ({t}) -> {t}
  %half = cnn.constant dense<0.5> : {t}
  %pp = cnn.add %p, %half : ({t}, {t}) -> {t}
  %t = cnn.scale %h {{factor = 10.0 : f32}} : ({t}) -> {t}
  %y = {op_text.replace('%p', '%pp')} : ({t}) -> {t}
  return %y : {t}
}}"""
    loss, dw = train_step_grads(mlir, x, w, labels, extra)
    tw = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    h = torch.tensor(x, dtype=torch.float64) * tw
    arg = (h.abs() + 0.5 if "%p" in op_text
           else h * 10 if "%t" in op_text else h)
    ref = F.cross_entropy(fn(arg), torch.tensor(labels))
    ref.backward()
    assert rel(loss, ref.item()) < TOL, (loss, ref.item())
    assert rel(dw, tw.grad.numpy()) < TOL, (dw, tw.grad.numpy())


BINARY = {"add": torch.add, "sub": torch.sub, "mul": torch.mul,
          "div": torch.div, "pow_tensor": torch.pow,
          "prelu": F.prelu, "maximum": torch.maximum,
          "minimum": torch.minimum}
# The range of x (default 0.5..2, where pow_tensor and div are smooth):
# prelu needs both signs, maximum/minimum values on both sides of w.
X_RANGE = {"prelu": (-2, 2), "maximum": (0, 2.5), "minimum": (0, 2.5)}


def torch_binary(name, a, b):
    if name == "prelu":  # F.prelu wants a 1-D per-channel slope
        return torch.where(a > 0, a, a * b)
    return BINARY[name](a, b)


@pytest.mark.parametrize("extra", [(), ("--cnn-fuse",)], ids=["plain", "fused"])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_broadcast_binary_and_reductions(name, extra):
    """x (N, C, H, W) op w (1, C, 1, 1), then the mean over H, W and a sum
    over C-halves: the broadcast operand's gradient is summed over N, H, W
    (cnn.reduce_sum) and the reductions' gradients are broadcasts."""
    rng = np.random.default_rng(1)
    x = rng.uniform(*X_RANGE.get(name, (0.5, 2)),
                    size=(2, 4, 3, 3)).astype(np.float32)
    w = rng.uniform(0.5, 2, size=(1, 4, 1, 1)).astype(np.float32)
    labels = rng.integers(0, 4, size=2)
    tx, tw, tr = ty((2, 4, 3, 3)), ty((1, 4, 1, 1)), ty((2, 4, 1, 1))
    mlir = f"""
func.func @forward(%x: {tx} {{cnn.input}}, %w: {tw} {{cnn.param = "w"}}) -> tensor<2x4xf32> {{
  %y = cnn.{name} %x, %w : ({tx}, {tw}) -> {tx}
  %se = cnn.reduce_mean %y {{axes = array<i64: 2, 3>}} : ({tx}) -> {tr}
  %g = cnn.sigmoid %se : ({tr}) -> {tr}
  %z = cnn.mul %y, %g : ({tx}, {tr}) -> {tx}
  %s = cnn.reduce_sum %z {{axes = array<i64: 2, 3>}} : ({tx}) -> {tr}
  %l = cnn.reshape %s : ({tr}) -> tensor<2x4xf32>
  return %l : tensor<2x4xf32>
}}"""
    loss, dw = train_step_grads(mlir, x, w, labels, extra)
    twt = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    y = torch_binary(name, torch.tensor(x, dtype=torch.float64), twt)
    g = torch.sigmoid(y.mean(dim=(2, 3), keepdim=True))
    logits = (y * g).sum(dim=(2, 3))
    ref = F.cross_entropy(logits, torch.tensor(labels))
    ref.backward()
    assert rel(loss, ref.item()) < TOL, (loss, ref.item())
    assert rel(dw, twt.grad.numpy()) < TOL, (dw, twt.grad.numpy())


@pytest.mark.parametrize("extra", [(), ("--cnn-fuse",)], ids=["plain", "fused"])
@pytest.mark.parametrize("name", ["prelu", "maximum", "minimum", "sub", "div"])
def test_binary_lhs_gradient(name, extra):
    """The gradient of the left operand: w (2, 4, 3, 3) op x (1, 4, 1, 1)
    (for prelu: w is the input, x the per-channel slope)."""
    rng = np.random.default_rng(2)
    w = rng.uniform(*X_RANGE.get(name, (0.5, 2)),
                    size=(2, 4, 3, 3)).astype(np.float32)
    x = rng.uniform(0.5, 2, size=(1, 4, 1, 1)).astype(np.float32)
    labels = rng.integers(0, 4, size=2)
    tx, tw, tr = ty((1, 4, 1, 1)), ty((2, 4, 3, 3)), ty((2, 4, 1, 1))
    mlir = f"""
func.func @forward(%x: {tx} {{cnn.input}}, %w: {tw} {{cnn.param = "w"}}) -> tensor<2x4xf32> {{
  %y = cnn.{name} %w, %x : ({tw}, {tx}) -> {tw}
  %s = cnn.reduce_sum %y {{axes = array<i64: 2, 3>}} : ({tw}) -> {tr}
  %l = cnn.reshape %s : ({tr}) -> tensor<2x4xf32>
  return %l : tensor<2x4xf32>
}}"""
    loss, dw = train_step_grads(mlir, x, w, labels, extra)
    twt = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    y = torch_binary(name, twt, torch.tensor(x, dtype=torch.float64))
    ref = F.cross_entropy(y.sum(dim=(2, 3)), torch.tensor(labels))
    ref.backward()
    assert rel(loss, ref.item()) < TOL, (loss, ref.item())
    assert rel(dw, twt.grad.numpy()) < TOL, (dw, twt.grad.numpy())


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_tie_splits_the_gradient(name):
    """torch.maximum/minimum (1.13) give each operand half of dy where they
    are equal: w op x with x equal to w in every other element."""
    rng = np.random.default_rng(3)
    w = rng.uniform(-1, 1, size=(4, 6)).astype(np.float32)
    x = rng.uniform(-1, 1, size=(4, 6)).astype(np.float32)
    x[:, ::2] = w[:, ::2]
    labels = rng.integers(0, 6, size=4)
    t = ty((4, 6))
    mlir = f"""
func.func @forward(%x: {t} {{cnn.input}}, %w: {t} {{cnn.param = "w"}}) -> {t} {{
  %y = cnn.{name} %w, %x : ({t}, {t}) -> {t}
  %z = cnn.mul %y, %w : ({t}, {t}) -> {t}
  return %z : {t}
}}"""
    loss, dw = train_step_grads(mlir, x, w, labels)
    twt = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    y = BINARY[name](twt, torch.tensor(x, dtype=torch.float64)) * twt
    ref = F.cross_entropy(y, torch.tensor(labels))
    ref.backward()
    assert rel(loss, ref.item()) < TOL, (loss, ref.item())
    assert rel(dw, twt.grad.numpy()) < TOL, (dw, twt.grad.numpy())
