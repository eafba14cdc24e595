"""cnnc Python helpers: export models from PyTorch, compile, run, compare."""
