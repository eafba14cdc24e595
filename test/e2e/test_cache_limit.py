"""The size cap of cnnc.compile's cache (python/cnnc/cache.py).

* Unit: artifacts of known sizes and last-use times; enforce_limit removes
  the least recently used first, never the one in use, with the keys that
  point at them; stale build directories go; $CNNC_CACHE_MAX_MB is parsed,
  and a bad value is an error naming the variable.
* Through cnnc.compile (CPU path): with a cap of 0 compiling a second model
  evicts the first (its key too), so compiling the first again is a miss;
  with the default cap both stay and the second compile of each is a hit.
"""
import json
import os
import sys
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))

from cnnc import cache  # noqa: E402


def fake_artifact(root, name, size, used):
    d = root / name
    d.mkdir()
    (d / "meta.json").write_text("{}")
    (d / "blob").write_bytes(b"x" * size)
    os.utime(d, (used, used))
    (root / "keys").mkdir(exist_ok=True)
    (root / "keys" / ("k-" + name + ".json")).write_text(json.dumps({"artifact": name}))
    return d


def test_lru_eviction(tmp_path):
    now = time.time()
    a = fake_artifact(tmp_path, "a", 1000, now - 300)
    b = fake_artifact(tmp_path, "b", 1000, now - 200)
    c = fake_artifact(tmp_path, "c", 1000, now - 100)
    stale = tmp_path / "build-old"
    stale.mkdir()
    os.utime(stale, (now - 2 * 86400, now - 2 * 86400))
    fresh = tmp_path / "build-new"
    fresh.mkdir()
    assert [p for _, _, p in cache.artifacts(str(tmp_path))] == [str(a), str(b), str(c)]
    # a is in use now: b (then least recently used) goes first.
    cache.mark_used(str(a))
    removed = cache.enforce_limit(str(tmp_path), keep=str(a), limit=2100)
    assert removed == [str(b)]
    assert not b.exists() and a.exists() and c.exists()
    assert not (tmp_path / "keys" / "k-b.json").exists()
    assert (tmp_path / "keys" / "k-a.json").exists()
    assert not stale.exists() and fresh.exists()
    # A cap below one step keeps exactly the one in use.
    removed = cache.enforce_limit(str(tmp_path), keep=str(c), limit=0)
    assert removed == [str(a)] and c.exists()
    assert sorted(os.listdir(tmp_path / "keys")) == ["k-c.json"]


def test_limit_from_environment(monkeypatch):
    monkeypatch.delenv("CNNC_CACHE_MAX_MB", raising=False)
    assert cache.max_bytes() == 2048 << 20
    monkeypatch.setenv("CNNC_CACHE_MAX_MB", "1.5")
    assert cache.max_bytes() == 3 << 19
    for bad in ("-1", "lots", "nan", "inf"):
        monkeypatch.setenv("CNNC_CACHE_MAX_MB", bad)
        with pytest.raises(ValueError, match="CNNC_CACHE_MAX_MB must be a non-negative"):
            cache.max_bytes()


def test_compile_evicts_least_recently_used(monkeypatch, tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnx")
    from cnnc.tools import require_tool
    require_tool("cnnc")
    import cnnc
    monkeypatch.setenv("CNNC_CACHE_DIR", str(tmp_path / "cache"))

    def net(width):
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Conv2d(3, width, 3), torch.nn.ReLU(),
                                   torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                   torch.nn.Linear(width, 4))

    def build(width):
        m = net(width)
        t = cnnc.compile(m, torch.randn(2, 3, 8, 8), device="cpu",
                         optimizer=torch.optim.SGD(m.parameters(), lr=0.1))
        return t.cache_hit, t.info["artifact_dir"]

    hit, a = build(4)
    assert not hit
    hit, a2 = build(4)
    assert hit and a2 == a
    monkeypatch.setenv("CNNC_CACHE_MAX_MB", "0")
    hit, b = build(5)
    assert not hit and os.path.isdir(b) and not os.path.exists(a)
    keys = os.listdir(tmp_path / "cache" / "keys")
    assert len(keys) == 1
    hit, a3 = build(4)  # evicted: built again
    assert not hit and os.path.isdir(a3) and not os.path.exists(b)
    monkeypatch.setenv("CNNC_CACHE_MAX_MB", "bad")
    with pytest.raises(ValueError, match="CNNC_CACHE_MAX_MB"):
        build(4)
