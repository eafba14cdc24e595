"""cnn-fuse keeps the training step's numbers: the step of each model is run
on the reference interpreter before and after the pass (same weights, batch
and labels) and the loss and every gradient and BN statistic compared with
max|a-b| / max|b| <= 1e-5. The reference kernels of the unfused ops compute
the same f32 operations in the same order as the fused ops (BN normalization
as (x - mean) * invstd * scale + bias, the BN gradient's final scaling), so
the fused step is in fact bit-for-bit the unfused one; 1e-5 leaves room
for a future fusion that reassociates. ResNet-18 also runs NHWC (cnn-layout
first), where the ReLU gradient fuses into the BN gradient as well."""
import pathlib
import subprocess
import sys

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))
from cnnc.cnnw import read_cnnw  # noqa: E402
from cnnc.export import build_model, export_onnx  # noqa: E402
from cnnc.tools import require_tool  # noqa: E402


tool = require_tool


def exported_with_batch(tmp_path, name, seed, shape):
    """Exports `name` (training mode) to tmp_path/m.onnx and saves a random
    batch of `shape` and its labels as tmp_path/x.npy, y.npy."""
    model = build_model(name, 10, seed=seed)
    onnx = tmp_path / "m.onnx"
    export_onnx(model, str(onnx), shape, training=True, opset=13)
    rng = np.random.RandomState(seed)
    np.save(tmp_path / "x.npy", rng.rand(*shape).astype(np.float32))
    np.save(tmp_path / "y.npy", rng.randint(0, 10, size=shape[0]).astype(np.int64))
    return onnx


def training_ir(onnx, out, optimizer_flags=("--optimizer", "none")):
    """The unoptimized (-O0) training step of `onnx` as MLIR in `out`."""
    subprocess.run([tool("cnnc"), str(onnx), "--train", "-O0", "--emit", "mlir", "-o",
                    str(out)] + list(optimizer_flags), check=True)
    return out


