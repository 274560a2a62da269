"""Reading records: parse's JSON Lines, and the original PyProf's Python-dict lines (``ast.literal_eval``,
never ``eval``), line by line from a binary stream. A malformed line raises InputError naming the line.

Legacy dict lines keep their arguments inside ``marker`` strings; they are decoded here into ``args`` (and,
for backward kernels, which the original labelled with the forward op itself, into ``fwd``), so that the
rest of prof sees one shape of record.
"""
from __future__ import annotations

import ast
import json
import re
import warnings
from typing import IO, Any, Callable, Iterable, Iterator, Optional, TypedDict, Union

from pyprof.common import BoundedDict, InputError

from pyprof.record import END_KEY, FIELD_NAMES, HEADER_KEY, SIDE_KEY, defaults_of
from pyprof.prof.load.contract import (FAST_TYPES, MAX_DEPTH, Ending, Header, check, deeper_than, is_end, is_header,
                                  is_side, typed_loads)
from pyprof.prof.load.side import read_side

import msgspec
from msgspec import Raw
from orjson import JSONDecodeError as _OrjsonError
from orjson import loads  # several times faster than json.loads on records

DECODE_ERRORS: tuple = (_OrjsonError, ValueError, RecursionError)
# ValidationError is a DecodeError; msgspec refuses a line nested past its own stack limit with RecursionError
LEAN_ERRORS: tuple = (msgspec.DecodeError, RecursionError, UnicodeDecodeError)  # (text not UTF-8)


def lean_loads(keys: Iterable[str]) -> Callable[[bytes], dict]:
    """A decoder of one line into a dict of only the record's ``keys`` (those present in the line).

    Per-kernel output reads a dozen of a record's fields; decoding the rest (the range stack, the call stack,
    the markers) into Python objects is most of the cost of a row. msgspec skips fields it is not asked for
    without building objects. ``args``, and the forward link's ``args``, stay raw JSON (``Raw``): the model
    keys its cache by their bytes and decodes them (``raw_value``) only on a miss. The forward link keeps only
    ``mod``, ``op`` and ``args``.

    It raises one of ``LEAN_ERRORS`` for a line it cannot take (not JSON, not an object, a forward link that
    is not an object): the caller then decodes that line whole, so messages and results are the full path's.
    """
    # Typed as contract.FAST_TYPES: a line whose keys have other types (or nest deeper) is refused here, at C
    # speed, and decoded whole by the caller, whose check names the key (or accepts the line).
    fields: dict = {k: FAST_TYPES.get(k, Any) for k in (*keys, "schema")}
    if "args" in fields:
        fields["args"] = Raw  # null stays raw too (b"null")
    if "fwd" in fields:
        fields["fwd"] = Optional[_Fwd]
    return msgspec.json.Decoder(TypedDict("LeanRecord", fields, total=False)).decode


class _Fwd(TypedDict, total=False):
    """The parts of a forward link prof reads (lean decoding): the model's, and the layer and call site a
    backward kernel's row takes from it."""

    mod: Union[str, list[str]]
    op: Union[str, list[str]]
    args: Raw
    layer: list[str]
    callsite: Optional[str]


def raw_value(v, level: int = 2):
    """The Python value of an argument list that lean decoding kept raw (any other value as it is), found at
    ``level`` of its record (2: the record's own ``args``; 3: its forward link's). Raises ValueError, which the
    caller turns into a message naming the line, for one that is not a list of objects (contract.TYPES) or
    that takes the record deeper than contract.MAX_DEPTH."""
    if type(v) is not Raw:
        return v
    value = msgspec.json.decode(v)
    if type(value) is not list or any(type(a) is not dict for a in value):  # null too, as the whole decode says
        raise ValueError("args: expected a list of argument objects")
    if deeper_than(value, MAX_DEPTH - level + 1):
        raise ValueError(f"arguments nested deeper than {MAX_DEPTH} levels")
    return value


class ArgsDecoder:
    """``raw_value`` for the model's cache misses, each argument decoded once: the list is only cut into its
    arguments' raw JSON, and an argument seen before (by its bytes) is taken from a bounded cache.

    Why: a call whose arguments differ from an earlier call's in one scalar misses the model's cache, and decoding
    and checking its whole list was most of that miss. An AdamW step's ``_foreach_div_`` and ``_foreach_addcdiv_``
    calls carry a new step size each step beside the same tensor lists (10.7 kB of JSON a call on the 50k
    Transformer export, 458 such misses in 60k records). The values are those ``raw_value`` gives (JSON decoded
    the same way, argument by argument), and any list it would refuse goes to it, which raises as before."""

    #: Arguments shorter than this are decoded each time: a scalar's few bytes change from call to call and
    #: would only churn the cache.
    CACHED_BYTES = 128
    #: Nor is a longer one kept: with 256 entries the cache holds at most 16 MB of JSON, whatever the input. Only the
    #: model's misses come here (two calls a step on the Transformer), so a few entries already serve a run.
    MAX_CACHED_BYTES = 64 << 10

    def __init__(self, max_entries: int = 256) -> None:
        self._cache = BoundedDict(max_entries)  # (level, an argument's JSON) -> its value
        self._split = msgspec.json.Decoder(list[Raw]).decode

    def __call__(self, v, level: int = 2):
        if type(v) is not Raw:
            return raw_value(v, level)
        try:
            parts = self._split(v)
        except (msgspec.DecodeError, RecursionError):  # null, not a list, too deep: the reference says which
            return raw_value(v, level)
        limit = MAX_DEPTH - level  # an argument is one level below its list (deeper_than counts the list)
        cache, out = self._cache, []
        for part in parts:
            raw = bytes(part)
            key = (level, raw) if self.CACHED_BYTES <= len(raw) <= self.MAX_CACHED_BYTES else None
            value = cache.get(key) if key is not None else None
            if value is None:
                try:
                    value = msgspec.json.decode(raw)
                except (msgspec.DecodeError, RecursionError):
                    return raw_value(v, level)
                if type(value) is not dict or deeper_than(value, limit):
                    return raw_value(v, level)  # raises, with the message the whole list gets
                if key is not None:
                    cache.add(key, value)
            out.append(value)
        return out


def read_records(stream: IO[bytes], path: str, side: list | None = None,
                 header: Header | None = None) -> Iterator[tuple[int, dict]]:
    """Yield (line number, record dict) for every record line, after checking it (contract.check), with every
    key of the record: those a schema-3 line leaves out at their default put back, and ``gpu_props`` from parse's
    header line. ``side``: a list that gets what each side line holds (pyprof.prof.load.side; else they are skipped
    unread). ``header``: a contract.Header that reads parse's header line, for a caller that wants what else it
    says (the input's rank: ``header.dist``).
    Raises InputError on a malformed line, and at the end for a stream cut short (contract.Ending).
    """
    ending = Ending(path)
    yield from _records_of(enumerate(stream, 1), path, Header() if header is None else header, ending, side)
    ending.done()


def read_lines_of(lines: Iterable[tuple[int, bytes]], path: str, header: Header,
                  linenos: list, side: list | None = None) -> Iterator[tuple[int, dict]]:
    """``read_records`` of a part of a file: (line number, line) pairs, the file's header already read into
    ``header``; whether the file ends as parse ends it is not judged here. Appends each record's line number
    to ``linenos`` as it is yielded, and (line number, what it holds) of each side line to ``side``."""
    # its own Ending: the records' schema is still checked as read_records checks it; its done() is not called
    for lineno, d in _records_of(lines, path, header, Ending(path), side, numbered=True):
        linenos.append(lineno)
        yield lineno, d


def _records_of(lines: Iterable[tuple[int, bytes]], path: str, header: Header, ending: Ending,
                side: list | None = None, numbered: bool = False) -> Iterator[tuple[int, dict]]:
    for lineno, line in lines:
        if is_end(line):
            ending.end()
            continue
        if is_header(line):
            header.read(line, path, lineno)
            ending.header()
            continue
        if is_side(line):
            if side is not None:
                run = read_side(_side_loads(line, path, lineno), path, lineno)
                if run is not None:
                    side.append((lineno, run) if numbered else run)
            continue
        d = typed_loads(line, path, lineno)  # decoded and checked at once: nearly every line
        if d is None:  # not a typed record: decoded whole, and the problem named
            try:
                d = loads(line)
            except DECODE_ERRORS:
                if not line.strip():
                    continue
                d = legacy_loads(line, path, lineno)
            if type(d) is not dict:
                raise InputError(path, f"line {lineno}: expected one record object per line, got {type(d).__name__}")
            if END_KEY not in d and SIDE_KEY not in d:
                check(d, path, lineno)
        if END_KEY in d:  # an end line written other than as parse writes it
            ending.end()
            continue
        if SIDE_KEY in d:  # a side line written other than as parse writes it
            if side is not None:
                run = read_side(d, path, lineno)
                if run is not None:
                    side.append((lineno, run) if numbered else run)
            continue
        ending.record(d, lineno)
        if "gpu_props" not in d:
            d["gpu_props"] = header.props(d)
        defaults_of(d)
        yield lineno, d


def _side_loads(line: bytes, path: str, lineno: int):
    try:
        return loads(line)
    except DECODE_ERRORS:
        raise InputError(path, f"line {lineno}: a damaged side line (not JSON)") from None


def legacy_loads(line: bytes, path: str, lineno: int) -> dict:
    """An original PyProf dict line as a record of today's shape. Raises InputError naming the line."""
    text = line.decode("utf-8", "replace").strip()
    if not text.startswith("{"):
        raise InputError(path, f"line {lineno}: not a JSON record nor a PyProf dict line")
    if len(text) > MAX_LEGACY_CHARS:
        raise InputError(path, f"line {lineno}: a PyProf dict line longer than {MAX_LEGACY_CHARS} characters")
    try:
        with warnings.catch_warnings():  # an odd escape in a string is a SyntaxWarning on stderr, not our output
            warnings.simplefilter("ignore")
            d = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise InputError(path, f"line {lineno}: not a JSON record nor a PyProf dict line") from None
    if not isinstance(d, dict):
        raise InputError(path, f"line {lineno}: expected a dict, got {type(d).__name__}")
    if deeper_than(d, MAX_DEPTH):
        raise InputError(path, f"line {lineno}: a record nested deeper than {MAX_DEPTH} levels")
    try:
        out = from_legacy(d)
    except (TypeError, ValueError, AttributeError) as e:
        raise InputError(path, f"line {lineno}: a PyProf dict line whose fields have unexpected types ({e})") \
            from None
    # Python literals hold what JSON cannot (a set, bytes, a complex number): the record is made of JSON's
    # values, as parse's are (tuples become lists), or refused.
    try:
        return json.loads(json.dumps(out, allow_nan=False))
    except (TypeError, ValueError) as e:
        raise InputError(path, f"line {lineno}: a PyProf dict line with a value JSON cannot hold ({e})") from None


#: The original PyProf's dict lines are a few kB; literal_eval's cost grows with a line's length.
MAX_LEGACY_CHARS = 1 << 20


_LEGACY_MOD = {"Tensor": "torch.Tensor", "torch.Tensor": "torch.Tensor"}
_LEGACY_TYPES = {"NoneType": "none", "list": "tuple", "torch.dtype": "dtype", "dtype": "dtype"}


def from_legacy(d: dict) -> dict:
    """Map an original PyProf dict line to this project's record keys (args decoded from ``marker``)."""
    if "schema" in d or "args" in d:
        return d
    mod, op = d.get("mod") or [], d.get("op") or []
    # One name as a string, not a list of one (a line written by hand): a name, never its characters.
    mods = [_LEGACY_MOD.get(m, m) for m in ([mod] if isinstance(mod, str) else mod)]
    ops = [op] if isinstance(op, str) else list(op)
    d["mod"], d["op"] = mods, ops
    args: list = []
    for m in d.get("marker") or []:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                mk = ast.literal_eval(m) if isinstance(m, str) else m
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
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


#: The first key of the first line of records: a field of the record (parse writes ``kind`` first; a writer of
#: records in another key order starts with another field) or parse's end line, alone in the records of a
#: profile without GPU activity. A PyTorch profiler trace's keys (schemaVersion, traceEvents,
#: deviceProperties ...) are none of them.
RECORD_FIRST_KEYS = frozenset(FIELD_NAMES) | {END_KEY, HEADER_KEY, SIDE_KEY}
_FIRST_KEY = re.compile(rb'\{\s*"([A-Za-z_][A-Za-z0-9_]{0,63})"\s*:')
#: Leading blank space looked through for the first line; a file that is all blank so far is records (none).
_BLANK_BYTES = 1 << 20


def is_records(path: str) -> bool:
    """True when ``path`` holds JSON Lines records (parse's, or the original PyProf's dict lines), False for a
    profiler export. Decided from the first key of the first line, however long that line is (a 20 MB kernel
    name, a deep value): at most the first MB of blank space and a few hundred bytes are read. An empty file
    (or blank lines only) is records, none of them: what ``pyprof parse`` writes for a profile without GPU
    activity. Raises InputError if the file cannot be read."""
    try:
        with open(path, "rb") as f:
            first = f.read(1 << 16)
            start = first[3:] if first.startswith(b"\xef\xbb\xbf") else first
            start = start.lstrip()
            read = len(first)
            while not start and read < _BLANK_BYTES:
                block = f.read(1 << 16)
                if not block:
                    break
                read += len(block)
                start = block.lstrip()
            if 0 < len(start) < 256:  # the first key may run on into the next block
                start += f.read(256)
    except OSError as e:
        raise InputError(path, f"cannot open: {e.strerror}") from None
    from pyprof.parse.readers.detect import GZIP_MAGIC, SQLITE_MAGIC, XZ_MAGIC

    if first.startswith((SQLITE_MAGIC, GZIP_MAGIC, XZ_MAGIC)):
        return False
    if not start:
        return True  # empty, or blank lines only: parse's output for a profile without GPU activity
    if start.startswith(b"{'"):
        return True  # the original PyProf's Python-dict lines
    m = _FIRST_KEY.match(start)
    return m is not None and m.group(1).decode() in RECORD_FIRST_KEYS
