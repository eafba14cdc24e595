"""Training from image folders and .npy arrays on the CPU reference
interpreter (the same data layer and loop as the GPU executable).

* A tiny torchvision ImageFolder (train/ + val/, JPEG and PNG written with
  PIL): one epoch with --eval-every, a cosine schedule with warmup and
  --log-json. The per-step lr equals torch.optim.lr_scheduler's
  SequentialLR(LinearLR, CosineAnnealingLR); the eval lines count every
  validation image; the JSON lines mirror the printed lines.
* `cnnc train` without a GPU keeps the trained weights (<-o>.trained.cnnw).
* .npy arrays: a directory with train_x/train_y/val_x/val_y and a single
  images.npy + --labels.
* Bad data exits 1 with one error line naming the offending file: a corrupt
  JPEG, an empty folder, a label out of range, mismatched npy lengths.
"""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
Image = pytest.importorskip("PIL.Image")
from cnnc import train_check as tc  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

BATCH = 8


@pytest.fixture(scope="module")
def model8(tmp_path_factory):
    """SimpleCNN (10 classes) exported in training mode for batch 8, 32x32."""
    path = tmp_path_factory.mktemp("simplecnn") / "simplecnn.onnx"
    tc.export_training(tc.make_model("simplecnn", seed=0), path, (BATCH, 3, 32, 32))
    return path


def make_folder(root, classes, per_class, seed):
    """root/<class>/<i>.jpg|png: class-coloured noise of varying sizes."""
    rng = np.random.default_rng(seed)
    for k, cls in enumerate(classes):
        os.makedirs(os.path.join(root, cls), exist_ok=True)
        for i in range(per_class):
            h, w = rng.integers(36, 64, size=2)
            img = rng.integers(0, 64, size=(h, w, 3)).astype(np.uint8)
            img[..., k % 3] += 160
            ext = "png" if i % 3 == 0 else "jpg"
            Image.fromarray(img).save(os.path.join(root, cls, "%d.%s" % (i, ext)))


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("imagefolder"))
    make_folder(os.path.join(root, "train"), ["cat", "dog", "eel"], 8, 1)  # 24
    make_folder(os.path.join(root, "val"), ["cat", "dog", "eel"], 3, 2)  # 9
    return root


def torch_lrs(base, warmup, total, steps):
    p = [torch.nn.Parameter(torch.zeros(1))]
    opt = torch.optim.SGD(p, lr=base)
    sched = torch.optim.lr_scheduler.SequentialLR(
        opt, [torch.optim.lr_scheduler.LinearLR(opt, 1.0 / warmup, 1.0, warmup - 1),
              torch.optim.lr_scheduler.CosineAnnealingLR(opt, total - warmup)], [warmup])
    out = []
    for _ in range(steps):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


def error_line(r, must_contain):
    assert r.returncode == 1, (r.returncode, r.stdout[-2000:], r.stderr)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, "expected one error line, got:\n" + r.stderr
    assert "error" in lines[0] and must_contain in lines[0], lines[0]
    print("\nMEASURED error line:", lines[0])
    return lines[0]


