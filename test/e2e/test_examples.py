"""The examples in examples/ run end to end on the CPU path (the reference
interpreter behind cnnc.compile): ResNet-18 from a DataLoader over a
generated ImageFolder of JPEG/PNG images and over CIFAR-10-format binary
files, a few steps each. They must exit 0, draw the loss curve and save the
trained weights as the module's own state_dict (which loads strictly into a
fresh torchvision ResNet-18 and records exactly the steps taken)."""
import os
import re
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")
pytest.importorskip("tqdm")
pytest.importorskip("matplotlib")

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
STEPS = 3


def run_example(script, args, tmp_path):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(ROOT, "python")
    env["CNNC_CACHE_DIR"] = str(tmp_path / "cache")
    out = tmp_path / "out"
    cmd = [sys.executable, os.path.join(ROOT, "examples", script), "--device", "cpu",
           "--max-steps", str(STEPS), "--workers", "0", "--lr", "0.01",
           "--out", str(out)] + args
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    m = re.search(r"first loss ([0-9.]+), last loss ([0-9.]+) over (\d+) steps", p.stdout)
    assert m, p.stdout
    assert int(m.group(3)) == STEPS
    for v in (float(m.group(1)), float(m.group(2))):
        assert 0 < v < 50, p.stdout
    png = (out / "loss.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(out.glob("*.tmp*")), "temporary files left behind"
    return p.stdout, out / "resnet18.pt"


def check_weights(path, num_classes):
    sd = torch.load(path)
    model = torchvision.models.resnet18(num_classes=num_classes)
    model.load_state_dict(sd, strict=True)
    # The trainer's own state (BN statistics counted per step), not the
    # module's untouched initial state.
    assert int(sd["bn1.num_batches_tracked"]) == STEPS
    assert all(torch.isfinite(v).all() for v in sd.values() if v.is_floating_point())


def test_imagefolder_example(tmp_path):
    stdout, weights = run_example(
        "train_imagefolder.py",
        ["--make-demo", str(tmp_path / "shapes"), "--batch", "8", "--image-size", "48"],
        tmp_path)
    assert "in 4 classes" in stdout
    # Both formats were written (and ImageFolder read them).
    files = [f for _, _, fs in os.walk(tmp_path / "shapes") for f in fs]
    assert any(f.endswith(".jpg") for f in files) and any(f.endswith(".png") for f in files)
    assert re.search(r"held-out top-1 accuracy: [01]\.\d+", stdout), stdout
    check_weights(weights, 4)


def test_cifar_example(tmp_path):
    data = os.path.join(ROOT, "data", "generated", "digits")
    if not os.path.exists(os.path.join(data, "data_batch_1.bin")):
        pytest.skip("bundled digits not prepared (scripts/prepare-data.sh)")
    stdout, weights = run_example("train_cifar.py", ["--data", data, "--batch", "8"], tmp_path)
    assert re.search(r"test top-1 accuracy: [01]\.\d+", stdout), stdout
    check_weights(weights, 10)


def test_cifar_example_rejects_a_corrupt_file(tmp_path):
    (tmp_path / "data_batch_1.bin").write_bytes(b"\x01" * 100)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    p = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "train_cifar.py"),
                        "--device", "cpu", "--data", str(tmp_path)],
                       capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode != 0
    assert "not a whole number of 3073-byte CIFAR-10 records" in p.stderr


def test_finetune_example(tmp_path):
    """examples/finetune.py: a 'pretrained' ResNet-18 state_dict (a stand-in
    written by --make-weights), one update of 2 micro-batches with the
    backbone frozen (BN in eval mode), then one with everything trained in
    three param groups, clipped; the saved model and optimizer state_dicts
    load back."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"),
               CNNC_CACHE_DIR=str(tmp_path / "cache"))
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "finetune.py"),
                        "--make-weights", str(tmp_path / "r18.pt"), "--device", "cpu",
                        "--image-size", "32", "--batch", "4", "--frozen-steps", "1",
                        "--steps", "1", "--accumulate", "2", "--out", str(out)],
                       capture_output=True, text=True, timeout=900, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "frozen backbone: first loss" in p.stdout and "unfrozen: first loss" in p.stdout
    assert re.search(r"first loss [0-9.]+, last loss [0-9.]+ over 2 steps", p.stdout), p.stdout
    ckpt = torch.load(out / "finetuned.pt")
    model = torchvision.models.resnet18(num_classes=10)
    model.load_state_dict(ckpt["model"], strict=True)
    # BN counted only the unfrozen phase's 2 micro-batches (eval mode before).
    assert int(ckpt["model"]["bn1.num_batches_tracked"]) == 2
    # The backbone trained in phase 2.
    before = torch.load(tmp_path / "r18.pt")
    assert not torch.equal(ckpt["model"]["conv1.weight"], before["conv1.weight"])
    opt = ckpt["opt"]
    # Three groups, each at its cosine schedule's end (T_max = 1 step).
    assert len(opt["param_groups"]) == 3
    assert all(abs(g["lr"]) < 1e-12 for g in opt["param_groups"])
    assert len(opt["state"]) == len(list(model.parameters()))
    assert all(s["momentum_buffer"] is not None for s in opt["state"].values())
