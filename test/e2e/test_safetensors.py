"""safetensors weights: cnnc (C++) and cnnc.safetensors (Python) against each
other, against the format's specification, and against PyTorch.

* cnnc's --save-state FILE.safetensors holds what --save-state FILE.cnnw holds
  (same names, dtypes, values), and the bytes equal what the Python writer
  produces for the same tensors.
* A minimal reader written here from the specification
  (https://huggingface.co/docs/safetensors: u64 length, JSON header,
  data_offsets relative to the data) loads cnnc's file into torch tensors, and
  the trained SimpleCNN's state_dict takes them with strict=True (the names
  are PyTorch's state_dict keys).
* Python -> C++: weights written by write_safetensors drive
  `cnnc --run-reference --weights` to the same output as the .cnnw of the
  same values, and differ from the model's own weights' output.
* Corrupt files (truncated, bad header length, JSON errors, offsets out of
  range / overlapping / leaving a gap, dtype or shape mismatch) each give one
  clear error from both readers, naming the problem.
* cnnc.load_state_dict and the command lines of cnnc.safetensors / cnnc.cnnw.
* Both readers accept and refuse the same 120 mutated files.
"""
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
from cnnc import train_check as tc  # noqa: E402
from cnnc.cnnw import read_cnnw, write_cnnw  # noqa: E402
from cnnc.safetensors import (SafetensorsError, load_state_dict,  # noqa: E402
                              parse_safetensors, read_safetensors,
                              serialize_safetensors, write_safetensors)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
DIGITS = os.path.join(REPO, "data", "generated", "digits")


def spec_reader(path):
    """A reader written from the format's description only (no cnnc code):
    name -> torch tensor."""
    dtypes = {"F32": torch.float32, "F16": torch.float16, "I32": torch.int32,
              "I64": torch.int64}
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        t = torch.frombuffer(bytearray(data[b:e]), dtype=dtypes[info["dtype"]]) \
            if e > b else torch.empty(0, dtype=dtypes[info["dtype"]])
        out[name] = t.reshape(info["shape"])
    return out


@pytest.fixture(scope="module")
def trained(tmp_path_factory, cnnc):
    """SimpleCNN (batch 4) trained 2 SGD steps on the CPU path, its state
    saved both as .safetensors and .cnnw by the same run's settings."""
    d = tmp_path_factory.mktemp("st")
    model = tc.make_model("simplecnn", seed=0)
    onnx_path = d / "m.onnx"
    tc.export_training(model, onnx_path, (4, 3, 32, 32))
    for ext in ("safetensors", "cnnw"):
        r = tc.run_cnnc(cnnc, onnx_path, "--train", "--run-reference", "--steps", 2,
                        "--data", "synthetic", "--save-state", d / ("s." + ext))
        assert r.returncode == 0, r.stderr
    return d, model, onnx_path


def test_cpp_writes_what_cnnw_holds_and_python_writes_the_same_bytes(trained):
    d, _, _ = trained
    st, meta = read_safetensors(d / "s.safetensors")
    cw = read_cnnw(d / "s.cnnw")
    assert meta == {"format": "pt"}
    assert sorted(st) == sorted(cw)
    for k in cw:
        assert st[k].dtype == cw[k].dtype and st[k].shape == cw[k].shape, k
        np.testing.assert_array_equal(st[k], cw[k], err_msg=k)
    raw = open(d / "s.safetensors", "rb").read()
    assert serialize_safetensors(st, meta) == raw
    (n,) = struct.unpack("<Q", raw[:8])
    assert (8 + n) % 8 == 0  # data aligned, as the reference writer pads


def test_torch_loads_cnnc_file_through_spec_reader(trained):
    d, model, _ = trained
    tensors = spec_reader(d / "s.safetensors")
    sd = model.state_dict()
    # Every parameter and buffer of the module, under its state_dict key;
    # the rest is the optimizer state of those parameters.
    assert set(sd) <= set(tensors), set(sd) - set(tensors)
    assert all(k in sd or k.rsplit(".", 1)[0] in sd for k in tensors), sorted(tensors)
    model.load_state_dict({k: tensors[k] for k in sd}, strict=True)
    cw = read_cnnw(d / "s.cnnw")
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), cw[k], err_msg=k)
    # cnnc.load_state_dict: the same tensors, without the optimizer state.
    loaded = load_state_dict(d / "s.safetensors")
    assert set(loaded) == set(sd)
    model.load_state_dict(loaded, strict=True)
    assert set(load_state_dict(d / "s.cnnw")) == set(sd)
    assert set(load_state_dict(d / "s.safetensors", include_optimizer_state=True)) == \
        set(tensors)


