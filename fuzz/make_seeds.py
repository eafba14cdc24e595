"""Writes the seed corpora of the fuzz targets from the repo's test inputs.

    /usr/bin/python3 fuzz/make_seeds.py [fuzz/corpus]

onnx: every model of test/Frontend/Inputs/make_onnx.py; pipeline: the .mlir
test inputs; cnnw/npy/cnnt/safetensors: small tensors of each dtype and
rank (safetensors also with metadata and with its offsets out of key order); cifar: a
few records of several geometries (5-byte header, see FuzzCifar.cpp);
image: small JPEGs (baseline, progressive, gray, 4:2:0) and PNGs (RGB,
RGBA, gray, palette, 16-bit) after a selector byte (see FuzzImage.cpp).
reference: the models of test/Frontend/Inputs/make_{onnx,new_ops_onnx,
resize_onnx,pad_onnx}.py and the classifiers below; train-step: the
classifiers (small CNNs ending in N x classes logits, each with one of the
ops that size a tensor: Conv, ConvTranspose, Pad, Resize, Concat, Expand,
pooling; see FuzzReference.cpp).
Deterministic: rerunning gives the same files. A campaign adds what it finds
(scripts/fuzz.sh merges new coverage into fuzz/corpus/<target>).
"""
import glob
import importlib.util
import os
import struct
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
from cnnc.cnnw import write_cnnw  # noqa: E402
from cnnc.safetensors import serialize_safetensors  # noqa: E402


def tensors():
    rng = np.random.default_rng(0)
    yield "f32_scalar", np.array(1.5, dtype=np.float32)
    yield "f32_2x3", rng.standard_normal((2, 3)).astype(np.float32)
    yield "f16_4", rng.standard_normal(4).astype(np.float16)
    yield "i32_3x1x2", np.arange(6, dtype=np.int32).reshape(3, 1, 2)
    yield "i64_labels", np.array([0, 3, 9, 1], dtype=np.int64)
    yield "f32_empty", np.zeros((0, 3), dtype=np.float32)
    yield "f32_nchw", rng.standard_normal((1, 3, 4, 4)).astype(np.float32)


def cnnt_bytes(a):
    code = {np.float32: 0, np.float16: 1, np.int32: 2, np.int64: 3}[a.dtype.type]
    return (b"CNNT" + struct.pack("<II", code, a.ndim) +
            struct.pack("<%dq" % a.ndim, *a.shape) + a.astype(a.dtype.newbyteorder("<")).tobytes())


def write_images(out):
    """JPEG and PNG variants a folder of photos holds, each after one
    selector byte (FuzzImage.cpp: crop kind, output size, flip, channels)."""
    import io
    from PIL import Image
    rng = np.random.default_rng(2)
    rgb = Image.fromarray(rng.integers(0, 256, (13, 17, 3), dtype=np.uint8), "RGB")
    cases = [
        ("baseline.jpg", rgb, "JPEG", {"quality": 90}),
        ("progressive.jpg", rgb, "JPEG", {"quality": 75, "progressive": True}),
        ("subsampled.jpg", rgb, "JPEG", {"quality": 60, "subsampling": 2}),
        ("gray.jpg", rgb.convert("L"), "JPEG", {}),
        ("rgb.png", rgb, "PNG", {}),
        ("rgba.png", rgb.convert("RGBA"), "PNG", {}),
        ("gray.png", rgb.convert("L"), "PNG", {}),
        ("palette.png", rgb.convert("P"), "PNG", {}),
        ("gray16.png", Image.fromarray(
            rng.integers(0, 65536, (5, 7), dtype=np.uint16)), "PNG", {}),
    ]
    for k, (name, img, fmt, kw) in enumerate(cases):
        buf = io.BytesIO()
        img.save(buf, fmt, **kw)
        with open(os.path.join(out, name), "wb") as f:
            f.write(bytes([(37 * k + 5) % 256]) + buf.getvalue())


