"""bench/compile_time.py's rows (issue 37's compile time): each label names
what its build differs in, and the environment it runs with matches the
label, so that a device table can be read without the script (session 24's
"cold" row silently meant 4 host units, then 1)."""
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench"))

import compile_time  # noqa: E402


def test_rows_name_their_host_units_and_cache():
    runs = compile_time.build_runs(4)
    labels = [r[0] for r in runs]
    assert labels == ["one nvcc unit, no cache", "cold, 1 host unit, no cache",
                      "cold, default host units, no cache",
                      "cold, 4 host units, no cache", "cold, 4 host units, empty cache",
                      "unchanged, 4 host units", "weights changed, 4 host units",
                      "lr changed, 4 host units"]
    for label, env, lr, seed in runs:
        assert ("no cache" in label) == (env.get("CNNC_OBJECT_CACHE") == "off"), label
        assert (env.get("CNNC_NVCC_SPLIT") == "0") == label.startswith("one nvcc unit")
        if "default host units" in label:
            assert "CNNC_NVCC_HOST_UNITS" not in env, label
        elif "host unit" in label:
            n = label.split(" host unit")[0].rsplit(" ", 1)[1]
            assert env["CNNC_NVCC_HOST_UNITS"] == n, label
        assert (lr == 0.05) == label.startswith("lr changed")
        assert (seed is not None) == label.startswith("weights changed")
    # One host unit: no second cold row of the same build.
    labels = [r[0] for r in compile_time.build_runs(1)]
    assert labels.count("cold, 1 host unit, no cache") == 1
    assert "unchanged, 1 host unit" in labels
    # No --host-units: the cached rows build with cnnc's default.
    runs = compile_time.build_runs(0)
    assert [r[0] for r in runs][2:] == [
        "cold, default host units, no cache", "cold, default host units, empty cache",
        "unchanged, default host units", "weights changed, default host units",
        "lr changed, default host units"]
    assert all("CNNC_NVCC_HOST_UNITS" not in r[1] for r in runs[2:])


def test_host_units_from_the_unit_names():
    assert compile_time.host_units_of({"kernels0": 2.0, "host": 2.5, "host1": 1.9,
                                       "host2 (cached)": 0.0, "hyper": 0.1}) == 3
    assert compile_time.host_units_of({"model": 16.0}) is None


def test_unit_times_include_the_host_units():
    err = ("  10.0000 (100.0%)  nvcc compile\n"
           "   3.2000 ( 32.0%)    kernels0\n"
           "   2.5000 ( 25.0%)    host\n"
           "   2.1000 ( 21.0%)    host3\n"
           "   0.1000 (  1.0%)    hyper\n"
           "cnnc: nvcc: 6 unit(s), 6 compiled (16 at a time), 0 from the cache\n")
    assert compile_time.parse_unit_times(err) == {"kernels0": 3.2, "host": 2.5, "host3": 2.1,
                                                  "hyper": 0.1}
    stages, units = compile_time.parse_timing(err)
    assert stages == {"nvcc compile": 10.0} and units == (6, 6, 0)


@pytest.mark.parametrize("value", ["-1", "65"])
def test_bad_host_units_is_an_error(value, capsys):
    with pytest.raises(SystemExit):
        compile_time.main(["--cnnc", "cnnc", "--host-units", value])
    assert "--host-units must be from 0 (cnnc's default) to 64" in capsys.readouterr().err
