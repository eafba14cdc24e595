"""Bad input files get one clear error naming the file and exit 1.

The inputs are the regressions under fuzz/regressions/ (the crashers found
so far, one per class: int64 overflow of the element count, bad .npy
headers, negative dims, non-UTF-8 names, a zero stride in ONNX). The C++
readers (runtime/src/TensorFile.cpp) and python/cnnc/cnnw.py must agree on
which .cnnw files are valid.
"""
import glob
import os
import re
import subprocess

import numpy as np
import pytest

from cnnc.cnnw import CnnwError, read_cnnw, write_cnnw
from cnnc.tools import REPO

REG = os.path.join(REPO, "fuzz", "regressions")
CORPUS = os.path.join(REPO, "fuzz", "corpus")
MAKE_ONNX = os.path.join(REPO, "test", "Frontend", "Inputs", "make_onnx.py")


def files(kind, pattern):
    return sorted(glob.glob(os.path.join(REG, kind, pattern)))


@pytest.fixture(scope="module")
def model(tmp_path_factory, cnnc):
    d = tmp_path_factory.mktemp("m")
    path = str(d / "m.onnx")
    subprocess.run(["/usr/bin/python3", MAKE_ONNX, "conv_bias", path], check=True)
    x = str(d / "x.npy")
    np.save(x, np.zeros((2, 3, 8, 8), np.float32))
    return path, x


def run(cmd, cwd):
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=60,
                       errors="replace")
    return p.returncode, p.stderr


def assert_clean_error(rc, err, path):
    assert rc == 1, err
    errors = [l for l in err.splitlines() if "error:" in l]
    assert len(errors) == 1, err
    assert path in errors[0], err
    assert "Stack dump" not in err and "terminate" not in err, err


@pytest.mark.parametrize("path", files("npy", "*.npy") + files("cnnt", "*.bin"),
                         ids=os.path.basename)
def test_bad_input_tensor(cnnc, model, tmp_path, path):
    m, _ = model
    rc, err = run([cnnc, m, "--run-reference", "--input", path, "--output",
                   str(tmp_path / "y.npy")], tmp_path)
    if os.path.basename(path) == "shape_zero.npy":  # valid file, wrong shape
        assert rc == 1 and "expects tensor<2x3x8x8xf32>" in err, err
        return
    assert_clean_error(rc, err, path)
    assert not os.path.exists(tmp_path / "y.npy")


@pytest.mark.parametrize("path", files("cnnw", "*.cnnw"), ids=os.path.basename)
def test_bad_weights(cnnc, model, tmp_path, path):
    m, x = model
    rc, err = run([cnnc, m, "--run-reference", "--weights", path, "--input", x,
                   "--output", str(tmp_path / "y.npy")], tmp_path)
    assert_clean_error(rc, err, path)
    with pytest.raises(CnnwError):
        read_cnnw(path)


def test_onnx_zero_stride(cnnc, tmp_path):
    path = os.path.join(REG, "onnx", "w2_2207_emit.onnx")
    rc, err = run([cnnc, path, "--emit", "mlir"], tmp_path)
    assert rc == 1, err
    assert "strides [2, 0]" in err and "Stack dump" not in err, err


def test_onnx_external_data_stays_in_folder(cnnc, tmp_path):
    ext = tmp_path / "m.onnx"
    subprocess.run(["/usr/bin/python3", MAKE_ONNX, "conv_bias_external", str(ext)],
                   check=True)
    import onnx
    m = onnx.load(str(ext), load_external_data=False)
    for t in m.graph.initializer:
        for kv in t.external_data:
            if kv.key == "location":
                kv.value = "../" + os.path.basename(str(tmp_path)) + "/m.onnx.data"
    bad = tmp_path / "escape.onnx"
    bad.write_bytes(m.SerializeToString())
    rc, err = run([cnnc, str(bad), "--emit", "mlir"], tmp_path)
    assert rc == 1 and "leaves the model's folder" in err, err


def cxx_accepts(cnnc, path, tmp_path):
    """Whether cnnc's reader accepts a .cnnw (via --weights on an .mlir that
    needs no weights: a file that parses is then refused for its entries,
    which match no parameter of the model, and that refusal means the reader
    accepted it)."""
    mlir = tmp_path / "id.mlir"
    mlir.write_text("func.func @forward(%x: tensor<2xf32> {cnn.input}) -> tensor<2xf32> "
                    "{ return %x : tensor<2xf32> }\n")
    rc, err = run([cnnc, str(mlir), "--weights", path, "--emit", "mlir"], tmp_path)
    return rc == 0 or re.search(r"(entries that match|entry that matches) no parameter "
                                r"or buffer of the model", err) is not None, err


@pytest.mark.parametrize("path", files("cnnw", "*.cnnw") +
                         sorted(glob.glob(os.path.join(CORPUS, "cnnw", "*"))),
                         ids=os.path.basename)
def test_readers_agree(cnnc, tmp_path, path):
    ok_cxx, err = cxx_accepts(cnnc, path, tmp_path)
    try:
        read_cnnw(path)
        ok_py = True
    except CnnwError:
        ok_py = False
    assert ok_cxx == ok_py, err


def test_python_rejects_overflowing_shape(tmp_path):
    # 2^32 x 2^32 f32 elements wrap to 0 bytes in int64 arithmetic.
    p = tmp_path / "w.cnnw"
    write_cnnw(str(p), {"a": np.zeros((1,), np.float32)})
    b = bytearray(p.read_bytes())
    dims_at = 8 + 4 + 4 + 1 + 4 + 4
    b[dims_at:dims_at + 8] = (2 ** 32).to_bytes(8, "little")
    b[dims_at + 8:dims_at + 16] = (0).to_bytes(8, "little")  # nbytes
    b = b[:dims_at + 8] + (2 ** 32).to_bytes(8, "little") + b[dims_at + 8:]
    b[8 + 4 + 4 + 1 + 4:8 + 4 + 4 + 1 + 8] = (2).to_bytes(4, "little")  # rank 2
    b = b[:dims_at + 16] + (0).to_bytes(8, "little")
    p.write_bytes(bytes(b))
    with pytest.raises(CnnwError, match="more bytes than fit"):
        read_cnnw(str(p))
