"""Gradient rules of the ops imported for the ONNX conformance set's losses
against torch.autograd in float64: cnn.nll_loss (NegativeLogLikelihoodLoss,
SoftmaxCrossEntropyLoss), and cnn.gather_elements, cnn.select (Where with a
run-time operand) and cnn.thresholded_relu (the last test).

The forward feeds x * w (a parameter) through cnn.nll_loss with constant
integer labels and class weights; cnn-autodiff builds the backward pass
(nll_loss_grad), the reference interpreter runs it (plain, after cnn-fuse,
after cnn-lower-elementwise), and the loss and the parameter's gradient are
compared with F.nll_loss's. Every reduction, with and without class weights
and ignore_index; a per-position loss (none) becomes the logits of the
step's cross-entropy, a reduced one scales fixed logits.
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
N, C, D = 2, 3, 4
LABELS = np.array([[0, 1, 2, 1], [2, -1, 0, 0]], np.int64)
CLASS_WEIGHT = np.array([0.5, 1.0, 2.0], np.float32)


def mlir_text(reduction, weighted, ignore):
    t, tl = ty((N, C, D)), "tensor<2x4xi64>"
    labels = "dense<" + str(LABELS.tolist()) + ">"
    attrs = [f"reduction = #cnn.loss_reduction<{reduction}>"]
    if ignore:
        attrs.append("ignore_index = -1")
    operands, types = "%h, %y", f"{t}, {tl}"
    weight_def = ""
    if weighted:
        weight_def = ("  %cw = cnn.constant dense<"
                      + str(CLASS_WEIGHT.tolist()) + "> : tensor<3xf32>\n")
        operands += ", %cw"
        types += ", tensor<3xf32>"
    if reduction == "none":
        tail = f"""  %l = cnn.nll_loss {operands} {{{", ".join(attrs)}}} : ({types}) -> tensor<2x4xf32>
  return %l : tensor<2x4xf32>"""
    else:
        tail = f"""  %l = cnn.nll_loss {operands} {{{", ".join(attrs)}}} : ({types}) -> tensor<f32>
  %r = cnn.reshape %l : (tensor<f32>) -> tensor<1x1xf32>
  %v = cnn.constant dense<[[1.0, -2.0, 0.5, 3.0], [-1.0, 0.25, 2.0, -0.5]]> : tensor<2x4xf32>
  %z = cnn.mul %v, %r : (tensor<2x4xf32>, tensor<1x1xf32>) -> tensor<2x4xf32>
  return %z : tensor<2x4xf32>"""
    return f"""
