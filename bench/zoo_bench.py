#!/usr/bin/env python3
"""cnnc vs PyTorch on the torchvision zoo beyond ResNet (GPU machine).

bench/bench.py's rows (cnnc's executable: ms/step and peak GPU memory from
its own report; PyTorch eager f32, AMP + channels_last, torch.compile) for
the models of the issue "every torchvision CNN trains", batch 64 at 224x224:
EfficientNet-B0, MobileNetV3-Large, RegNetY-400MF, DenseNet-121,
ShuffleNetV2 x1.0 and ConvNeXt-Tiny. The export is the legacy (TorchScript)
exporter in training mode at opset 17 (python/cnnc/export.py passes
dynamo=False on torch >= 2.9; StochasticDepth is exported as Dropout + Mul).

  python3 bench/zoo_bench.py --cnnc .carry/cnnc [--models efficientnet_b0,...]
       [--steps 30] [--no-compile]

A model cnnc cannot compile yet prints its error and keeps PyTorch's rows.
torch.compile takes ~1-2 minutes per model: pass --no-compile to stay within
one device call (10 minutes) for all six, or run a few models per call.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench  # noqa: E402

ZOO = {
    "efficientnet_b0": (64, 224),
    "mobilenet_v3_large": (64, 224),
    "regnet_y_400mf": (64, 224),
    "densenet121": (64, 224),
    "shufflenet_v2_x1_0": (64, 224),
    "convnext_tiny": (64, 224),
}


def main():
    bench.CONFIG.update(ZOO)
    argv = sys.argv[1:]
    if not any(a == "--models" or a.startswith("--models=") for a in argv):
        argv += ["--models", ",".join(ZOO)]
    if not any(a == "--steps" or a.startswith("--steps=") for a in argv):
        argv += ["--steps", "30"]
    if not any(a == "--work" or a.startswith("--work=") for a in argv):
        argv += ["--work", "/tmp/cnnc-zoo-bench"]
    sys.argv = [sys.argv[0]] + argv
    bench.main()


if __name__ == "__main__":
    main()
