"""A loss-scaling step that skips changes no state, in the CUDA target's own
step (`--target gpu --precision fp16 --layout nhwc`, on the reference
interpreter), trained from a data file as the executable trains
(issue 32's fbnetc_100 zoo failure, session 28).

* `--data` feeds the CUDA pipeline's step: cnn-input-format folds the
  image's cast to f16, transpose to NHWC and channel padding into the
  step's argument, and the reference driver converts each loaded batch as
  the runtime's input conversion does. (Before, the loader read the NHWC
  argument's H as the channels: "cannot adapt 3-channel images to 32
  channels".) The loss of step 1 equals the run on the same batch given as
  `--input` (f32 N x C x H x W, converted the same way) and as `--input` in
  the argument's own form (f16 N x H x W x C').
* A net whose scaled f16 gradients overflow (a BatchNorm scale of 40
  before the classifier) skips its first steps: the loss scale halves
  after each, and every parameter and momentum buffer after each skipped
  step equals the initial one bit for bit (only the BN running statistics
  and the loss scale move), so the loss of every skipped step is step
  1's, although the loader gives each step (each epoch of this one-batch
  file) the images in another order. The first step that applies changes
  the parameters.
* test/gpu/check_zoo.py's probe of the executable's skipped steps
  (gpucheck_common.skipped_steps_moved), with the reference interpreter
  standing in for the executable: nothing moved over the skipped steps,
  and the applied step's changes are found.
"""
import os
import stat
import sys

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))
sys.path.insert(0, os.path.join(REPO, "test", "gpu"))

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
import torch.nn as nn  # noqa: E402

from cnnc import train_check as tc  # noqa: E402
from cnnc.cnnw import read_cnnw  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

BATCH, CLASSES, HW = 8, 10, 32  # CIFAR-10 records: 3 x 32 x 32
GPU_F16 = ("--target", "gpu", "--precision", "fp16", "--layout", "nhwc")
SGD = ("--optimizer", "sgd", "--lr", "0.01", "--momentum", "0.9",
       "--weight-decay", "0")


