"""What the GPU checks against PyTorch share (check_vs_torch.py,
check_zoo.py, check_python_api.py, check_ignore_index.py,
check_finetune_modes.py, check_finetune_optim.py): running the compiler and
the executable, reading losses from the progress lines, the relative error
(of arrays and of torch tensors), the ok/FAIL lines and their count, and the
CIFAR-format batch with the runtime's resize."""
import os
import re
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def require_gpu(name):
    """Exits 77 (ctest's skip) without torch or a CUDA GPU; else puts the
    checkout's python/ on sys.path, turns TF32 off (both sides compute in
    true f32) and returns torch."""
    sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None or not torch.cuda.is_available():
        print("%s: no CUDA GPU (or no torch): skipped" % name)
        sys.exit(77)
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    return torch


def run(cmd, **kw):
    """Runs cmd; returns (stdout + stderr, seconds). A failure raises with
    the tail of the output."""
    t = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise RuntimeError("command failed (%d): %s\n%s" % (
            p.returncode, " ".join(cmd), (p.stdout + p.stderr)[-3000:]))
    return p.stdout + p.stderr, time.time() - t


def losses_of(text):
    """The losses of the executable's progress lines, in step order."""
    return [float(m.group(2)) for m in re.finditer(r"^step (\d+) loss (\S+)", text, re.M)]


# The failed checks of this process (check's FAIL lines).
FAILURES = []


def check(cond, what):
    """Prints `ok    what` or `FAIL  what` and counts the failures."""
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        FAILURES.append(what)


def tensor_rel(a, b, floor=1e-6):
    """max |a - b| / max(max |b|, floor) of two torch tensors on any device,
    in float64."""
    a, b = a.double().cpu(), b.double().cpu()
    return ((a - b).abs().max() / b.abs().max().clamp_min(floor)).item()


def spread_bound(torch_spread, factor=4.0, floor=1e-3):
    """The model-level bound of check_zoo and check_python_api: cnnc's
    farthest tensor (or loss) may lie `factor` times as far as the farthest
    any of PyTorch's own f32 runs puts any tensor, and never less than
    `floor`. A few f32 training steps part by more than rounding on every
    implementation (an element within rounding of a ReLU's zero, Adam's
    sign-like first update), and the difference lands on whichever tensors
    that element feeds; a wrong step is off by O(1)."""
    return max(floor, factor * torch_spread)


def rel(a, b):
    """max |a - b| / max |b|."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def write_cifar(path, images, labels):
    """uint8 images (N, 3, 32, 32) and labels as CIFAR-10 binary records."""
    rec = np.concatenate([labels.astype(np.uint8)[:, None],
                          images.reshape(len(images), -1).astype(np.uint8)], axis=1)
    with open(path, "wb") as f:
        f.write(rec.tobytes())


def adapt(images, h, w):
    """The runtime's nearest-neighbour resize (cnnrt::adaptImages)."""
    sy = (np.arange(h) * images.shape[2]) // h
    sx = (np.arange(w) * images.shape[3]) // w
    return images[:, :, sy][:, :, :, sx]


def skipped_steps_moved(exe, args, init, lead, ckpt):
    """What the first `lead` steps of `exe` (all skipped by loss scaling)
    changed: runs `exe args --steps lead` with a checkpoint after each step
    (`ckpt`, with '{step}') and returns "tensor after step k" for every
    parameter that differs from `init` (name -> initial array, public
    shapes) and every momentum buffer or applied-step count that is not
    zero. BatchNorm running statistics and the loss scale move on a skipped
    step (as in PyTorch) and are not compared."""
    from cnnc.cnnw import read_cnnw
    run([exe, *args, "--steps", str(lead), "--checkpoint", ckpt, "--checkpoint-every", "1"])
    moved = []
    for k in range(1, lead + 1):
        for key, v in read_cnnw(ckpt.replace("{step}", str(k))).items():
            v = np.asarray(v)
            if key.endswith(".momentum_buffer") or key == "optimizer.applied_steps":
                changed = bool(np.any(v))
            elif key in init and not key.endswith(("running_mean", "running_var")):
                changed = not np.array_equal(v.ravel(), np.asarray(init[key]).ravel())
            else:
                continue
            if changed:
                moved.append("%s after step %d" % (key, k))
    return moved