def test_imagefolder_epochs_eval_schedule_json(cnnc, model8, folder, tmp_path):
    log = tmp_path / "log.jsonl"
    state = tmp_path / "state.cnnw"
    # 2 epochs of 24 images = 6 steps; eval after epoch 1 (step 3) and at the end.
    r = tc.run_cnnc(cnnc, model8, "--train", "--run-reference", "--optimizer", "sgd",
                    "--lr", "0.05", "--data", folder, "--epochs", 2,
                    "--lr-schedule", "cosine", "--warmup-steps", 2,
                    "--eval-every-epochs", 1, "--workers", 2, "--log-json", log,
                    "--save-state", state, "--seed", 3)
    assert r.returncode == 0, r.stderr
    print(r.stdout)
    assert re.search(r"^data: ImageFolder .*/train: 3 classes, 24 images, "
                     r"RandomResizedCrop\+flip; 2 workers; normalization mean "
                     r"0.485,0.456,0.406 std 0.229,0.224,0.225$", r.stdout, re.M), r.stdout
    assert re.search(r"^validation: ImageFolder .*/val: 3 classes, 9 images", r.stdout, re.M)
    assert "schedule: cosine (lr 0.05 -> 0 over 4 steps), linear warmup 2 steps; 6 steps" \
        in r.stdout
    steps = [l for l in r.stdout.splitlines() if l.startswith("step ")]
    assert len(steps) == 6, r.stdout
    evals = re.findall(r"^eval step (\d+) epoch ([0-9.]+): top-1 [0-9.]+% \((\d+)/(\d+)\) "
                       r"top-5 [0-9.]+% \((\d+)/(\d+)\)$", r.stdout, re.M)
    assert [int(e[0]) for e in evals] == [3, 6], r.stdout
    for e in evals:
        assert int(e[3]) == 9 and int(e[5]) == 9 and int(e[4]) == 9  # 3 classes: top-5 = all
    records = [json.loads(l) for l in open(log)]
    train = [x for x in records if x["type"] == "train"]
    ev = [x for x in records if x["type"] == "eval"]
    assert [x["step"] for x in train] == list(range(1, 7))
    assert [x["step"] for x in ev] == [3, 6]
    assert train[2]["epoch"] == 1.0 and ev[1]["epoch"] == 2.0
    want = torch_lrs(0.05, 2, 6, 6)
    got = [x["lr"] for x in train]
    print("\nMEASURED lr cnnc", got, "torch", want)
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=0)
    for line, x in zip(steps, train):
        assert line.startswith("step %d loss %.7g epoch %.2f lr %.6g " %
                               (x["step"], x["loss"], x["epoch"], x["lr"])), (line, x)
        assert np.isfinite(x["loss"]) and x["img_per_s"] > 0
    assert os.path.getsize(state) > 0


def test_same_seed_same_run_any_workers(cnnc, model8, folder, tmp_path):
    """Augmentation is seeded per sample: 0 or 3 workers give the same losses."""
    def losses(workers):
        r = tc.run_cnnc(cnnc, model8, "--train", "--run-reference", "--data", folder,
                        "--steps", 3, "--workers", workers, "--seed", 7)
        assert r.returncode == 0, r.stderr
        return [float(v) for _, v in tc.STEP_RE.findall(r.stdout)]
    a, b = losses(0), losses(3)
    assert len(a) == 3 and a == b, (a, b)


def test_cnnc_train_keeps_weights_without_gpu(cnnc, model8, folder, tmp_path):
    out = tmp_path / "mytrain"
    r = subprocess.run([str(cnnc), "train", str(model8), "--train", "--data", folder,
                        "--steps", "2", "-o", str(out)], capture_output=True, text=True,
                       env=dict(os.environ, CNNC_ASSUME_NO_GPU="1"), timeout=600)
    assert r.returncode == 0, r.stderr
    trained = str(out) + ".trained.cnnw"
    assert "trained state written to '%s'" % trained in r.stderr, r.stderr
    assert os.path.getsize(trained) > 0
    assert not [f for f in os.listdir(tmp_path) if ".tmp." in f]


