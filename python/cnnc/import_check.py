"""Exports models with the installed torch and checks that cnnc imports them.

For every (model, exporter, mode) this exports an ONNX file, runs
`cnnc FILE` (op counts) and `cnnc FILE --run-reference` on a random batch and
compares the result with PyTorch's eval-mode output. Meant for the machines
with a newer torch (2.x, dynamo exporter) than Debian's 1.13:

    python3 -m cnnc.import_check --cnnc build/bin/cnnc --out /tmp/ic \
        --models simplecnn,resnet18 --exporters legacy,dynamo --modes eval,train

Prints one line per case and a summary; exit status 1 if any case failed.
With --keep-failures DIR, failing exports (and a text dump of their graph)
are copied there.
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import time
import traceback

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from cnnc.export import build_model, default_input_shape  # noqa: E402


def export(model, x, path, exporter, training):
    kwargs = dict(input_names=["input"], output_names=["logits"])
    major = int(torch.__version__.split(".")[0])
    if major >= 2:
        kwargs["dynamo"] = exporter == "dynamo"
    elif exporter == "dynamo":
        raise RuntimeError("torch %s has no dynamo exporter" % torch.__version__)
    if training:
        model.train()
        kwargs["training"] = torch.onnx.TrainingMode.TRAINING
        kwargs["do_constant_folding"] = False
    else:
        model.eval()
    torch.onnx.export(model, (x,), path, **kwargs)


def graph_summary(path):
    try:
        import onnx
        m = onnx.load(path, load_external_data=False)
        ops = collections.Counter(n.op_type for n in m.graph.node)
        opset = [(o.domain, o.version) for o in m.opset_import]
        return "opset=%s ops=%s" % (opset, dict(ops))
    except Exception as e:  # noqa: BLE001
        return "onnx summary failed: %s" % e


def run_case(args, name, exporter, mode, outdir):
    tag = "%s_%s_%s" % (name, exporter, mode)
    path = os.path.join(outdir, tag + ".onnx")
    model = build_model(name, seed=0)
    x = torch.randn(*default_input_shape(name, args.batch))
    t0 = time.time()
    export(model, x, path, exporter, mode == "train")
    t_export = time.time() - t0
    # A training export runs as exported: BatchNorm with batch statistics
    # (cnnc refuses training-mode Dropout in a forward run).
    model.train() if mode == "train" else model.eval()
    with torch.no_grad():
        ref = model(x).numpy()
    r = subprocess.run([args.cnnc, path], capture_output=True, text=True)
    if r.returncode:
        return tag, False, "import failed: " + r.stderr.strip()[:1500], path
    counts = collections.Counter(re.findall(r"= (cnn\.[a-z_0-9]+)", r.stdout))
    xin = os.path.join(outdir, tag + ".x.npy")
    yout = os.path.join(outdir, tag + ".y.npy")
    np.save(xin, x.numpy())
    t0 = time.time()
    r = subprocess.run([args.cnnc, path, "--run-reference", "--input", xin,
                        "--output", yout], capture_output=True, text=True)
    t_ref = time.time() - t0
    if r.returncode:
        return tag, False, "reference run failed: " + r.stderr.strip()[:1500], path
    y = np.load(yout)
    if y.shape != ref.shape:
        return tag, False, "shape %s != torch %s" % (y.shape, ref.shape), path
    err = float(np.abs(y - ref).max())
    scale = float(np.abs(ref).max()) or 1.0
    ok = err <= 1e-4 * max(1.0, scale)
    detail = "max|diff|=%.3g (|ref|max=%.3g) export %.1fs ref %.1fs ops=%s" % (
        err, scale, t_export, t_ref, dict(counts))
    return tag, ok, detail, path


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--cnnc", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--models", default="simplecnn,resnet18")
    p.add_argument("--exporters", default="legacy,dynamo")
    p.add_argument("--modes", default="eval,train")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--keep-failures", default=None)
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    print("torch", torch.__version__, flush=True)
    failures = 0
    for name in args.models.split(","):
        for exporter in args.exporters.split(","):
            for mode in args.modes.split(","):
                try:
                    tag, ok, detail, path = run_case(args, name, exporter,
                                                     mode, args.out)
                except Exception:  # noqa: BLE001
                    tag = "%s_%s_%s" % (name, exporter, mode)
                    ok, path = False, None
                    detail = "export failed: " + traceback.format_exc(
                        limit=2)[-1200:]
                print("%-4s %s: %s" % ("ok" if ok else "FAIL", tag, detail),
                      flush=True)
                if path and os.path.exists(path):
                    print("     " + graph_summary(path), flush=True)
                if not ok:
                    failures += 1
                    if args.keep_failures and path and os.path.exists(path):
                        os.makedirs(args.keep_failures, exist_ok=True)
                        if os.path.getsize(path) < 15 << 20:
                            shutil.copy(path, args.keep_failures)
    print("%d case(s) failed" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
