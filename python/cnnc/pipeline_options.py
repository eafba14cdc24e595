"""cnnc's pipeline options, read from the compiler.

The training pipeline's options (cnn-train-pipeline: the optimizer, layout,
precision, fusion and memory options), their defaults and the defaults each
target gets are declared once, in the compiler
(include/cnnc/Transforms/Pipeline.h). `cnnc --print-pipeline-options-json`
prints them; the package asks the compiler it runs instead of repeating
them.
"""
import functools
import json
import subprocess

from cnnc import tools


@functools.lru_cache(maxsize=None)
def _load(cnnc_bin):
    proc = subprocess.run([cnnc_bin, "--print-pipeline-options-json"],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        from cnnc.api import CompileError
        raise CompileError("%s --print-pipeline-options-json failed (exit %d): %s"
                           % (cnnc_bin, proc.returncode, proc.stderr.strip()))
    return json.loads(proc.stdout)


def options(cnnc_bin=None):
    """The JSON document: {"options": [{"name", "flag", "type", "default",
    "description"}, ...], "targets": {"gpu": {...}, "cpu": {...}}}."""
    cnnc_bin = cnnc_bin or tools.find_tool("cnnc")
    if cnnc_bin is None:
        from cnnc.api import CompileError
        raise CompileError("the cnnc compiler was not found: set CNNC_BUILD_DIR to the "
                           "build directory (with bin/cnnc), or reinstall the package "
                           "from a build")
    return _load(cnnc_bin)


def default(name, cnnc_bin=None):
    """The declared default of option `name` (e.g. 'aux-loss-weight')."""
    for opt in options(cnnc_bin)["options"]:
        if opt["name"] == name:
            return opt["default"]
    raise KeyError("cnnc has no pipeline option '%s'" % name)


def target_default(target, name, cnnc_bin=None):
    """What `target` ('gpu' or 'cpu') gets for `name` ('layout',
    'precision', 'fuse') when the option is not given."""
    return options(cnnc_bin)["targets"][target][name]
