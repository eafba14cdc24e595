"""Dense prediction through the generated executable (issue 32 part 3): a
small FCN (N x C x H x W output) compiled by nvcc with --ignore-index 255,
then `./train --data x.npy --labels y.npy` (N x H x W masks) and `--data DIR`
(images/ + masks/): the data errors are one message and exit 1, reported
before the GPU is looked for, so they are checked here without a GPU. With
a GPU the run trains and prints mIoU (test/gpu/check_segmentation.py is the
numerics check)."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(
    not os.path.exists("/usr/local/cuda/bin/nvcc") and not shutil.which("nvcc"),
    reason="nvcc not installed")

torch = pytest.importorskip("torch")
nn = torch.nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "python"))
from cnnc.export import export_for_training  # noqa: E402


class TinyFCN(nn.Module):
    def __init__(self, classes=5):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.b1 = nn.BatchNorm2d(8)
        self.head = nn.Conv2d(8, classes, 1)

    def forward(self, x):
        return self.head(torch.relu(self.b1(self.c1(x))))


@pytest.fixture(scope="module")
def exe(cnnc, tmp_path_factory):
    d = tmp_path_factory.mktemp("dense_exe")
    torch.manual_seed(0)
    onnx = str(d / "fcn.onnx")
    export_for_training(TinyFCN(), torch.randn(2, 3, 8, 8), onnx)
    out = str(d / "train")
    env = dict(os.environ, CNNC_OBJECT_CACHE=str(d / "cache"))
    p = subprocess.run([cnnc, onnx, "--train", "--ignore-index", "255", "--arch", "sm_80",
                        "--precision", "fp32", "-o", out], capture_output=True, text=True,
                       env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return out


def run(exe, *args):
    return subprocess.run([exe, *args, "--steps", "2"], capture_output=True, text=True,
                          timeout=120)


def masks(n, h=8, w=8, seed=0):
    g = np.random.default_rng(seed)
    y = g.integers(0, 5, size=(n, h, w)).astype(np.int64)
    y[:, 0, :] = 255
    return y


def test_executable_carries_the_ignore_index(exe):
    cu = open(exe + ".cu").read()
    assert "nullptr, 255ll};" in cu or "kHooks, 255ll};" in cu


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8])
def test_npy_masks(exe, tmp_path, dtype):
    x = np.random.default_rng(1).random((4, 3, 8, 8), dtype=np.float32)
    np.save(tmp_path / "x.npy", x)

    def labels(y):
        np.save(tmp_path / "y.npy", y)
        return run(exe, "--data", str(tmp_path / "x.npy"), "--labels",
                   str(tmp_path / "y.npy"))

    p = labels(masks(4).astype(dtype))
    if p.returncode == 0:  # a GPU: it trained
        assert "done: 2 steps" in p.stdout, p.stdout
    else:
        assert p.returncode == 3, p.stderr  # no GPU: the data were accepted
    bad = [
        (masks(4)[:, 0, 0], "have shape (4,) but the step expects per-pixel labels (4, 8, 8)"),
        (masks(4)[:, :4, :], "have shape (4, 4, 8) but the step expects per-pixel labels "
                             "(4, 8, 8)"),
        (np.where(masks(4) == 3, 7, masks(4)), "label 7 is not a class in [0, 5) nor the "
                                               "ignore_index 255"),
    ]
    for y, message in bad:
        if dtype == np.uint8 or y.max() < np.iinfo(dtype).max:
            p = labels(y.astype(dtype))
            assert p.returncode == 1, (p.returncode, p.stderr)
            assert message in p.stderr, p.stderr
            assert p.stderr.count("\n") == 1, p.stderr


def test_mask_folder(exe, tmp_path):
    from PIL import Image
    g = np.random.default_rng(2)
    for split, n in (("train", 3), ("val", 2)):
        for sub in ("images", "masks"):
            (tmp_path / split / sub).mkdir(parents=True)
        for i in range(n):
            Image.fromarray(g.integers(0, 255, (10, 12, 3), dtype=np.uint8)).save(
                tmp_path / split / "images" / ("%d.png" % i))
            # VOC's palette masks: the indices are the classes.
            m = Image.frombytes("P", (12, 10), masks(1, 10, 12, seed=i)[0].astype(
                np.uint8).tobytes())
            m.putpalette([(k * 53) % 256 for k in range(768)])
            m.save(tmp_path / split / "masks" / ("%d.png" % i))
    # (Not --eval: the CUDA emitter gives a dense model no evalStep/Logits
    # yet, so the executable's mIoU validation is not reachable.)
    p = run(exe, "--data", str(tmp_path))
    if p.returncode == 0:
        assert "done: 2 steps" in p.stdout, p.stdout
    else:
        assert p.returncode == 3, p.stderr
    os.remove(tmp_path / "train" / "masks" / "1.png")
    p = run(exe, "--data", str(tmp_path))
    assert p.returncode == 1
    assert ("image %s has no mask %s" % (tmp_path / "train" / "images" / "1.png",
                                         tmp_path / "train" / "masks" / "1.png")) in p.stderr
