"""safetensors files without the ``safetensors`` package (numpy only).

The format (https://huggingface.co/docs/safetensors): an 8-byte
little-endian header length N, N bytes of UTF-8 JSON
``{name: {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]},
"__metadata__": {str: str}}`` (padded with spaces), then the raw
little-endian bytes; offsets are relative to the end of the header and the
tensors' byte ranges tile the data exactly. Files written here load with
``safetensors.torch.load_file``; files it writes load here. The reader
applies the same rules as cnnc's C++ reader (runtime/src/Safetensors.cpp),
each violation one ``SafetensorsError`` naming the file and the tensor.

    from cnnc.safetensors import read_safetensors, write_safetensors
    tensors, metadata = read_safetensors("w.safetensors")  # name -> ndarray
    write_safetensors("w.safetensors", {"fc.weight": w}, {"format": "pt"})
    state = cnnc.load_state_dict("train.trained.safetensors")  # torch tensors

Names are PyTorch's ``state_dict`` keys (``conv1.weight``,
``bn1.running_mean``); optimizer state is ``<param>.momentum_buffer``,
``<param>.exp_avg``, ``<param>.exp_avg_sq``; under f16 ``loss_scale`` and
``loss_scale.growth_tracker``; a checkpoint also holds
``__step__`` (int64 [1], the last step done) and ``__loader__`` (int64 [3]:
data seed, epoch, sample within the epoch). docs/runtime.md lists them all.

Command line:
    python3 -m cnnc.safetensors FILE                 list tensors and metadata
    python3 -m cnnc.safetensors FILE --convert OUT   write OUT (.safetensors,
        .cnnw, or .pt: torch.save of the model's state_dict entries)
"""
import argparse
import collections
import json
import os
import struct
import sys

import numpy as np

MAX_HEADER = 100000000  # the safetensors crate's MAX_HEADER_SIZE
MAX_RANK = 8  # cnnrt::kMaxRank
DTYPES = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "I32": np.dtype("<i4"),
          "I64": np.dtype("<i8")}
# Also read (numpy holds them; cnnc's C++ side does not): converted where a
# model loads them.
EXTRA_DTYPES = {"F64": np.dtype("<f8"), "I8": np.dtype("i1"), "U8": np.dtype("u1"),
                "I16": np.dtype("<i2"), "U16": np.dtype("<u2"), "U32": np.dtype("<u4"),
                "U64": np.dtype("<u8"), "BOOL": np.dtype("?")}
NAMES = {v: k for k, v in DTYPES.items()}
NAMES.update({v: k for k, v in EXTRA_DTYPES.items()})


class SafetensorsError(ValueError):
    pass


def _no_duplicates(pairs):
    d = collections.OrderedDict()
    for k, v in pairs:
        if k in d:
            raise SafetensorsError("duplicate key \"%s\"" % k)
        d[k] = v
    return d


def _reject_constant(c):
    # Python's json takes NaN/Infinity; JSON (and the crate) do not.
    raise SafetensorsError("%s is not JSON" % c)


def _uint(v):
    # bool is an int in Python but not a JSON number.
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2 ** 64


