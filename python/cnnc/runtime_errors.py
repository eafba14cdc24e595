"""The GPU runtime's errors as Python exceptions.

libcnnrt's C API (runtime/include/cnnrt/cnnrt_c.h) never ends the process:
a function that fails returns -1 (cnnrt_create: NULL) and keeps the message
(cnnrt_last_error) and what failed (cnnrt_last_error_code). The ctypes
backend (cnnc.api._CudaBackend) turns every such status into a CnnrtError
through check() and create_session() here.
"""

#: cnnrt_last_error_code() -> CnnrtError.kind (cnnrt_c.h's CNNRT_ERROR_*).
KINDS = {
    1: "invalid",
    2: "no-gpu",
    3: "out-of-memory",
    4: "cuda",
    5: "cudnn",
    6: "cublas",
    7: "config",
    8: "data-parallel",
}


class CnnrtError(RuntimeError):
    """The GPU runtime failed: no usable GPU, out of GPU memory, a CUDA,
    cuDNN or cuBLASLt error, a CNNRT_* setting it cannot honour, ... The
    message is the runtime's (what the standalone executable prints);
    `kind` says what failed (a value of KINDS, "error" when the library
    does not say). After a CUDA error inside a step the trainer's session is
    unusable: build a new trainer (often a new process: CUDA's own context
    may be lost too)."""

    def __init__(self, message, kind="error"):
        super().__init__(message)
        self.kind = kind


def last_error(lib, what):
    """The CnnrtError for the last failed call of `lib` on this thread,
    its message prefixed with "cnnc: <what>: "."""
    message = (lib.cnnrt_last_error() or b"").decode(errors="replace")
    # Libraries built before the code existed have no cnnrt_last_error_code.
    code_fn = getattr(lib, "cnnrt_last_error_code", None)
    kind = "error"
    if code_fn is not None:
        import ctypes
        code_fn.restype, code_fn.argtypes = ctypes.c_int, []
        kind = KINDS.get(int(code_fn()), "error")
    return CnnrtError("cnnc: %s: %s" % (what, message or "unknown runtime error"), kind)


def check(lib, rc, what):
    """Raises the runtime's error when the status `rc` of a C API call is
    not 0."""
    if rc != 0:
        raise last_error(lib, what)


def create_session(lib, spec, weights_path, use_graph=True):
    """cnnrt_create(spec, weights_path, use_graph): the session handle, or
    the runtime's error (no GPU, a bad CNNRT_* setting, out of memory while
    preparing the step, an unreadable weights file) as a CnnrtError."""
    handle = lib.cnnrt_create(spec, weights_path.encode() if weights_path else None,
                              int(bool(use_graph)))
    if not handle:
        raise last_error(lib, "cannot create the GPU session")
    return handle
