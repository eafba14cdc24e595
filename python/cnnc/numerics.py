"""cnnc.compare: cnnc's numerics against PyTorch, layer by layer.

    report = cnnc.compare(model, x, y)      # rtol=1e-4 by default
    print(report)                           # a table; the first mismatch
    assert report.ok

Forward: the compiled @forward (inference mode: BN running statistics) runs
on the CPU reference interpreter keeping the output of every ONNX node; the
last node of each module's scope ("/layer1/0/conv1/Conv" for layer1.0.conv1,
"/layer1/0/Relu_1" for the block layer1.0) is compared with that module's
output in PyTorch (forward hooks, model.eval()), as is the model's output. Backward: the step compiled
with `--optimizer none` returns the gradient of every parameter for (x, y)
(training mode: batch statistics), compared with PyTorch's autograd; and the
loss. Relative error = max|cnnc - torch| / max|torch|.
"""
import copy

import torch
import torch.nn.functional as F


class LayerDiff:
    def __init__(self, name, module, op, rel_err, rtol, shape):
        self.name, self.module, self.op = name, module, op
        self.rel_err, self.shape = rel_err, tuple(shape)
        self.ok = rel_err <= rtol

    def __repr__(self):
        return "LayerDiff(%s, module=%s, rel_err=%.3g)" % (self.name, self.module, self.rel_err)


class CompareReport:
    """activations / gradients: LayerDiff lists in program / parameter
    order; loss: (cnnc, torch); first_mismatch: the first LayerDiff above
    rtol (forward before backward), or None."""

    def __init__(self, activations, gradients, loss, rtol):
        self.activations, self.gradients, self.loss, self.rtol = \
            activations, gradients, loss, rtol
        loss_err = abs(loss[0] - loss[1]) / max(abs(loss[1]), 1e-12)
        self.loss_ok = loss_err <= rtol
        self.first_mismatch = next((d for d in activations + gradients if not d.ok), None)
        self.ok = self.first_mismatch is None and self.loss_ok

    def __str__(self):
        lines = ["cnnc vs PyTorch (relative error = max|diff| / max|torch|, rtol %g)" % self.rtol,
                 "forward (inference mode):"]
        for d in self.activations:
            lines.append("  %-40s %-28s %-24s %.3g%s" % (d.name, d.module, d.op, d.rel_err,
                                                         "" if d.ok else "  <-- exceeds"))
        lines.append("gradients (training mode):")
        for d in self.gradients:
            lines.append("  %-40s %.3g%s" % (d.name, d.rel_err, "" if d.ok else "  <-- exceeds"))
        lines.append("loss: cnnc %.7g, torch %.7g" % self.loss)
        if self.first_mismatch is not None:
            d = self.first_mismatch
            lines.append("first mismatch: %s (module %s, %s): relative error %.3g > %g" %
                         (d.name, d.module, d.op, d.rel_err, self.rtol))
        else:
            lines.append("all within rtol" if self.ok else "loss exceeds rtol")
        return "\n".join(lines)

    __repr__ = __str__


def _rel(a, b):
    a, b = a.double(), b.double()
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()


def compare(model, x, y, rtol=1e-4, label_smoothing=0.0):
    """Compares cnnc (CPU reference interpreter, f32) with PyTorch on one
    batch (x, y); returns a CompareReport. The model is not modified."""
    from cnnc.api import compile as cnnc_compile

    model = copy.deepcopy(model).cpu().float()
    x = x.detach().cpu().float()
    y = y.detach().cpu().long()
    trainer = cnnc_compile(model, x, device="cpu", label_smoothing=label_smoothing,
                           _gradients_only=True)
    backend = trainer._backend

    # Forward, inference mode. A module's output is the last ONNX node of
    # its scope ("/block/Relu_1" for module "block"), so residual blocks with
    # functional ReLUs/adds are compared too; a node is reported once, under
    # its innermost module.
    modules = {name: m for name, m in model.named_modules() if name}
    outputs = {}

    def keep(name):
        def hook(mod, inp, out):
            if isinstance(out, torch.Tensor):
                outputs[name] = out.detach()
        return hook

    hooks = [m.register_forward_hook(keep(name)) for name, m in modules.items()]
    model.eval()
    with torch.no_grad():
        logits = model(x)
    for h in hooks:
        h.remove()
    trace = backend.trace(x)
    last_of_scope = {}  # module path -> index of the last node in its scope
    for i, (name, _, _) in enumerate(trace):
        parts = [p for p in name.split("/") if p][:-1]
        for k in range(1, len(parts) + 1):
            last_of_scope[".".join(parts[:k])] = i
    by_node = {}
    for module in sorted(last_of_scope, key=lambda m: -m.count(".")):  # innermost first
        i = last_of_scope[module]
        ref = outputs.get(module)
        if i in by_node or ref is None or tuple(ref.shape) != tuple(trace[i][2].shape):
            continue
        by_node[i] = module
    activations = []
    for i in sorted(by_node):
        name, op, value = trace[i]
        activations.append(LayerDiff(name, by_node[i], op, _rel(value, outputs[by_node[i]]),
                                     rtol, value.shape))
    out = trainer.eval(x)
    activations.append(LayerDiff("output", "(model)", "@forward", _rel(out, logits), rtol,
                                 out.shape))

    # Backward, training mode.
    model.train()
    model.zero_grad()
    loss = F.cross_entropy(model(x), y, label_smoothing=label_smoothing)
    loss.backward()
    cnnc_loss = trainer.step(x, y)
    gradients = []
    for name, p in model.named_parameters():
        g = backend.get_grad(name, tuple(p.shape))
        gradients.append(LayerDiff(name, name.rsplit(".", 1)[0], "grad",
                                   _rel(g, p.grad), rtol, p.shape))
    return CompareReport(activations, gradients, (cnnc_loss, loss.item()), rtol)
