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
    ["cnnc-opt", "cnnc", "cnnc-reference-run", "cnnc-capi-host"], [config.cnnc_tools_dir])

# nvcc compiles (but nothing runs) on machines without a GPU.
for nvcc in ("/usr/local/cuda/bin/nvcc",):
    if os.path.exists(nvcc):
        config.available_features.add("nvcc")
        config.substitutions.append(("%nvcc", nvcc))
        break
