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
(training mode: batch statistics; eval-mode BatchNorm modules stay frozen),
compared with PyTorch's autograd; and the loss. Relative error =
max|cnnc - torch| / max|torch|. PyTorch also runs in float64: its f32 error
against float64 is each row's second column, and a row is flagged only where
cnnc's error exceeds both rtol and 10x (noise_factor) that f32 noise. The
table lists rows worst first.
"""
import copy

import torch
import torch.nn.functional as F


class LayerDiff:
    """One row: cnnc's relative error against PyTorch f32 (`rel_err`) and
    PyTorch f32's own against PyTorch float64 (`torch_err`, the f32 noise
    of this value). Flagged (ok False) only where rel_err exceeds both rtol
    and noise_factor x torch_err: a value that f32 rounding moves by 1 %
    in PyTorch too is not cnnc's error."""

    def __init__(self, name, module, op, rel_err, rtol, shape, torch_err=0.0,
                 noise_factor=10.0):
        self.name, self.module, self.op = name, module, op
        self.rel_err, self.shape = rel_err, tuple(shape)
        self.torch_err = torch_err
        self.allowed = max(rtol, noise_factor * torch_err)
        self.ok = rel_err <= self.allowed

    def __repr__(self):
        return "LayerDiff(%s, module=%s, rel_err=%.3g, torch_err=%.3g)" % (
            self.name, self.module, self.rel_err, self.torch_err)


class CompareReport:
    """activations / gradients: LayerDiff lists in program / parameter
    order; loss: (cnnc, torch f32, torch float64); first_mismatch: the first
    flagged LayerDiff (forward before backward), or None. str() lists the
    rows worst first (largest rel_err / allowed)."""

    def __init__(self, activations, gradients, loss, rtol, noise_factor=10.0):
        self.activations, self.gradients, self.loss, self.rtol = \
            activations, gradients, loss, rtol
        self.noise_factor = noise_factor
        loss_err = abs(loss[0] - loss[1]) / max(abs(loss[1]), 1e-12)
        loss_noise = abs(loss[1] - loss[2]) / max(abs(loss[2]), 1e-12)
        self.loss_ok = loss_err <= max(rtol, noise_factor * loss_noise)
        self.first_mismatch = next((d for d in activations + gradients if not d.ok), None)
        self.ok = self.first_mismatch is None and self.loss_ok

    def __str__(self):
        def worst_first(rows):
            return sorted(rows, key=lambda d: -d.rel_err / max(d.allowed, 1e-30))

        def mark(d):
            if d.ok:
                return ""
            return "  <-- exceeds rtol and %gx torch f32's error" % self.noise_factor
        lines = ["cnnc vs PyTorch, worst first (relative error = max|diff| / max|torch|; "
                 "a row is flagged when cnnc's error against torch f32 exceeds both rtol %g "
                 "and %gx torch f32's own error against torch float64)"
                 % (self.rtol, self.noise_factor),
                 "forward (inference mode):%s cnnc-vs-f32  f32-vs-f64" % (" " * 71)]
        for d in worst_first(self.activations):
            lines.append("  %-40s %-28s %-24s %11.3g %11.3g%s" % (
                d.name, d.module, d.op, d.rel_err, d.torch_err, mark(d)))
        lines.append("gradients (training mode):%s cnnc-vs-f32  f32-vs-f64" % (" " * 15))
        for d in worst_first(self.gradients):
            lines.append("  %-40s %11.3g %11.3g%s" % (d.name, d.rel_err, d.torch_err, mark(d)))
        lines.append("loss: cnnc %.7g, torch f32 %.7g, torch float64 %.7g" % self.loss)
        if self.first_mismatch is not None:
            d = self.first_mismatch
            lines.append("first mismatch: %s (module %s, %s): relative error %.3g > %g "
                         "(rtol %g; torch f32 vs float64 %.3g)" %
                         (d.name, d.module, d.op, d.rel_err, d.allowed, self.rtol,
                          d.torch_err))
        else:
            lines.append("all within rtol or torch f32's own error" if self.ok
                         else "loss exceeds rtol")
        return "\n".join(lines)

    __repr__ = __str__


def _rel(a, b):
    a, b = a.double(), b.double()
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()