def test_python_written_weights_drive_the_cpp_reader(trained, cnnc, tmp_path):
    d, _, onnx_path = trained
    w = {k: v for k, v in read_cnnw(d / "s.cnnw").items()
         if not k.endswith(".momentum_buffer")}
    rng = np.random.default_rng(1)
    w = {k: (v + 0.05 * rng.standard_normal(v.shape)).astype(v.dtype) for k, v in w.items()}
    write_safetensors(tmp_path / "w.safetensors", w)
    write_cnnw(tmp_path / "w.cnnw", w)
    x = rng.standard_normal((4, 3, 32, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    outs = {}
    for name in ("w.safetensors", "w.cnnw", None):
        extra = ["--weights", tmp_path / name] if name else []
        out = tmp_path / ("y-%s.npy" % name)
        r = tc.run_cnnc(cnnc, onnx_path, "--run-reference", "--input", tmp_path / "x.npy",
                        "--output", out, *extra)
        assert r.returncode == 0, r.stderr
        outs[name] = np.load(out)
    np.testing.assert_array_equal(outs["w.safetensors"], outs["w.cnnw"])
    assert np.abs(outs["w.safetensors"] - outs[None]).max() > 1e-3


def _file(header, data=b""):
    h = header.encode() if isinstance(header, str) else header
    return struct.pack("<Q", len(h)) + h + data


OK = '{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
CORRUPT = {
    "short": (b"abc", "8-byte header length"),
    "huge_header": (struct.pack("<Q", 200000000) + b"{}", "limit"),
    "header_past_end": (_file(OK, bytes(8))[:20], "runs past the end of the file"),
    "truncated_data": (_file(OK, bytes(7)), "run past the end of the data"),
    "trailing": (_file(OK, bytes(9)), "bytes after the last tensor"),
    "not_json": (_file('{"w":', bytes(8)), "not valid JSON"),
    "not_object": (_file('[1]'), "does not start with '{'"),
    "bad_utf8": (_file(b'{"\xff":1}'), "not UTF-8"),
    "duplicate": (_file('{"a":{},"a":{}}'), "duplicate key"),
    "shape_mismatch": (_file('{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}',
                             bytes(8)), "need 12 bytes"),
    "dtype_mismatch": (_file('{"w":{"dtype":"I64","shape":[2],"data_offsets":[0,8]}}',
                             bytes(8)), "need 16 bytes"),
    "unsupported_dtype": (_file('{"w":{"dtype":"Q9","shape":[2],"data_offsets":[0,8]}}',
                                bytes(8)), "dtype 'Q9'"),
    "negative_dim": (_file('{"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}',
                           bytes(8)), "non-negative"),
    "offsets_reversed": (_file('{"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}',
                               bytes(8)), "end before they begin"),
    "overlap": (_file('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                      '"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', bytes(8)),
                "overlap"),
    "gap": (_file('{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', bytes(8)),
            "gap"),
    "missing_key": (_file('{"w":{"dtype":"F32","shape":[2]}}', bytes(8)),
                    'missing "data_offsets"'),
}


@pytest.mark.parametrize("case", sorted(CORRUPT))
def test_corrupt_file_one_clear_error(case, cnnc, trained, tmp_path):
    data, expect = CORRUPT[case]
    path = tmp_path / ("bad-%s.safetensors" % case)
    path.write_bytes(data)
    with pytest.raises(SafetensorsError) as e:
        read_safetensors(path)
    assert expect in str(e.value), str(e.value)
    assert str(path) in str(e.value)
    _, _, onnx_path = trained
    r = tc.run_cnnc(cnnc, onnx_path, "--run-reference", "--input", "unused.npy",
                    "--weights", path)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.returncode != 0 and len(lines) == 1, r.stderr
    assert expect in lines[0] and str(path) in lines[0], lines[0]


def test_parse_round_trip_and_extra_dtypes():
    t = {"a": np.arange(6, dtype=np.int64).reshape(2, 3), "b": np.float16([1.5]),
         "c": np.zeros((0, 4), np.float32), "d": np.float32(2.0), "e": np.float64([3.0]),
         "é\n\"": np.int32([7])}
    back, meta = parse_safetensors(serialize_safetensors(t, {"k": "v"}))
    assert meta == {"k": "v"} and list(back) == list(t)
    for k in t:
        assert back[k].dtype == np.asarray(t[k]).dtype and back[k].shape == np.shape(t[k])
        np.testing.assert_array_equal(back[k], t[k])
    # BF16 (PyTorch checkpoints often hold it) reads as float32.
    bf = struct.pack("<H", 0x3fc0)  # 1.5
    got, _ = parse_safetensors(_file('{"x":{"dtype":"BF16","shape":[1],'
                                     '"data_offsets":[0,2]}}', bf))
    assert got["x"].dtype == np.float32 and got["x"][0] == 1.5


def test_load_state_dict_leaves_out_training_state(tmp_path):
    one = np.float32([1.0])
    write_safetensors(tmp_path / "c.safetensors", {
        "fc.weight": one, "fc.weight.exp_avg": one, "fc.weight.exp_avg_sq": one,
        "bn.running_mean": one, "fc.bias.momentum_buffer": one, "fc.bias.grad": one,
        "loss_scale": one, "loss_scale.growth_tracker": one,
        "__step__": np.int64([3]), "__loader__": np.int64([0, 1, 2])})
    sd = load_state_dict(tmp_path / "c.safetensors")
    assert list(sd) == ["fc.weight", "bn.running_mean"]
    assert isinstance(sd["fc.weight"], torch.Tensor) and sd["fc.weight"].dtype == torch.float32
    full = load_state_dict(tmp_path / "c.safetensors", include_optimizer_state=True)
    assert len(full) == 10 and full["__step__"].dtype == torch.int64


def test_command_lines(trained, tmp_path):
    d, _, _ = trained
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))

    def run(*args):
        return subprocess.run([sys.executable, "-m", *map(str, args)], env=env,
                              capture_output=True, text=True, timeout=120)
    for mod in ("cnnc.cnnw", "cnnc.safetensors"):
        r = run(mod, "--help")
        assert r.returncode == 0 and "usage:" in r.stdout, r.stderr
    r = run("cnnc.safetensors", d / "s.safetensors")
    assert r.returncode == 0 and "conv1.weight" in r.stdout and "format = pt" in r.stdout
    r = run("cnnc.safetensors", d / "s.cnnw", "--convert", tmp_path / "c.safetensors")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "c.safetensors").read_bytes() == \
        serialize_safetensors(read_cnnw(d / "s.cnnw"), {"format": "pt"})
    r = run("cnnc.safetensors", d / "s.safetensors", "--convert", tmp_path / "m.pt")
    assert r.returncode == 0, r.stderr
    assert set(torch.load(tmp_path / "m.pt")) == set(load_state_dict(d / "s.cnnw"))
    r = run("cnnc.safetensors", tmp_path / "missing.safetensors")
    assert r.returncode == 1 and "error:" in r.stderr and "Traceback" not in r.stderr


