"""cnnc from Python: compile a torch.nn.Module's training step with cnnc.

    import cnnc
    trainer = cnnc.compile(model, example_input, optimizer=torch.optim.SGD(...))
    loss = trainer.step(x, y)
    trainer.sync_to(model)

Also the helpers the tests and scripts use: cnnc.export (ONNX export),
cnnc.safetensors and cnnc.cnnw (weights files; cnnc.load_state_dict reads
either into torch tensors), cnnc.tools (finding the build). See
docs/python.md.
The API is imported on first use, so that `python3 -m cnnc.cnnw` works
without torch.
"""
__version__ = "0.1.0"

_API = {"compile": "cnnc.api", "Trainer": "cnnc.api", "CompileError": "cnnc.api",
        "UnsupportedOptimizerError": "cnnc.api", "cache_dir": "cnnc.api",
        "optimizer_flags": "cnnc.api", "world_size": "cnnc.api", "compare": "cnnc.numerics",
        "CompareReport": "cnnc.numerics", "confusion_matrix": "cnnc.metrics",
        "miou": "cnnc.metrics", "load_state_dict": "cnnc.safetensors",
        "CnnrtError": "cnnc.runtime_errors"}
__all__ = sorted(_API)


def __getattr__(name):
    if name in _API:
        import importlib
        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError("module 'cnnc' has no attribute %r" % name)
