"""cnnc.compile: a torch.nn.Module's training step compiled by cnnc.

    trainer = cnnc.compile(model, example_input, optimizer=torch.optim.SGD(...))
    loss = trainer.step(x, y)      # forward, cross-entropy, backward, update
    logits = trainer.eval(x)       # inference mode (BN running statistics)
    trainer.sync_to(model)         # the trained weights back into the module

The step is exported (training-mode ONNX), compiled by the cnnc binary of
the build (cnnc.tools) and cached on disk; it runs on the GPU as a shared
library built by `cnnc --emit lib` (runtime C API, cnnrt_c.h) or, without a
GPU, on the CPU reference interpreter (libcnnc_reference.so). Both are loaded
in process with ctypes. See docs/python.md.
"""
import collections
import hashlib
import inspect
import json
import math
import os
import shutil
import subprocess
import tempfile
import time
import warnings

import numpy as np
import torch

from cnnc import cache as _cache, finetune, tools

from cnnc import optim, pipeline_options
from cnnc import runtime_errors as _rt
from cnnc import scaler as _scaler

# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


class CompileError(RuntimeError):
    """The model or its settings cannot be compiled (the message says why)."""


class UnsupportedOptimizerError(ValueError):
    """The optimizer uses a setting that cnnc cannot honour."""


# ---------------------------------------------------------------------------
# Optimizer settings
# ---------------------------------------------------------------------------

def optimizer_flags(optimizer, model):
    """cnnc's optimizer flags for a torch.optim optimizer, or
    UnsupportedOptimizerError naming the setting it cannot honour. Frozen
    parameters and param groups go into flags["param-groups"] (cnnc.optim).

    Returns (flags: dict of cnnc option -> value, lr: float)."""
    flags, lr, spec = optim.translate(optimizer, model, UnsupportedOptimizerError)
    if spec is not None:
        flags["param-groups"] = optim.param_groups_json(spec)
    return flags, lr


# ---------------------------------------------------------------------------
# The on-disk cache
# ---------------------------------------------------------------------------

