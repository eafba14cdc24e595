"""The op families of issue 32 through the CUDA target, on this machine (no
GPU needed).

test_new_ops.py proves each family's numerics on the reference interpreter;
the GPU checks (test/gpu/check_new_ops.py) need a device. Between the two,
nothing in CI showed that the composite forms the importer makes of these
layers (GroupNorm/InstanceNorm as reductions and elementwise ops, GRN's
ReduceL2, LogSoftmax and GlobalMaxPool as reduce_max, ECA's Conv1d,
BatchNorm1d on N x C and N x C x L) are accepted by the GPU pipeline and
printed as CUDA that nvcc compiles. Here:

* every model of test_new_ops.CASES, plus Resize (nearest, bilinear with
  align_corners both ways) and a softmax over the channels (selective
  kernels), emits a training step as CUDA in f32 NCHW and in the default
  f16 NHWC;
* under f16 the normalization statistics stay f32 (issue 32: "GroupNorm /
  InstanceNorm statistics in f32 like BatchNorm"): every reduction of a norm
  model returns f32 in the IR the CUDA target compiles;
* one net holding every family is compiled by nvcc (object only), f32 and
  f16.
"""
import os
import re
import shutil
import subprocess

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from cnnc import train_check as tc  # noqa: E402

import test_new_ops as ops  # noqa: E402  (the models, from the same folder)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

NVCC = "/usr/local/cuda/bin/nvcc" if os.path.exists(
    "/usr/local/cuda/bin/nvcc") else shutil.which("nvcc")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Upsample(nn.Module):
    """Down by a stride-2 conv, up again by F.interpolate (U-Net/FPN)."""

    def __init__(self, mode, align_corners=None, c=16):
        super().__init__()
        self.down = nn.Conv2d(c, c, 3, stride=2, padding=1)
        self.mode, self.align = mode, align_corners

    def forward(self, x):
        up = F.interpolate(self.down(x), scale_factor=2, mode=self.mode,
                           align_corners=self.align)
        return torch.cat([x, up], 1)[:, :16]


class SplitAttention(nn.Module):
    """Selective kernels as timm writes them: a softmax over the radix (axis 1)
    of N x 2 x C x 1 x 1 weighting two branches stacked on axis 1, summed."""

    def __init__(self, c=16):
        super().__init__()
        self.fc = nn.Conv2d(c, 2 * c, 1)

    def forward(self, x):
        n, c = x.shape[:2]
        a = self.fc(x.mean((2, 3), keepdim=True)).view(n, 2, c, 1, 1)
        branches = torch.stack([x, torch.relu(x)], 1)
        return (branches * torch.softmax(a, dim=1)).sum(1)


CASES = dict(ops.CASES)
CASES.update({
    "resize_nearest": lambda: ops.Net(Upsample("nearest")),
    "resize_bilinear": lambda: ops.Net(Upsample("bilinear", False)),
    "resize_bilinear_align_corners": lambda: ops.Net(Upsample("bilinear", True)),
    "softmax_radix": lambda: ops.Net(SplitAttention()),
})
NORMS = ["groupnorm_1", "groupnorm_8", "groupnorm_C", "instancenorm_affine",
         "instancenorm", "grn"]
FORMS = [("fp32", "nchw"), ("fp16", "nhwc")]


def export(name, tmp_path):
    torch.manual_seed(0)
    path = tmp_path / (name + ".onnx")
    tc.export_training(ops.affine_init(CASES[name]()), path, ops.SHAPE)
    return path


def emit(cnnc, onnx_path, precision, layout, what, out):
    p = subprocess.run([cnnc, str(onnx_path), "--train", "--optimizer", "sgd",
                        "--momentum", "0.9", "--precision", precision,
                        "--layout", layout, "--target", "gpu", "--emit", what,
                        "-o", str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    return out.read_text()


@pytest.mark.parametrize("precision,layout", FORMS)
@pytest.mark.parametrize("case", list(CASES))
def test_family_emits_cuda(cnnc, tmp_path, case, precision, layout):
    text = emit(cnnc, export(case, tmp_path), precision, layout, "cuda",
                tmp_path / "step.cu")
    assert "trainStep" in text
    # The step computes in the precision asked for: an f16 step stores
    # activations as __half, an f32 one never does.
    assert ("__half" in text.split("generated kernels")[-1]) == (precision == "fp16")


@pytest.mark.parametrize("case", NORMS)
def test_norm_statistics_stay_f32_under_f16(cnnc, tmp_path, case):
    ir = emit(cnnc, export(case, tmp_path), "fp16", "nhwc", "mlir",
              tmp_path / "step.mlir")
    reductions = re.findall(r"= cnn\.(reduce_(?:sum|mean))\b[^\n]*-> tensor<[0-9x]*x(f16|f32)>", ir)
    assert reductions, "no reduction in the f16 step of " + case
    f16 = [r for r in reductions if r[1] == "f16"]
    # A statistic (mean, variance, L2 norm) or its gradient's sum in f16 is
    # what autocast avoids; cnn-precision's f32-statistics=false (for
    # comparisons only) makes every one of these f16, and this fails.
    assert not f16, "%s: f16 reductions %s" % (case, f16)
    assert re.search(r"tensor<[0-9x]*xf16>", ir), "the step is not f16 at all"


class AllFamilies(nn.Module):
    """Every family of issue 32 in one net, for one nvcc compile per form."""

    def __init__(self, c=16):
        super().__init__()
        self.conv = nn.Conv2d(3, c, 3, padding=1)
        self.body = nn.Sequential(
            nn.GroupNorm(4, c), nn.SiLU(), nn.InstanceNorm2d(c, affine=True),
            nn.PReLU(c), ops.ECA(), nn.ELU(0.7), ops.BN1dSeq(c), nn.SELU(),
            nn.CELU(0.5), nn.Softplus(), ops.GRN(c), Upsample("nearest"),
            Upsample("bilinear", True), Upsample("bilinear", False),
            SplitAttention(c),
            ops.Act(lambda h: torch.minimum(torch.maximum(h, -h), h + 1)))
        self.pool = nn.AdaptiveMaxPool2d(1)
        self.head = ops.BN1dHead(c)

    def forward(self, x):
        h = self.body(self.conv(x))
        return F.log_softmax(self.head(h) + self.pool(h).flatten(1).sum(1, keepdim=True), 1)


@pytest.mark.skipif(not NVCC, reason="nvcc not installed")
@pytest.mark.parametrize("precision,layout", FORMS)
def test_all_families_cuda_step_builds(cnnc, tmp_path, precision, layout):
    torch.manual_seed(0)
    path = tmp_path / "all.onnx"
    tc.export_training(ops.affine_init(AllFamilies()), path, ops.SHAPE)
    cu = tmp_path / "step.cu"
    emit(cnnc, path, precision, layout, "cuda", cu)
    p = subprocess.run([NVCC, "-std=c++17", "-arch=sm_90a",
                        "-I" + os.path.join(REPO, "runtime", "include"),
                        "-c", str(cu), "-o", str(tmp_path / "step.o")],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-3000:]
