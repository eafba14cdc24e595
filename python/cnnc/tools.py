"""Where the built cnnc tools and libraries are (for the package, tests and
scripts).

The build directory is: $CNNC_BUILD_DIR, else the one recorded when the
package was installed (cnnc/_install_config.py, written by setup.py), else
<repo>/build for a source checkout. $CNNC names the compiler itself (ctest
sets it and CNNC_BUILD_DIR to the same build).
"""
import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build_dirs():
    """Candidate build directories, most specific first."""
    dirs = []
    if os.environ.get("CNNC_BUILD_DIR"):
        dirs.append(os.environ["CNNC_BUILD_DIR"])
    try:
        from cnnc._install_config import BUILD_DIR
        dirs.append(BUILD_DIR)
    except ImportError:
        pass
    dirs.append(os.path.join(REPO, "build"))
    return dirs


def find_tool(name="cnnc"):
    """The path of tool `name` (cnnc, cnnc-opt, ...) in the build, or None."""
    if os.environ.get("CNNC"):
        cnnc = os.environ["CNNC"]
        path = cnnc if name == "cnnc" else os.path.join(os.path.dirname(cnnc), name)
        return path if os.path.exists(path) else None
    for d in build_dirs():
        if os.path.exists(os.path.join(d, "bin", name)):
            return os.path.join(d, "bin", name)
    return None


def find_library(name):
    """The path of shared library `name` (e.g. libcnnc_reference.so) in the
    build's lib/ directory (next to the cnnc in use), or None."""
    dirs = []
    cnnc = find_tool("cnnc")
    if cnnc:
        dirs.append(os.path.join(os.path.dirname(os.path.dirname(cnnc)), "lib"))
    dirs += [os.path.join(d, "lib") for d in build_dirs()]
    for d in dirs:
        if os.path.exists(os.path.join(d, name)):
            return os.path.join(d, name)
    return None


def require_tool(name="cnnc"):
    """find_tool, or skip the calling pytest test when the tool is not built."""
    path = find_tool(name)
    if path is None:
        import pytest
        pytest.skip("%s not built (set CNNC or CNNC_BUILD_DIR, or build build/bin)" % name)
    return path
