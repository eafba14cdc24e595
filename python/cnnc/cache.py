"""Size cap of cnnc.compile's on-disk cache (cache_dir()).

Layout (cnnc.api): <root>/<artifact>/ holds one compiled step (meta.json,
the step, its weights), <root>/keys/<hash>.json points a quick key at an
artifact, <root>/build-*/ are builds in progress.

After every compile (hit or build) the artifact used is marked as used now
(its directory's mtime: atime is not kept on most mounts) and, while the
artifacts total more than the cap, the least recently used ones are removed
together with the keys that point at them. The artifact just used is never
removed, so a cap smaller than one step keeps exactly that step.

The cap is $CNNC_CACHE_MAX_MB mebibytes (default 2048); 0 keeps only the
artifact in use. A value that is not a non-negative number is an error that
names the variable. Build directories left behind by a killed process are
removed once they are a day old.
"""
import os
import shutil
import time

DEFAULT_MAX_MB = 2048
ENV = "CNNC_CACHE_MAX_MB"
STALE_BUILD_SECONDS = 24 * 3600


def max_bytes():
    """The cap in bytes from $CNNC_CACHE_MAX_MB (default 2048 MiB)."""
    text = os.environ.get(ENV, "").strip()
    if not text:
        return DEFAULT_MAX_MB << 20
    try:
        mb = float(text)
    except ValueError:
        mb = -1.0
    if not mb >= 0 or mb == float("inf"):
        raise ValueError("%s must be a non-negative number of MiB (0 keeps only the "
                         "step in use), got %r" % (ENV, text))
    return int(mb * (1 << 20))


def _size(path):
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total


def artifacts(root):
    """(last use, size in bytes, path) of every compiled step in the cache,
    least recently used first."""
    out = []
    try:
        names = os.listdir(root)
    except OSError:
        return out
    for name in names:
        path = os.path.join(root, name)
        if name == "keys" or name.startswith("build-") or \
                not os.path.isfile(os.path.join(path, "meta.json")):
            continue
        try:
            used = os.stat(path).st_mtime
        except OSError:
            continue
        out.append((used, _size(path), path))
    out.sort()
    return out


def mark_used(artifact_dir):
    """Marks a compiled step as used now (the LRU order)."""
    try:
        os.utime(artifact_dir)
    except OSError:
        pass


def _remove(root, path):
    """Removes an artifact and the keys that point at it. The directory is
    first renamed, so another process never sees half of it."""
    name = os.path.basename(path)
    keys = os.path.join(root, "keys")
    try:
        for k in os.listdir(keys):
            kp = os.path.join(keys, k)
            try:
                with open(kp) as f:
                    if ('"%s"' % name) in f.read():
                        os.remove(kp)
            except OSError:
                pass
    except OSError:
        pass
    doomed = os.path.join(root, "evict-%s-%d" % (name, os.getpid()))
    try:
        os.rename(path, doomed)
    except OSError:
        return
    shutil.rmtree(doomed, ignore_errors=True)


def enforce_limit(root, keep=None, limit=None, now=None):
    """Evicts least recently used steps until the cache holds at most
    `limit` bytes (default max_bytes()), never `keep`. Returns the paths
    removed."""
    limit = max_bytes() if limit is None else limit
    now = time.time() if now is None else now
    removed = []
    # Builds of killed processes.
    try:
        for name in os.listdir(root):
            p = os.path.join(root, name)
            if (name.startswith("build-") or name.startswith("evict-")) and \
                    now - os.stat(p).st_mtime > STALE_BUILD_SECONDS:
                shutil.rmtree(p, ignore_errors=True)
    except OSError:
        pass
    entries = artifacts(root)
    total = sum(size for _, size, _ in entries)
    keep = os.path.realpath(keep) if keep else None
    for _, size, path in entries:
        if total <= limit:
            break
        if keep and os.path.realpath(path) == keep:
            continue
        _remove(root, path)
        removed.append(path)
        total -= size
    return removed


def note_use(root, artifact_dir, limit=None):
    """What cnnc.compile calls after finding or building a step."""
    mark_used(artifact_dir)
    return enforce_limit(root, keep=artifact_dir, limit=limit)
