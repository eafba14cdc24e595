"""Export helpers: SimpleCNN and torchvision models to ONNX for cnnc.

Used by the tests (test/e2e) and the bench scripts. Works with torch 1.13
(Debian, TorchScript exporter) and newer torch (torch 2.x; pass
``dynamo=True`` to use the dynamo-based exporter where available).

    /usr/bin/python3 -m cnnc.export simplecnn out.onnx --batch 32 [--training]
    /usr/bin/python3 -m cnnc.export resnet50 r50.onnx --training --image-size 160[,128]

The exporter's known-harmless warnings (known_export_warnings) are not
printed; any other warning is.
"""
import argparse
import contextlib
import os
import sys
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F


class SimpleCNN(nn.Module):
    """The small example network of the mixed-precision tutorials.

    input 3x32x32; conv 3->16 (3x3, s1, p1) -> ReLU -> max-pool 2;
    conv 16->32 (3x3, s1, p1) -> ReLU -> max-pool 2; flatten (32*8*8)
    -> linear 2048->128 -> ReLU -> linear 128->num_classes.
    """

    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, kernel_size=3, stride=1, padding=1)
        self.conv2 = nn.Conv2d(16, 32, kernel_size=3, stride=1, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(32 * 8 * 8, 128)
        self.fc2 = nn.Linear(128, num_classes)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        # reshape(size(0), -1) (works for channels_last too): exported as a Shape/Gather/Unsqueeze/Concat chain
        # feeding Reshape, which cnnc folds at import.
        x = x.reshape(x.size(0), -1)
        x = F.relu(self.fc1(x))
        return self.fc2(x)


def build_model(name, num_classes=None, seed=0):
    """A model by name: 'simplecnn', any torchvision.models constructor, or
    'timm:NAME' (timm.create_model, random init, as its default
    drop rates: a benchmark times the model a user would train)."""
    torch.manual_seed(seed)
    if name.lower() == "simplecnn":
        return SimpleCNN(num_classes or 10)
    if name.startswith("timm:"):
        import timm

        kwargs = {"num_classes": num_classes} if num_classes else {}
        return timm.create_model(name[len("timm:"):], pretrained=False, **kwargs)
    import torchvision

    ctor = getattr(torchvision.models, name, None)
    if ctor is None:
        raise ValueError("unknown model '%s'" % name)
    kwargs = {"num_classes": num_classes} if num_classes else {}
    try:
        return ctor(weights=None, **kwargs)
    except TypeError:  # older torchvision
        return ctor(pretrained=False, **kwargs)


def default_input_shape(name, batch, image_size=None):
    """N x 3 x H x W: 32 x 32 for SimpleCNN (its only size: fc1 is sized for
    it), else image_size (H, W), by default 224 x 224."""
    if name.lower() == "simplecnn":
        if image_size is not None and tuple(image_size) != (32, 32):
            raise ValueError("simplecnn takes 32x32 images (its fc1 is sized for "
                             "32 * 8 * 8 features), not --image-size %dx%d" %
                             tuple(image_size))
        return (batch, 3, 32, 32)
    h, w = image_size if image_size is not None else (224, 224)
    return (batch, 3, h, w)


def parse_image_size(text):
    """"H" or "H,W" (also "HxW") -> (H, W) of positive integers."""
    parts = text.replace("x", ",").split(",")
    try:
        hw = [int(p) for p in parts]
    except ValueError:
        hw = []
    if len(hw) == 1:
        hw = hw * 2
    if len(hw) != 2 or min(hw) < 1:
        raise argparse.ArgumentTypeError("expected H or H,W (positive integers), got %r"
                                         % text)
    return tuple(hw)


# Warnings torch.onnx.export prints for every training-mode export that say
# nothing about the model cnnc gets: (category, message regex).
#  - num_batches_tracked += 1 of each BatchNorm is dropped from the traced
#    graph (torch 1.13+: one warning per BatchNorm). cnnc does not use it: the
#    running statistics follow `momentum`, which torchvision's BatchNorm sets.
#  - torch >= 2.9 announces the dynamo exporter when the TorchScript one is
#    asked for; it is asked for on purpose (the dynamo one drops the
#    training-mode BatchNormalization).
KNOWN_EXPORT_WARNINGS = [
    (UserWarning, r"ONNX Preprocess - Removing mutation from node aten::add_ on "
                  r"block input: '[^']*num_batches_tracked'"),
    (DeprecationWarning, r".*legacy TorchScript-based ONNX export"),
    (FutureWarning, r".*legacy TorchScript-based ONNX export"),
]


@contextlib.contextmanager
def known_export_warnings():
    """Hides KNOWN_EXPORT_WARNINGS (by category and message) inside the
    block; every other warning is shown as usual."""
    with warnings.catch_warnings():
        for category, message in KNOWN_EXPORT_WARNINGS:
            warnings.filterwarnings("ignore", message=message, category=category)
        yield


class exportable_stochastic_depth:
    """Context manager: torchvision's StochasticDepth in standard ONNX ops.

    StochasticDepth (EfficientNet, ConvNeXt; torchvision.ops.stochastic_depth)
    draws its per-sample mask with bernoulli_, which the training-mode ONNX
    exporter of torch 1.13 cannot export. While the context is active its
    forward computes the same thing with standard ops: mode "row" is
    ``x * F.dropout(ones([N, 1, ..., 1]), p, training=True)`` -- one keep/drop
    per sample, kept samples scaled by 1 / (1 - p), exactly torchvision's
    ``noise.bernoulli_(1 - p).div_(1 - p)`` -- and mode "batch" the same with
    ones([1, ..., 1]). It exports as Dropout (training_mode) + a broadcasting
    Mul, which cnn-autodiff turns into a cnn.dropout_mask of that shape times
    x. Evaluation (or p = 0) is the identity, as in torchvision. The random
    draws differ from PyTorch's (cnnc has its own counter-based generator),
    the distribution is the same.
    """

    def __enter__(self):
        try:
            from torchvision.ops import StochasticDepth
        except ImportError:  # no torchvision: nothing to patch
            self._cls = None
            return self
        self._cls = StochasticDepth
        self._forward = self._cls.forward

        def forward(module, x):
            if not module.training or module.p == 0.0:
                return x
            if module.mode == "row":
                size = [x.shape[0]] + [1] * (x.dim() - 1)
            else:
                size = [1] * x.dim()
            keep = F.dropout(torch.ones(size, dtype=x.dtype, device=x.device),
                             module.p, training=True)
            return x * keep

        self._cls.forward = forward
        return self

    def __exit__(self, *exc):
        if self._cls is not None:
            self._cls.forward = self._forward
        return False


def export_onnx(model, path, input_shape, training=False, dynamic_batch=False,
                opset=None, dynamo=False, input_name="input",
                output_name="logits"):
    """Exports `model` to `path` and returns the example input used.

    training=True exports the training-mode graph as cnnc expects it:
    BatchNormalization with training_mode=1 (running-stat outputs), Dropout
    with ratio/training_mode inputs, no constant folding.
    """
    x = torch.randn(*input_shape)
    kwargs = dict(input_names=[input_name], output_names=[output_name])
    if dynamic_batch:
        kwargs["dynamic_axes"] = {input_name: {0: "batch"},
                                  output_name: {0: "batch"}}
    if opset is not None:
        kwargs["opset_version"] = opset
    import inspect
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        # torch >= 2.9 defaults to the dynamo exporter, which drops the
        # training-mode BatchNormalization; ask for the one wanted.
        kwargs["dynamo"] = bool(dynamo)
    elif dynamo:
        raise ValueError("this torch has no dynamo-based ONNX exporter")
    if training:
        model.train()
        kwargs["training"] = torch.onnx.TrainingMode.TRAINING
        kwargs["do_constant_folding"] = False
    else:
        model.eval()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with exportable_stochastic_depth(), known_export_warnings():
        torch.onnx.export(model, (x,), path, **kwargs)
    return x


class _ExportBatchNorm(torch.nn.modules.batchnorm._BatchNorm):
    """BatchNorm of any rank (N, C, ...), as SyncBatchNorm accepts."""

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError("expected at least 2-D input (got %d-D)" % input.dim())


def has_sync_batch_norm(model):
    return any(isinstance(m, torch.nn.SyncBatchNorm) for m in model.modules())


def without_sync_batch_norm(model):
    """`model`, or a copy whose torch.nn.SyncBatchNorm layers are plain
    BatchNorm with the same names and state. SyncBatchNorm cannot be traced
    outside a process group; cnnc synchronizes the statistics itself
    (`cnnc --sync-bn`, which cnnc.compile passes for such models)."""
    if not has_sync_batch_norm(model):
        return model
    import copy
    clone = copy.deepcopy(model)

    def swap(parent):
        for name, child in parent.named_children():
            if isinstance(child, torch.nn.SyncBatchNorm):
                bn = _ExportBatchNorm(child.num_features, child.eps, child.momentum,
                                      child.affine, child.track_running_stats)
                # On the layer's device: a model on cuda:LOCAL_RANK under
                # torchrun is traced there (load_state_dict copies values,
                # it does not move the new module).
                state = next(iter(child.state_dict().values()), None)
                if state is not None:
                    bn = bn.to(state.device)
                bn.load_state_dict(child.state_dict())
                bn.train(child.training)
                setattr(parent, name, bn)
            else:
                swap(child)
    swap(clone)
    return clone


def export_for_training(model, example_input, path, opset=None,
                        input_name="input", output_name="logits"):
    """Exports the training graph of `model` for `example_input`'s shape
    to `path` (what cnnc.compile does), leaving the module as it was.

    Each module is exported in its own train/eval mode, as PyTorch's
    training loop would run it (TrainingMode.PRESERVE): a BatchNorm module in
    eval mode becomes an inference-form BatchNormalization, which cnnc's step
    normalizes with the running statistics without updating them (frozen-BN
    fine-tuning); an eval-mode Dropout is the identity. Call model.train()
    first for the usual training graph. TrainingMode.EVAL, the default, would
    also fold BatchNorm into the convolutions (new, unnamed weights), so cnnc
    would train a different network. The export runs the module once, which
    would update BN running statistics and num_batches_tracked: they are
    restored afterwards.
    """
    import inspect
    kwargs = dict(input_names=[input_name], output_names=[output_name],
                  training=torch.onnx.TrainingMode.PRESERVE,
                  do_constant_folding=False)
    if opset is not None:
        kwargs["opset_version"] = opset
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False  # torch 2.x: the TorchScript exporter
    model = without_sync_batch_norm(model)
    modes = [m.training for m in model.modules()]
    saved = {k: v.detach().clone() for k, v in model.state_dict().items()}
    try:
        with torch.no_grad(), known_export_warnings():
            torch.onnx.export(model, (example_input,), path, **kwargs)
    finally:
        with torch.no_grad():
            for k, v in model.state_dict().items():
                v.copy_(saved[k])
        for m, training in zip(model.modules(), modes):
            m.training = training


def export_named(name, path, batch=1, training=False, dynamic_batch=False,
                 opset=None, dynamo=False, num_classes=None, seed=0, image_size=None):
    """build_model + export_onnx; returns (model, example input)."""
    shape = default_input_shape(name, batch, image_size)
    model = build_model(name, num_classes, seed)
    x = export_onnx(model, path, shape,
                    training=training, dynamic_batch=dynamic_batch,
                    opset=opset, dynamo=dynamo)
    return model, x


def main(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m cnnc.export", description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("model", help="simplecnn or a torchvision model name")
    p.add_argument("output", help="where to write the .onnx file")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--training", action="store_true")
    p.add_argument("--dynamic-batch", action="store_true")
    p.add_argument("--opset", type=int, default=None)
    p.add_argument("--dynamo", action="store_true")
    p.add_argument("--num-classes", type=int, default=None)
    p.add_argument("--image-size", type=parse_image_size, default=None, metavar="H[,W]",
                   help="input height and width (default 224; simplecnn: 32 only)")
    args = p.parse_args(argv)
    try:
        default_input_shape(args.model, args.batch, args.image_size)
    except ValueError as e:
        p.error(str(e))
    export_named(args.model, args.output, batch=args.batch,
                 training=args.training, dynamic_batch=args.dynamic_batch,
                 opset=args.opset, dynamo=args.dynamo,
                 num_classes=args.num_classes, image_size=args.image_size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
