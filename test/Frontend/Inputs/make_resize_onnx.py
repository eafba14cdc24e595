"""ONNX models for the Resize / Upsample lit test (onnx.helper only).

    %python make_resize_onnx.py <case> <output.onnx>
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
    m.ir_version = 8 if opset >= 18 else 7
    return m


def arr(name, values, dtype):
    return numpy_helper.from_array(np.array(values, dtype=dtype), name)


def resize13():
    """What torch.onnx.export writes at opset 13: nearest (asymmetric,
    floor) with scales, bilinear (half_pixel) with sizes, align_corners with
    an integral scale."""
    nodes = [
        helper.make_node("Resize", ["x", "", "s2"], ["a"], mode="nearest",
                         coordinate_transformation_mode="asymmetric",
                         nearest_mode="floor", name="up_nearest"),
        helper.make_node("Resize", ["a", "", "", "sz"], ["b"], mode="linear",
                         coordinate_transformation_mode="half_pixel", name="up_size"),
        helper.make_node("Resize", ["b", "", "s3"], ["y"], mode="linear",
                         coordinate_transformation_mode="align_corners",
                         name="up_corners"),
    ]
    inits = [arr("s2", [1, 1, 2, 2], np.float32), arr("sz", [1, 2, 12, 7], np.int64),
             arr("s3", [1, 1, 0.5, 2], np.float32)]
    return model(nodes, [vi("x", [1, 2, 4, 5])], [vi("y", [1, 2, 6, 14])], inits)


def resize11():
    """Opset 11: roi and an empty scales input before the sizes (torch's
    size= form at opset 11)."""
    nodes = [helper.make_node("Resize", ["x", "roi", "empty", "sz"], ["y"],
                              mode="nearest", coordinate_transformation_mode="asymmetric",
                              nearest_mode="floor", name="up11")]
    inits = [arr("roi", [], np.float32), arr("empty", [], np.float32),
             arr("sz", [1, 2, 8, 7], np.int64)]
    return model(nodes, [vi("x", [1, 2, 4, 5])], [vi("y", [1, 2, 8, 7])], inits, opset=11)


def resize18_axes():
    """Opset 18: scales for the axes [2, 3] only; ONNX's default nearest
    rounding modes."""
    nodes = [helper.make_node("Resize", ["x", "", "s"], ["y"], axes=[2, 3],
                              mode="nearest", nearest_mode="round_prefer_ceil",
                              coordinate_transformation_mode="pytorch_half_pixel",
                              name="up18")]
    return model(nodes, [vi("x", [1, 2, 4, 5])], [vi("y", [1, 2, 8, 15])],
                 [arr("s", [2, 3], np.float32)], opset=18)


def resize10():
    """Opset 10: mode and a scales input; asymmetric coordinates."""
    nodes = [helper.make_node("Resize", ["x", "s"], ["y"], mode="linear", name="up10")]
    return model(nodes, [vi("x", [1, 2, 4, 5])], [vi("y", [1, 2, 8, 10])],
                 [arr("s", [1, 1, 2, 2], np.float32)], opset=10)


def upsample7():
    nodes = [helper.make_node("Upsample", ["x"], ["y"], mode="nearest",
                              scales=[1.0, 1.0, 2.0, 3.0], name="ups7")]
    return model(nodes, [vi("x", [1, 2, 4, 5])], [vi("y", [1, 2, 8, 15])], opset=7)


def upsample9():
    nodes = [helper.make_node("Upsample", ["x", "s"], ["y"], mode="linear", name="ups9")]
    return model(nodes, [vi("x", [1, 2, 4, 5])], [vi("y", [1, 2, 8, 10])],
                 [arr("s", [1, 1, 2, 2], np.float32)], opset=9)


def refuse(name, opset=13, inputs=("x", "", "s"), inits=None, x_shape=(1, 2, 4, 5),
           **attrs):
    def make():
        node = helper.make_node("Resize", list(inputs), ["y"], name=name, **attrs)
        init = inits if inits is not None else [arr("s", [1, 1, 2, 2], np.float32)]
        return model([node], [vi("x", list(x_shape))], [vi("y", None)], init,
                     opset=opset)
    return make


def runtime():
    """Scales computed from the data at run time (four elements of x)."""
    nodes = [
        helper.make_node("Flatten", ["x"], ["flat"], axis=0),
        helper.make_node("Slice", ["flat", "st", "en", "ax"], ["four"]),
        helper.make_node("Reshape", ["four", "shp"], ["runtime_scales"]),
        helper.make_node("Resize", ["x", "", "runtime_scales"], ["y"], name="runtime_node"),
    ]
    inits = [arr("st", [0], np.int64), arr("en", [4], np.int64), arr("ax", [1], np.int64),
             arr("shp", [4], np.int64)]
    return model(nodes, [vi("x", [1, 2, 4, 5])], [vi("y", None)], inits)


CASES = {
    "resize13": resize13, "resize11": resize11, "resize18_axes": resize18_axes,
    "resize10": resize10, "upsample7": upsample7, "upsample9": upsample9,
    "cubic": refuse("cubic_node", mode="cubic"),
    "crop": refuse("crop_node", mode="linear",
                   coordinate_transformation_mode="tf_crop_and_resize"),
    "antialias": refuse("aa_node", opset=18, mode="linear", antialias=1),
    "exclude": refuse("exclude_node", exclude_outside=1),
    "channels": refuse("channel_node", inits=[arr("s", [1, 2, 2, 2], np.float32)]),
    "runtime": runtime,
    "rank3": refuse("rank3_node", x_shape=(2, 4, 5), inits=[arr("s", [1, 2, 2], np.float32)]),
    "corners": refuse("corners_node", mode="linear",
                      coordinate_transformation_mode="align_corners",
                      inits=[arr("s", [1, 1, 2, 1.25], np.float32)]),
    "both": refuse("both_node", inputs=("x", "", "s", "sz"),
                   inits=[arr("s", [1, 1, 2, 2], np.float32),
                          arr("sz", [1, 2, 8, 10], np.int64)]),
}

if __name__ == "__main__":
    with open(sys.argv[2], "wb") as f:
        f.write(CASES[sys.argv[1]]().SerializeToString())
