"""torch's GradScaler as the source and sink of cnnc's loss-scale state.

An f16 step (precision="fp16", the GPU default) scales the loss dynamically
by GradScaler's rules (cnn-precision: halve on inf/NaN, double after 2000
finite steps) and keeps the scale and the growth tracker as two state
tensors, "loss_scale" and "loss_scale.growth_tracker". As the optimizer is
for the optimizer state, the user's GradScaler passed to
`cnnc.compile(..., scaler=scaler)` is for these: compile starts the step
from `scaler.state_dict()`'s "scale" and "_growth_tracker" (a fresh scaler:
65536 and 0, cnnc's own start), and `trainer.sync_to(model)` writes them
back with `scaler.load_state_dict`, so that

    torch.save({"model": m.state_dict(), "opt": opt.state_dict(),
                "scaler": scaler.state_dict()}, path)

and a later compile of the loaded model, optimizer and scaler resumes the
same scale, as torch's AMP loop would.

What cnnc cannot honour is an error naming it: a scaler whose
growth_factor, backoff_factor or growth_interval differ from cnnc's
(GradScaler's defaults), an enabled scaler on a step without loss scaling
(fp32, or the CPU reference), a disabled one on an f16 step (cnnc always
scales f16 losses).
"""
import math

# cnn-precision's loss-scale rules (its pass options' defaults, which are
# GradScaler's).
GROWTH_FACTOR = 2.0
BACKOFF_FACTOR = 0.5
GROWTH_INTERVAL = 2000
SCALE_NAME = "loss_scale"
TRACKER_NAME = "loss_scale.growth_tracker"


def _is_scaler(obj):
    return all(hasattr(obj, a) for a in ("state_dict", "load_state_dict",
                                         "is_enabled"))


def check(scaler, precision, backend_kind):
    """Validates `scaler` for a step of `precision` ("fp16"/"fp32") on
    `backend_kind` ("cuda"/"reference"). Returns the scaler to carry state
    with, or None (no scaler, or a disabled one on a step without loss
    scaling)."""
    from cnnc.api import CompileError
    if scaler is None:
        return None
    if not _is_scaler(scaler):
        raise TypeError("scaler= must be a torch.cuda.amp.GradScaler (or "
                        "torch.amp.GradScaler), got %s" % type(scaler).__name__)
    scaled = backend_kind == "cuda" and precision == "fp16"
    if not scaler.is_enabled():
        if scaled:
            raise CompileError(
                "scaler= is a disabled GradScaler, but the fp16 step always scales its "
                "loss (dynamic loss scaling as GradScaler's): pass an enabled GradScaler, "
                "or precision='fp32' to train without loss scaling")
        return None
    if not scaled:
        where = ("the CPU reference step" if backend_kind != "cuda"
                 else "a precision='%s' step" % precision)
        raise CompileError(
            "scaler= is an enabled GradScaler, but %s has no loss scaling (only "
            "precision='fp16' on the GPU scales the loss): pass "
            "GradScaler(enabled=False) or leave scaler= out" % where)
    sd = scaler.state_dict()
    for key, want in (("growth_factor", GROWTH_FACTOR),
                      ("backoff_factor", BACKOFF_FACTOR),
                      ("growth_interval", GROWTH_INTERVAL)):
        got = sd.get(key)
        if got is None or float(got) != float(want):
            raise CompileError(
                "GradScaler %s=%r is not supported: cnnc's f16 step scales the loss by "
                "GradScaler's default rules (growth_factor=%r, backoff_factor=%r, "
                "growth_interval=%d)" % (key, got, GROWTH_FACTOR, BACKOFF_FACTOR,
                                         GROWTH_INTERVAL))
    scale = float(sd.get("scale", 0.0))
    if not (math.isfinite(scale) and scale > 0):
        raise CompileError("GradScaler scale %r: the loss scale must be a finite "
                           "number > 0" % (scale,))
    return scaler


def _tensors(trainer):
    """The step's loss-scale state tensors (scale, tracker), or None."""
    from cnnc.api import _Tensor
    backend = trainer._backend
    names = getattr(backend, "loss_scale_names", None)
    if names is None:
        return None
    if SCALE_NAME not in names or TRACKER_NAME not in names:
        return None
    return _Tensor(SCALE_NAME, "loss_scale", ()), _Tensor(TRACKER_NAME, "loss_scale", ())


def load_into(trainer, scaler):
    """Starts the compiled step from `scaler`'s scale and growth tracker."""
    trainer._scaler = scaler
    if scaler is None:
        return
    ts = _tensors(trainer)
    if ts is None:
        from cnnc.api import CompileError
        raise CompileError("scaler= was given, but the compiled step has no loss-scale "
                           "state ('%s', '%s')" % (SCALE_NAME, TRACKER_NAME))
    import torch
    sd = scaler.state_dict()
    trainer._backend.set(ts[0], torch.tensor(float(sd["scale"])))
    trainer._backend.set(ts[1], torch.tensor(float(sd.get("_growth_tracker", 0))))


def state(trainer):
    """{"scale": float, "_growth_tracker": int} of the step, or None."""
    ts = _tensors(trainer)
    if ts is None:
        return None
    return {"scale": float(trainer._backend.get(ts[0])),
            "_growth_tracker": int(float(trainer._backend.get(ts[1])))}


def write_back(trainer):
    """Writes the step's scale and growth tracker into the scaler given to
    compile (its state_dict() then holds them, as after torch's updates)."""
    scaler = getattr(trainer, "_scaler", None)
    if scaler is None:
        return
    st = state(trainer)
    sd = scaler.state_dict()
    sd.update(st)
    # (Sets the initial values and, in a scaler that has run, its tensors.)
    scaler.load_state_dict(sd)
