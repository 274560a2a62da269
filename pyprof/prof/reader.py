"""Reading records: parse's JSON Lines, and the original PyProf's Python-dict lines (``ast.literal_eval``,
never ``eval``), line by line from a binary stream. A malformed line raises InputError naming the line.

Legacy dict lines keep their arguments inside ``marker`` strings; they are decoded here into ``args`` (and,
for backward kernels, which the original labelled with the forward op itself, into ``fwd``), so that the
rest of prof sees one shape of record.
"""
from __future__ import annotations

import ast
import json
from typing import IO, Any, Callable, Iterable, Iterator, Optional, TypedDict

from pyprof.common import InputError

try:
    from orjson import JSONDecodeError as _OrjsonError
    from orjson import loads as _loads

    _DECODE_ERRORS: tuple = (_OrjsonError, ValueError)
except ImportError:  # pragma: no cover - orjson is optional
    _loads = json.loads
    _DECODE_ERRORS = (ValueError,)

try:
    import msgspec

    Raw: type = msgspec.Raw
    LEAN_ERRORS: tuple = (msgspec.DecodeError,)  # ValidationError is one too
except ImportError:  # pragma: no cover - msgspec is optional: every line then takes the full decode
    msgspec = None

    class Raw:  # never instantiated: ``type(x) is Raw`` is then always false
        pass

    LEAN_ERRORS = ()


def lean_loads(keys: Iterable[str]) -> Callable[[bytes], dict] | None:
    """A decoder of one line into a dict of only the record's ``keys`` (those present in the line).

    Per-kernel output reads a dozen of a record's fields; decoding the rest (the range stack, the call stack,
    the markers) into Python objects is most of the cost of a row. msgspec skips fields it is not asked for
    without building objects. ``args``, and the forward link's ``args``, stay raw JSON (``Raw``): the model
    keys its cache by their bytes and decodes them (``raw_value``) only on a miss. The forward link keeps only
    ``mod``, ``op`` and ``args``.

    It raises one of ``LEAN_ERRORS`` for a line it cannot take (not JSON, not an object, a forward link that
    is not an object): the caller then decodes that line whole, so messages and results are the full path's.
    None where msgspec is not installed.
    """
    if msgspec is None:
        return None
    fields: dict = {k: Any for k in keys}
    if "args" in fields:
        fields["args"] = Raw  # null stays raw too (b"null")
    if "fwd" in fields:
        fields["fwd"] = Optional[_Fwd]
    return msgspec.json.Decoder(TypedDict("LeanRecord", fields, total=False)).decode


class _Fwd(TypedDict, total=False):
    """The parts of a forward link the model reads (lean decoding)."""

    mod: Any
    op: Any
    args: Raw


def raw_value(v):
    """The Python value of a field that lean decoding kept raw (any other value as it is)."""
    return msgspec.json.decode(v) if type(v) is Raw else v


def iter_records(stream: IO[bytes], path: str) -> Iterator[tuple[int, dict]]:
    """Yield (line number, record dict) for every non-blank line. Raises InputError on a malformed line."""
    loads = _loads
    for lineno, line in enumerate(stream, 1):
        try:
            d = loads(line)
        except _DECODE_ERRORS:
            if not line.strip():
                continue
            d = _legacy(line, path, lineno)
        if type(d) is not dict:
            raise InputError(path, f"line {lineno}: expected one record object per line, got {type(d).__name__}")
        yield lineno, d


def _legacy(line: bytes, path: str, lineno: int) -> dict:
    text = line.decode("utf-8", "replace").strip()
    if not text.startswith("{"):
        raise InputError(path, f"line {lineno}: not a JSON record nor a PyProf dict line")
    try:
        d = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise InputError(path, f"line {lineno}: not a JSON record nor a PyProf dict line") from None
    if not isinstance(d, dict):
        raise InputError(path, f"line {lineno}: expected a dict, got {type(d).__name__}")
    return from_legacy(d)


_LEGACY_MOD = {"Tensor": "torch.Tensor", "torch.Tensor": "torch.Tensor"}
_LEGACY_TYPES = {"NoneType": "none", "list": "tuple", "torch.dtype": "dtype", "dtype": "dtype"}


def from_legacy(d: dict) -> dict:
    """Map an original PyProf dict line to this project's record keys (args decoded from ``marker``)."""
    if "schema" in d or "args" in d:
        return d
    mods = [_LEGACY_MOD.get(m, m) for m in (d.get("mod") or [])]
    ops = list(d.get("op") or [])
    d["mod"], d["op"] = mods, ops
    args: list = []
    for m in d.get("marker") or []:
        try:
            mk = ast.literal_eval(m) if isinstance(m, str) else m
        except (ValueError, SyntaxError):
            continue
        if isinstance(mk, dict) and ops and mk.get("op") == ops[0]:
            args = [_legacy_arg(a) for a in mk.get("args") or [] if isinstance(a, dict)]
            break
    for key in ("grid", "block"):
        if isinstance(d.get(key), tuple):
            d[key] = list(d[key])
    if d.get("dir") == "bprop" and ops:
        # The original gave backward kernels their forward op's mod/op/args: keep that as the forward link.
        d["fwd"] = {"mod": mods, "op": ops, "args": args}
        args = []
    d["args"] = args
    return d


def _legacy_arg(a: dict) -> dict:
    out = {k: v for k, v in a.items() if k != "name" or v}
    t = out.get("type")
    out["type"] = _LEGACY_TYPES.get(t, t)
    if isinstance(out.get("shape"), tuple):
        out["shape"] = list(out["shape"])
    if isinstance(out.get("value"), tuple):
        out["value"] = list(out["value"])
    return out
