"""The marker text of one torch call: a cache key that is cheap to build, and the JSON made once per key.

docs/markers.md is the contract with ``pyprof.parse``. The hot path is ``signature``: it must not call
anything that pyprof patches (that would recurse) and must never read a tensor's value (that would sync
the GPU), so it touches only shape, dtype, contiguity and device.
"""
from __future__ import annotations

import json
import math

import torch

from pyprof.common import BoundedDict
from pyprof.record import MARKER_VERSION

MAX_STR_CHARS = 64

_Tensor = torch.Tensor
_Parameter = torch.nn.Parameter
PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter)  # exact types: a subclass may answer differently
SCALAR_TYPES = (int, float, bool, str, type(None), complex)
_SCALARS = SCALAR_TYPES
_CONSTANTS = (torch.dtype, torch.device, torch.layout, torch.memory_format)
_CONSTANT_NAMES = {torch.dtype: "dtype", torch.device: "device", torch.layout: "layout",
                   torch.memory_format: "memory_format"}


def signature(x):
    """Return a hashable key that is equal for two arguments exactly when their markers are equal."""
    t = type(x)
    if t is _Tensor or isinstance(x, _Tensor):
        local = _local_shard(x) if t is not _Tensor and t is not _Parameter else None
        if local is not None:  # a shard's marker is its own shape's, and its whole tensor's
            return (t, x.shape, signature(local))
        try:
            return (x.shape, x.dtype, x.is_contiguous(), x.get_device(), x.requires_grad)
        except (RuntimeError, NotImplementedError):  # sparse, nested, meta tensors without strides
            return (t, x.dtype)
    if t in _SCALARS:
        # The type is part of the key: 1, 1.0 and True are equal as dict keys but not as markers.
        return (t, x)
    if t is tuple or t is list or t is torch.Size:
        try:  # a list of plain tensors (foreach ops, cat) without a call per element
            return (t, tuple([(e.shape, e.dtype, e.is_contiguous(), e.get_device(), e.requires_grad)
                              if type(e) in PLAIN_TENSORS else signature(e) for e in x]))
        except (RuntimeError, NotImplementedError):
            return (t, tuple(map(signature, x)))
    if t in _CONSTANTS:
        return x
    return t


def describe(x, name: str | None = None) -> dict:
    """Return the marker entry of one argument (docs/markers.md, "Argument entries")."""
    entry = _describe(x)
    if name is not None:
        entry = {"name": name, **entry}
    return entry


def _describe(x) -> dict:
    t = type(x)
    if isinstance(x, _Tensor):
        return _tensor_entry(x)
    if t is bool:
        return {"type": "bool", "value": x}
    if t is int:
        return {"type": "int", "value": x}
    if t is float:
        return {"type": "float", "value": _finite(x)}
    if t is str:
        return {"type": "str", "value": _cut(x)}
    if x is None:
        return {"type": "none", "value": None}
    if t is complex:
        return {"type": "complex", "value": [_finite(x.real), _finite(x.imag)]}
    if t in _CONSTANTS:
        return {"type": _CONSTANT_NAMES[t], "value": _constant_name(x)}
    if isinstance(x, (tuple, list)):
        tensors = list(_flat_tensors(x))
        if tensors:
            return {"type": "tensorlist", "items": [_tensor_entry(e) for e in tensors]}
        return {"type": "tuple", "value": [_scalar_value(e) for e in x]}
    return {"type": t.__name__}


def _local_shard(x):
    """The tensor of this process's shard when ``x`` is a DTensor (FSDP2's parameters and gradients, tensor
    parallel weights), else None. Its kernels run on the shard: the marker's shape is the shard's."""
    if type(x).__name__ != "DTensor":
        return None
    local = getattr(x, "_local_tensor", None)
    return local if isinstance(local, _Tensor) else None


def _tensor_entry(x) -> dict:
    local = _local_shard(x) if type(x) not in PLAIN_TENSORS else None
    if local is not None:
        return {**_tensor_entry(local), "global_shape": list(x.shape)}
    entry = {"type": "tensor", "shape": list(x.shape), "dtype": _constant_name(x.dtype)}
    try:
        entry["contig"] = x.is_contiguous()
        entry["device"] = x.get_device()
    except (RuntimeError, NotImplementedError):
        pass
    # Whether backward will compute this tensor's gradient: a layer whose input needs none (the first
    # convolution) runs a weight-gradient kernel only, which prof must not count as a data gradient.
    entry["grad"] = x.requires_grad
    return entry


