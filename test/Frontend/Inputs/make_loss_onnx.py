"""Writes small ONNX models for losses.test: the importer forms of
SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss, ArgMax and ArgMin, and
the attribute values and inputs they refuse; onnx.helper only.

    %python make_loss_onnx.py <case> <output.onnx>
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_onnx import ints, model, vi  # noqa: E402


def floats(name, values, shape=None):
    a = np.array(values, dtype=np.float32)
    return numpy_helper.from_array(a.reshape(shape) if shape else a, name)


def sce(**attrs):
    # N x C x d scores, N x d labels (an int64 initializer), class weights,
    # both outputs.
    nodes = [helper.make_node("SoftmaxCrossEntropyLoss", ["x", "y", "w"],
                              ["loss", "log_prob"], name="sce", **attrs)]
    return model(nodes, [vi("x", [2, 3, 4])],
                 [vi("loss", None), vi("log_prob", None)],
                 [ints("y", [[0, 1, 2, 1], [2, -1, 0, 0]]),
                  floats("w", [0.5, 1.0, 2.0])])


def sce_sum_ignore():
    return sce(reduction="sum", ignore_index=-1)


def sce_bad_reduction():
    return sce(reduction="max", ignore_index=-1)


def nll_none():
    # Reduction none over N x C (rank 2), no weight, no ignore_index.
    nodes = [helper.make_node("NegativeLogLikelihoodLoss", ["x", "y"],
                              ["loss"], name="nll", reduction="none")]
    return model(nodes, [vi("x", [3, 5])], [vi("loss", None)],
                 [ints("y", [4, 0, 2])])


def nll_float_labels():
    nodes = [helper.make_node("NegativeLogLikelihoodLoss", ["x", "y"],
                              ["loss"], name="nll")]
    return model(nodes, [vi("x", [3, 5])], [vi("loss", None)],
                 [floats("y", [4, 0, 2])])


def nll_label_shape():
    # Labels for 2 positions where the input has 3.
    nodes = [helper.make_node("NegativeLogLikelihoodLoss", ["x", "y"],
                              ["loss"], name="nll")]
    return model(nodes, [vi("x", [3, 5])], [vi("loss", None)],
                 [ints("y", [4, 0])])


def argmax_argmin():
    # ArgMax over the last axis without keepdims, the last of equal values;
    # ArgMin with the defaults (axis 0, keepdims).
    nodes = [
        helper.make_node("ArgMax", ["x"], ["i"], name="amax", axis=-1,
                         keepdims=0, select_last_index=1),
        helper.make_node("ArgMin", ["x"], ["j"], name="amin"),
    ]
    return model(nodes, [vi("x", [2, 3, 4])],
                 [vi("i", None, TensorProto.INT64),
                  vi("j", None, TensorProto.INT64)])


def argmax_axis():
    nodes = [helper.make_node("ArgMax", ["x"], ["i"], name="amax", axis=3)]
    return model(nodes, [vi("x", [2, 3, 4])],
                 [vi("i", None, TensorProto.INT64)])


CASES = {f.__name__: f for f in [
    sce_sum_ignore, sce_bad_reduction, nll_none, nll_float_labels,
    nll_label_shape, argmax_argmin, argmax_axis]}


def main():
    case, out = sys.argv[1], sys.argv[2]
    with open(out, "wb") as f:
        f.write(CASES[case]().SerializeToString())


if __name__ == "__main__":
    main()
