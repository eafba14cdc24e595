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

Every bench/bench.py flag applies. A model cnnc cannot compile yet prints its
error and keeps PyTorch's rows. The three torch.compile modes take minutes per
model: name a few models per device call, or bound the call with --deadline.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

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


def main(argv=None):
    config = dict(bench.CONFIG, **ZOO)
    return bench.main(zoo_argv(sys.argv[1:] if argv is None else argv), config)


if __name__ == "__main__":
    sys.exit(main())
