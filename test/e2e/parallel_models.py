"""What the parallel-training e2e tests share (test_data_parallel.py,
test_pipeline.py): the digits data set, the SmallBN net and the export of a
model for a batch size."""
import os
import subprocess
import sys

import pytest
import torch

from cnnc import train_check as tc

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIGITS_CSV = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"


def make_digits(tmp_path_factory, prefix):
    """The sklearn digits as an image folder (scripts/make_digits.py); skips
    the test when python3-sklearn's copy is not installed."""
    if not os.path.exists(DIGITS_CSV):
        pytest.skip("python3-sklearn's digits (%s) are not installed" % DIGITS_CSV)
    out = tmp_path_factory.mktemp(prefix) / "digits"
    subprocess.run([sys.executable, os.path.join(REPO, "scripts", "make_digits.py"),
                    "--out", str(out)], check=True, capture_output=True)
    return out


def export(tmp_path_factory, name, batch, model, prefix="export"):
    """`model` exported for training at batch `batch` (3 x 32 x 32 images)."""
    path = tmp_path_factory.mktemp(prefix) / ("%s_b%d.onnx" % (name, batch))
    tc.export_training(model, path, (batch, 3, 32, 32))
    return path


class SmallBN(torch.nn.Module):
    """conv -> BatchNorm -> relu -> pool -> linear: the smallest net whose
    loss depends on the batch statistics."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 4)
        return self.fc(torch.flatten(x, 1))


class UNet(torch.nn.Module):
    """The U-Net of Ronneberger et al. with padded convolutions (4 levels,
    channels w .. 16w, BatchNorm, max-pool, transposed-convolution
    upsampling into concatenations with the encoder's outputs): every level's
    skip spans the middle of the network, so a pipeline cut anywhere but at
    the ends crosses skips (issue 38's example of a step that does not fit
    one GPU, at 1024 x 1024 and w = 64)."""

    def __init__(self, classes=2, w=4):
        super().__init__()
        nn = torch.nn

        def block(i, o):
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o),
                                 nn.ReLU(), nn.Conv2d(o, o, 3, padding=1, bias=False),
                                 nn.BatchNorm2d(o), nn.ReLU())

        c = [w, 2 * w, 4 * w, 8 * w, 16 * w]
        self.enc = nn.ModuleList([block(3, c[0])] + [block(c[k], c[k + 1]) for k in range(4)])
        self.up = nn.ModuleList([nn.ConvTranspose2d(c[k + 1], c[k], 2, stride=2)
                                 for k in reversed(range(4))])
        self.dec = nn.ModuleList([block(2 * c[k], c[k]) for k in reversed(range(4))])
        self.head = nn.Conv2d(c[0], classes, 1)

    def forward(self, x):
        skips = []
        for k, e in enumerate(self.enc):
            x = e(x if k == 0 else torch.nn.functional.max_pool2d(x, 2))
            skips.append(x)
        x = skips.pop()
        for up, dec in zip(self.up, self.dec):
            x = dec(torch.cat([up(x), skips.pop()], 1))
        return self.head(x)


class DeepBN(torch.nn.Module):
    """Seven layers with parameters (conv + BatchNorm pairs, a linear head):
    enough for the 6 virtual stages of 3 interleaved stages of 2 chunks.
    With `skips`, residuals over one layer and the stem's output added again
    at the end (a tensor that crosses every cut in between); without, a
    chain (what interleaved stages take: tensors between adjacent stages
    only)."""

    def __init__(self, skips=True):
        super().__init__()
        torch.manual_seed(0)
        self.skips = skips
        self.stem = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn0 = torch.nn.BatchNorm2d(8)
        self.convs = torch.nn.ModuleList(
            torch.nn.Conv2d(8, 8, 3, padding=1) for _ in range(5))
        self.bns = torch.nn.ModuleList(torch.nn.BatchNorm2d(8) for _ in range(5))
        self.fc = torch.nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.bn0(self.stem(x))), 2)
        skip = x
        for k, (conv, bn) in enumerate(zip(self.convs, self.bns)):
            y = bn(conv(x))
            x = torch.relu(y + x) if k % 2 and self.skips else torch.relu(y)
        x = torch.nn.functional.max_pool2d(x + skip if self.skips else x, 4)
        return self.fc(torch.flatten(x, 1))
