"""Writes the models of timm-forms.test (onnx.helper only).

    %python make_timm_forms_onnx.py <case> <output.onnx>

same_pad: timm's pad_same as torch.onnx writes it for a static 2 x 1 x 5 x 6
input (kernel 3, stride 2): per side a float amount (ceil(size / 2) - 1) * 2
+ 3 - size, clamped at 0 by Clip, halved (Div, Cast to INT64 truncates),
the two halves Concat'ed into Pad's pads. H = 5 gives 2 (1 / 1), W = 6 gives
1 (0 / 1); integer amounts -1 and 7 clamp to 0 (N and C are not padded).
scalar_param: x * s for three one-element float initializers: "blk.gain"
(a 0-d nn.Parameter as torch names it: learned), "onnx::Mul_7" and
"const_fold_opt__3" (an exporter's folded constants: constants).
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def model(nodes, inputs, outputs, inits):
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)],
                          producer_name="cnnc-test")
    m.ir_version = 7
    return m


def const(name, value, dtype=np.float32):
    return helper.make_node("Constant", [], [name], name="c_" + name,
                            value=numpy_helper.from_array(
                                np.array(value, dtype=dtype)))


def same_pad():
    nodes = [const("zero", 0.0), const("two", 2.0), const("one", 1.0),
             const("k", 3.0), const("i0", [0], np.int64),
             const("axes", [0], np.int64)]
    # N: an integer amount below 0 and one above the max, clamped to 0 by an
    # integer Clip (min 0 and max 0 as int64 constants).
    nodes += [const("p_n", -1, np.int64), const("q_n", 7, np.int64),
              const("zero_i", 0, np.int64),
              helper.make_node("Clip", ["p_n", "zero_i"], ["lo_n"], name="clip_lo_n"),
              helper.make_node("Clip", ["q_n", "", "zero_i"], ["hi_n"], name="clip_hi_n"),
              helper.make_node("Unsqueeze", ["lo_n", "axes"], ["ulo_n"]),
              helper.make_node("Unsqueeze", ["hi_n", "axes"], ["uhi_n"])]
    for tag, size in (("h", 5.0), ("w", 6.0)):
        nodes += [
            const("size_" + tag, size),
            helper.make_node("Div", ["size_" + tag, "two"], ["q_" + tag]),
            helper.make_node("Ceil", ["q_" + tag], ["c_" + tag]),
            helper.make_node("Sub", ["c_" + tag, "one"], ["s_" + tag]),
            helper.make_node("Mul", ["s_" + tag, "two"], ["m_" + tag]),
            helper.make_node("Add", ["m_" + tag, "k"], ["a_" + tag]),
            helper.make_node("Sub", ["a_" + tag, "size_" + tag],
                             ["p_" + tag])]
        nodes += [
            helper.make_node("Clip", ["p_" + tag, "zero"], ["pc_" + tag],
                             name="clip_" + tag),
            helper.make_node("Div", ["pc_" + tag, "two"], ["d_" + tag]),
            helper.make_node("Cast", ["d_" + tag], ["lo_" + tag],
                             to=TensorProto.INT64),
            helper.make_node("Cast", ["pc_" + tag], ["all_" + tag],
                             to=TensorProto.INT64),
            helper.make_node("Sub", ["all_" + tag, "lo_" + tag], ["hi_" + tag]),
            helper.make_node("Unsqueeze", ["lo_" + tag, "axes"], ["ulo_" + tag]),
            helper.make_node("Unsqueeze", ["hi_" + tag, "axes"], ["uhi_" + tag]),
        ]
    # pads: [N, C, H, W begins, N, C, H, W ends]; N and C get the clamped 0s.
    nodes += [
        helper.make_node("Concat", ["ulo_n", "ulo_n", "ulo_h", "ulo_w",
                                    "uhi_n", "uhi_n", "uhi_h", "uhi_w"],
                         ["pads"], axis=0),
        helper.make_node("Pad", ["x", "pads"], ["y"], name="pad_same"),
    ]
    return model(nodes,
                 [helper.make_tensor_value_info("x", F, [2, 1, 5, 6])],
                 [helper.make_tensor_value_info("y", F, None)], [])


def scalar_param():
    inits = [numpy_helper.from_array(np.array(v, dtype=np.float32), n)
             for n, v in (("blk.gain", 0.5), ("onnx::Mul_7", 2.0),
                          ("const_fold_opt__3", 3.0))]
    nodes = [helper.make_node("Mul", ["x", "blk.gain"], ["a"], name="gain"),
             helper.make_node("Mul", ["a", "onnx::Mul_7"], ["b"], name="twice"),
             helper.make_node("Mul", ["b", "const_fold_opt__3"], ["y"],
                              name="thrice")]
    return model(nodes,
                 [helper.make_tensor_value_info("x", F, [2, 3])],
                 [helper.make_tensor_value_info("y", F, None)], inits)


if __name__ == "__main__":
    onnx.save(globals()[sys.argv[1]](), sys.argv[2])
