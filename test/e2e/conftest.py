"""Shared by the e2e tests: the python/ package on the path, and the built
cnnc as a fixture (the test is skipped when it is not built)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "python"))

from cnnc.tools import require_tool  # noqa: E402


@pytest.fixture(scope="module")
def cnnc():
    return require_tool("cnnc")