def test_readers_agree_on_mutated_files(cnnc, trained, tmp_path):
    """The Python and C++ readers accept and refuse the same files: 120
    deterministic mutations (bytes changed, cut, JSON punctuation inserted)
    of the fuzz seeds and of cnnc's own file; the C++ reader is driven
    through `cnnc --weights` (a file it parses fails later, on --input)."""
    import glob
    import random
    seeds = [open(p, "rb").read() for p in sorted(glob.glob(
        os.path.join(REPO, "fuzz", "corpus", "safetensors", "*")))]
    d, _, onnx_path = trained
    seeds.append(open(d / "s.safetensors", "rb").read())
    rng = random.Random(0)
    accepted = 0
    for i in range(120):
        b = bytearray(rng.choice(seeds))
        if i % 8 == 0:  # a changed value in the data parses
            b = bytearray(seeds[-1])
            b[len(b) - 1 - rng.randrange(4096)] ^= 0x40
        for _ in range(rng.randint(1, 3) if i % 8 else 0):
            op, k = rng.random(), rng.randrange(len(b) + 1)
            if op < 0.4 and k < len(b):
                # Mostly in the header (a change in the data always parses).
                b[k if rng.random() < 0.5 else min(k, 8 + rng.randrange(600))] = \
                    rng.randrange(256)
            elif op < 0.7:
                b[k:k] = bytes([rng.choice(b'{}[]",:0-1e.\\ ')])
            else:
                del b[k:k + rng.randint(1, 8)]
        if len(b) >= 8 and rng.random() < 0.5:  # keep the header length plausible
            n = struct.unpack("<Q", bytes(b[:8]))[0]
            if n > len(b) - 8:
                b[:8] = struct.pack("<Q", max(0, len(b) - 8 - rng.randint(0, 8)))
        path = tmp_path / ("m%03d.safetensors" % i)
        path.write_bytes(bytes(b))
        try:
            parse_safetensors(bytes(b), str(path), extra_dtypes=False)
            py = True
        except SafetensorsError:
            py = False
        r = tc.run_cnnc(cnnc, onnx_path, "--run-reference", "--input", tmp_path / "none.npy",
                        "--output", tmp_path / "y.npy", "--weights", path)
        cpp = "cannot read weights" not in r.stderr
        assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert py == cpp, (path, py, r.stderr)
        accepted += py
    print("\nMEASURED mutated files accepted by both readers: %d of 120" % accepted)
    assert accepted > 0