def classifiers():
    """Small CNNs a training step accepts (input 2 x 3 x 8 x 8, logits
    2 x 4), one growing op each, for the reference and train-step targets."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(3)

    def w(name, *shape, dtype=np.float32):
        return numpy_helper.from_array(
            (rng.standard_normal(shape) * 0.3).astype(dtype), name)

    def ints(name, values):
        return numpy_helper.from_array(np.array(values, np.int64), name)

    def head(x, channels):
        # global pooling, then a 4-class Gemm
        return ([helper.make_node("GlobalAveragePool", [x], ["gap"]),
                 helper.make_node("Flatten", ["gap"], ["flat"], axis=1),
                 helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"],
                                  transB=1)],
                [w("fc.w", 4, channels), w("fc.b", 4)])

    def make(name, body, inits, channels):
        nodes, more = head("h", channels)
        g = helper.make_graph(
            body + nodes, name,
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8, 8])],
            [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [2, 4])],
            inits + more)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        return name, m

    conv = [helper.make_node("Conv", ["x", "c.w", "c.b"], ["c"], kernel_shape=[3, 3],
                             pads=[1, 1, 1, 1], strides=[1, 1], dilations=[1, 1], group=1),
            helper.make_node("BatchNormalization", ["c", "bn.g", "bn.b", "bn.m", "bn.v"],
                             ["bn"]),
            helper.make_node("Relu", ["bn"], ["r"])]
    cinit = [w("c.w", 4, 3, 3, 3), w("c.b", 4),
             numpy_helper.from_array(np.ones(4, np.float32), "bn.g"), w("bn.b", 4),
             numpy_helper.from_array(np.zeros(4, np.float32), "bn.m"),
             numpy_helper.from_array(np.ones(4, np.float32), "bn.v")]
    yield make("conv_bn_maxpool", conv + [
        helper.make_node("MaxPool", ["r"], ["h"], kernel_shape=[2, 2], strides=[2, 2])],
        cinit, 4)
    yield make("conv_avgpool", conv + [
        helper.make_node("AveragePool", ["r"], ["h"], kernel_shape=[3, 3], strides=[2, 2],
                         pads=[1, 1, 1, 1])], cinit, 4)
    yield make("conv_transpose", [
        helper.make_node("ConvTranspose", ["x", "t.w", "t.b"], ["t"], kernel_shape=[2, 2],
                         strides=[2, 2], output_padding=[0, 0]),
        helper.make_node("Relu", ["t"], ["h"])],
        [w("t.w", 3, 4, 2, 2), w("t.b", 4)], 4)
    yield make("pad_conv", [
        helper.make_node("Pad", ["x", "pads"], ["p"], mode="constant"),
        helper.make_node("Conv", ["p", "c.w"], ["h"], kernel_shape=[3, 3])],
        [ints("pads", [0, 0, 1, 1, 0, 0, 1, 1]), w("c.w", 4, 3, 3, 3)], 4)
    yield make("resize_conv", [
        helper.make_node("Resize", ["x", "", "scales"], ["u"], mode="nearest"),
        helper.make_node("Conv", ["u", "c.w"], ["h"], kernel_shape=[3, 3], strides=[2, 2])],
        [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"),
         w("c.w", 4, 3, 3, 3)], 4)
    yield make("resize_sizes", [
        helper.make_node("Resize", ["x", "", "", "sizes"], ["u"], mode="linear"),
        helper.make_node("Conv", ["u", "c.w"], ["h"], kernel_shape=[1, 1])],
        [ints("sizes", [2, 3, 12, 12]), w("c.w", 4, 3, 1, 1)], 4)
    yield make("concat_conv", [
        helper.make_node("Conv", ["x", "c.w"], ["a"], kernel_shape=[1, 1]),
        helper.make_node("Concat", ["a", "x"], ["h"], axis=1)],
        [w("c.w", 4, 3, 1, 1)], 7)
    yield make("expand_mul", [
        helper.make_node("Expand", ["g", "shape"], ["e"]),
        helper.make_node("Mul", ["x", "e"], ["m"]),
        helper.make_node("Conv", ["m", "c.w"], ["h"], kernel_shape=[3, 3], group=1,
                         dilations=[2, 2])],
        [w("g", 1, 3, 1, 1), ints("shape", [2, 3, 8, 8]), w("c.w", 4, 3, 3, 3)], 4)
    yield make("grouped_residual", [
        helper.make_node("Conv", ["x", "c.w"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["a", "d.w"], ["b"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                         group=4),
        helper.make_node("Add", ["a", "b"], ["s"]),
        helper.make_node("Relu", ["s"], ["h"])],
        [w("c.w", 4, 3, 3, 3), w("d.w", 4, 1, 3, 3)], 4)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "fuzz", "corpus")
    d = {t: os.path.join(out, t)
         for t in ("onnx", "pipeline", "cnnw", "npy", "cnnt", "safetensors", "cifar",
                   "image")}
    for p in d.values():
        os.makedirs(p, exist_ok=True)
    ts = list(tensors())
    for name, a in ts:
        np.save(os.path.join(d["npy"], name + ".npy"), a)
        with open(os.path.join(d["cnnt"], name + ".bin"), "wb") as f:
            f.write(cnnt_bytes(a))
    write_cnnw(os.path.join(d["cnnw"], "all.cnnw"), dict(ts))
    for name, a in ts[:3]:
        write_cnnw(os.path.join(d["cnnw"], name + ".cnnw"), {name: a})
    write_cnnw(os.path.join(d["cnnw"], "empty.cnnw"), {})
    st = {"all.safetensors": (dict(ts), {"format": "pt"}),
          "empty.safetensors": ({}, None),
          "meta.safetensors": ({"w": ts[1][1]}, {"format": "pt", "step": "3",
                                                 "\u00e9": "\\\"x\n"})}
    for name, (t, meta) in st.items():
        with open(os.path.join(d["safetensors"], name), "wb") as f:
            f.write(serialize_safetensors(t, meta))
    # The header's keys in another order than the data (as the reference
    # writer, which sorts by dtype then name, produces).
    hdr = (b'{"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},'
           b'"a":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}}')
    with open(os.path.join(d["safetensors"], "reordered.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hdr)) + hdr + struct.pack("<if", 7, 1.5))
    rng = np.random.default_rng(1)
    for c, h, w, k in ((3, 4, 4, 10), (1, 8, 8, 10), (3, 2, 2, 2)):
        hdr = bytes([c - 1, h - 1, w - 1, k - 1, (c + h) % 256])
        recs = b"".join(bytes([i % k]) + rng.integers(0, 256, c * h * w, dtype=np.uint8).tobytes()
                        for i in range(3))
        with open(os.path.join(d["cifar"], "c%dh%dw%dk%d.bin" % (c, h, w, k)), "wb") as f:
            f.write(hdr + recs)
    write_images(d["image"])
    spec = importlib.util.spec_from_file_location(
        "make_onnx", os.path.join(ROOT, "test", "Frontend", "Inputs", "make_onnx.py"))
    mk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mk)
    for case, fn in sorted(mk.CASES.items()):
        with open(os.path.join(d["onnx"], case + ".onnx"), "wb") as f:
            f.write(fn().SerializeToString())
    for t in ("reference", "train-step"):
        os.makedirs(os.path.join(out, t), exist_ok=True)
    for name, m in classifiers():
        for t in ("reference", "train-step"):
            with open(os.path.join(out, t, "seed_" + name + ".onnx"), "wb") as f:
                f.write(m.SerializeToString())
    for script in ("make_onnx", "make_new_ops_onnx", "make_resize_onnx", "make_pad_onnx"):
        spec = importlib.util.spec_from_file_location(
            script, os.path.join(ROOT, "test", "Frontend", "Inputs", script + ".py"))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        for case, fn in sorted(mod.CASES.items()):
            if case == "huge_input":
                continue  # its 12 x 2^62 input only repeats the importer's check
            with open(os.path.join(out, "reference", "seed_%s_%s.onnx" % (script[5:], case)),
                      "wb") as f:
                f.write(fn().SerializeToString())
    for p in sorted(glob.glob(os.path.join(ROOT, "test", "**", "*.mlir"), recursive=True)):
        with open(p, "rb") as f:
            text = f.read()
        if len(text) <= 64 * 1024:
            rel = os.path.relpath(p, os.path.join(ROOT, "test")).replace("/", "_")
            with open(os.path.join(d["pipeline"], rel), "wb") as f:
                f.write(text)


if __name__ == "__main__":
    main()
