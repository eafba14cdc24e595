# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "CNNC"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "gpu", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "e2e"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.cnnc_obj_root, "test")

llvm_config.use_default_substitutions()
config.substitutions.append(("%python", "/usr/bin/python3"))
config.substitutions.append(("%cnnc_src", config.cnnc_src_root))
llvm_config.with_environment("PATH", config.cnnc_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(
    ["cnnc-opt", "cnnc-translate", "cnnc", "cnnc-reference-run", "cnnc-capi-host"],
    [config.cnnc_tools_dir])

# nvcc compiles (but nothing runs) on machines without a GPU.
for nvcc in ("/usr/local/cuda/bin/nvcc",):
    if os.path.exists(nvcc):
        config.available_features.add("nvcc")
        config.substitutions.append(("%nvcc", nvcc))
        break

# MLIR's pass statistics (--mlir-pass-statistics) are LLVM Statistics, which
# compile to no-ops without LLVM_ENABLE_STATS (NDEBUG and no
# LLVM_FORCE_ENABLE_STATS: a Release build against Debian's LLVM). Tests of
# the printed statistics need a build where they count.
def _pass_statistics_enabled():
    import subprocess
    tool = os.path.join(config.cnnc_tools_dir, "cnnc-opt")
    ir = ("func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
          "  %y = cnn.relu %x : (tensor<2xf32>) -> tensor<2xf32>\n"
          "  return %y : tensor<2xf32>\n}\n")
    try:
        out = subprocess.run(
            [tool, "-", "--cnn-lower-elementwise", "--mlir-pass-statistics",
             "-o", os.devnull], input=ir, capture_output=True, text=True,
            timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return "lowered-ops" in out.stderr

if _pass_statistics_enabled():
    config.available_features.add("mlir-pass-statistics")