class Head(nn.Module):
    """fbnet's shape in small: stem conv-BN-ReLU, a depthwise block, a 1x1
    conv to more channels with BN-ReLU, global pool, classifier."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False),
                                  nn.BatchNorm2d(16), nn.ReLU())
        self.dw = nn.Sequential(nn.Conv2d(16, 16, 3, 1, 1, groups=16, bias=False),
                                nn.BatchNorm2d(16), nn.ReLU())
        self.head = nn.Sequential(nn.Conv2d(16, 64, 1, bias=False),
                                  nn.BatchNorm2d(64), nn.ReLU())
        self.fc = nn.Linear(64, CLASSES)

    def forward(self, x):
        return self.fc(self.head(self.dw(self.stem(x))).mean(dim=(2, 3)))


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    """The exported net, a CIFAR-format data file of exactly one batch
    (uint8 images, as check_zoo writes it) and that batch as .npy: f32
    N x C x H x W (byte / 255, the loader's scaling) and in the step's
    argument form (f16 N x H x W x 8)."""
    d = tmp_path_factory.mktemp("skip")
    torch.manual_seed(0)
    model = Head()
    with torch.no_grad():
        model.head[1].weight.fill_(40.0)  # scaled gradients overflow f16
    onnx_path = d / "head.onnx"
    tc.export_training(model, onnx_path, (BATCH, 3, HW, HW))
    g = np.random.RandomState(3)
    images = g.randint(0, 256, size=(BATCH, 3, HW, HW)).astype(np.uint8)
    labels = g.randint(0, CLASSES, size=BATCH).astype(np.int64)
    data = d / "batch.bin"
    data.write_bytes(np.concatenate([labels.astype(np.uint8)[:, None],
                                     images.reshape(BATCH, -1)], axis=1).tobytes())
    x = images.astype(np.float32) / np.float32(255.0)
    np.save(d / "x.npy", x)
    np.save(d / "y.npy", labels)
    nhwc = np.zeros((BATCH, HW, HW, 8), np.float16)
    nhwc[..., :3] = x.transpose(0, 2, 3, 1).astype(np.float16)
    np.save(d / "x_nhwc_f16.npy", nhwc)
    return d, onnx_path


def train(cnnc, onnx_path, workdir, *args):
    proc = tc.run_cnnc(cnnc, onnx_path, "--train", *GPU_F16, *SGD,
                       "--run-reference", "--log-every", "1", *args)
    run = tc.CnncRun([cnnc, onnx_path, *args], proc, 0.0, None).check()
    return run


def test_data_file_feeds_the_cuda_pipelines_step(cnnc, case):
    d, onnx_path = case
    from_data = train(cnnc, onnx_path, d, "--data", d / "batch.bin", "--steps", 1)
    nchw = train(cnnc, onnx_path, d, "--input", d / "x.npy", "--labels",
                 d / "y.npy", "--steps", 1)
    folded = train(cnnc, onnx_path, d, "--input", d / "x_nhwc_f16.npy",
                   "--labels", d / "y.npy", "--steps", 1)
    assert len(from_data.losses) == 1 and np.isfinite(from_data.losses[0])
    # The same images and labels, in another order from the loader (BN's
    # sums and the loss's mean in another order: equal to f32 rounding).
    assert from_data.losses[0] == pytest.approx(nchw.losses[0], rel=1e-5)
    assert nchw.losses == folded.losses


def test_skipped_steps_change_no_parameter(cnnc, case):
    d, onnx_path = case
    steps = 6
    run = train(cnnc, onnx_path, d, "--data", d / "batch.bin", "--steps", steps,
                "--checkpoint", d / "ck{step}.cnnw", "--checkpoint-every", 1)
    assert len(run.losses) == steps
    init = tc.onnx_initializers(onnx_path)
    states = [read_cnnw(str(d / ("ck%d.cnnw" % k))) for k in range(1, steps + 1)]
    scales = [float(np.asarray(s["loss_scale"]).ravel()[0]) for s in states]
    skipped = 0
    while skipped < steps and scales[skipped] == 65536.0 / 2 ** (skipped + 1):
        skipped += 1
    # The net is built to overflow at the first scales, and to apply a step
    # before the sixth.
    assert 2 <= skipped < steps, scales
    momenta = [k for k in states[0] if k.endswith(".momentum_buffer")]
    params = [k[:-len(".momentum_buffer")] for k in momenta]
    assert params, sorted(states[0])
    names = params + momenta + ["optimizer.applied_steps"]
    for k in range(1, skipped):
        for name in names:
            assert np.array_equal(np.asarray(states[k][name]),
                                  np.asarray(states[0][name])), (k + 1, name)
    # Step 1 skipped: the initial weights, momentum zero, no step applied.
    for name in params:
        assert np.array_equal(np.asarray(states[0][name]),
                              np.asarray(init[name], np.float32)), name
    for name in momenta + ["optimizer.applied_steps"]:
        assert not np.any(np.asarray(states[0][name])), name
    # The forward is a function of the weights: every skipped step's loss is
    # step 1's, whatever order the loader gave the images in.
    assert max(run.losses[:skipped]) - min(run.losses[:skipped]) <= \
        1e-5 * abs(run.losses[0]), run.losses
    # The first step that applies changes the weights.
    changed = [n for n in params if not np.array_equal(
        np.asarray(states[skipped][n]), np.asarray(states[0][n]))]
    assert changed, "step %d applied but changed no parameter" % (skipped + 1)


def test_check_zoo_probe_of_skipped_steps(cnnc, case, tmp_path):
    from gpucheck_common import skipped_steps_moved
    d, onnx_path = case
    # `./train ARGS` as `cnnc --run-reference ARGS` (the loop's flags are
    # the executable's).
    exe = tmp_path / "train"
    exe.write_text("#!/bin/sh\nexec %s %s --train %s --optimizer sgd --momentum 0.9 "
                   "--weight-decay 0 --run-reference \"$@\"\n" % (
                       cnnc, onnx_path, " ".join(GPU_F16)))
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    init = tc.onnx_initializers(onnx_path)
    args = ["--data", str(d / "batch.bin"), "--lr", "0.01", "--log-every", "1"]
    ckpt = str(tmp_path / "skip{step}.cnnw")
    # The net skips its first 4 steps (test_skipped_steps_change_no_parameter).
    assert skipped_steps_moved(str(exe), args, init, 4, ckpt) == []
    moved = skipped_steps_moved(str(exe), args, init, 5, ckpt)
    assert "fc.weight after step 5" in moved and "fc.weight.momentum_buffer after step 5" \
        in moved and "optimizer.applied_steps after step 5" in moved, moved
    assert not [m for m in moved if not m.endswith("after step 5")], moved
