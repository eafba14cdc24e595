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


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "zoo_heavy: deeper/wider torchvision variants, run with "
        "CNNC_ZOO_HEAVY=1 (test_torchvision.py)")
