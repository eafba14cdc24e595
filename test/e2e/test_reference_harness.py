"""Helpers for the reference-interpreter tests (test_reference_*.py).

Builds small .mlir functions of cnn ops from Python, runs them through
`cnnc-reference-run` (lib/Reference/tools) on .npy inputs, and compares the
results with PyTorch.

The binary is found in $CNNC_BUILD_DIR/bin, or else in the first of
<repo>/build/bin, <repo>/build-ref/bin that contains it.
"""
import os
import pathlib
import subprocess
import tempfile

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[2]
TOOL = "cnnc-reference-run"


def find_tool():
    candidates = []
    if os.environ.get("CNNC_BUILD_DIR"):
        candidates.append(pathlib.Path(os.environ["CNNC_BUILD_DIR"]) / "bin")
    candidates += [REPO / "build" / "bin", REPO / "build-ref" / "bin"]
    for d in candidates:
        if (d / TOOL).is_file():
            return str(d / TOOL)
    raise FileNotFoundError(
        f"{TOOL} not found in {[str(c) for c in candidates]}; "
        "build it (ninja cnnc-reference-run) or set CNNC_BUILD_DIR")


def ty(shape, dtype="f32"):
    shape = tuple(int(d) for d in shape)
    return "tensor<" + "".join(f"{d}x" for d in shape) + dtype + ">"


def fmt_attr(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "%.9e : f32" % v
    if isinstance(v, (tuple, list)):
        return "array<i64: " + ", ".join(str(int(x)) for x in v) + ">"
    if isinstance(v, str):
        return v  # already formatted
    raise TypeError(v)


class Value:
    def __init__(self, name, shape, dtype):
        self.name, self.shape, self.dtype = name, tuple(shape), dtype

    @property
    def type(self):
        return ty(self.shape, self.dtype)


class Fn:
    """Builder of one func.func of cnn ops."""

    def __init__(self, name="f"):
        self.name = name
        self.args = []
        self.lines = []
        self.count = 0

    def arg(self, shape, dtype="f32", attrs=None):
        v = Value(f"%arg{len(self.args)}", shape, dtype)
        self.args.append((v, attrs))
        return v

    def op(self, name, operands, attrs=None, results=None, dtype=None):
        """Emits `cnn.<name>`; `results` is a list of shapes (or (shape, dtype)).
        Returns one Value or a list when there are several results."""
        if results is None:
            results = [operands[0].shape]
        res = []
        for r in results:
            if isinstance(r, tuple) and len(r) == 2 and isinstance(r[1], str):
                res.append(r)
            else:
                res.append((tuple(r), dtype or operands[0].dtype))
        base = f"%v{self.count}"
        self.count += 1
        if len(res) == 1:
            outs = [Value(base, *res[0])]
            lhs = base
        else:
            outs = [Value(f"{base}#{i}", *r) for i, r in enumerate(res)]
            lhs = f"{base}:{len(res)}"
        attr_text = ""
        if attrs:
            attr_text = " {" + ", ".join(
                f"{k} = {fmt_attr(v)}" for k, v in attrs.items()) + "}"
        in_types = ", ".join(o.type for o in operands)
        out_types = ", ".join(o.type for o in outs)
        if len(outs) > 1:
            out_types = f"({out_types})"
        self.lines.append(
            f"  {lhs} = cnn.{name} {', '.join(o.name for o in operands)}"
            f"{attr_text} : ({in_types}) -> {out_types}")
        return outs[0] if len(outs) == 1 else outs

    def constant(self, value_text, shape, dtype="f32"):
        v = Value(f"%v{self.count}", shape, dtype)
        self.count += 1
        self.lines.append(f"  {v.name} = cnn.constant {value_text} : {v.type}")
        return v

    def text(self, returns):
        args = []
        for v, attrs in self.args:
            a = f"{v.name}: {v.type}"
            if attrs:
                a += " {" + ", ".join(f'{k} = "{val}"'
                                      for k, val in attrs.items()) + "}"
            args.append(a)
        rtypes = ", ".join(r.type for r in returns)
        body = "\n".join(self.lines)
        return (f"func.func @{self.name}({', '.join(args)}) -> ({rtypes}) {{\n"
                f"{body}\n  return {', '.join(r.name for r in returns)} : "
                f"{rtypes}\n}}\n")


def run_text(mlir, inputs, extra_args=(), workdir=None):
    """Runs the first function of `mlir` on numpy `inputs`; returns the list
    of numpy results and the tool's stderr."""
    with tempfile.TemporaryDirectory(dir=workdir) as d:
        d = pathlib.Path(d)
        (d / "f.mlir").write_text(mlir)
        paths = []
        for i, x in enumerate(inputs):
            p = d / f"in{i}.npy"
            np.save(p, np.array(x, order="C"))
            paths.append(str(p))
        proc = subprocess.run(
            [find_tool(), str(d / "f.mlir"), "-o", str(d / "out"),
             *extra_args, *paths],
            capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(
                f"{TOOL} failed ({proc.returncode}):\n{proc.stderr}\n{mlir}")
        outs = []
        i = 0
        while (d / f"out{i}.npy").exists():
            outs.append(np.load(d / f"out{i}.npy"))
            i += 1
        return outs, proc.stderr


def run(fn, returns, inputs, **kw):
    outs, _ = run_text(fn.text(returns), inputs, **kw)
    assert len(outs) == len(returns)
    return outs


def rel_err(got, want):
    """max |got - want| / max |want| (normwise relative error)."""
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.size == 0:
        return 0.0
    scale = max(np.abs(want).max(), 1e-30)
    return float(np.abs(got - want).max() / scale)


def assert_close(got, want, tol=1e-5, what=""):
    if hasattr(want, "detach"):
        want = want.detach().numpy()
    err = rel_err(got, want)
    assert err <= tol, f"{what}: max relative error {err:.3g} > {tol:g}"


# Self-tests of the helpers (so this file is also a valid pytest module).

def test_type_formatting():
    assert ty((2, 3)) == "tensor<2x3xf32>"
    assert ty((), "f32") == "tensor<f32>"
    assert fmt_attr((1, 2)) == "array<i64: 1, 2>"
    assert fmt_attr(True) == "true"


def test_rel_err():
    assert rel_err([1.0, 2.0], [1.0, 2.0]) == 0.0
    assert abs(rel_err([1.0, 2.1], [1.0, 2.0]) - 0.05) < 1e-12


def test_tool_runs_identity():
    f = Fn()
    x = f.arg((2, 3))
    y = f.op("scale", [x], {"factor": 2.0})
    (out,) = run(f, [y], [np.arange(6, dtype=np.float32).reshape(2, 3)])
    assert out.dtype == np.float32
    assert (out == 2 * np.arange(6).reshape(2, 3)).all()
