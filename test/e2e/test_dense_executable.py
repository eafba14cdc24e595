"""Dense prediction through the generated executable (issue 32 part 3): a
small FCN (N x C x H x W output) compiled by nvcc with --ignore-index 255,
then `./train --data x.npy --labels y.npy` (N x H x W masks) and `--data DIR`
(images/ + masks/): the data errors are one message and exit 1, reported
before the GPU is looked for, so they are checked here without a GPU. With
a GPU the run trains and prints mIoU (test/gpu/check_segmentation.py is the
numerics check)."""
import os
import re
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
    def __init__(self, classes=5, aux=False):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.b1 = nn.BatchNorm2d(8)
        self.head = nn.Conv2d(8, classes, 1)
        # torchvision's FCN/DeepLabV3 'aux' head: trained, not evaluated.
        self.aux = nn.Conv2d(8, classes, 1) if aux else None

    def forward(self, x):
        f = torch.relu(self.b1(self.c1(x)))
        return self.head(f) if self.aux is None else (self.head(f), self.aux(f))


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("dense_exe")


def build(cnnc, d, aux):
    torch.manual_seed(0)
    name = "fcn_aux" if aux else "fcn"
    onnx = str(d / (name + ".onnx"))
    export_for_training(TinyFCN(aux=aux), torch.randn(2, 3, 8, 8), onnx)
    out = str(d / name)
    # One object cache: the second model reuses the runtime-side units.
    env = dict(os.environ, CNNC_OBJECT_CACHE=str(d / "cache"))
    p = subprocess.run([cnnc, onnx, "--train", "--ignore-index", "255", "--arch", "sm_80",
                        "--precision", "fp32", "-o", out], capture_output=True, text=True,
                       env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def exe(cnnc, build_dir):
    return build(cnnc, build_dir, aux=False)


@pytest.fixture(scope="module")
def exe_aux(cnnc, build_dir):
    return build(cnnc, build_dir, aux=True)


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
    p = run(exe, "--data", str(tmp_path), "--eval")
    if p.returncode == 0:
        assert "done: 2 steps" in p.stdout, p.stdout
    else:
        assert p.returncode == 3, p.stderr
    os.remove(tmp_path / "train" / "masks" / "1.png")
    p = run(exe, "--data", str(tmp_path))
    assert p.returncode == 1
    assert ("image %s has no mask %s" % (tmp_path / "train" / "images" / "1.png",
                                         tmp_path / "train" / "masks" / "1.png")) in p.stderr


@pytest.mark.parametrize("aux", [False, True])
def test_eval_step_emitted(exe, exe_aux, aux):
    """The dense model's eval step: @forward's per-pixel logits N x C x H x W
    are the Logits tensor, and the aux head (its weight) is not in it."""
    cu = open((exe_aux if aux else exe) + ".cu").read()
    assert "trainStep, evalStep, cnncDefaultLR" in cu
    logits = re.search(r'\{"logits", cnnrt::DType::F32, 4, \{2, 5, 8, 8\}, (\d+), 2560, '
                       r'cnnrt::Role::Logits\}', cu)
    assert logits, "no 2 x 5 x 8 x 8 f32 Logits tensor"
    body = cu[cu.index("static void evalStep("):]
    body = body[:body.index("\n}\n")]
    assert "P<float>(A, %s)" % logits.group(1) in body
    if aux:
        w = re.search(r'\{"aux.weight", cnnrt::DType::F32, 4, \{5, 8, 1, 1\}, (\d+),', cu)
        assert w and "P<float>(A, %s)" % w.group(1) not in body
        assert "P<float>(A, %s)" % w.group(1) in cu[cu.index("static void trainStep("):]


def npy_split(d, val_y=None, val_x=None):
    g = np.random.default_rng(3)
    np.save(d / "train_x.npy", g.random((4, 3, 8, 8), dtype=np.float32))
    np.save(d / "train_y.npy", masks(4))
    np.save(d / "val_x.npy", g.random((3, 3, 8, 8), dtype=np.float32) if val_x is None
            else val_x)
    np.save(d / "val_y.npy", masks(3, seed=5) if val_y is None else val_y)


@pytest.mark.parametrize("aux", [False, True])
def test_eval_on_the_validation_split(exe, exe_aux, tmp_path, aux):
    # --eval is accepted (before this the executable refused it: "this model
    # has no evalStep/Logits", exit 2); with a GPU the eval and done lines
    # carry mIoU (its numerics: test/gpu/check_dense_eval.py).
    npy_split(tmp_path)
    p = run(exe_aux if aux else exe, "--data", str(tmp_path), "--eval")
    if p.returncode == 0:
        assert re.search(r"^eval step 2 epoch \S+: mIoU \S+% pixel acc \S+% \(168 pixels, "
                         r"3 images\)", p.stdout, re.M), p.stdout
        assert "mIoU" in p.stdout.splitlines()[-1]
    else:
        assert p.returncode == 3, (p.returncode, p.stderr)


def test_bad_validation_masks_are_one_error(exe, tmp_path):
    """Validation masks are checked as the training ones, before the GPU."""
    bad = [
        (dict(val_y=np.where(masks(3, seed=5) == 2, 9, masks(3, seed=5))),
         "label 9 is not a class in [0, 5) nor the ignore_index 255: %s"
         % (tmp_path / "val_y.npy")),
        (dict(val_y=masks(3, 8, 6, seed=5)),
         "have shape (3, 8, 6) but the step expects per-pixel labels (3, 8, 8)"),
        (dict(val_x=np.zeros((3, 3, 8, 10), np.float32)),
         "have shape (3, 8, 8) but the step expects per-pixel labels (3, 8, 10)"),
    ]
    for kw, message in bad:
        npy_split(tmp_path, **kw)
        p = run(exe, "--data", str(tmp_path), "--eval")
        assert p.returncode == 1, (p.returncode, p.stderr)
        assert message in p.stderr, p.stderr
        assert p.stderr.count("\n") == 1, p.stderr