def _flat_tensors(xs):
    for e in xs:
        if isinstance(e, _Tensor):
            yield e
        elif isinstance(e, (tuple, list)):
            yield from _flat_tensors(e)


def _scalar_value(x):
    t = type(x)
    if t is float:
        return _finite(x)
    if t is str:
        return _cut(x)
    if t in (int, bool) or x is None:
        return x
    if t in _CONSTANTS:
        return _constant_name(x)
    if isinstance(x, (tuple, list)):
        return [_scalar_value(e) for e in x]
    return t.__name__


def _constant_name(x) -> str:
    # str(torch.float16) is 'torch.float16'; the marker keeps the bare name parse expects.
    return str(x).removeprefix("torch.")


def _finite(x: float):
    # JSON has no inf/nan literals; json.dumps would write invalid JSON for them.
    return x if math.isfinite(x) else str(x)


def _cut(s: str) -> str:
    return s if len(s) <= MAX_STR_CHARS else s[: MAX_STR_CHARS - 3] + "..."


def op_marker(mod: str, op: str, args, kwargs, site: str, stack: list[str] | None = None) -> str:
    """Return the JSON text of an op range (docs/markers.md, "Op ranges").

    The text is what ``json.dumps`` writes for the payload dict (compact separators, keys in the documented order),
    assembled from each argument's entry text: a tensor's entry is cached by its signature, so a call whose scalars
    change every step (an optimizer's per-step list of bias corrections beside lists of a hundred parameters) costs
    a join of cached texts, not a dump of every tensor again.
    """
    parts = [_entry_text(a) for a in args]
    # A keyword entry is its value's entry with "name" first: '{"name":"k",' + the entry after its "{".
    parts += ['{"name":' + _dumps(k) + "," + _entry_text(v)[1:] for k, v in kwargs.items()]
    text = (f'{{"pyprof":{_dumps(MARKER_VERSION)},"mod":{_dumps(mod)},"op":{_dumps(op)},'
            f'"args":[{",".join(parts)}],"site":{_dumps(site)}')
    if stack is not None:
        text += ',"stack":' + _dumps(stack)
    return text + "}"


_dumps = json.JSONEncoder(separators=(",", ":")).encode
#: Entry texts of plain tensors by (shape, dtype, contig, device, grad): every key of the entry. Bounded: shapes
#: that change every step (variable sequence lengths) would otherwise grow it.
_TENSOR_TEXTS = BoundedDict(20_000)


def _entry_text(x) -> str:
    t = type(x)
    if t in PLAIN_TENSORS:
        return _tensor_text(x)
    if (t is list or t is tuple) and x and all(type(e) in PLAIN_TENSORS for e in x):
        return '{"type":"tensorlist","items":[' + ",".join(map(_tensor_text, x)) + "]}"
    return _dumps(_describe(x))


def _tensor_text(x) -> str:
    try:
        key = (x.shape, x.dtype, x.is_contiguous(), x.get_device(), x.requires_grad)
    except (RuntimeError, NotImplementedError):  # sparse, nested: an entry without contig and device
        return _dumps(_tensor_entry(x))
    text = _TENSOR_TEXTS.get(key)
    if text is None:
        text = _dumps(_tensor_entry(x))
        _TENSOR_TEXTS.add(key, text)
    return text


def module_marker(qualname: str, type_name: str) -> str:
    """Return the JSON text of an ``nn.Module`` range."""
    return json.dumps({"pyprof": MARKER_VERSION, "module": qualname, "type": type_name}, separators=(",", ":"))


def profiler_literal(value) -> str:
    """A marker as the PyTorch profiler's range name: a Python literal without a double quote in it (parse reads
    it as it reads the original PyProf's markers, with ``ast.literal_eval``). The profiler writes range names into
    its JSON trace without escaping them, so a JSON marker's quotes would break the trace."""
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'").replace('"', "\\x22") + "'"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{profiler_literal(str(k))}: {profiler_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(profiler_literal(v) for v in value) + "]"
    if value is None or isinstance(value, (bool, int)):
        return repr(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else profiler_literal(str(value))
    return profiler_literal(str(value))
