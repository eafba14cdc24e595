"""Where the built cnnc tools are (for tests and scripts).

The build is found as: the directory of $CNNC, else $CNNC_BUILD_DIR/bin,
else <repo>/build/bin (ctest sets both variables to the same build).
"""
import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def find_tool(name="cnnc"):
    """The path of tool `name` (cnnc, cnnc-opt, ...) in the build, or None."""
    if os.environ.get("CNNC"):
        cnnc = os.environ["CNNC"]
        path = cnnc if name == "cnnc" else os.path.join(os.path.dirname(cnnc), name)
        return path if os.path.exists(path) else None
    dirs = []
    if os.environ.get("CNNC_BUILD_DIR"):
        dirs.append(os.path.join(os.environ["CNNC_BUILD_DIR"], "bin"))
    dirs.append(os.path.join(REPO, "build", "bin"))
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
