"""Writes the models of const-fold.test (onnx.helper only).

    %python make_const_fold_onnx.py <case> <output.onnx>

fold: a shape computed from the input's shape, as exporters write
x.view(x.size(0), x.size(1) * 2, -1): Shape -> Gather (one index each) ->
Mul -> Concat -> Reshape, with no Unsqueeze or Cast between them.
runtime_shape: a Reshape whose shape is read from the input's values
(Flatten -> Slice), which no import-time evaluation can know.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def ints(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def model(nodes, inputs, outputs, inits):
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)],
                          producer_name="cnnc-test")
    m.ir_version = 7
    return m


def fold():
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], name="shape"),
        helper.make_node("Gather", ["s", "i0"], ["n"], name="gather_n", axis=0),
        helper.make_node("Gather", ["s", "i1"], ["c"], name="gather_c", axis=0),
        helper.make_node("Mul", ["c", "two"], ["c2"], name="mul_c"),
        helper.make_node("Concat", ["n", "c2", "minus1"], ["newshape"],
                         name="concat_shape", axis=0),
        helper.make_node("Reshape", ["x", "newshape"], ["y"], name="view"),
    ]
    return model(nodes, [helper.make_tensor_value_info("x", F, [3, 2, 4, 4])],
                 [helper.make_tensor_value_info("y", F, None)],
                 [ints("i0", [0]), ints("i1", [1]), ints("two", [2]),
                  ints("minus1", [-1])])


def runtime_shape():
    nodes = [
        helper.make_node("Flatten", ["x"], ["flat"], name="flatten", axis=0),
        helper.make_node("Slice", ["flat", "st", "en", "ax"], ["k"],
                         name="data_dims"),
        helper.make_node("Reshape", ["x", "k"], ["y"], name="view_runtime"),
    ]
    return model(nodes, [helper.make_tensor_value_info("x", F, [2, 2])],
                 [helper.make_tensor_value_info("y", F, None)],
                 [ints("st", [0]), ints("en", [2]), ints("ax", [1])])


if __name__ == "__main__":
    onnx.save(globals()[sys.argv[1]](), sys.argv[2])
