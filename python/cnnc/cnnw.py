"""Reader and writer for .cnnw tensor files (weights, checkpoints, train state).

Format (docs/runtime.md, little-endian):

    "CNNW0001"                      8 bytes
    u32 count
    count x { u32 nameLen; char name[nameLen]; u32 dtype (0 f32, 1 f16, 2 i32, 3 i64);
              u32 rank; i64 dims[rank]; u64 nbytes; u8 data[nbytes] }   (C order)

    from cnnc.cnnw import read_cnnw, write_cnnw
    tensors = read_cnnw("state.cnnw")        # dict name -> numpy array (file order)
    write_cnnw("w.cnnw", {"fc.weight": w})

Command line: ``python3 -m cnnc.cnnw FILE`` lists the tensors. .cnnw is
cnnc's internal format (the weights beside a built executable); the
interchange format is safetensors (cnnc.safetensors), which every cnnc
reader and writer takes for a path ending in .safetensors.
"""
import collections
import os
import struct
import sys

import numpy as np

MAGIC = b"CNNW0001"
MAX_RANK = 8
DTYPES = {0: np.dtype("<f4"), 1: np.dtype("<f2"), 2: np.dtype("<i4"),
          3: np.dtype("<i8")}
CODES = {v: k for k, v in DTYPES.items()}


class CnnwError(ValueError):
    pass


def parse_cnnw(buf, path="<bytes>"):
    """Parses the bytes of a .cnnw file; returns an OrderedDict name -> array."""
    mv = memoryview(buf)
    pos = 0

    def take(n, what):
        nonlocal pos
        if pos + n > len(mv):
            raise CnnwError("%s: truncated file: %s needs %d bytes at offset %d, "
                            "file has %d" % (path, what, n, pos, len(mv)))
        out = mv[pos:pos + n]
        pos += n
        return out

    if bytes(take(8, "magic")) != MAGIC:
        raise CnnwError("%s: bad magic (not a CNNW0001 file)" % path)
    (count,) = struct.unpack("<I", take(4, "count"))
    out = collections.OrderedDict()
    for i in range(count):
        (nlen,) = struct.unpack("<I", take(4, "name length"))
        raw = bytes(take(nlen, "name"))
        try:
            name = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise CnnwError("%s: entry %d has a name that is not UTF-8: %r" %
                            (path, i, raw)) from None
        if not name:
            raise CnnwError("%s: entry %d has an empty name" % (path, i))
        dcode, rank = struct.unpack("<II", take(8, "dtype/rank"))
        if dcode not in DTYPES:
            raise CnnwError("%s: tensor '%s': bad dtype code %d" % (path, name, dcode))
        if rank > MAX_RANK:
            raise CnnwError("%s: tensor '%s': rank %d > %d" % (path, name, rank, MAX_RANK))
        dims = struct.unpack("<%dq" % rank, take(8 * rank, "dims"))
        (nbytes,) = struct.unpack("<Q", take(8, "nbytes"))
        dt = DTYPES[dcode]
        # The same shape rule as cnnrt::checkShape (runtime/src/TensorFile.cpp):
        # no negative dimension, and the product of the non-zero dimensions
        # times the item size fits in int64. Python ints do not overflow
        # (np.prod would wrap).
        if any(d < 0 for d in dims):
            raise CnnwError("%s: tensor '%s': shape %s has a negative dimension" %
                            (path, name, list(dims)))
        nonzero = 1
        for d in dims:
            nonzero *= d if d else 1
        if nonzero * dt.itemsize >= 2 ** 63:
            raise CnnwError("%s: tensor '%s': shape %s needs more bytes than fit "
                            "in 64 bits" % (path, name, list(dims)))
        expect = nonzero * dt.itemsize if all(dims) else 0
        if nbytes != expect:
            raise CnnwError("%s: tensor '%s': nbytes %d != %s x %d" %
                            (path, name, nbytes, list(dims), dt.itemsize))
        data = np.frombuffer(bytes(take(nbytes, "data of '%s'" % name)), dtype=dt)
        if name in out:
            raise CnnwError("%s: duplicate tensor name '%s'" % (path, name))
        out[name] = data.reshape(dims).copy()
    if pos != len(mv):
        raise CnnwError("%s: %d trailing bytes after %d tensors" %
                        (path, len(mv) - pos, count))
    return out


def read_cnnw(path):
    """Reads a .cnnw file; returns an OrderedDict name -> numpy array."""
    with open(path, "rb") as f:
        return parse_cnnw(f.read(), str(path))


def write_cnnw(path, tensors):
    """Writes name -> array (f32/f16/i32/i64; others are converted to f32)."""
    parts = [MAGIC, struct.pack("<I", len(tensors))]
    for name, a in tensors.items():
        a = np.asarray(a)
        if a.dtype.newbyteorder("<") not in CODES:
            a = a.astype(np.float32)
        # (np.ascontiguousarray would turn rank 0 into rank 1)
        a = np.array(a, dtype=a.dtype.newbyteorder("<"), order="C", copy=True)
        nb = name.encode("utf-8")
        parts += [struct.pack("<I", len(nb)), nb,
                  struct.pack("<II", CODES[a.dtype], a.ndim),
                  struct.pack("<%dq" % a.ndim, *a.shape),
                  struct.pack("<Q", a.nbytes), a.tobytes()]
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(b"".join(parts))
    os.replace(tmp, path)


def main(argv=None):
    import argparse
    p = argparse.ArgumentParser(
        prog="python3 -m cnnc.cnnw",
        description="List the tensors of a .cnnw file (name, dtype, shape). "
                    "To bring one into PyTorch: cnnc.load_state_dict(FILE), or "
                    "python3 -m cnnc.safetensors FILE --convert OUT.safetensors|OUT.pt")
    p.add_argument("file", help="a .cnnw file")
    args = p.parse_args(argv)
    try:
        tensors = read_cnnw(args.file)
    except (OSError, ValueError) as e:
        print("error: %s" % e, file=sys.stderr)
        return 1
    for name, a in tensors.items():
        print("%-48s %-8s %s" % (name, a.dtype, list(a.shape)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
