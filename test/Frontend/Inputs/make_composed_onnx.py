"""Writes small ONNX models for composed-ops.test: ops the importer builds
from existing cnn ops (Sum, Mean, DepthToSpace, SpaceToDepth, LRN), the
forms of GatherElements, Where on run-time values and ThresholdedRelu, and
the attribute values they refuse; onnx.helper only.

    %python make_composed_onnx.py <case> <output.onnx>
"""
import os
import sys

import numpy as np
from onnx import helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_onnx import init, ints, model, vi  # noqa: E402


def sum_mean():
    # Sum of three (a broadcast initializer), Mean of two.
    nodes = [helper.make_node("Sum", ["x", "b", "x"], ["s"], name="sum3"),
             helper.make_node("Mean", ["s", "x"], ["y"], name="mean2")]
    return model(nodes, [vi("x", [2, 3, 4, 4])], [vi("y", None)],
                 [init("b", [3, 1, 1])])


def depth_space(mode="CRD"):
    nodes = [helper.make_node("DepthToSpace", ["x"], ["d"], name="d2s",
                              blocksize=2, mode=mode),
             helper.make_node("SpaceToDepth", ["d"], ["y"], name="s2d",
                              blocksize=2)]
    return model(nodes, [vi("x", [1, 8, 3, 5])], [vi("y", None)])


def depth_space_bad_mode():
    return depth_space("XYZ")


def space_to_depth_bad_size():
    nodes = [helper.make_node("SpaceToDepth", ["x"], ["y"], name="s2d",
                              blocksize=2)]
    return model(nodes, [vi("x", [1, 8, 3, 4])], [vi("y", None)])


def lrn():
    nodes = [helper.make_node("LRN", ["x"], ["y"], name="lrn", size=4,
                              alpha=0.4, beta=0.75, bias=1.5)]
    return model(nodes, [vi("x", [2, 7, 2, 3])], [vi("y", None)])


def gather_where():
    # GatherElements along axis 1 with int64 indices (one negative), Where
    # between a constant and the run-time result on a constant condition,
    # ThresholdedRelu.
    cond = numpy_helper.from_array(
        np.array([[[True, False, True]], [[False, True, True]]]), "cond")
    nodes = [
        helper.make_node("GatherElements", ["x", "idx"], ["g"], name="gather",
                         axis=1),
        helper.make_node("Where", ["cond", "zero", "g"], ["w"], name="where"),
        helper.make_node("ThresholdedRelu", ["w"], ["y"], name="thr",
                         alpha=0.5),
    ]
    zero = numpy_helper.from_array(np.array(0.0, np.float32), "zero")
    idx = numpy_helper.from_array(
        np.array([[[0, 3, -1]], [[2, 1, 0]]], np.int64), "idx")
    m = model(nodes, [vi("x", [2, 4, 3])], [vi("y", None)], [idx, cond, zero])
    return m


def gather_bad_axis():
    nodes = [helper.make_node("GatherElements", ["x", "idx"], ["y"],
                              name="gather", axis=3)]
    return model(nodes, [vi("x", [2, 4, 3])], [vi("y", None)],
                 [ints("idx", [[[0, 1, 2]], [[2, 1, 0]]])])


CASES = {f.__name__: f for f in [
    sum_mean, depth_space, depth_space_bad_mode, space_to_depth_bad_size,
    lrn, gather_where, gather_bad_axis]}


def main():
    case, out = sys.argv[1], sys.argv[2]
    with open(out, "wb") as f:
        f.write(CASES[case]().SerializeToString())


if __name__ == "__main__":
    main()
