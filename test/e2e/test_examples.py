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