def test_npy_directory_and_single_file(cnnc, model8, tmp_path):
    rng = np.random.default_rng(0)
    d = tmp_path / "npy"
    d.mkdir()
    x = rng.integers(0, 256, size=(20, 32, 32, 3), dtype=np.uint8)  # NHWC
    y = rng.integers(0, 10, size=20).astype(np.int64)
    np.save(d / "train_x.npy", x)
    np.save(d / "train_y.npy", y)
    np.save(d / "val_x.npy", x[:10].transpose(0, 3, 1, 2).astype(np.float32) / 255)  # NCHW f32
    np.save(d / "val_y.npy", y[:10])
    r = tc.run_cnnc(cnnc, model8, "--train", "--run-reference", "--data", d, "--steps", 3)
    assert r.returncode == 0, r.stderr
    assert re.search(r"^data: npy .*train_x.npy \(NHWC uint8, 20 images\)", r.stdout, re.M)
    m = tc.ACC_RE.search(r.stdout)
    assert m and int(m.group(3)) == 10, r.stdout
    r = tc.run_cnnc(cnnc, model8, "--train", "--run-reference", "--data",
                    d / "train_x.npy", "--labels", d / "train_y.npy", "--steps", 2)
    assert r.returncode == 0, r.stderr
    assert len(tc.STEP_RE.findall(r.stdout)) == 2


def test_bad_data_one_error_naming_the_file(cnnc, model8, folder, tmp_path):
    # A corrupt JPEG in an ImageFolder (found when its batch is decoded).
    bad = tmp_path / "bad"
    make_folder(str(bad), ["a", "b"], 4, 5)
    with open(bad / "b" / "1.jpg", "r+b") as f:
        f.truncate(40)
    r = tc.run_cnnc(cnnc, model8, "--train", "--run-reference", "--data", bad, "--epochs", 1)
    error_line(r, "corrupt JPEG %s" % (bad / "b" / "1.jpg"))
    # An empty folder, a class folder without images.
    empty = tmp_path / "empty"
    empty.mkdir()
    r = tc.run_cnnc(cnnc, model8, "--train", "--run-reference", "--data", empty, "--steps", 1)
    error_line(r, str(empty))
    (empty / "cls").mkdir()
    r = tc.run_cnnc(cnnc, model8, "--train", "--run-reference", "--data", empty, "--steps", 1)
    error_line(r, "no .jpg/.jpeg/.png images in class folder %s/cls" % empty)
    # npy: a label out of range, mismatched lengths.
    x = np.zeros((10, 3, 32, 32), np.uint8)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", np.array([0] * 9 + [10], np.int64))
    np.save(tmp_path / "y9.npy", np.zeros(9, np.int64))
    r = tc.run_cnnc(cnnc, model8, "--train", "--run-reference", "--data", tmp_path / "x.npy",
                    "--labels", tmp_path / "y.npy", "--steps", 1)
    error_line(r, "bad label 10 in %s index 9 (num_classes = 10)" % (tmp_path / "y.npy"))
    r = tc.run_cnnc(cnnc, model8, "--train", "--run-reference", "--data", tmp_path / "x.npy",
                    "--labels", tmp_path / "y9.npy", "--steps", 1)
    error_line(r, "have 9 entries but %s has 10 images" % (tmp_path / "x.npy"))
    # Flags: --steps with --epochs, a bad schedule.
    r = tc.run_cnnc(cnnc, model8, "--train", "--run-reference", "--data", folder,
                    "--steps", 1, "--epochs", 1)
    error_line(r, "give --steps or --epochs, not both")
    r = tc.run_cnnc(cnnc, model8, "--train", "--run-reference", "--data", folder,
                    "--steps", 1, "--lr-schedule", "linear")
    error_line(r, "invalid value 'linear' for --lr-schedule")