def cache_dir():
    """$CNNC_CACHE_DIR, else $XDG_CACHE_HOME/cnnc, else ~/.cache/cnnc."""
    if os.environ.get("CNNC_CACHE_DIR"):
        return os.environ["CNNC_CACHE_DIR"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(
        os.path.expanduser("~"), ".cache")
    return os.path.join(base, "cnnc")


def _file_fingerprint(path):
    st = os.stat(path)
    return "%s:%d:%d" % (os.path.realpath(path), st.st_size, st.st_mtime_ns)


def _module_fingerprint(model):
    """What decides the exported graph, without exporting: the module tree,
    the source of every module class's forward, and the state's names,
    shapes and dtypes (not the values: weights are loaded at every compile)."""
    h = hashlib.sha256()
    h.update(repr(model).encode())
    seen = set()
    for m in model.modules():
        cls = type(m)
        if cls in seen:
            continue
        seen.add(cls)
        h.update(("%s.%s" % (cls.__module__, cls.__qualname__)).encode())
        try:
            h.update(inspect.getsource(cls.forward).encode())
        except (OSError, TypeError):
            pass
    for k, v in model.state_dict().items():
        h.update(("%s%s%s" % (k, tuple(v.shape), v.dtype)).encode())
    return h.hexdigest()


def _write_json_atomic(path, obj):
    tmp = "%s.tmp%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


# ---------------------------------------------------------------------------
# Backends (ctypes)
# ---------------------------------------------------------------------------

def world_size():
    """The data-parallel world size this process belongs to: torchrun's (or
    any launcher's) WORLD_SIZE, else torch.distributed's when it is
    initialized, else 1."""
    if os.environ.get("WORLD_SIZE"):
        try:
            return max(1, int(os.environ["WORLD_SIZE"]))
        except ValueError:
            raise CompileError("WORLD_SIZE=%r is not a number" % os.environ["WORLD_SIZE"])
    dist = getattr(torch, "distributed", None)
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return 1


def _has_gpu():
    if os.environ.get("CNNC_ASSUME_NO_GPU") == "1":
        return False
    return torch.cuda.is_available()


class _Tensor:
    """A state or trace tensor's description."""

    def __init__(self, name, role, shape):
        self.name, self.role, self.shape = name, role, tuple(shape)


def _as_f32(x, what):
    if not isinstance(x, torch.Tensor):
        x = torch.as_tensor(np.asarray(x))
    if not x.is_floating_point():
        raise TypeError("%s must be a floating-point tensor, got %s" % (what, x.dtype))
    return x.detach().to(torch.float32).contiguous()


class _ReferenceBackend:
    """The CPU reference interpreter (libcnnc_reference.so)."""

    device = torch.device("cpu")

    def __init__(self, mlir_path, weights_path, lib_path, stages_path=None,
                 micro_batches=1):
        import ctypes as C
        self.C = C
        lib = C.CDLL(lib_path)
        P, F, I, I64 = C.c_void_p, C.c_float, C.c_int, C.c_int64
        sig = {
            "cnnref_open": (P, [C.c_char_p, C.c_char_p]),
            "cnnref_close": (None, [P]),
            "cnnref_last_error": (C.c_char_p, []),
            "cnnref_input_shape": (I, [P, P, P]),
            "cnnref_num_classes": (I64, [P]),
            "cnnref_labels_shape": (I, [P, P, P]),
            "cnnref_ignore_index": (I64, [P]),
            "cnnref_output_shape": (I, [P, P, P]),
            "cnnref_step": (I, [P, P, P, F, P]),
            "cnnref_eval": (I, [P, P, P]),
            "cnnref_num_state": (I, [P]),
            "cnnref_state_name": (C.c_char_p, [P, I]),
            "cnnref_state_role": (I, [P, I]),
            "cnnref_state_shape": (I, [P, I, P, P]),
            "cnnref_get_state": (I, [P, C.c_char_p, P]),
            "cnnref_set_state": (I, [P, C.c_char_p, P]),
            "cnnref_step_count": (I64, [P]),
            "cnnref_set_step_count": (None, [P, I64]),
            "cnnref_trace": (I, [P, P]),
            "cnnref_trace_count": (I, [P]),
            "cnnref_trace_name": (C.c_char_p, [P, I]),
            "cnnref_trace_op": (C.c_char_p, [P, I]),
            "cnnref_trace_shape": (I, [P, I, P, P]),
            "cnnref_trace_get": (I, [P, I, P]),
            "cnnref_set_pipeline": (I, [P, C.c_char_p, I]),
        }
        for name, (res, args) in sig.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args
        self.lib = lib
        self.handle = lib.cnnref_open(mlir_path.encode(), weights_path.encode())
        if not self.handle:
            raise CompileError("cannot open the compiled step: " + self._error())
        if stages_path is not None:
            # Pipeline stages: each step runs the split step's stages on
            # threads, on M micro-batches (cnnc/pipeline.py).
            if lib.cnnref_set_pipeline(self.handle, stages_path.encode(),
                                       int(micro_batches)) != 0:
                raise CompileError("cannot load the pipeline stages: " + self._error())
        self.input_shape = self._shape(lib.cnnref_input_shape, self.handle)
        self.num_classes = int(lib.cnnref_num_classes(self.handle))
        # (N,) or per-pixel (N, H, W); the eval output (N, classes[, H, W]).
        self.labels_shape = self._shape(lib.cnnref_labels_shape, self.handle)
        self.ignore_index = int(lib.cnnref_ignore_index(self.handle))
        self.output_shape = self._shape(lib.cnnref_output_shape, self.handle)
        self.tensors = []
        for i in range(lib.cnnref_num_state(self.handle)):
            shape = self._shape(lib.cnnref_state_shape, self.handle, i)
            self.tensors.append(_Tensor(lib.cnnref_state_name(self.handle, i).decode(),
                                        ("param", "buffer", "opt_state")[
                                            lib.cnnref_state_role(self.handle, i)],
                                        shape))

    def _error(self):
        return self.lib.cnnref_last_error().decode()

    def _check(self, rc, what):
        if rc != 0:
            raise RuntimeError("cnnc: %s: %s" % (what, self._error()))

    def _shape(self, fn, *args):
        dims = (self.C.c_int64 * 8)()
        rank = self.C.c_int(0)
        self._check(fn(*args, dims, self.C.byref(rank)), "shape query")
        return tuple(dims[i] for i in range(rank.value))

    def step(self, x, y, lr):
        x = x.cpu()
        y = y.cpu()
        loss = self.C.c_float(0)
        self._check(self.lib.cnnref_step(self.handle, x.data_ptr(), y.data_ptr(),
                                         float(lr), self.C.byref(loss)), "step")
        return loss.value

    def eval(self, x):
        out = torch.empty(self.output_shape, dtype=torch.float32)
        self._check(self.lib.cnnref_eval(self.handle, x.cpu().data_ptr(),
                                         out.data_ptr()), "eval")
        return out

    def get(self, t):
        out = torch.empty(t.shape, dtype=torch.float32)
        self._check(self.lib.cnnref_get_state(self.handle, t.name.encode(),
                                              out.data_ptr()), "reading " + t.name)
        return out

    def get_grad(self, name, shape):
        out = torch.empty(shape, dtype=torch.float32)
        self._check(self.lib.cnnref_get_state(self.handle, (name + ".grad").encode(),
                                              out.data_ptr()), "reading the gradient of " + name)
        return out

    def set(self, t, value):
        value = value.detach().to("cpu", torch.float32).contiguous()
        self._check(self.lib.cnnref_set_state(self.handle, t.name.encode(),
                                              value.data_ptr()), "writing " + t.name)

    def set_scalar(self, t, value):
        self.set(t, torch.tensor(float(value)))

    @property
    def step_count(self):
        return int(self.lib.cnnref_step_count(self.handle))

    @step_count.setter
    def step_count(self, n):
        self.lib.cnnref_set_step_count(self.handle, int(n))

    def trace(self, x):
        """[(node name, op name, tensor)] of @forward on x."""
        lib, h = self.lib, self.handle
        self._check(lib.cnnref_trace(h, x.cpu().contiguous().data_ptr()), "trace")
        out = []
        for i in range(lib.cnnref_trace_count(h)):
            shape = self._shape(lib.cnnref_trace_shape, h, i)
            t = torch.empty(shape, dtype=torch.float32)
            self._check(lib.cnnref_trace_get(h, i, t.data_ptr()), "trace")
            out.append((lib.cnnref_trace_name(h, i).decode(),
                        lib.cnnref_trace_op(h, i).decode(), t))
        return out

    def close(self):
        if self.handle:
            self.lib.cnnref_close(self.handle)
            self.handle = None

    __del__ = close


def _cuda_api_signatures(C):
    """ctypes (restype, argtypes) of the runtime's C API (cnnrt_c.h)."""
    P, F, I, I64 = C.c_void_p, C.c_float, C.c_int, C.c_int64
    return {
        "cnnrt_model_spec": (P, []),
        "cnnrt_create": (P, [P, C.c_char_p, I]),
        "cnnrt_destroy": (None, [P]),
        "cnnrt_last_error": (C.c_char_p, []),
        "cnnrt_input_shape": (I, [P, P, P]),
        "cnnrt_labels_shape": (I, [P, P, P]),
        "cnnrt_output_shape": (I, [P, P, P]),
        "cnnrt_num_classes": (I64, [P]),
        "cnnrt_train_step": (I, [P, P, P, I, F, P]),
        "cnnrt_loss": (I, [P, P]),
        "cnnrt_loss_to_device": (I, [P, P, P]),
        "cnnrt_eval_input": (I, [P, P, I, P, I, P]),
        "cnnrt_num_state": (I, [P]),
        "cnnrt_state_name": (C.c_char_p, [P, I]),
        "cnnrt_state_role": (I, [P, I]),
        "cnnrt_state_shape": (I, [P, I, P, P]),
        "cnnrt_read_state": (I, [P, C.c_char_p, P]),
        "cnnrt_write_state": (I, [P, C.c_char_p, P]),
        "cnnrt_set_scalar_state": (I, [P, C.c_char_p, C.c_float]),
        "cnnrt_step_count": (I64, [P]),
        "cnnrt_set_step_count": (None, [P, I64]),
        "cnnrt_set_device": (I, [I]),
    }


class _CudaBackend:
    """A step built by `cnnc --emit lib` (libstep.so: libcnnrt + the model),
    driven through the runtime's C API (cnnrt_c.h)."""

    _ROLES = {0: "param", 1: "buffer", 2: "opt_state", 3: "loss_scale"}

    def __init__(self, lib_path, weights_path, device, ignore_index=-100, plan=None):
        import ctypes as C
        self.C = C
        self.device = device
        self.ignore_index = int(ignore_index)
        lib = C.CDLL(lib_path)
        sig = _cuda_api_signatures(C)
        if plan is not None:
            # A pipeline stage's library (cnnc --emit lib --pipeline-stages):
            # the stages' specs instead of one model's.
            del sig["cnnrt_model_spec"]
            sig.update({"cnnrt_pipeline_stages": (C.c_int, []),
                        "cnnrt_pipeline_replicas": (C.c_int, []),
                        "cnnrt_pipeline_stage_spec": (C.c_void_p, [C.c_int])})
        for name, (res, args) in sig.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args
        self.lib = lib
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        self.device = device
        torch.cuda.current_stream(device)  # PyTorch's context first
        self._set_device()
        # The last pipeline stage has the loss; the other stages none.
        self.has_loss = plan is None or plan.stage == plan.stages - 1
        if plan is None:
            spec = lib.cnnrt_model_spec()
        else:
            built = (lib.cnnrt_pipeline_stages(), lib.cnnrt_pipeline_replicas())
            if built != (plan.stages, plan.replicas):
                raise CompileError("the step library holds %d stages x %d replicas, not "
                                   "%d x %d" % (built + (plan.stages, plan.replicas)))
            spec = lib.cnnrt_pipeline_stage_spec(plan.stage)
            from cnnc import pipeline as _pipeline
            _pipeline.stage_environment(plan)
        # A runtime failure (no GPU, out of memory, ...) is a cnnc.CnnrtError.
        self.handle = _rt.create_session(lib, spec, weights_path)
        self.input_shape = self._shape(lib.cnnrt_input_shape, self.handle)
        self.num_classes = int(lib.cnnrt_num_classes(self.handle))
        # (N,) or, for a dense model, (N, H, W): one class per pixel.
        self.labels_shape = self._shape(lib.cnnrt_labels_shape, self.handle)
        # (N, C) or, for a dense model, the per-pixel (N, C, H, W).
        self.output_shape = self._shape(lib.cnnrt_output_shape, self.handle)
        self.tensors = []
        self.loss_scale_names = set()
        for i in range(lib.cnnrt_num_state(self.handle)):
            role = self._ROLES.get(lib.cnnrt_state_role(self.handle, i))
            name = lib.cnnrt_state_name(self.handle, i).decode()
            # The scale (role LossScale) and its growth tracker (kept with
            # the optimizer state in checkpoints, role OptState): carried by
            # cnnc/scaler.py, not by the torch optimizer.
            if role == "loss_scale" or name == _scaler.TRACKER_NAME:
                self.loss_scale_names.add(name)
                continue
            self.tensors.append(_Tensor(lib.cnnrt_state_name(self.handle, i).decode(), role,
                                        self._shape(lib.cnnrt_state_shape, self.handle, i)))

    def _check(self, rc, what):
        _rt.check(self.lib, rc, what)

    def _shape(self, fn, *args):
        dims = (self.C.c_int64 * 8)()
        rank = self.C.c_int(0)
        self._check(fn(*args, dims, self.C.byref(rank)), "shape query")
        return tuple(dims[i] for i in range(rank.value))

    def _set_device(self):
        # The library has its own CUDA runtime (static): its current device
        # is per thread and starts at 0.
        _rt.check(self.lib, self.lib.cnnrt_set_device(self.device.index), "set device")

    def _stream(self):
        self._set_device()
        return torch.cuda.current_stream(self.device).cuda_stream

    def step(self, x, y, lr):
        on_device = x.is_cuda
        if on_device != y.is_cuda:
            y = y.to(x.device)
        self._check(self.lib.cnnrt_train_step(self.handle, x.data_ptr(), y.data_ptr(),
                                              int(on_device), float(lr), self._stream()),
                    "step")
        if not self.has_loss:
            return None  # a pipeline stage before the last
        # The loss stays on the GPU (a 0-d tensor, ordered on PyTorch's
        # stream): reading it back every step would make the host wait for
        # each step and leave the GPU idle while Python prepares the next.
        loss = torch.empty((), dtype=torch.float32, device=self.device)
        self._check(self.lib.cnnrt_loss_to_device(self.handle, loss.data_ptr(),
                                                  self._stream()), "loss")
        return loss

    def eval(self, x):
        out = torch.empty(self.output_shape, dtype=torch.float32, device=x.device)
        self._check(self.lib.cnnrt_eval_input(self.handle, x.data_ptr(), int(x.is_cuda),
                                              out.data_ptr(), int(out.is_cuda),
                                              self._stream()), "eval")
        return out

    def get(self, t):
        self._set_device()
        out = torch.empty(t.shape, dtype=torch.float32)
        self._check(self.lib.cnnrt_read_state(self.handle, t.name.encode(), out.data_ptr()),
                    "reading " + t.name)
        return out

    def set(self, t, value):
        value = value.detach().to("cpu", torch.float32).contiguous()
        torch.cuda.current_stream(self.device).synchronize()
        self._set_device()
        self._check(self.lib.cnnrt_write_state(self.handle, t.name.encode(),
                                               value.data_ptr()), "writing " + t.name)

    def set_scalar(self, t, value):
        # Queued on the session's stream, the value passed by copy: no
        # synchronization (a scheduler changes group LRs every step).
        self._set_device()
        self._check(self.lib.cnnrt_set_scalar_state(self.handle, t.name.encode(),
                                                    float(value)), "writing " + t.name)

    @property
    def step_count(self):
        return int(self.lib.cnnrt_step_count(self.handle))

    @step_count.setter
    def step_count(self, n):
        self.lib.cnnrt_set_step_count(self.handle, int(n))

    def close(self):
        if getattr(self, "handle", None):
            self._set_device()
            self.lib.cnnrt_destroy(self.handle)
            self.handle = None

    __del__ = close


# ---------------------------------------------------------------------------
# The trainer
# ---------------------------------------------------------------------------

# torch.optim's per-parameter state that cnnc holds as "<param>.<key>".
_OPT_STATE = ("momentum_buffer", "exp_avg", "exp_avg_sq")


class Trainer:
    """A compiled training step bound to its model's names (see compile)."""

    def __init__(self, backend, model, optimizer, lr, info):
        self._backend = backend
        self._optimizer = optimizer
        self._lr = lr
        self.info = info  #: how it was compiled (backend, cache hit, paths)
        #: Pipeline stages (cnnc/pipeline.py Plan: stages, micro_batches,
        #: schedule; on the GPU this process's stage, replica, replicas), or
        #: None.
        self.pipeline = info.get("pipeline")
        self.cache_hit = info["cache_hit"]
        self.artifact_dir = info["artifact_dir"]
        self.input_shape = backend.input_shape
        self.num_classes = backend.num_classes
        #: (N,) labels, or (N, H, W) per-pixel labels of a dense-prediction
        #: model (N x C x H x W logits); labels equal to ignore_index are
        #: left out of the loss and of its mean.
        self.labels_shape = tuple(backend.labels_shape)
        self.ignore_index = backend.ignore_index
        self._state = collections.OrderedDict((t.name, t) for t in backend.tensors)
        model_sd = model.state_dict()
        self._names = list(model_sd.keys())
        # A GPU pipeline stage holds its own tensors only: state_dict() and
        # sync_to() read and write those (None: every name).
        self._owned = None
        if self.pipeline is not None and self.pipeline.stage is not None:
            from cnnc import pipeline as _pipeline
            self._owned = _pipeline.owned_names(self._names, self._state)
        # BatchNorm forwards per step: a pipelined step runs M micro-batches.
        self._forwards = self.pipeline.micro_batches if self.pipeline else 1
        self._like = {k: (v.dtype, v.device, tuple(v.shape)) for k, v in model_sd.items()}
        # num_batches_tracked of each BN: the model's count plus this
        # trainer's steps (torch counts training forwards).
        self._tracked = {k: int(v) for k, v in model_sd.items()
                         if k.endswith("num_batches_tracked")}
        self._tracked_base = backend.step_count
        # Eval-mode BatchNorm modules count no steps (PyTorch's do not).
        self._tracked_fixed = finetune.frozen_tracked(model)
        for name, t in self._state.items():
            if t.role in ("param", "buffer") and name not in model_sd:
                raise CompileError(
                    "the compiled step has a tensor '%s' that is not in the "
                    "model's state_dict (the export renamed it)" % name)
        self.load_state_dict(model_sd, strict=False)
        self._opt_kind = info["flags"]["optimizer"]
        self._params = {n: p for n, p in model.named_parameters()
                        if self._owned is None or n in self._owned}
        optim.check_state(model, optimizer, self._opt_kind)
        self._load_optimizer_state(model, optimizer)
        # Accumulation: the step counts micro-steps, torch's state optimizer
        # steps.
        self._accumulate = int(info["flags"].get("accumulate", 1))
        self._backend.step_count = self._backend.step_count * self._accumulate
        self._tracked_base = self._backend.step_count
        self._group_lrs = optim.GroupLRs(optimizer, self._state, self._backend)

    # -- training ----------------------------------------------------------

    @property
    def backend(self):
        """'cuda' or 'reference' (the CPU interpreter)."""
        return self.info["backend"]

    def _check_x(self, x):
        x = _as_f32(x, "the input")
        dev = self._backend.device
        if x.is_cuda and (dev.type != "cuda" or x.device != dev):
            if dev.type == "cuda":
                raise ValueError("input on %s, but the step runs on %s" % (x.device, dev))
            x = x.cpu()
        if tuple(x.shape) != tuple(self.input_shape):
            raise ValueError(
                "input of shape %s, but the step was compiled for %s (compile "
                "for this shape, or use DataLoader(..., drop_last=True) so that "
                "every batch has the compiled size)" %
                (tuple(x.shape), tuple(self.input_shape)))
        return x

    def _check_y(self, y):
        if not isinstance(y, torch.Tensor):
            y = torch.as_tensor(np.asarray(y))
        if y.is_cuda and self._backend.device.type != "cuda":
            y = y.cpu()
        if y.is_floating_point() or y.dtype == torch.bool:
            raise TypeError("labels must be an integer tensor of class indices, got %s" % y.dtype)
        if tuple(y.shape) != self.labels_shape:
            if len(self.labels_shape) == 3:
                raise ValueError(
                    "labels of shape %s, but the step expects per-pixel labels %s "
                    "(N x H x W: one class per pixel of the model's N x C x H x W "
                    "output)" % (tuple(y.shape), self.labels_shape))
            raise ValueError("labels of shape %s, but the step expects %s" %
                             (tuple(y.shape), self.labels_shape))
        return y.detach().to(torch.int64).contiguous()

    def current_lr(self):
        """The learning rate of the next step: the optimizer's param_groups[0]
        'lr' when compiled with an optimizer (so torch.optim.lr_scheduler
        schedules on it apply), else the last set_lr."""
        if self._optimizer is not None:
            lr = self._optimizer.param_groups[0]["lr"]
            return float(lr)
        return self._lr

    def set_lr(self, lr):
        """Sets the learning rate of the following steps (also in the
        optimizer's param groups, where schedulers read it)."""
        lr = float(lr)
        # cnnc's --lr rule (cnnrt/HyperParams.h): finite and >= 0; inf would
        # turn every parameter into nan at the next step.
        if not (math.isfinite(lr) and lr >= 0):
            raise ValueError("the learning rate must be a finite number >= 0, got %r" % lr)
        self._lr = lr
        if self._optimizer is not None:
            for g in self._optimizer.param_groups:
                g["lr"] = lr

    def step(self, x, y):
        """One training step (forward, cross-entropy, backward, update) on
        images x and integer labels y. Returns the loss: on the GPU a 0-d
        float32 CUDA tensor that the step fills asynchronously (float(loss)
        waits for it; not reading it lets the next step queue at once), on
        the CPU path a float. With pipeline_stages: x is the step's whole
        batch (M micro-batches), the loss the mean of the M micro-batches';
        on the GPU every stage of a replica takes the same x and y (stage 0
        reads x, the last stage y) and only the last stage returns the
        loss: the other stages return None (as PyTorch's pipeline
        schedules; is_last_stage says which)."""
        x = self._check_x(x)
        y = self._check_y(y)
        if not y.is_cuda:
            bad = ((y < 0) | (y >= self.num_classes)) & (y != self.ignore_index)
            if bool(bad.any()):
                raise ValueError("label %d is not a class in [0, %d) nor the "
                                 "ignore_index %d" % (int(y[bad][0]), self.num_classes,
                                                      self.ignore_index))
        self._group_lrs.sync()  # param groups 1.. (group 0: current_lr)
        loss = self._backend.step(x, y, self.current_lr())
        if self._optimizer is not None:
            # The trainer took the optimizer's step: tell torch's LR
            # schedulers so (what optimizer.step() marks), or they warn that
            # scheduler.step() came before any optimizer.step().
            self._optimizer._opt_called = True  # torch >= 2.0
            if hasattr(self._optimizer, "_step_count"):  # torch 1.x
                self._optimizer._step_count += 1
        return loss

    def eval(self, x):
        """Logits of the forward in inference mode (BN running statistics)."""
        if self.pipeline is not None:
            from cnnc import pipeline as _pipeline
            _pipeline.refuse_eval(self.pipeline)
        return self._backend.eval(self._check_x(x))

    @property
    def pipeline_stage(self):
        """This process's pipeline stage (GPU pipeline), else None."""
        return self.pipeline.stage if self.pipeline is not None else None

    @property
    def pipeline_replica(self):
        """This process's data-parallel replica of the pipeline (GPU
        pipeline: rank // pipeline_stages), else None."""
        return self.pipeline.replica if self.pipeline is not None else None

    @property
    def is_last_stage(self):
        """Whether step() returns the loss here: True but on a GPU pipeline
        stage before the last."""
        p = self.pipeline
        return p is None or p.stage is None or p.stage == p.stages - 1

    __call__ = eval

    # -- state ---------------------------------------------------------------

    def state_dict(self):
        """The model's state_dict (its names, dtypes and devices) with the
        trained values. A GPU pipeline stage returns its own entries only
        (its parameters, buffers and their BatchNorms' counts): the union
        over the stages is the model's."""
        out = collections.OrderedDict()
        steps = (self._backend.step_count - self._tracked_base) * self._forwards
        for name in self._names:
            if self._owned is not None and name not in self._owned:
                continue
            dtype, device, shape = self._like[name]
            if name in self._state:
                v = self._backend.get(self._state[name]).reshape(shape)
            elif name in self._tracked:
                v = torch.tensor(self._tracked[name] +
                                 (0 if name in self._tracked_fixed else steps))
            else:
                v = self._extra[name]
            out[name] = v.to(device=device, dtype=dtype)
        return out

    def load_state_dict(self, state_dict, strict=True):
        """Loads parameters and buffers (names of the model's state_dict)."""
        missing = [n for n in self._names if n not in state_dict
                   and (self._owned is None or n in self._owned)]
        unexpected = [n for n in state_dict if n not in self._like]
        if strict and (missing or unexpected):
            raise KeyError("load_state_dict: missing %s, unexpected %s" % (missing, unexpected))
        if not hasattr(self, "_extra"):
            self._extra = {}
        steps = (self._backend.step_count - self._tracked_base) * self._forwards
        for name, value in state_dict.items():
            if name not in self._like:
                continue
            shape = self._like[name][2]
            if tuple(value.shape) != shape:
                raise ValueError("load_state_dict: '%s' has shape %s, the model %s" %
                                 (name, tuple(value.shape), shape))
            if name in self._state:
                self._backend.set(self._state[name], value.reshape(self._state[name].shape))
            elif name in self._tracked:
                self._tracked[name] = int(value) - (0 if name in self._tracked_fixed
                                                    else steps)
            else:
                self._extra[name] = value.detach().clone()

    def sync_to(self, model):
        """Copies the trained parameters and buffers into `model`, and the
        optimizer state (momentum buffers, Adam moments and step) into the
        optimizer given to compile, so that its state_dict() is torch's. A
        GPU pipeline stage writes its own parameters, buffers and their
        optimizer state, and leaves the others as they are (each stage's
        process holds its part of the model)."""
        model.load_state_dict(self.state_dict(), strict=self._owned is None)
        optim.write_state(self, self._params, self._optimizer, self._opt_kind,
                          self._optimizer_steps())
        _scaler.write_back(self)  # the loss scale into compile's scaler=
        return model

    def _optimizer_steps(self):
        """Optimizer steps taken (with loss scaling, the applied ones)."""
        applied = self._state.get("optimizer.applied_steps")
        if applied is not None:
            return int(float(self._backend.get(applied)))
        return self._backend.step_count // self._accumulate

    def optimizer_state(self):
        """cnnc's optimizer state by its names ('<param>.momentum_buffer',
        '<param>.exp_avg', '<param>.exp_avg_sq')."""
        return {n: self._backend.get(t) for n, t in self._state.items()
                if t.role == "opt_state" and not n.startswith("optimizer.")
                and not n.endswith(".grad_accum")}

    def _load_optimizer_state(self, model, optimizer):
        if optimizer is None:
            return
        for name, p in model.named_parameters():
            st = optimizer.state.get(p, {})
            for key, value in st.items():
                target = "%s.%s" % (name, key)
                if key in _OPT_STATE and target in self._state and value is not None:
                    self._backend.set(self._state[target], value)
                    # SGD keeps no step count, but its first step sets the
                    # momentum buffer to the gradient: with a buffer, the
                    # next step is not the first.
                    if self._backend.step_count == 0:
                        self._backend.step_count = 1
                        self._tracked_base = 1
            if "step" in st:
                self._backend.step_count = int(st["step"])
                self._tracked_base = self._backend.step_count
                # With loss scaling (fp16) updates are numbered by the steps
                # actually applied.
                applied = self._state.get("optimizer.applied_steps")
                if applied is not None:
                    self._backend.set(applied, torch.tensor(float(st["step"])))

    @property
    def steps(self):
        """Steps taken by the compiled optimizer (the Adam step count; with
        accumulate=k, k step calls are one)."""
        return self._backend.step_count // self._accumulate


# ---------------------------------------------------------------------------
# compile
# ---------------------------------------------------------------------------

def _run_cnnc(args, what):
    proc = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True)
    if proc.returncode != 0:
        raise CompileError("cnnc failed to %s (exit %d):\n%s%s\ncommand: %s" %
                           (what, proc.returncode, proc.stderr, proc.stdout,
                            " ".join(args)))
    return proc


