"""ONNX models for the Pad and multi-output lit tests (onnx.helper only).

    %python make_pad_onnx.py <case> <output.onnx>
"""
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def vi(name, shape):
    return helper.make_tensor_value_info(name, F, shape)


def model(nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                          producer_name="cnnc-test")
    m.ir_version = 7
    return m


def arr(name, values, dtype):
    return numpy_helper.from_array(np.array(values, dtype=dtype), name)


def pad11():
    """Opset 11+ input form: DenseNet/Inception's Pad before AveragePool
    (constant_value input), then reflect, edge and a negative (crop) pad."""
    nodes = [
        helper.make_node("Pad", ["x", "p1", "cv"], ["a"], name="pad_const"),
        helper.make_node("AveragePool", ["a"], ["b"], kernel_shape=[3, 3],
                         strides=[1, 1], name="pool"),
        helper.make_node("Pad", ["b", "p2"], ["c"], mode="reflect", name="pad_reflect"),
        helper.make_node("Pad", ["c", "p3"], ["d"], mode="edge", name="pad_edge"),
        helper.make_node("Pad", ["d", "p4"], ["y"], name="pad_crop"),
    ]
    inits = [arr("p1", [0, 0, 1, 1, 0, 0, 1, 1], np.int64), arr("cv", 0.5, np.float32),
             arr("p2", [0, 0, 2, 0, 0, 0, 0, 3], np.int64),
             arr("p3", [0, 0, 0, 1, 0, 0, 5, 0], np.int64),
             arr("p4", [0, 0, -1, 0, 0, 0, 0, -2], np.int64)]
    return model(nodes, [vi("x", [1, 2, 6, 6])], [vi("y", [1, 2, 12, 8])], inits)


def pad2():
    """Opset 2-10 attribute form."""
    nodes = [helper.make_node("Pad", ["x"], ["y"], pads=[0, 0, 1, 2, 0, 0, 3, 4],
                              value=-1.0, name="pad_attr")]
    return model(nodes, [vi("x", [1, 2, 4, 4])], [vi("y", [1, 2, 8, 10])], opset=9)


def pad_bad_reflect():
    nodes = [helper.make_node("Pad", ["x", "p"], ["y"], mode="reflect", name="too_wide")]
    return model(nodes, [vi("x", [1, 2, 3, 3])], [vi("y", [1, 2, 9, 3])],
                 [arr("p", [0, 0, 3, 0, 0, 0, 3, 0], np.int64)])


def pad_bad_mode():
    nodes = [helper.make_node("Pad", ["x", "p"], ["y"], mode="wrap", name="wrap")]
    return model(nodes, [vi("x", [1, 2, 3, 3])], [vi("y", [1, 2, 5, 3])],
                 [arr("p", [0, 0, 1, 0, 0, 0, 1, 0], np.int64)])


def pad_int64_min():
    """A fuzzer's find (session 25): INT64_MIN as a pad was negated."""
    nodes = [helper.make_node("Pad", ["x", "p"], ["y"], name="huge")]
    return model(nodes, [vi("x", [1, 2, 3, 3])], [vi("y", [1, 2, 3, 3])],
                 [arr("p", [0, 0, -2**63, 0, 0, 0, 0, 0], np.int64)])


def two_outputs():
    """A main and an auxiliary classifier (GoogLeNet-style graph outputs)."""
    nodes = [
        helper.make_node("Gemm", ["x", "w"], ["main"], transB=1, name="fc"),
        helper.make_node("Gemm", ["x", "wa"], ["aux"], transB=1, name="aux_fc"),
    ]
    inits = [arr("w", np.arange(40).reshape(10, 4) * 0.01, np.float32),
             arr("wa", np.arange(40).reshape(10, 4) * 0.02, np.float32)]
    return model(nodes, [vi("x", [2, 4])], [vi("main", [2, 10]), vi("aux", [2, 10])], inits)


CASES = {"pad11": pad11, "pad2": pad2, "pad_bad_reflect": pad_bad_reflect,
         "pad_bad_mode": pad_bad_mode, "pad_int64_min": pad_int64_min, "two_outputs": two_outputs}

if __name__ == "__main__":
    with open(sys.argv[2], "wb") as f:
        f.write(CASES[sys.argv[1]]().SerializeToString())