def run_steps(mlir, tmp, tag, steps):
    """`steps` steps of `mlir` on the reference interpreter (x.npy, y.npy in
    `tmp`): the printed loss of each step (as text) and the saved state."""
    state = str(tmp / (tag + ".cnnw"))
    p = subprocess.run([tool("cnnc"), str(mlir), "--train", "--optimizer", "none",
                        "--run-reference", "--steps", str(steps), "--log-every", "1",
                        "--input", str(tmp / "x.npy"), "--labels", str(tmp / "y.npy"),
                        "--save-state", state],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    losses = [l.split("loss")[1].split()[0] for l in p.stdout.splitlines() if "loss" in l]
    return losses, read_cnnw(state)


def run_step(mlir, tmp, tag):
    losses, state = run_steps(mlir, tmp, tag, 1)
    return float(losses[0]), state


def assert_same_step(plain, fused, tmp):
    """One reference step of each gives the same loss and state bit for bit
    (more than 20 gradients among the state: the backward pass ran)."""
    (l0, s0), (l1, s1) = run_step(plain, tmp, "plain"), run_step(fused, tmp, "fused")
    assert l1 == l0, (l0, l1)
    grads = [k for k in s0 if k.endswith(".grad")]
    assert len(grads) > 20
    for k in s0:
        assert np.array_equal(np.asarray(s0[k]), np.asarray(s1[k])), k


@pytest.mark.parametrize("name,batch,hw,tol,layout", [
    ("simplecnn", 4, 32, 1e-5, "nchw"),
    ("resnet18", 4, 64, 1e-5, "nchw"),
    ("resnet18", 4, 64, 1e-5, "nhwc"),
    ("mobilenet_v2", 4, 64, 1e-5, "nchw")])
def test_fuse_preserves_step(tmp_path, name, batch, hw, tol, layout):
    seed = 2 if name == "mobilenet_v2" else 0
    model = build_model(name, 10, seed=seed)
    for m in model.modules():
        if m.__class__.__name__ == "Dropout":
            m.p = 0.0
        if m.__class__.__name__ == "BatchNorm2d" and name == "mobilenet_v2":
            m.eps = 1e-3
    onnx = tmp_path / "m.onnx"
    export_onnx(model, str(onnx), (batch, 3, hw, hw), training=True, opset=13)
    rng = np.random.RandomState(seed)
    np.save(tmp_path / "x.npy", rng.rand(batch, 3, hw, hw).astype(np.float32))
    np.save(tmp_path / "y.npy", rng.randint(0, 10, size=batch).astype(np.int64))
    base = tmp_path / "base.mlir"
    subprocess.run([tool("cnnc"), str(onnx), "--train", "-O0", "--optimizer", "none",
                    "--emit", "mlir", "-o", str(base)], check=True)
    fused = tmp_path / "fused.mlir"
    before = (["--cnn-layout"] if layout.startswith("nhwc") else []) + \
        (["--cnn-precision"] if layout.endswith("f16") else [])
    if before:
        # The step before cnn-fuse runs in the same layout and precision.
        pre = tmp_path / "pre.mlir"
        subprocess.run([tool("cnnc-opt"), str(base)] + before + ["-o", str(pre)], check=True)
        base = pre
    subprocess.run([tool("cnnc-opt"), str(base), "--cnn-fuse", "-o", str(fused)], check=True)
    text = fused.read_text()
    assert "cnn.fused_" in text
    if name == "simplecnn":
        assert text.count("cnn.fused_conv2d") == 4  # 2 in @forward, 2 in @train_step
    if name == "resnet18":
        # Each block's first BN-ReLU gradient fuses, with the ReLU mask
        # recomputed from x (the ReLU output is that BN's normalization).
        assert "cnn.batch_norm_stats" in text
        assert "cnn.fused_batch_norm_affine_relu_grad" in text
    l0, s0 = run_step(base, tmp_path, "base")
    l1, s1 = run_step(fused, tmp_path, "fused")
    assert abs(l1 - l0) <= tol * abs(l0)
    worst = 0.0
    for k, v in s0.items():
        a, b = np.asarray(s1[k], np.float64), np.asarray(v, np.float64)
        # Tensors that are zero in exact arithmetic (the bias gradient of a
        # BN followed by another BN, running means of zero-mean data) hold
        # only rounding noise: compare those against a 1e-3 floor.
        scale = max(np.max(np.abs(b)), 1e-3)
        worst = max(worst, float(np.max(np.abs(a - b)) / scale))
    print("%s %s: %d tensors, worst rel %.2e" % (name, layout, len(s0), worst))
    assert worst <= tol


def assert_recompute_matches_stored(base, pre, tmp):
    """cnn-fuse after `pre` on `base`, with recompute-relu-mask=true and
    =false: one reference step of each gives the same loss and state bit for
    bit. Returns the two fused steps' text by the option's value."""
    steps, texts = {}, {}
    for recompute in ("true", "false"):
        out = tmp / ("fused-%s.mlir" % recompute)
        subprocess.run([tool("cnnc-opt"), str(base)] + pre +
                       ["--cnn-fuse=recompute-relu-mask=%s" % recompute, "-o", str(out)],
                       check=True)
        texts[recompute] = out.read_text()
        steps[recompute] = run_step(out, tmp, recompute)
    (l0, s0), (l1, s1) = steps["false"], steps["true"]
    assert l0 == l1
    assert s0.keys() == s1.keys()
    for k in s0:
        assert np.array_equal(np.asarray(s0[k]), np.asarray(s1[k])), k
    return texts


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_recomputed_relu_mask_is_the_stored_one(tmp_path, precision):
    """fused_batch_norm_affine_relu_grad recomputes the ReLU mask as
    round(x * alpha + beta) > 0, rounded to the stored type as the forward's
    ReLU output was: the step must be bit-identical to the fused step that
    reads the stored output (cnn-fuse recompute-relu-mask=false), in f32 and
    in f16. (Leaving out the rounding only matters where 0 < x * alpha +
    beta < 2^-25, which this input does not reach: the rounding is checked
    by the GPU runs against PyTorch, not here.)"""
    onnx = exported_with_batch(tmp_path, "resnet18", 1, (4, 3, 64, 64))
    base = training_ir(onnx, tmp_path / "base.mlir")
    pre = ["--cnn-layout"] + (["--cnn-precision"] if precision == "fp16" else [])
    texts = assert_recompute_matches_stored(base, pre, tmp_path)
    for recompute, text in texts.items():
        assert ("cnn.fused_batch_norm_affine_relu_grad" in text) == (recompute == "true")


@pytest.mark.parametrize("precision,layout", [("fp16", "nchw"), ("fp32", "nhwc")])
def test_sync_bn_recomputed_relu_mask_is_the_stored_one(tmp_path, precision, layout):
    """The sync-bn step (cnn-data-parallel sync-bn, world size 1, so that the
    reference interpreter runs it as one rank) with the ReLU mask recomputed
    from x in the gradient sums and in the input gradient
    (fused_batch_norm_affine_relu_grad_sums, each of ResNet-18's 9 BN + ReLU)
    is bit-identical to the step that stores the masked gradient
    (recompute-relu-mask=false)."""
    onnx = exported_with_batch(tmp_path, "resnet18", 1, (4, 3, 64, 64))
    base = training_ir(onnx, tmp_path / "base.mlir")
    pre = (["--cnn-layout"] if layout == "nhwc" else []) + \
        (["--cnn-precision"] if precision == "fp16" else []) + \
        ["--cnn-data-parallel=sync-bn=true world-size=1"]
    texts = assert_recompute_matches_stored(base, pre, tmp_path)
    for recompute, text in texts.items():
        assert text.count("cnn.fused_batch_norm_affine_relu_grad_sums") == \
            (9 if recompute == "true" else 0)


@pytest.mark.parametrize("name,layout", [("resnet18", "nhwc"), ("resnet18", "nchw")])
def test_remat_preserves_step_and_lowers_the_plan(tmp_path, name, layout):
    """cnn-remat recomputes BN-apply + ReLU outputs (and the stem's input
    padding) in the backward pass: the step is bit-for-bit the fused one, and
    the static plan's training temporaries shrink."""
    batch, hw = 4, 64
    model = build_model(name, 10, seed=0)
    onnx = tmp_path / "m.onnx"
    export_onnx(model, str(onnx), (batch, 3, hw, hw), training=True, opset=13)
    rng = np.random.RandomState(0)
    np.save(tmp_path / "x.npy", rng.rand(batch, 3, hw, hw).astype(np.float32))
    np.save(tmp_path / "y.npy", rng.randint(0, 10, size=batch).astype(np.int64))
    base = tmp_path / "base.mlir"
    subprocess.run([tool("cnnc"), str(onnx), "--train", "-O0", "--optimizer", "none",
                    "--emit", "mlir", "-o", str(base)], check=True)
    passes = (["--cnn-layout"] if layout == "nhwc" else []) + [
        "--cnn-fuse", "--cnn-lower-elementwise"]
    fused, remat = tmp_path / "fused.mlir", tmp_path / "remat.mlir"
    subprocess.run([tool("cnnc-opt"), str(base)] + passes + ["-o", str(fused)], check=True)
    subprocess.run([tool("cnnc-opt"), str(fused), "--cnn-remat", "-o", str(remat)], check=True)
    n = remat.read_text().count("cnn.remat")
    # ResNet-18's 8 blocks: the first BN-ReLU of each block and every other
    # block output are recomputed (at least one clone per block).
    assert n >= 8
    l0, s0 = run_step(fused, tmp_path, "fused")
    l1, s1 = run_step(remat, tmp_path, "remat")
    assert l0 == l1
    assert s0.keys() == s1.keys()
    for k in s0:
        assert np.array_equal(np.asarray(s0[k]), np.asarray(s1[k])), k

    def peak(*flags):
        # The GPU pipeline's plan at batch 64 (at batch 4 the weights and
        # their gradients dominate it), with SGD.
        out = subprocess.run([tool("cnnc"), str(onnx), "--train", "--target", "gpu",
                              "--layout", layout, "--batch", "64", "--emit", "mlir"] + list(flags),
                             check=True, capture_output=True, text=True).stdout
        return int(out.split("cnn.train_peak_bytes = ")[1].split(" ")[0])
    before, after = peak(), peak("--remat")
    print("%s %s: %d clones, training temporaries %d -> %d bytes" % (name, layout, n, before, after))
    # (0.943x on the NHWC step since cnn-max-pool-index stopped keeping the
    # stem's pooled input: what remat saves is the block outputs alone.)
    assert after < 0.95 * before




def test_conv_remat_keeps_step(tmp_path):
    """cnn-remat with a budget recomputes ResNet-50's expanding 1x1
    convolutions (each bottleneck's conv3, the first shortcut) in the
    backward pass before any elementwise activation (1.25 bytes of traffic
    per byte freed against 3): on the NHWC step with cnn-conv-stats (the
    convolutions carry their BN statistics and prologue), the step is bit
    for bit the one without recomputation. (f32: at a size the interpreter
    runs in seconds, 32x32, the f16 step without loss scaling overflows.)"""
    onnx = exported_with_batch(tmp_path, "resnet50", 7, (2, 3, 32, 32))
    base = training_ir(onnx, tmp_path / "base.mlir")
    fused, remat = tmp_path / "fused.mlir", tmp_path / "remat.mlir"
    subprocess.run([tool("cnnc-opt"), str(base), "--cnn-layout", "--canonicalize", "--cse",
                    "--cnn-fuse", "--cnn-conv-stats=any-precision=true",
                    "--cnn-lower-elementwise", "-o", str(fused)], check=True)
    subprocess.run([tool("cnnc-opt"), str(fused), "--cnn-remat=budget-mb=1", "-o",
                    str(remat)], check=True)
    clones = [l for l in remat.read_text().splitlines() if "cnn.remat" in l]
    convs = [l for l in clones if "= cnn.fused_conv2d_stats" in l]
    # 15 of the 16 conv3 (layer4.2's output is read by the backward pass
    # right after the forward: no gap of min-gap ops) and layer1.0's
    # shortcut (64 -> 256 channels); no 3x3, no stem.
    assert len(convs) == 16, len(convs)
    assert all("x1x1x" in l.split(":")[-1] for l in convs)
    assert len(clones) > len(convs)  # then elementwise ones, up to 1 MiB
    assert_same_step(fused, remat, tmp_path)



def test_default_remat_convs_lowers_the_plan(tmp_path):
    """The GPU pipeline recomputes expanding 1x1 convolutions by default
    (--remat-convs: 9 % of the stored activations, cheapest first): on
    ResNet-50's f16 NHWC step the largest conv3 outputs are recomputed, no
    elementwise op is, and the plan's training temporaries shrink by at
    least 7 %; --remat-convs=false recomputes nothing."""
    model = build_model("resnet50", 10, seed=0)
    onnx = tmp_path / "m.onnx"
    export_onnx(model, str(onnx), (2, 3, 64, 64), training=True, opset=13)

    def step(*flags):
        return subprocess.run([tool("cnnc"), str(onnx), "--train", "--target", "gpu",
                               "--batch", "32", "--emit", "mlir"] + list(flags),
                              check=True, capture_output=True, text=True).stdout

    def peak(text):
        return int(text.split("cnn.train_peak_bytes = ")[1].split(" ")[0])
    on, off = step(), step("--remat-convs=false")
    clones = [l for l in on.splitlines() if "cnn.remat" in l]
    assert clones and all("= cnn.fused_conv2d_stats" in l for l in clones), clones
    assert "cnn.remat" not in off
    print("resnet50 b32 64x64: %d conv clones, training temporaries %d -> %d bytes" % (
        len(clones), peak(off), peak(on)))
    assert peak(on) <= 0.93 * peak(off)



def compare_conv_stats(tmp_path, onnx, x, precision, tag):
    """Runs the NHWC step of `onnx` after cnn-fuse, without and with
    cnn-conv-stats, on the reference interpreter; returns the IR with the
    rewrite and both (loss, state) pairs."""
    np.save(tmp_path / "x.npy", x)
    base = training_ir(onnx, tmp_path / (tag + "-base.mlir"))
    fused, stats = tmp_path / (tag + "-fused.mlir"), tmp_path / (tag + "-stats.mlir")
    pre = ["--cnn-layout"] + (["--cnn-precision"] if precision == "fp16" else [])
    subprocess.run([tool("cnnc-opt"), str(base)] + pre +
                   ["--canonicalize", "--cse", "--cnn-fuse", "-o", str(fused)], check=True)
    # any-precision: the CUDA target rewrites f16 steps only; the
    # interpreter runs the f32 form too.
    subprocess.run([tool("cnnc-opt"), str(fused), "--cnn-conv-stats=any-precision=%s" %
                    ("true" if precision == "fp32" else "false"), "-o", str(stats)],
                   check=True)
    return (stats.read_text(), run_step(fused, tmp_path, tag + "-fused"),
            run_step(stats, tmp_path, tag + "-stats"))


def max_rel(s0, s1, k):
    a, b = np.asarray(s1[k], np.float64), np.asarray(s0[k], np.float64)
    return float(np.max(np.abs(a - b))) / max(float(np.max(np.abs(b))), 1e-3)


@pytest.mark.parametrize("precision,tol", [("fp32", 2e-5), ("fp16", 2e-2)])
def test_conv_stats_keeps_step(tmp_path, precision, tol):
    """cnn-conv-stats on conv -> BN -> ReLU -> conv -> BN -> pool ->
    linear, a step without max-pool choices, so its gradients are nearly
    smooth functions of the BN statistics: fused_conv2d_stats +
    batch_norm_finalize (variance from E[x^2] - E[x]^2 of f32 sums), the
    second convolution with the BN-apply + ReLU as its prologue (and the
    normalized tensor recomputed for its filter gradient), must give
    cnn-fuse's step (two-pass shifted sums) within `tol`: 2e-5 in f32; in
    f16 a statistic that moves by an ulp moves f16 roundings, 2e-2."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(5)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(8, 16, 3, padding=1, bias=False), torch.nn.BatchNorm2d(16),
        torch.nn.ReLU(), torch.nn.Conv2d(16, 24, 3, stride=2, padding=1, bias=False),
        torch.nn.BatchNorm2d(24), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
        torch.nn.Linear(24, 10))
    onnx = tmp_path / "m.onnx"
    export_onnx(model, str(onnx), (8, 8, 16, 16), training=True, opset=13)
    rng = np.random.RandomState(5)
    np.save(tmp_path / "y.npy", rng.randint(0, 10, size=8).astype(np.int64))
    # A channel mean of several standard deviations, as conv outputs have.
    x = (rng.randn(8, 8, 16, 16) + 3.0).astype(np.float32)
    text, (l0, s0), (l1, s1) = compare_conv_stats(tmp_path, onnx, x, precision, "s")
    assert text.count("= cnn.batch_norm_finalize") == 2
    assert text.count("= cnn.fused_conv2d_stats") == 2
    assert text.count("operandSegmentSizes = array<i32: 1, 1, 1, 1>") == 1
    # The second convolution's filter gradient takes the prologue too.
    assert text.count("= cnn.fused_conv2d_bwd_filter") == 1
    assert "cnn.batch_norm_stats" not in text
    assert abs(l1 - l0) <= tol * abs(l0), (l0, l1)
    worst = max(max_rel(s0, s1, k) for k in s0)
    print("conv-stats %s: %d tensors, worst rel %.2e" % (precision, len(s0), worst))
    assert any(k.endswith(".grad") for k in s0) and worst <= tol


def test_conv_stats_resnet18_forward(tmp_path):
    """Every BN of ResNet-18's f16 NHWC step takes its statistics from the
    convolution before it (the stem's input is channel-padded to 4), the
    second convolution of each of the 8 blocks takes the first BN-apply +
    ReLU as its prologue, and
    the forward pass keeps its numbers: the loss and all running
    statistics within 2e-3 (f16: a statistic that moves in its last bits
    flips the rounding of some normalized values, 1 ulp = 1e-3, and the
    flips add up over 17 layers; measured 5.5e-4 and 8.3e-4). Its gradients
    are not compared: at a batch the interpreter can run, ReLU and max-pool
    choices flip with the last bit of a statistic; the f32 case above and
    the GPU checks against PyTorch cover them."""
    model = build_model("resnet18", 10, seed=3)
    onnx = tmp_path / "m.onnx"
    export_onnx(model, str(onnx), (4, 3, 64, 64), training=True, opset=13)
    rng = np.random.RandomState(3)
    np.save(tmp_path / "y.npy", rng.randint(0, 10, size=4).astype(np.int64))
    x = rng.rand(4, 3, 64, 64).astype(np.float32)
    text, (l0, s0), (l1, s1) = compare_conv_stats(tmp_path, onnx, x, "fp16", "r")
    assert text.count("= cnn.batch_norm_finalize") == 20
    assert text.count("= cnn.fused_conv2d_stats") == 20
    assert text.count("operandSegmentSizes = array<i32: 1, 1, 1, 1>") == 8
    assert text.count("= cnn.fused_conv2d_bwd_filter") == 8
    assert "cnn.batch_norm_stats" not in text
    running = [k for k in s0 if "running" in k]
    print("resnet18 conv-stats: loss %.6f vs %.6f, running stats worst rel %.2e" % (
        l1, l0, max(max_rel(s0, s1, k) for k in running)))
    assert abs(l1 - l0) <= 2e-3 * abs(l0), (l0, l1)
    assert len(running) == 40
    for k in running:
        assert max_rel(s0, s1, k) <= 2e-3, k


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_dgrad_epilogue_keeps_step(tmp_path, precision):
    """cnn-dgrad-epilogue on ResNet-18's NHWC step: the gradient at the input
    of blocks 2-8 (a block output's ReLU: relu_grad(conv_bwd_data + the
    shortcut's gradient, y), the downsampling blocks' two convolution
    gradients summed) becomes fused_conv2d_bwd_data, 7 of them, and the
    step keeps its numbers exactly on the reference interpreter (the fused
    op rounds as the unfused ops store; the CUDA target's cuDNN graph keeps
    f32 and is checked against PyTorch on the GPU)."""
    onnx = exported_with_batch(tmp_path, "resnet18", 4, (4, 3, 64, 64))
    base = training_ir(onnx, tmp_path / "base.mlir")
    pre = ["--cnn-layout"] + (["--cnn-precision"] if precision == "fp16" else [])
    plain, fused = tmp_path / "plain.mlir", tmp_path / "fused.mlir"
    subprocess.run([tool("cnnc-opt"), str(base)] + pre +
                   ["--canonicalize", "--cse", "--cnn-fuse", "-o", str(plain)], check=True)
    subprocess.run([tool("cnnc-opt"), str(base)] + pre +
                   ["--canonicalize", "--cse", "--cnn-dgrad-epilogue=any-precision=true",
                    "--cnn-fuse", "-o", str(fused)], check=True)
    text = fused.read_text()
    assert text.count("= cnn.fused_conv2d_bwd_data") == 7
    assert_same_step(plain, fused, tmp_path)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_max_pool_index_keeps_step(tmp_path, precision):
    """cnn-max-pool-index on ResNet-18's NHWC step after cnn-fuse and
    cnn-conv-stats: the stem's pooling records each window's argmax and
    takes the BN apply + ReLU as its prologue (the normalized tensor is
    gone: the BN gradient recomputes its ReLU mask), the pooling gradient
    routes by the index and, with grad-fusion, is gathered inside the stem's
    BN + ReLU gradient (fused_max_pool2d_batch_norm_relu_grad). Both forms
    keep the step's numbers exactly on the reference interpreter (the same
    maxima and the same sums in the same order). The eval forward's pooling
    stays plain."""
    onnx = exported_with_batch(tmp_path, "resnet18", 5, (4, 3, 64, 64))
    base = training_ir(onnx, tmp_path / "base.mlir")
    pre = ["--cnn-layout"] + (["--cnn-precision"] if precision == "fp16" else []) + [
        "--canonicalize", "--cse", "--cnn-fuse", "--cnn-conv-stats=any-precision=true"]
    plain, indexed, fused = (tmp_path / f"{n}.mlir" for n in ("plain", "indexed", "fused"))
    subprocess.run([tool("cnnc-opt"), str(base)] + pre + ["-o", str(plain)], check=True)
    subprocess.run([tool("cnnc-opt"), str(plain), "--cnn-max-pool-index=grad-fusion=false",
                    "-o", str(indexed)], check=True)
    subprocess.run([tool("cnnc-opt"), str(plain), "--cnn-max-pool-index", "-o", str(fused)],
                   check=True)
    for path, index_grads, fused_grads in ((indexed, 1, 0), (fused, 0, 1)):
        text = path.read_text()
        assert text.count("= cnn.fused_max_pool2d ") == 1
        assert "operandSegmentSizes = array<i32: 1, 1, 1>" in text  # the prologue
        assert text.count("= cnn.max_pool2d_index_grad") == index_grads
        assert text.count("= cnn.fused_max_pool2d_batch_norm_relu_grad") == fused_grads
        assert "cnn.max_pool2d_grad" not in text
        assert text.count("= cnn.max_pool2d ") == 1  # @forward's
    l0, s0 = run_step(plain, tmp_path, "plain")
    grads = [k for k in s0 if k.endswith(".grad")]
    assert len(grads) > 20
    for path in (indexed, fused):
        l1, s1 = run_step(path, tmp_path, path.stem)
        assert l1 == l0, (path.stem, l0, l1)
        for k in s0:
            assert np.array_equal(np.asarray(s0[k]), np.asarray(s1[k])), (path.stem, k)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_dual_bn_grad_keeps_step(tmp_path, precision):
    """cnn-fuse's dual BatchNorm gradient on ResNet-18's NHWC step: the
    downsampling blocks of layers 2-4 send one gradient into two
    BatchNorms (the block's last and the shortcut's), and each pair becomes
    one fused_dual_batch_norm_grad. The step keeps its numbers bit for bit
    on the reference interpreter against cnn-fuse with dual-bn-grad=false
    (the same sums in the same order)."""
    onnx = exported_with_batch(tmp_path, "resnet18", 6, (4, 3, 64, 64))
    base = training_ir(onnx, tmp_path / "base.mlir")
    pre = ["--cnn-layout"] + (["--cnn-precision"] if precision == "fp16" else []) + [
        "--canonicalize", "--cse"]
    plain, fused = tmp_path / "plain.mlir", tmp_path / "fused.mlir"
    subprocess.run([tool("cnnc-opt"), str(base)] + pre +
                   ["--cnn-fuse=dual-bn-grad=false", "-o", str(plain)], check=True)
    subprocess.run([tool("cnnc-opt"), str(base)] + pre + ["--cnn-fuse", "-o", str(fused)],
                   check=True)
    assert "cnn.fused_dual_batch_norm_grad" not in plain.read_text()
    text = fused.read_text()
    assert text.count("= cnn.fused_dual_batch_norm_grad") == 3
    assert text.count("= cnn.batch_norm_grad") == plain.read_text().count(
        "= cnn.batch_norm_grad") - 6
    assert_same_step(plain, fused, tmp_path)


@pytest.mark.parametrize("precision,optimizer", [("fp16", "sgd"), ("fp32", "adam")])
def test_param_format_keeps_steps(tmp_path, precision, optimizer):
    """cnn-param-format stores the filters and their optimizer state as the
    NHWC convolution reads them (K, R, S, C'; in f16 conv1's 3 channels
    padded to 8): three training steps on the reference interpreter, which converts
    the state to and from the public K, C, R, S form at each step, give
    bit-identical losses, weights and optimizer state (the pass only moves
    data: the same arithmetic runs in the same order)."""
    onnx = exported_with_batch(tmp_path, "simplecnn", 3, (4, 3, 32, 32))
    opt = ["--optimizer", optimizer] + (["--momentum", "0.9"] if optimizer == "sgd" else [])
    base = training_ir(onnx, tmp_path / "base.mlir", opt)
    pre = ["--cnn-layout"] + (["--cnn-precision"] if precision == "fp16" else []) + [
        "--canonicalize", "--cse"]
    a, b = tmp_path / "a.mlir", tmp_path / "b.mlir"
    subprocess.run([tool("cnnc-opt"), str(base)] + pre + ["-o", str(a)], check=True)
    subprocess.run([tool("cnnc-opt"), str(a), "--cnn-param-format", "-o", str(b)], check=True)
    text = b.read_text()
    assert text.count("cnn.public_shape = array<i64: 16, 3, 3, 3>") >= 3  # param, state, result
    # f16 pads conv1's 3 input channels to 8 (Tensor Cores); f32 does not.
    stored = "16x3x3x8" if precision == "fp16" else "16x3x3x3"
    assert "tensor<%sxf32> {cnn.param = \"conv1.weight\"" % stored in text

    (l0, s0), (l1, s1) = run_steps(a, tmp_path, "a", 3), run_steps(b, tmp_path, "b", 3)
    assert len(l0) == 3 and l0 == l1, (l0, l1)
    assert s0.keys() == s1.keys()
    for k in s0:
        assert np.asarray(s0[k]).shape == np.asarray(s1[k]).shape, k
        assert np.array_equal(np.asarray(s0[k]), np.asarray(s1[k])), k
    print("param-format %s %s: losses %s, %d state tensors identical" % (
        precision, optimizer, l1, len(s1)))

    # A weights file whose conv1.weight does not have the public shape the
    # stored form records: one diagnostic naming it, a non-zero exit.
    from cnnc.cnnw import write_cnnw
    bad = {k: np.asarray(v) for k, v in read_cnnw(str(base) + ".cnnw").items()}
    bad["conv1.weight"] = np.zeros((16, 3, 3, 2), np.float32)
    write_cnnw(str(tmp_path / "bad.cnnw"), bad)
    badir = tmp_path / "bad.mlir"
    badir.write_text(text.replace(str(base) + ".cnnw", str(tmp_path / "bad.cnnw")))
    p = subprocess.run([tool("cnnc"), str(badir), "--train", "--optimizer", "none",
                        "--run-reference", "--steps", "1", "--input", str(tmp_path / "x.npy"),
                        "--labels", str(tmp_path / "y.npy")], capture_output=True, text=True)
    assert p.returncode != 0
    assert "conv1.weight" in p.stderr and "shape" in p.stderr, p.stderr
    # It names the shape given and the (public) shape expected.
    assert "(16x3x3x2, expected 16x3x3x3)" in p.stderr, p.stderr
    assert "Stack dump" not in p.stderr and "Assertion" not in p.stderr, p.stderr
