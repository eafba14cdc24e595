"""Writes the seed corpora of the fuzz targets from the repo's test inputs.

    /usr/bin/python3 fuzz/make_seeds.py [fuzz/corpus]

onnx: every model of test/Frontend/Inputs/make_onnx.py; pipeline: the .mlir
test inputs; cnnw/npy/cnnt/safetensors: small tensors of each dtype and
rank (safetensors also with metadata and with its offsets out of key order); cifar: a
few records of several geometries (5-byte header, see FuzzCifar.cpp);
image: small JPEGs (baseline, progressive, gray, 4:2:0) and PNGs (RGB,
RGBA, gray, palette, 16-bit) after a selector byte (see FuzzImage.cpp).
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
    for p in sorted(glob.glob(os.path.join(ROOT, "test", "**", "*.mlir"), recursive=True)):
        with open(p, "rb") as f:
            text = f.read()
        if len(text) <= 64 * 1024:
            rel = os.path.relpath(p, os.path.join(ROOT, "test")).replace("/", "_")
            with open(os.path.join(d["pipeline"], rel), "wb") as f:
                f.write(text)


if __name__ == "__main__":
    main()
