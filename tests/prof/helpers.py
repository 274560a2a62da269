"""Builders for hand-made argument entries and records (docs/markers.md format)."""
from __future__ import annotations


def T(shape, dtype="float32", name=None):
    e = {"type": "tensor", "shape": list(shape), "dtype": dtype, "contig": True, "device": 0}
    if name:
        e["name"] = name
    return e


def L(*tensors, name=None):
    e = {"type": "tensorlist", "items": list(tensors)}
    if name:
        e["name"] = name
    return e


def S(value, name=None):
    """A scalar, tuple, str or None entry, typed as a marker types it."""
    if value is None:
        e = {"type": "none", "value": None}
    elif isinstance(value, bool):
        e = {"type": "bool", "value": value}
    elif isinstance(value, int):
        e = {"type": "int", "value": value}
    elif isinstance(value, float):
        e = {"type": "float", "value": value}
    elif isinstance(value, str):
        e = {"type": "str", "value": value}
    else:
        e = {"type": "tuple", "value": list(value)}
    if name:
        e["name"] = name
    return e


def D(dtype, name=None):
    e = {"type": "dtype", "value": dtype}
    if name:
        e["name"] = name
    return e


def rec(name="kernel", dur=1000, op=None, mod=None, args=(), dir="fprop", sub=0, seq=(1,), tid=1, **kw):
    r = {"kind": "kernel", "kShortName": name, "kLongName": name, "kDuration": dur, "start_ns": 0, "tid": tid,
         "dir": dir, "subSeqId": sub, "seqId": list(seq), "mod": [mod] if mod else [], "op": [op] if op else [],
         "args": list(args), "gpu": "NVIDIA H200", "schema": 1}
    r.update(kw)
    return r


def split_name(name: str) -> tuple[str, str]:
    """(mod, op) of a registry key as a marker would carry it."""
    if "::" in name:
        return "aten", name
    mod, _, op = name.rpartition(".")
    return mod, op


_PARSED: dict = {}


def parsed(rel: str) -> bytes:
    """parse's JSON Lines for a committed capture (``tests/data/REL``), made once per test session with
    ``python -m pyprof.parse`` (an .xz export is decompressed to a temporary file first)."""
    import lzma
    import os
    import shutil
    import subprocess
    import sys
    import tempfile

    if rel not in _PARSED:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        src = os.path.join(root, "tests", "data", rel)
        assert os.path.isfile(src), f"missing fixture {src}"
        with tempfile.TemporaryDirectory() as tmp:
            path = src
            if rel.endswith(".xz"):
                path = os.path.join(tmp, os.path.basename(rel)[:-3])
                with lzma.open(src) as f, open(path, "wb") as out:
                    shutil.copyfileobj(f, out)
            p = subprocess.run([sys.executable, "-m", "pyprof.parse", path], capture_output=True, cwd=root,
                               env={**os.environ, "PYTHONPATH": root})
        assert p.returncode == 0, p.stderr.decode()[-2000:]
        _PARSED[rel] = p.stdout
    return _PARSED[rel]


def captures() -> list[str]:
    """Every committed H200 capture, relative to tests/data (tests/data/README.md)."""
    import glob
    import os

    data = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
    found = sorted(glob.glob(os.path.join(data, "nsys", "*", "*.sqlite.xz")) +
                   glob.glob(os.path.join(data, "kineto", "*.json.gz")))
    return [os.path.relpath(p, data) for p in found]
