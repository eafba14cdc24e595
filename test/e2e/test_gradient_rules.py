"""Gradient rules of non-elementwise ops (GradientOpInterface) vs PyTorch.

Each rule lives with its op (lib/Dialect/CNN/CNNGradients.cpp); cnn-autodiff
only walks the ops. These check the rules added for attention-style and
max-reducing networks through the whole path: cnn-autodiff builds the
backward pass, the reference interpreter runs it (plain, after cnn-fuse, and
after cnn-lower-elementwise), and the gradient of the parameter is compared
with torch.autograd in float64.
"""
import os
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_elementwise_ops import rel, train_step_grads, ty  # noqa: E402

torch.set_num_threads(1)
TOL = 2e-5
PIPELINES = [(), ("--cnn-fuse",), ("--cnn-lower-elementwise",)]
IDS = ["plain", "fused", "lowered"]


@pytest.mark.parametrize("extra", PIPELINES, ids=IDS)
@pytest.mark.parametrize("axis", [1, 2, 3])
def test_softmax_gradient(axis, extra):
    """Split attention: softmax over the radix (axis 1), over another axis and
    the last, weighted back onto the features; the rule is
    dx = y * (dy - sum(dy * y, axis))."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 3, 4, 5)).astype(np.float32)
    w = rng.normal(size=(1, 3, 4, 5)).astype(np.float32)
    labels = rng.integers(0, 3, size=2)
    t, tw, tr = ty((2, 3, 4, 5)), ty((1, 3, 4, 5)), ty((2, 3, 1, 1))
    mlir = f"""
func.func @forward(%x: {t} {{cnn.input}}, %w: {tw} {{cnn.param = "w"}}) -> tensor<2x3xf32> {{
  %h = cnn.mul %x, %w : ({t}, {tw}) -> {t}
  %p = cnn.softmax %h {{axis = {axis} : i64}} : ({t}) -> {t}
  %z = cnn.mul %p, %x : ({t}, {t}) -> {t}
  %s = cnn.reduce_sum %z {{axes = array<i64: 2, 3>}} : ({t}) -> {tr}
  %l = cnn.reshape %s : ({tr}) -> tensor<2x3xf32>
  return %l : tensor<2x3xf32>
}}"""
    loss, dw = train_step_grads(mlir, x, w, labels, extra)
    twt = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    tx = torch.tensor(x, dtype=torch.float64)
    p = torch.softmax(tx * twt, dim=axis)
    ref = F.cross_entropy((p * tx).sum(dim=(2, 3)), torch.tensor(labels))
    ref.backward()
    assert rel(loss, ref.item()) < TOL, (loss, ref.item())
    assert rel(dw, twt.grad.numpy()) < TOL, (dw, twt.grad.numpy())


@pytest.mark.parametrize("extra", PIPELINES, ids=IDS)
@pytest.mark.parametrize("ties", [False, True], ids=["distinct", "ties"])
def test_reduce_max_gradient(ties, extra):
    """Global max pooling (reduce_max over H, W): the gradient goes to the
    maximum, split evenly among equal maxima as torch.amax does (ties: the
    input is rounded to a coarse grid so maxima repeat)."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 3, 4, 4)).astype(np.float32)
    if ties:
        x = np.round(x).astype(np.float32)
    w = np.ones((1, 3, 1, 1), np.float32) + \
        rng.uniform(0, 0.5, size=(1, 3, 1, 1)).astype(np.float32)
    labels = rng.integers(0, 3, size=2)
    t, tw, tr = ty((2, 3, 4, 4)), ty((1, 3, 1, 1)), ty((2, 3, 1, 1))
    mlir = f"""
func.func @forward(%x: {t} {{cnn.input}}, %w: {tw} {{cnn.param = "w"}}) -> tensor<2x3xf32> {{
  %h = cnn.mul %x, %w : ({t}, {tw}) -> {t}
  %m = cnn.reduce_max %h {{axes = array<i64: 2, 3>}} : ({t}) -> {tr}
  %n = cnn.mul %m, %w : ({tr}, {tw}) -> {tr}
  %l = cnn.reshape %n : ({tr}) -> tensor<2x3xf32>
  return %l : tensor<2x3xf32>
}}"""
    loss, dw = train_step_grads(mlir, x, w, labels, extra)
    twt = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    m = (torch.tensor(x, dtype=torch.float64) * twt).amax(dim=(2, 3),
                                                         keepdim=True)
    ref = F.cross_entropy((m * twt).reshape(2, 3), torch.tensor(labels))
    ref.backward()
    assert rel(loss, ref.item()) < TOL, (loss, ref.item())
    assert rel(dw, twt.grad.numpy()) < TOL, (dw, twt.grad.numpy())