func.func @forward(%x: {t} {{cnn.input}}, %w: {t} {{cnn.param = "w"}}) -> tensor<2x4xf32> {{
  %h = cnn.mul %x, %w : ({t}, {t}) -> {t}
  %y = cnn.constant {labels} : {tl}
{weight_def}{tail}
}}"""


@pytest.mark.parametrize("extra", PIPELINES, ids=IDS)
@pytest.mark.parametrize("ignore", [False, True], ids=["all", "ignore"])
@pytest.mark.parametrize("weighted", [False, True], ids=["plain", "weighted"])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_nll_loss_gradient(reduction, weighted, ignore, extra):
    labels = LABELS if ignore else np.where(LABELS < 0, 1, LABELS)
    mlir = mlir_text(reduction, weighted, ignore)
    if not ignore:
        mlir = mlir.replace(str(LABELS.tolist()), str(labels.tolist()))
    rng = np.random.default_rng(5)
    x = rng.normal(size=(N, C, D)).astype(np.float32)
    w = rng.normal(size=(N, C, D)).astype(np.float32)
    step_labels = np.array([3, 1])  # the step's cross-entropy over the 4 columns
    loss, dw = train_step_grads(mlir, x, w, step_labels, extra)

    tw = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    h = torch.tensor(x, dtype=torch.float64) * tw
    l = F.nll_loss(h, torch.tensor(labels),
                   weight=torch.tensor(CLASS_WEIGHT, dtype=torch.float64)
                   if weighted else None,
                   ignore_index=-1 if ignore else -100, reduction=reduction)
    if reduction == "none":
        logits = l
    else:
        v = torch.tensor([[1.0, -2.0, 0.5, 3.0], [-1.0, 0.25, 2.0, -0.5]],
                         dtype=torch.float64)
        logits = v * l
    ref = F.cross_entropy(logits, torch.tensor(step_labels))
    ref.backward()
    assert rel(loss, ref.item()) < TOL, (loss, ref.item())
    assert rel(dw, tw.grad.numpy()) < TOL, (dw, tw.grad.numpy())
    # The gradient reaches exactly the labelled class of each position that
    # is not ignored.
    mask = np.zeros((N, C, D), bool)
    for n in range(N):
        for d in range(D):
            if labels[n, d] >= 0:
                mask[n, labels[n, d], d] = True
    assert np.all(dw[~mask] == 0)
    assert np.all(dw[mask] != 0)


# gather_elements (what NegativeLogLikelihoodLoss's expanded form and
# torch.gather export) and select (ONNX Where with a run-time operand): the
# gradient rules against torch.autograd.
# N x 2 x D: one negative index, and positions gathered twice (n 0, d 0;
# n 1, d 3), whose gradients add up.
GATHER_INDEX = [[[0, 2, 1, -1], [0, 1, 1, 2]], [[2, 2, 0, 1], [2, 0, 0, 1]]]
COND = [[[1, 0, 1, 1], [1, 1, 0, 1]], [[0, 1, 1, 1], [1, 1, 0, 1]]]


@pytest.mark.parametrize("extra", PIPELINES, ids=IDS)
def test_gather_elements_and_select_gradient(extra):
    t = ty((N, C, D))
    mlir = f"""
func.func @forward(%x: {t} {{cnn.input}}, %w: {t} {{cnn.param = "w"}}) -> tensor<2x8xf32> {{
  %h = cnn.mul %x, %w : ({t}, {t}) -> {t}
  %i = cnn.constant dense<{GATHER_INDEX}> : tensor<2x2x4xi64>
  %g = cnn.gather_elements %h, %i {{axis = 1}} : ({t}, tensor<2x2x4xi64>) -> tensor<2x2x4xf32>
  %c = cnn.constant dense<{np.array(COND, float).tolist()}> : tensor<2x2x4xf32>
  %z = cnn.constant dense<0.5> : tensor<1x1x1xf32>
  %s = cnn.select %c, %g, %z : (tensor<2x2x4xf32>, tensor<2x2x4xf32>, tensor<1x1x1xf32>) -> tensor<2x2x4xf32>
  %t = cnn.thresholded_relu %s {{alpha = -0.25 : f32}} : (tensor<2x2x4xf32>) -> tensor<2x2x4xf32>
  %l = cnn.reshape %t : (tensor<2x2x4xf32>) -> tensor<2x8xf32>
  return %l : tensor<2x8xf32>
}}"""
    rng = np.random.default_rng(9)
    x = rng.normal(size=(N, C, D)).astype(np.float32)
    w = rng.normal(size=(N, C, D)).astype(np.float32)
    step_labels = np.array([0, 7])
    loss, dw = train_step_grads(mlir, x, w, step_labels, extra)

    tw = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    h = torch.tensor(x, dtype=torch.float64) * tw
    index = torch.tensor(GATHER_INDEX) % C
    g = torch.gather(h, 1, index)
    cond = torch.tensor(COND, dtype=torch.bool)
    s = torch.where(cond, g, torch.tensor(0.5, dtype=torch.float64))
    t = torch.where(s > -0.25, s, torch.zeros_like(s))
    ref = F.cross_entropy(t.reshape(N, 2 * D), torch.tensor(step_labels))
    ref.backward()
    assert rel(loss, ref.item()) < TOL, (loss, ref.item())
    assert rel(dw, tw.grad.numpy()) < TOL, (dw, tw.grad.numpy())
    # Only the gathered positions that were selected and above the
    # threshold get a gradient.
    assert np.count_nonzero(dw) == np.count_nonzero(tw.grad.numpy())
    assert 0 < np.count_nonzero(dw) < N * C * D