def compare(model, x, y, rtol=1e-4, label_smoothing=0.0, noise_factor=10.0):
    """Compares cnnc (CPU reference interpreter, f32) with PyTorch on one
    batch (x, y); returns a CompareReport. PyTorch runs in f32 and in
    float64: a row is flagged only where cnnc's error against PyTorch f32
    exceeds both `rtol` and `noise_factor` x PyTorch f32's own error
    against float64 (noise_factor=0: rtol alone). The model is not
    modified; its modules' train/eval modes are those of the step."""
    from cnnc.api import compile as cnnc_compile

    model = copy.deepcopy(model).cpu().float()
    model64 = copy.deepcopy(model).double()
    x = x.detach().cpu().float()
    y = y.detach().cpu().long()
    trainer = cnnc_compile(model, x, device="cpu", label_smoothing=label_smoothing,
                           _gradients_only=True)
    backend = trainer._backend
    # The step's modes (eval-mode BatchNorm modules stay frozen in it).
    modes = [m.training for m in model.modules()]

    # Forward, inference mode. A module's output is the last ONNX node of
    # its scope ("/block/Relu_1" for module "block"), so residual blocks with
    # functional ReLUs/adds are compared too; a node is reported once, under
    # its innermost module.
    calls = {}

    def run_hooked(m, inp):
        outputs = {}

        def keep(name):
            def hook(mod, args, out):
                calls[name] = calls.get(name, 0) + 1
                if isinstance(out, torch.Tensor):
                    # A copy: a later in-place op (ReLU(inplace=True) after
                    # a BatchNorm) would overwrite the module's output.
                    outputs[name] = out.detach().clone()
            return hook

        hooks = [sub.register_forward_hook(keep(name))
                 for name, sub in m.named_modules() if name]
        m.eval()
        try:
            with torch.no_grad():
                out = m(inp)
        finally:
            for h in hooks:
                h.remove()
        return out, outputs

    logits, outputs = run_hooked(model, x)
    logits64, outputs64 = run_hooked(model64, x.double())
    # A module called more than once (torchvision's BasicBlock calls its
    # ReLU twice) has no one output to compare: the hook kept the last call's.
    for name, n in calls.items():
        if n > 2:  # once per precision
            outputs.pop(name, None)
    trace = backend.trace(x)
    modules = {name for name, _ in model.named_modules() if name}
    last_of_scope = {}  # module path -> index of the last node in its scope
    for i, (name, _, _) in enumerate(trace):
        # Scopes name the children ("/layer1/0/conv1/Conv") or, as torch
        # 1.13 names a Sequential's children, "<sequential>.<index>"
        # ("/layer3/layer3.0/conv2/Conv", "/layer3/layer3.0/downsample/
        # downsample.1/BatchNormalization").
        cur = ""
        for part in [p for p in name.split("/") if p][:-1]:
            nested = cur + "." + part if cur else part
            sibling = cur.rsplit(".", 1)[0] + "." + part if "." in cur else part
            cur = next((c for c in (nested, sibling) if c in modules), nested)
            last_of_scope[cur] = i
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
        module = by_node[i]
        activations.append(LayerDiff(name, module, op, _rel(value, outputs[module]), rtol,
                                     value.shape, _rel(outputs[module], outputs64[module]),
                                     noise_factor))
    out = trainer.eval(x)
    activations.append(LayerDiff("output", "(model)", "@forward", _rel(out, logits), rtol,
                                 out.shape, _rel(logits, logits64), noise_factor))

    # Backward, in the modes the step was compiled in (training mode unless
    # the module is in eval mode).
    def backward(m, inp):
        for sub, training in zip(m.modules(), modes):
            sub.training = training
        m.zero_grad()
        loss = F.cross_entropy(m(inp), y, label_smoothing=label_smoothing)
        loss.backward()
        return loss.item()

    loss32 = backward(model, x)
    loss64 = backward(model64, x.double())
    cnnc_loss = trainer.step(x, y)
    grads64 = dict(model64.named_parameters())
    gradients = []
    for name, p in model.named_parameters():
        g = backend.get_grad(name, tuple(p.shape))
        gradients.append(LayerDiff(name, name.rsplit(".", 1)[0], "grad", _rel(g, p.grad), rtol,
                                   p.shape, _rel(p.grad, grads64[name].grad), noise_factor))
    return CompareReport(activations, gradients, (cnnc_loss, loss32, loss64), rtol,
                         noise_factor)
