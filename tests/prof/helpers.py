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