def parse_safetensors(buf, path="<bytes>", extra_dtypes=True):
    """Parses the bytes of a safetensors file; returns (OrderedDict name ->
    array in the order of the data, metadata dict)."""
    mv = memoryview(buf)
    if len(mv) < 8:
        raise SafetensorsError("truncated file %s: %d bytes, less than the 8-byte "
                               "header length" % (path, len(mv)))
    (n,) = struct.unpack("<Q", mv[:8])
    if n > MAX_HEADER:
        raise SafetensorsError("%s: safetensors header length %d exceeds the "
                               "format's limit of %d bytes" % (path, n, MAX_HEADER))
    if n > len(mv) - 8:
        raise SafetensorsError("truncated file %s: the safetensors header length "
                               "%d runs past the end of the file (%d bytes)" %
                               (path, n, len(mv)))
    try:
        text = bytes(mv[8:8 + n]).decode("utf-8")
    except UnicodeDecodeError:
        raise SafetensorsError("%s: the safetensors header is not UTF-8" % path) from None
    if not text.startswith("{"):
        raise SafetensorsError("%s: the safetensors header does not start with '{'" % path)
    try:
        header = json.loads(text, object_pairs_hook=_no_duplicates,
                            parse_constant=_reject_constant)
    except SafetensorsError as e:
        raise SafetensorsError("%s: the safetensors header is not valid JSON: %s" %
                               (path, e)) from None
    except (ValueError, RecursionError) as e:
        raise SafetensorsError("%s: the safetensors header is not valid JSON: %s" %
                               (path, e)) from None
    data = mv[8 + n:]
    metadata = {}
    infos = []
    for name, info in header.items():
        if name == "__metadata__":
            if not isinstance(info, dict):
                raise SafetensorsError("%s: __metadata__ is not an object of strings"
                                       % path)
            for k, v in info.items():
                if not isinstance(v, str):
                    raise SafetensorsError("%s: __metadata__ value of \"%s\" is not "
                                           "a string" % (path, k))
            metadata = dict(info)
            continue

        def bad(what):
            return SafetensorsError("%s: tensor '%s': %s" % (path, name, what))
        if not name:
            raise SafetensorsError("%s: a tensor has an empty name" % path)
        if not isinstance(info, dict):
            raise bad("its header entry is not an object")
        for k in info:
            if k not in ("dtype", "shape", "data_offsets"):
                raise bad("unknown key \"%s\" (expected dtype, shape, data_offsets)" % k)
        for k in ("dtype", "shape", "data_offsets"):
            if k not in info:
                raise bad("missing \"%s\"" % k)
        dt = info["dtype"]
        if not isinstance(dt, str):
            raise bad("dtype is not a string")
        if dt in DTYPES:
            np_dt = DTYPES[dt]
        elif extra_dtypes and dt in EXTRA_DTYPES:
            np_dt = EXTRA_DTYPES[dt]
        elif dt == "BF16":
            np_dt = "bf16"
        else:
            raise bad("unsupported dtype '%s'" % dt)
        shape = info["shape"]
        if not isinstance(shape, list) or not all(_uint(d) and d < 2 ** 63 for d in shape):
            raise bad("shape %r is not a list of non-negative 64-bit integers" % (shape,))
        if len(shape) > MAX_RANK:
            raise bad("rank %d exceeds the maximum %d" % (len(shape), MAX_RANK))
        itemsize = 2 if np_dt == "bf16" else np_dt.itemsize
        nonzero = 1
        for d in shape:
            nonzero *= d if d else 1
        if nonzero >= 2 ** 63 or nonzero * itemsize >= 2 ** 63:
            raise bad("shape %s has more elements than fit in 64 bits" % shape)
        nbytes = nonzero * itemsize if all(shape) else 0
        off = info["data_offsets"]
        if not (isinstance(off, list) and len(off) == 2 and all(_uint(o) for o in off)):
            raise bad("data_offsets is not a pair [begin, end] of non-negative integers")
        begin, end = off
        if end < begin:
            raise bad("data_offsets [%d, %d] end before they begin" % (begin, end))
        if end > len(data):
            raise bad("data_offsets [%d, %d] run past the end of the data (%d bytes "
                      "after the header; truncated file?)" % (begin, end, len(data)))
        if end - begin != nbytes:
            raise bad("dtype %s and shape %s need %d bytes but data_offsets [%d, %d] "
                      "hold %d" % (dt, shape, nbytes, begin, end, end - begin))
        infos.append((begin, end, name, np_dt, shape))
    infos.sort(key=lambda t: (t[0], t[1]))
    at, prev = 0, None
    for begin, end, name, _, _ in infos:
        if begin != at:
            where = ("tensor '%s' (which ends at %d)" % (prev, at) if prev
                     else "the start of the data")
            raise SafetensorsError("%s: tensor '%s' data_offsets [%d, %d] %s %s" % (
                path, name, begin, end, "overlap" if begin < at else "leave a gap after",
                where))
        at, prev = end, name
    if at != len(data):
        raise SafetensorsError("%s: %d bytes after the last tensor's data" %
                               (path, len(data) - at))
    out = collections.OrderedDict()
    for begin, end, name, np_dt, shape in infos:
        raw = bytes(data[begin:end])
        if np_dt == "bf16":
            # bfloat16 is the upper half of a float32.
            a = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view("<f4")
        else:
            a = np.frombuffer(raw, dtype=np_dt)
        out[name] = a.reshape(shape).copy()
    return out, metadata


def read_safetensors(path, extra_dtypes=True):
    """Reads a safetensors file: (OrderedDict name -> numpy array, metadata)."""
    with open(path, "rb") as f:
        return parse_safetensors(f.read(), str(path), extra_dtypes)


