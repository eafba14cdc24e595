"""Writes small ONNX models for composed-ops.test: ops the importer builds
from existing cnn ops (Sum, Mean, DepthToSpace, SpaceToDepth, LRN) and the
attribute values they refuse; onnx.helper only.

    %python make_composed_onnx.py <case> <output.onnx>
"""
import os
import sys

from onnx import helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_onnx import init, model, vi  # noqa: E402


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


CASES = {f.__name__: f for f in [
    sum_mean, depth_space, depth_space_bad_mode, space_to_depth_bad_size,
    lrn]}


def main():
    case, out = sys.argv[1], sys.argv[2]
    with open(out, "wb") as f:
        f.write(CASES[case]().SerializeToString())


if __name__ == "__main__":
    main()