def test_batch_auto_picks_largest_fitting_plan(cnnc, tmp_path):
    """--batch auto compiles only the planning passes per candidate: the
    chosen batch's plan fits 95 % of the free memory (CNNC_GPU_FREE_MIB
    stands in for nvidia-smi here) and the next candidate's does not."""
    from cnnc.export import export_onnx
    path = tmp_path / "dyn.onnx"
    export_onnx(tc.make_model("simplecnn", seed=0), str(path), (2, 3, 32, 32),
                training=True, dynamic_batch=True)
    env = dict(os.environ, CNNC_GPU_FREE_MIB="1500")
    r = subprocess.run([str(cnnc), str(path), "--train", "--batch", "auto", "--dump-plan"],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    m = re.search(r"cnnc: --batch auto: batch (\d+) \(arena \d+ MiB \+ staging \d+ MiB \+ "
                  r"1024 MiB CUDA context reserve = (\d+) MiB <= 95 % of the 1500 MiB free "
                  r"per CNNC_GPU_FREE_MIB\); batch (\d+) would need (\d+) MiB", r.stderr)
    assert m, r.stderr
    print("\nMEASURED", m.group(0))
    batch, need, nxt, need_next = map(int, m.groups())
    assert need <= 0.95 * 1500 < need_next and batch < nxt <= batch + 8
    # The plan printed is the chosen batch's: its input holds the batch as the
    # first convolution reads it (cnn-input-format): f16, NHWC, 3 channels
    # padded to 8.
    inp = re.search(r"^input\tinput\t(\d+)\t", r.stdout, re.M)
    assert inp and int(inp.group(1)) == batch * 32 * 32 * 8 * 2, r.stdout[:500]
    # Too little memory for batch 1: one error line.
    r = subprocess.run([str(cnnc), str(path), "--train", "--batch", "auto", "--dump-plan"],
                       capture_output=True, text=True,
                       env=dict(os.environ, CNNC_GPU_FREE_MIB="900"), timeout=600)
    error_line(r, "--batch auto: even batch 1 needs")
    # Without a GPU (CPU reference path): a note, the model's batch.
    r = subprocess.run([str(cnnc), "train", str(model_static(tmp_path)), "--train", "--batch",
                        "auto", "--data", "synthetic", "--steps", "1", "-o",
                        str(tmp_path / "t")], capture_output=True, text=True,
                       env=dict(os.environ, CNNC_ASSUME_NO_GPU="1"), timeout=600)
    assert r.returncode == 0, r.stderr
    assert "cnnc: note: --batch auto sizes the batch for a GPU's memory; without one" in r.stderr


def model_static(tmp_path):
    path = tmp_path / "static.onnx"
    tc.export_training(tc.make_model("simplecnn", seed=0), path, (BATCH, 3, 32, 32))
    return path


def test_dump_plan_svg_draws_every_temporary(cnnc, tmp_path):
    """--dump-plan-svg: one rectangle per temporary of the plan that
    --dump-plan prints, with its bytes, offset and live range, inside the
    picture; a well-formed SVG document."""
    import xml.etree.ElementTree as ET
    path = model_static(tmp_path)
    svg = tmp_path / "plan.svg"
    r = tc.run_cnnc(cnnc, path, "--train", "--dump-plan", "--dump-plan-svg", svg)
    assert r.returncode == 0, r.stderr
    temps = {}
    for line in r.stdout.splitlines():
        f = line.split("\t")
        if len(f) >= 6 and f[1] == "temp":
            lo, hi = re.match(r"\[(\d+), (\d+)\]", f[4]).groups()
            temps[f[0]] = (int(f[2]), int(f[3]), int(lo), int(hi))
    assert temps, r.stdout[:1000]
    root = ET.parse(svg).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    drawn = {}
    for rect in root.iter(ns + "rect"):
        title = rect.find(ns + "title")
        if title is None:
            continue
        m = re.match(r"(\S+) \(.*\): (\d+) bytes at (\d+), ops \[(\d+), (\d+)\]$", title.text)
        assert m, title.text
        drawn[m.group(1)] = tuple(int(g) for g in m.groups()[1:])
        x, w = float(rect.get("x")), float(rect.get("width"))
        assert 90 <= x and x + w <= 1180 + 0.01, (x, w)
    print("\nMEASURED %d of %d temporaries drawn (the rest are @forward's)" %
          (len(drawn), len(temps)))
    # Every drawn buffer is the plan's, and @train_step has most of them
    # (gradients; @forward only holds the evaluation's activations).
    for name, v in drawn.items():
        assert temps.get(name) == v, (name, v, temps.get(name))
    assert len(temps) / 2 < len(drawn) < len(temps)
