#!/usr/bin/env python3
"""cnnc vs PyTorch on the torchvision zoo beyond ResNet (GPU machine).

bench/bench.py's rows (cnnc's executable: ms/step and peak GPU memory from
its own report; PyTorch eager AMP + channels_last and the whole training step
under torch.compile in its three modes, each with its own time limit) for
the models of issue 37's zoo table, batch 64 at 224x224, 1000 classes:
EfficientNet-B0, MobileNetV3-Large, ConvNeXt-Tiny, RegNetY-400MF,
DenseNet-121, and ShuffleNetV2 x1.0 when named. The export is the legacy
(TorchScript) exporter in training mode at opset 17 (python/cnnc/export.py
passes dynamo=False on torch >= 2.9; StochasticDepth is exported as Dropout +
Mul).

  python3 bench/zoo_bench.py --cnnc .carry/cnnc [--models efficientnet_b0,...]
       [--steps 30] [--modes ...] [--limits MODE=S,...] [--deadline S] [--no-compile]
       [--zoo timm [--timm-shape BATCH,HW]] [--prebuild-jobs N]

`--zoo timm` times issue 32's timm families instead (test/gpu/timm_zoo.py:
one member per family, random init, timm's default drop rates, 1000
classes; --timm-shape, default 32,224); `--models` then picks among them,
with or without their `timm:` prefix. `--prebuild-jobs N` first exports and
compiles every model's executable, N at a time (cnnc's compile is CPU work:
the GPU is timed only afterwards, one model at a time); compile_s stays each
model's own wall time.

Every bench/bench.py flag applies. A model cnnc cannot compile yet prints its
error and keeps PyTorch's rows. The three torch.compile modes take minutes per
model: name a few models per device call, or bound the call with --deadline.
"""
import argparse
import concurrent.futures
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "test", "gpu"))

import bench  # noqa: E402

# name -> (batch, image size, classes)
ZOO = {
    "efficientnet_b0": (64, 224, 1000),
    "mobilenet_v3_large": (64, 224, 1000),
    "convnext_tiny": (64, 224, 1000),
    "regnet_y_400mf": (64, 224, 1000),
    "densenet121": (64, 224, 1000),
    "shufflenet_v2_x1_0": (64, 224, 1000),
}
# The table; ShuffleNetV2 only when named.
DEFAULT_MODELS = ["efficientnet_b0", "mobilenet_v3_large", "convnext_tiny",
                  "regnet_y_400mf", "densenet121"]


def zoo_argv(argv):
    """bench.py's arguments with the zoo's defaults where argv does not
    set them."""
    def given(flag):
        return any(a == flag or a.startswith(flag + "=") for a in argv)

    argv = list(argv)
    if not given("--models"):
        argv += ["--models", ",".join(DEFAULT_MODELS)]
    if not given("--steps"):
        argv += ["--steps", "30"]
    if not given("--work"):
        argv += ["--work", "/tmp/cnnc-zoo-bench"]
    return argv


def timm_config(shape):
    """`timm:NAME` -> (batch, image size, 1000) for every timm family."""
    from timm_zoo import TIMM_FAMILIES

    batch, hw = shape
    return {"timm:" + n: (batch, hw, 1000) for n in TIMM_FAMILIES}


def _prebuild_one(job):
    name, batch, hw, classes, args, flags = job
    try:
        return name, bench.build_cnnc(name, batch, hw, args, flags, classes), ""
    except Exception as e:  # the timed phase reports it as the row's error
        exe = bench.cnnc_exe_path(name, args, flags)
        os.makedirs(os.path.dirname(exe), exist_ok=True)
        with open(exe + ".error", "w") as f:
            f.write(str(e))
        return name, None, bench.last_error(str(e))


def prebuild(args, config, jobs):
    """Every model's executable, `jobs` compiles at a time, before any
    timing (bench.run_cnnc then finds them: args.prebuilt)."""
    work = []
    for name in args.models:
        batch, hw, classes = config[name]
        for _, flags in args.variants:
            work.append((name, batch, hw, args.classes or classes, args,
                         bench.split_flags(flags)[0]))
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as pool:
        for name, compile_s, err in pool.map(_prebuild_one, work):
            print("prebuilt %s: %s" % (name, "%.1f s" % compile_s if err == "" else err),
                  flush=True)


def select_zoo(argv):
    """zoo_bench's own flags out of argv: (options, bench.py's argv, the
    model table)."""
    own = argparse.ArgumentParser(add_help=False)
    own.add_argument("--zoo", choices=["torchvision", "timm"], default="torchvision")
    own.add_argument("--timm-shape", default="32,224")
    own.add_argument("--prebuild-jobs", type=int, default=0)
    opts, argv = own.parse_known_args(list(argv))
    if opts.zoo == "timm":
        config = timm_config([int(v) for v in opts.timm_shape.split(",")])
        models = None
        for i, a in enumerate(argv):
            if a == "--models" and i + 1 < len(argv):
                models = argv[i + 1]
                argv = argv[:i] + argv[i + 2:]
                break
            if a.startswith("--models="):
                models = a.split("=", 1)[1]
                argv = argv[:i] + argv[i + 1:]
                break
        names = [m if m.startswith("timm:") else "timm:" + m
                 for m in (models.split(",") if models else []) if m] or list(config)
        argv += ["--models", ",".join(names)]
    else:
        config = dict(bench.CONFIG, **ZOO)
    return opts, zoo_argv(argv), config


def main(argv=None):
    opts, argv, config = select_zoo(sys.argv[1:] if argv is None else argv)
    if opts.prebuild_jobs > 0:
        prebuild(bench.parse_args(argv, config), config, opts.prebuild_jobs)
        argv = argv + ["--prebuilt"]
    return bench.main(argv, config)


if __name__ == "__main__":
    sys.exit(main())