def serialize_safetensors(tensors, metadata=None):
    """The bytes of a safetensors file holding name -> array (in this order;
    dtypes numpy cannot name in the format are converted to float32)."""
    header = collections.OrderedDict()
    if metadata:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise SafetensorsError("metadata must map strings to strings "
                                       "(got %r: %r)" % (k, v))
        header["__metadata__"] = dict(metadata)
    blobs, offset = [], 0
    for name, a in tensors.items():
        if not isinstance(name, str) or not name or name == "__metadata__":
            raise SafetensorsError("bad tensor name %r" % (name,))
        a = np.asarray(a)
        key = a.dtype.newbyteorder("<")
        if key not in NAMES:
            a = a.astype(np.float32)
            key = np.dtype("<f4")
        b = np.array(a, dtype=key, order="C", copy=True).tobytes()
        header[name] = {"dtype": NAMES[key], "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def write_safetensors(path, tensors, metadata=None):
    """Writes name -> array atomically (a temporary file renamed over path).
    Without metadata, {"format": "pt"}, which Hugging Face loaders expect."""
    data = serialize_safetensors(tensors, {"format": "pt"} if metadata is None
                                 else metadata)
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def read_any(path):
    """name -> numpy array from a .safetensors or a .cnnw file (by content:
    a .cnnw starts with its magic)."""
    with open(path, "rb") as f:
        head = f.read(8)
    if head == b"CNNW0001":
        from cnnc.cnnw import read_cnnw
        return read_cnnw(path)
    return read_safetensors(path)[0]


def load_state_dict(path, include_optimizer_state=False):
    """A cnnc weights file or checkpoint (.safetensors or .cnnw, e.g. what
    ``cnnc train`` or ``./train --checkpoint`` wrote) as a dict of torch
    tensors for ``model.load_state_dict``: the model's parameters and
    buffers. Optimizer state (``*.momentum_buffer``, ``*.exp_avg``,
    ``*.exp_avg_sq``), gradients (``*.grad``), the loss scale (``loss_scale``,
    ``loss_scale.growth_tracker``) and the ``__step__``-style entries are
    left out unless include_optimizer_state=True."""
    import torch
    out = collections.OrderedDict()
    for name, a in read_any(path).items():
        if not include_optimizer_state and _is_state_entry(name):
            continue
        out[name] = torch.from_numpy(np.array(a, copy=True))
    return out


_STATE_SUFFIXES = (".momentum_buffer", ".exp_avg", ".exp_avg_sq", ".grad")
_STATE_NAMES = ("loss_scale", "loss_scale.growth_tracker")


def _is_state_entry(name):
    return (name.startswith("__") and name.endswith("__")) or \
        name.endswith(_STATE_SUFFIXES) or name in _STATE_NAMES


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="python3 -m cnnc.safetensors",
        description="List a safetensors or .cnnw file, or convert it (to "
                    ".safetensors, .cnnw, or .pt: torch.save of the state_dict "
                    "entries, which model.load_state_dict takes).")
    p.add_argument("file", help="a .safetensors or .cnnw file")
    p.add_argument("--convert", metavar="OUT",
                   help="write OUT; its format by extension (.safetensors, .cnnw, .pt)")
    args = p.parse_args(argv)
    try:
        if args.convert:
            out = args.convert
            if out.endswith(".pt") or out.endswith(".pth"):
                import torch
                torch.save(load_state_dict(args.file), out)
            elif out.endswith(".cnnw"):
                from cnnc.cnnw import write_cnnw
                write_cnnw(out, read_any(args.file))
            elif out.endswith(".safetensors"):
                write_safetensors(out, read_any(args.file))
            else:
                p.error("--convert: OUT must end in .safetensors, .cnnw, .pt or .pth: %s"
                        % out)
            return 0
        with open(args.file, "rb") as f:
            is_cnnw = f.read(8) == b"CNNW0001"
        if is_cnnw:
            tensors, metadata = read_any(args.file), {}
        else:
            tensors, metadata = read_safetensors(args.file)
    except (OSError, ValueError) as e:
        print("error: %s" % e, file=sys.stderr)
        return 1
    for k, v in metadata.items():
        print("metadata %s = %s" % (k, v))
    for name, a in tensors.items():
        print("%-48s %-8s %s" % (name, a.dtype, list(a.shape)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