def compile(model, example_input, optimizer=None, *, label_smoothing=0.0,
            ignore_index=-100, aux_loss_weight=None,
            lr=None, device=None, precision=None, layout=None, arch=None,
            remat=None, cache=True, verbose=False, clip_grad_norm=None,
            accumulate=1, scaler=None, pipeline_stages=None, micro_batches=None,
            pipeline_schedule=None, pipeline_chunks=None, _gradients_only=False):
    """Compiles the training step of `model` (cross-entropy loss on its
    logits; `optimizer`'s algorithm and hyper-parameters) for inputs of
    `example_input`'s shape, and returns a Trainer holding the model's
    current weights.

    optimizer: torch.optim.SGD, Adam or AdamW over the model's parameters
      that require a gradient (those with requires_grad=False are frozen:
      no gradient, no update, no state). Param groups keep their own lr,
      weight_decay, momentum/dampening/nesterov or betas/eps; each group's
      param_groups[k]["lr"] is read at every step (schedulers work).
      compile reads the optimizer's state and sync_to writes it back.
      amsgrad and maximize are rejected. None: SGD without momentum at
      `lr`.
    label_smoothing: of the cross-entropy loss.
    ignore_index: the label left out of the loss and of its mean, as in
      F.cross_entropy (default -100, PyTorch's; e.g. 255 for the void pixels
      of segmentation masks). A model whose output is N x C x H x W (dense
      prediction: segmentation) trains on per-pixel labels N x H x W.
    aux_loss_weight: for models with auxiliary outputs (GoogLeNet and
      Inception-v3 return (logits, aux...); torchvision's segmentation
      models {'out', 'aux'}), the loss is CE(main) + aux_loss_weight *
      sum CE(aux). Required for a model returning a tuple or dict (a
      CompileError names it otherwise); torchvision's reference scripts
      use 0.4 for classifiers and 0.5 for segmentation.
    The module's train/eval modes are kept (export with
      TrainingMode.PRESERVE): an eval-mode BatchNorm normalizes with its
      running statistics in the step and does not update them; a model in
      eval() trains as PyTorch's loop would (all BN frozen, Dropout off).
    device: 'cuda' (a GPU step built with nvcc) or 'cpu' (the reference
      interpreter); default: 'cuda' when torch sees a GPU, else 'cpu'.
    precision/layout: cnnc's --precision fp32|fp16 and --layout nchw|nhwc
      for the GPU (default: cnnc's GPU defaults, fp16 + NHWC); the CPU
      step is always fp32 NCHW.
    remat: what the GPU step recomputes in the backward pass instead of
      storing (memory for time; the results are the same): None, cnnc's
      default (expanding 1x1 convolutions, up to 9 % of the stored
      activations); False, nothing; True, every candidate (cnnc --remat);
      a positive int, about that many MiB (cnnc --remat-mb). The CPU
      reference step stores everything whatever it says.
    cache: reuse compiled steps from the cache directory (cache_dir()).
    clip_grad_norm: clip the gradients to this global norm inside the step,
      as torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
      before optimizer.step() (after unscaling under fp16; a skipped fp16
      step skips it, as GradScaler). Must be > 0; None: no clipping.
    accumulate: gradient accumulation over this many trainer.step calls
      (micro-batches): the update applies on every accumulate-th call, to
      the mean of their gradients, as torch's loop of `accumulate`
      backward passes of loss / accumulate and one optimizer.step().
      Each call returns its micro-batch's loss (not divided); BN running
      statistics update at every call; step the LR scheduler once per
      `accumulate` calls. Under fp16 the calls of one update share the
      loss scale, which changes (or skips the update) once per update.
    pipeline_stages/micro_batches/pipeline_schedule/pipeline_chunks: the
      model cut into S pipeline stages (cnnc picks the cuts), example_input's
      batch into M micro-batches, run in 'gpipe' (default) or '1f1b' order
      (pipeline_chunks=V: interleaved, V chunks a GPU, S >= 2, gpipe); one update
      per step, the same as accumulate=M over the same micro-batches. On
      the GPU one process per stage under torchrun (--nproc-per-node S x D,
      rank = replica x S + stage; only the last stage returns the loss, each
      stage holds its own parameters); on the CPU every stage in this
      process. cnnc/pipeline.py, docs/python.md "Pipeline stages".
    scaler: a torch GradScaler, the source and sink of the fp16 step's loss
      scale as the optimizer is of its state: compile starts from its
      scale and growth tracker, sync_to writes them back (cnnc/scaler.py;
      its growth/backoff settings must be GradScaler's defaults). An
      enabled scaler on a step without loss scaling is an error.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError("cnnc.compile needs a torch.nn.Module, got %s" % type(model).__name__)
    from . import pipeline as _pipeline
    plan = _pipeline.check_options(pipeline_stages, micro_batches, pipeline_schedule,
                                   accumulate, pipeline_chunks)
    if plan is not None and plan.chunks > 1:
        _pipeline.ensure_hardware_queues(torch)
    if not isinstance(example_input, torch.Tensor):
        raise TypeError("example_input must be a torch.Tensor")
    if example_input.dim() != 4:
        raise ValueError("example_input must be a 4-D image batch (N, C, H, W), got shape %s"
                         % (tuple(example_input.shape),))
    # The step's batch (what trainer.step takes) and the batch the model is
    # exported for: a pipelined step's micro-batch.
    step_input = example_input
    if plan is not None:
        example_input = _pipeline.micro_batch(plan, example_input)
    if not 0.0 <= float(label_smoothing) < 1.0:
        raise ValueError("label_smoothing must be in [0, 1), got %r" % label_smoothing)
    if _gradients_only:  # cnnc.compare: the step returns the gradients
        flags, lr = {"optimizer": "none"}, 0.0
    elif optimizer is not None:
        flags, opt_lr = optimizer_flags(optimizer, model)
        if lr is not None:
            raise ValueError("pass the learning rate in the optimizer or as lr=, not both")
        lr = opt_lr
    else:
        flags = {"optimizer": "sgd", "momentum": 0.0, "dampening": 0.0,
                 "nesterov": False, "weight-decay": 0.0}
        lr = 0.01 if lr is None else float(lr)
        frozen = [n for n, p in model.named_parameters() if not p.requires_grad]
        if frozen:
            flags["param-groups"] = {"frozen": frozen, "groups": []}
    flags["label-smoothing"] = float(label_smoothing)
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, (int, np.integer)):
        raise TypeError("ignore_index must be an int, got %r" % (ignore_index,))
    flags["ignore-index"] = int(ignore_index)
    if aux_loss_weight is not None:
        if not float(aux_loss_weight) >= 0:
            raise ValueError("aux_loss_weight must be >= 0, got %r" % (aux_loss_weight,))
        aux_loss_weight = float(aux_loss_weight)
    flags["aux-loss-weight"] = aux_loss_weight  # None: resolved after the export
    # Eval-mode BatchNorm modules train with their running statistics (an
    # error names one that has none); the modes are part of the cache key.
    eval_bns = finetune.eval_batch_norms(model)

    # Under torchrun (world size > 1) the step all-reduces its gradients
    # through NCCL (cnnc --gpus N): each process passes its own shard of the
    # data (e.g. a DistributedSampler), the loss is the mean over the ranks
    # and every rank starts from rank 0's state, as DDP does.
    ranks = world_size()
    if device is None:
        if ranks > 1 and _has_gpu():
            device = "cuda:%d" % int(os.environ.get("LOCAL_RANK", "0"))
        else:
            device = "cuda" if _has_gpu() else "cpu"
    device = torch.device(device)
    if device.type == "cuda" and not _has_gpu():
        raise CompileError("device='cuda' but torch sees no GPU")
    if device.type not in ("cuda", "cpu"):
        raise ValueError("device must be 'cuda' or 'cpu', got %s" % device)
    backend_kind = "cuda" if device.type == "cuda" else "reference"
    if plan is not None:
        plan = _pipeline.place(plan, ranks, backend_kind, CompileError)
        flags["pipeline"] = [plan.stages, plan.micro_batches, plan.schedule, plan.chunks]
        # The data-parallel replicas of each stage (cnnc --gpus D).
        ranks = plan.replicas or 1
    if ranks > 1:
        if backend_kind == "reference":
            raise CompileError(
                "data-parallel training (world size %d from the launcher) needs the GPU "
                "step: the CPU reference step runs in one process (`cnnc --run-reference "
                "--gpus N` runs N ranks as threads)" % ranks)
        flags["gpus"] = ranks
        # torch.nn.SyncBatchNorm layers: BatchNorm over the global batch
        # (cnnc --sync-bn); plain BatchNorm stays per rank, as under DDP.
        from cnnc.export import has_sync_batch_norm
        if has_sync_batch_norm(model):
            flags["sync-bn"] = True
    if remat is not None and not isinstance(remat, bool) and (
            not isinstance(remat, int) or remat <= 0):
        raise ValueError("remat must be None, False, True or a positive number of MiB, "
                         "got %r" % (remat,))
    if backend_kind == "reference":
        # The reference step runs in the CPU target's layout and precision
        # (cnnc's defaults, pipeline_options).
        ref_precision = pipeline_options.target_default("cpu", "precision")
        ref_layout = pipeline_options.target_default("cpu", "layout")
        if precision not in (None, ref_precision) or layout not in (None, ref_layout):
            raise ValueError("the CPU reference step runs in %s %s"
                             % (ref_precision, ref_layout.upper()))
    else:
        if remat is not None:
            flags["remat"] = remat
        flags["precision"] = precision or pipeline_options.target_default("gpu", "precision")
        flags["layout"] = layout or pipeline_options.target_default("gpu", "layout")
        if arch is None:
            major, minor = torch.cuda.get_device_capability(device)
            arch = "sm_90a" if (major, minor) == (9, 0) else "sm_%d%d" % (major, minor)
        flags["arch"] = arch

    optim.optimizer_step_flags(flags, clip_grad_norm, accumulate, flags.get("precision"))
    scaler = _scaler.check(scaler, flags.get("precision"), backend_kind)
    cnnc_bin = tools.find_tool("cnnc")
    if cnnc_bin is None:
        raise CompileError("the cnnc compiler was not found: set CNNC_BUILD_DIR to the build "
                           "directory (with bin/cnnc), or reinstall the package from a build")
    ref_lib = None
    fingerprint = [_file_fingerprint(cnnc_bin)]
    if backend_kind == "reference":
        ref_lib = tools.find_library("libcnnc_reference.so")
        if ref_lib is None:
            raise CompileError("libcnnc_reference.so was not found next to %s" % cnnc_bin)
        fingerprint.append(_file_fingerprint(ref_lib))
    shape = tuple(step_input.shape)
    quick = hashlib.sha256(json.dumps({
        "module": _module_fingerprint(model), "modes": finetune.mode_key(model),
        "shape": shape,
        "dtype": str(example_input.dtype), "flags": flags, "backend": backend_kind,
        "compiler": fingerprint, "torch": torch.__version__}, sort_keys=True).encode()).hexdigest()

    root = cache_dir()
    cache_limit = _cache.max_bytes()  # a bad $CNNC_CACHE_MAX_MB fails before the build
    os.makedirs(os.path.join(root, "keys"), exist_ok=True)
    key_file = os.path.join(root, "keys", quick + ".json")
    artifact_dir, cache_hit = None, False
    if cache and os.path.exists(key_file):
        try:
            with open(key_file) as f:
                entry = json.load(f)
            candidate = os.path.join(root, entry["artifact"])
            if os.path.exists(os.path.join(candidate, "meta.json")):
                artifact_dir, cache_hit = candidate, True
        except (OSError, ValueError, KeyError):
            artifact_dir = None
    t0 = time.time()
    if artifact_dir is None:
        artifact_dir = _build(model, example_input, flags, backend_kind, cnnc_bin,
                              fingerprint, root, verbose)
        _write_json_atomic(key_file, {"artifact": os.path.basename(artifact_dir)})
    _cache.note_use(root, artifact_dir, cache_limit)  # LRU size cap (cnnc/cache.py)
    with open(os.path.join(artifact_dir, "meta.json")) as f:
        meta = json.load(f)
    if backend_kind == "reference":
        backend = _ReferenceBackend(
            os.path.join(artifact_dir, "step.mlir"),
            os.path.join(artifact_dir, "step.mlir.cnnw"), ref_lib,
            stages_path=os.path.join(artifact_dir, "stages.mlir") if plan else None,
            micro_batches=plan.micro_batches if plan else 1)
    else:
        backend = _CudaBackend(os.path.join(artifact_dir, "libstep.so"),
                               os.path.join(artifact_dir, "libstep.so.cnnw"), device,
                               flags["ignore-index"], plan=plan)
    if tuple(backend.input_shape) != shape:
        raise CompileError("the compiled step takes %s, not the example's %s" %
                           (backend.input_shape, shape))
    info = {"backend": backend_kind, "cache_hit": cache_hit, "artifact_dir": artifact_dir,
            "compile_seconds": time.time() - t0, "flags": flags, "onnx_sha256": meta["onnx_sha256"],
            "eval_batch_norms": eval_bns, "pipeline": plan}
    trainer = Trainer(backend, model, optimizer, lr, info)
    _scaler.load_into(trainer, scaler)  # the f16 step resumes scaler='s scale
    return trainer


def _remat_args(remat):
    """cnnc's flags for compile()'s `remat` (None: cnnc's default)."""
    if remat is None:
        return []
    if remat is False:
        return ["--remat-convs=false"]
    if remat is True:
        return ["--remat"]
    return ["--remat-mb", str(int(remat))]


def _output_rank(onnx_path):
    """The rank of the exported model's first (main) output."""
    import onnx
    outputs = onnx.load(onnx_path, load_external_data=False).graph.output
    return len(outputs[0].type.tensor_type.shape.dim) if outputs else 2


def _build(model, example_input, flags, backend_kind, cnnc_bin, fingerprint, root, verbose):
    """Exports, compiles into a fresh directory and moves it into the cache
    under the hash of (ONNX bytes, flags, compiler)."""
    from cnnc.export import export_for_training
    work = tempfile.mkdtemp(prefix="build-", dir=root)
    try:
        onnx_path = os.path.join(work, "model.onnx")
        with warnings.catch_warnings():
            if not verbose:
                warnings.simplefilter("ignore")
            try:
                export_for_training(model, example_input, onnx_path)
            except Exception as e:  # the exporter's own errors, with context
                raise CompileError("torch.onnx.export of the training-mode graph failed: "
                                   "%s: %s" % (type(e).__name__, e)) from e
        with open(onnx_path, "rb") as f:
            onnx_hash = hashlib.sha256(f.read()).hexdigest()
        args = [cnnc_bin, onnx_path, "--train", "--optimizer", flags["optimizer"],
                "--label-smoothing", repr(flags["label-smoothing"]),
                "--ignore-index", str(flags.get("ignore-index", pipeline_options.default(
                    "ignore-index", cnnc_bin))),
                "--aux-loss-weight", repr(finetune.check_outputs(
                    finetune.onnx_output_names(onnx_path), flags.get("aux-loss-weight")))]
        if flags["optimizer"] != "none":
            args += ["--weight-decay", repr(flags["weight-decay"])]
        args += optim.optimizer_step_args(flags)  # clipping, accumulation
        if flags.get("pipeline"):
            from cnnc import pipeline as _pipeline
            stages, micro, schedule, chunks = flags["pipeline"]
            args += _pipeline.cnnc_args(_pipeline.Plan(stages, micro, schedule,
                                                       None, None, None, chunks))
        if flags.get("param-groups"):  # frozen parameters, param groups
            groups_path = os.path.join(work, "param_groups.json")
            _write_json_atomic(groups_path, flags["param-groups"])
            args += ["--param-groups", groups_path]
        if flags["optimizer"] == "sgd":
            args += ["--momentum", repr(flags["momentum"]),
                     "--dampening", repr(flags["dampening"])]
            if flags["nesterov"]:
                args.append("--nesterov")
        elif flags["optimizer"] in ("adam", "adamw"):
            args += ["--beta1", repr(flags["beta1"]), "--beta2", repr(flags["beta2"]),
                     "--eps", repr(flags["eps"])]
        if backend_kind == "reference":
            # Locations (ONNX node names) stay in the IR for cnnc.compare.
            args += ["--emit", "mlir", "--print-locations", "-o", os.path.join(work, "step.mlir")]
            _run_cnnc(args, "compile the training step")
            if flags.get("pipeline"):
                _pipeline.split_for_reference(
                    tools.find_tool("cnnc-opt"), os.path.join(work, "step.mlir"),
                    os.path.join(work, "stages.mlir"),
                    _pipeline.Plan(stages, micro, schedule, None, None, None, chunks),
                    _run_cnnc,
                    CompileError)
        else:
            if flags.get("gpus"):
                args += ["--gpus", str(flags["gpus"])]
                if flags.get("sync-bn"):
                    args.append("--sync-bn")
            args += _remat_args(flags.get("remat"))
            args += ["--precision", flags["precision"], "--layout", flags["layout"],
                     "--arch", flags["arch"], "--emit", "lib",
                     "-o", os.path.join(work, "libstep.so")]
            _run_cnnc(args, "build the GPU training step")
        meta = {"onnx_sha256": onnx_hash, "flags": flags, "backend": backend_kind,
                "compiler": fingerprint, "created": time.time()}
        _write_json_atomic(os.path.join(work, "meta.json"), meta)
        final = os.path.join(root, hashlib.sha256(json.dumps(
            [onnx_hash, flags, backend_kind, fingerprint], sort_keys=True).encode()).hexdigest())
        if os.path.exists(final):
            shutil.rmtree(work)
        else:
            try:
                os.rename(work, final)
            except OSError:  # another process finished the same build first
                shutil.rmtree(work, ignore_errors=True)
        return final
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise

