"""`python -m cnnc.export`: --image-size, and only the exporter's
known-harmless warnings hidden.

* resnet18 --training --image-size 64,48 --batch 2: the ONNX input is
  2 x 3 x 64 x 48 and nothing is printed (torch 1.13 printed one
  "Removing mutation ... num_batches_tracked" warning per BatchNorm, 20).
* --image-size 96 means 96 x 96; a bad size and simplecnn at another size
  than 32 are one usage error each (exit 2, no traceback, nothing written).
* known_export_warnings hides exactly its (category, message) pairs: another
  warning inside it still reaches the user.
"""
import os
import subprocess
import sys
import warnings

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))

pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
pytest.importorskip("torchvision")
from cnnc.export import (default_input_shape, known_export_warnings, main,  # noqa: E402
                         parse_image_size)


def run(*args):
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    return subprocess.run([sys.executable, "-m", "cnnc.export", *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=300)


def input_dims(path):
    return [d.dim_value for d in onnx.load(str(path)).graph.input[0].type.tensor_type.shape.dim]


def test_image_size_and_quiet_export(tmp_path):
    r = run("resnet18", tmp_path / "r.onnx", "--training", "--image-size", "64,48",
            "--batch", 2)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "" and r.stdout == "", r.stderr[-3000:]
    assert input_dims(tmp_path / "r.onnx") == [2, 3, 64, 48]
    assert parse_image_size("96") == (96, 96) and parse_image_size("96x80") == (96, 80)
    assert default_input_shape("resnet50", 4, (96, 80)) == (4, 3, 96, 80)
    assert default_input_shape("resnet50", 4) == (4, 3, 224, 224)


@pytest.mark.parametrize("args,expect", [
    (("resnet18", "x.onnx", "--image-size", "0,3"), "expected H or H,W"),
    (("resnet18", "x.onnx", "--image-size", "big"), "expected H or H,W"),
    (("simplecnn", "x.onnx", "--image-size", "64"), "simplecnn takes 32x32"),
])
def test_bad_image_size(tmp_path, capsys, args, expect):
    with pytest.raises(SystemExit) as e:
        main([str(a) for a in args])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert expect in err and "usage: python3 -m cnnc.export" in err, err
    assert not os.path.exists("x.onnx")


def test_only_known_warnings_hidden():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with known_export_warnings():
            warnings.warn("ONNX Preprocess - Removing mutation from node aten::add_ on "
                          "block input: 'bn1.num_batches_tracked'. This changes graph "
                          "semantics.", UserWarning)
            warnings.warn("ONNX Preprocess - Removing mutation from node aten::add_ on "
                          "block input: 'x'. This changes graph semantics.", UserWarning)
            warnings.warn("something else", UserWarning)
            warnings.warn("ONNX Preprocess - Removing mutation from node aten::add_ on "
                          "block input: 'bn1.num_batches_tracked'.", RuntimeWarning)
    assert [str(w.message)[:40] for w in seen] == [
        "ONNX Preprocess - Removing mutation from", "something else",
        "ONNX Preprocess - Removing mutation from"]
    assert [w.category for w in seen] == [UserWarning, UserWarning, RuntimeWarning]
