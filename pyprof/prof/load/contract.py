"""What prof and report accept as a record, checked as it is read: the types of the keys they read (docs/record.md),
a bound on nesting, the schema versions known, and parse's end line at the end of a stream of schema 2 records.

A record that breaks this is bad input: one InputError naming the file, the line and the key. The types are
msgspec types, so that the per-kernel path (reader.lean_loads) checks them while it decodes, at C speed, and the
other paths check a decoded record with the same declaration (``check``).
"""
from __future__ import annotations

import io
import os
import stat
from typing import IO, Annotated, Any, Optional, TypedDict, Union

from pyprof.common import InputError

from pyprof.record import (DIST_KEYS, END_KEY, END_PREFIX, FIELDS, HEADER_KEY, HEADER_PREFIX, INT_MAX, INT_MIN,
                           RECORD_SCHEMA, SIDE_PREFIX)

import msgspec

#: Records nest a few levels (a forward link's arguments, a tensor list's items); deeper ones are refused before
#: any code walks them (a walk that recursed would hit Python's limit on a hostile line).
MAX_DEPTH = 24


#: Integers are 64-bit (the readers keep times and counts in int64 arrays): JSON allows any size. The bounds are
#: record.INT_MIN and INT_MAX, which parse keeps to.
_Int: Any = Annotated[int, msgspec.Meta(ge=INT_MIN, le=INT_MAX)]
_Names = Union[str, list[str]]  # legacy PyProf lines and forward links may give one name instead of a list
_Ints = list[Optional[_Int]]

#: Container levels inside an argument's value (or a marker's, a GPU property's) that the fast, typed decoding
#: takes: real values nest up to 3 (a tensor list: a list of objects holding shape lists). A line nested deeper
#: is not refused for that: it is decoded whole and walked (``check``), which allows MAX_DEPTH.
FAST_LEVELS = 5


def _json(levels: int) -> Any:
    """Any JSON value of at most ``levels`` levels of lists and objects. Unrolled, a level per union: msgspec
    expands each reference, so the type grows as 2**levels (FAST_LEVELS keeps it small)."""
    scalar = Union[None, bool, int, float, str]
    value: Any = scalar
    for _ in range(levels):
        value = Union[scalar, list[value], dict[str, value]]  # type: ignore[valid-type]
    return value


def _types(value: Any) -> dict[str, Any]:
    """The type of each record field (record.FIELDS), as prof and report accept it: by the field's JSON kind, null
    allowed where a reader copes, and looser where old writers differ (named in ``special``); ``value`` is the
    type of a value inside arguments, markers and GPU properties."""
    arg = dict[str, value]
    fwd = TypedDict("Fwd", {"mod": _Names, "op": _Names, "args": list[arg], "callsite": Optional[str],  # type: ignore[misc]
                            "layer": list[str], "seq": Optional[_Int]}, total=False)
    by_kind = {"str": Optional[str], "str?": Optional[str], "int": Optional[_Int], "int?": Optional[_Int],
               "ints": _Ints, "strings": list[str], "bool": bool, "value": Optional[value], "nested": list[value]}
    special = {
        "kind": str, "schema": _Int, "est_occupancy_pct": Optional[float], "gpu_props": Optional[dict[str, value]],
        "marker": list[Union[arg, str]],  # the original PyProf wrote its markers as Python reprs (strings)
        "mod": _Names, "op": _Names,  # legacy PyProf lines and forward links may give one name, not a list
        "args": list[arg], "outputs": list[list[_Int]], "fwd": Optional[fwd],
    }
    return {f.name: special.get(f.name, by_kind.get(f.json)) for f in FIELDS}


#: The declaration ``check`` converts a decoded record to (after bounding its depth with a walk).
TYPES: dict[str, Any] = _types(Any)
#: The same keys with nested values bounded by type (FAST_LEVELS): what decoding checks at C speed.
FAST_TYPES: dict[str, Any] = _types(_json(FAST_LEVELS))

#: Every key a reader keeps (the end line's key too, so that one written with other spacing is still seen): a
#: record decoded with this type loses only keys no reader reads.
FullRecord = TypedDict("FullRecord", {**TYPES, END_KEY: bool}, total=False)  # type: ignore[misc]
_FastRecord = TypedDict("_FastRecord", {**FAST_TYPES, END_KEY: bool}, total=False)  # type: ignore[misc]

_typed_decode = msgspec.json.Decoder(_FastRecord).decode
# ValidationError is a DecodeError; text that is not UTF-8 raises UnicodeDecodeError
_TYPED_ERRORS: tuple = (msgspec.DecodeError, RecursionError, UnicodeDecodeError)


def typed_loads(line: bytes, path: str, lineno: int) -> dict | None:
    """The record on ``line`` decoded and checked in one pass (msgspec, at C speed: the keys of FullRecord only,
    each of its type), or None when the line is something else (not JSON, not an object, a key of another type,
    nested deeper than FAST_LEVELS): the caller then decodes it whole and ``check`` names the problem
    (or accepts it: a line nested deeper than FAST_LEVELS and at most MAX_DEPTH is a record).
    Raises InputError for a record of a newer schema."""
    try:
        d = _typed_decode(line)  # the types bound the nesting too (FAST_LEVELS)
    except _TYPED_ERRORS:
        return None
    _known_schema(d, path, lineno)
    return d


def check(d: dict, path: str, lineno: int) -> None:
    """Raise InputError naming ``path`` and ``lineno`` when record ``d`` has a key of the wrong type, nests deeper
    than MAX_DEPTH, or comes from a newer writer than this reader."""
    if deeper_than(d, MAX_DEPTH):
        raise InputError(path, f"line {lineno}: a record nested deeper than {MAX_DEPTH} levels")
    try:
        msgspec.convert(d, FullRecord)
    except msgspec.ValidationError as e:
        raise InputError(path, f"line {lineno}: a record field has an unexpected type ({_first_line(e)})") from None
    _known_schema(d, path, lineno)


def _known_schema(d: dict, path: str, lineno: int) -> None:
    schema = d.get("schema")
    if type(schema) is int and schema > RECORD_SCHEMA:
        raise InputError(path, f"line {lineno}: records of schema {schema}, newer than this pyprof reads "
                               f"({RECORD_SCHEMA}): upgrade pyprof")


def _first_line(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    return text if len(text) <= 200 else text[:200] + "..."


def deeper_than(value: Any, limit: int) -> bool:
    """True when ``value`` nests lists or dicts more than ``limit`` deep (walked level by level, never recursively:
    the input decides the depth)."""
    level, depth = [value], 0
    while level:
        depth += 1
        if depth > limit:
            return True
        level = [x for v in level for x in (v.values() if type(v) is dict else v) if type(x) in (list, dict)]
    return False


def is_header(line: bytes) -> bool:
    """True for parse's header line (schema 3 on: written exactly as record.header_line makes it)."""
    return line.startswith(HEADER_PREFIX)


class Header:
    """What parse's header line says about the records after it: their schema and each device's GPU properties,
    which schema 3 writes there once instead of on every record."""

    __slots__ = ("gpus", "dist", "schema")

    def __init__(self) -> None:
        self.gpus: dict = {}
        self.schema: int | None = None  # the records' schema; None until a header line is read (schema 1, 2)
        self.dist: dict | None = None  # the input's rank, world size, backend (record.DIST_KEYS), where it says

    def read(self, line: bytes, path: str, lineno: int) -> None:
        """Take a header line. Raises InputError for one that is not a header of a schema this pyprof reads."""
        try:
            import orjson

            h = orjson.loads(line)
        except ValueError:
            h = None
        if type(h) is not dict or h.get(HEADER_KEY) is not True or type(h.get("gpus")) is not dict \
                or type(h.get("schema")) is not int:
            raise InputError(path, f"line {lineno}: a damaged header line (expected parse's "
                                   f'{{"{HEADER_KEY}":true,"schema":N,"gpus":{{...}}}})')
        _known_schema(h, path, lineno)
        gpus = {}
        for dev, g in h["gpus"].items():
            if type(g) is not dict or not isinstance(g.get("gpu_props"), (dict, type(None))):
                raise InputError(path, f"line {lineno}: the header's GPU {dev!r} is not an object with gpu_props")
            gpus[dev] = g.get("gpu_props")
        self.gpus = gpus
        self.dist = _dist(h.get("dist"), path, lineno)
        self.schema = h["schema"]

    def props(self, d: dict) -> dict | None:
        """The GPU properties of record ``d``'s device: its own (records before schema 3), else the header's."""
        props = d.get("gpu_props")
        if props is None and self.gpus:
            dev = d.get("device")
            props = self.gpus.get(str(dev), self.gpus.get("*"))
        return props


def _dist(d: object, path: str, lineno: int) -> dict | None:
    """The header's ``dist`` with its known keys (record.DIST_KEYS), each of its kind or null. Raises InputError
    for one that is not an object of those."""
    if d is None:
        return None
    kinds = {"int": int, "str": str}
    if type(d) is not dict or any(d.get(k) is not None and type(d[k]) is not kinds[kind]
                                  for k, kind in DIST_KEYS.items()):
        raise InputError(path, f"line {lineno}: the header's dist is not an object of "
                               f"{', '.join(f'{k} ({kind})' for k, kind in DIST_KEYS.items())}")
    return {k: d.get(k) for k in DIST_KEYS}


def is_side(line: bytes) -> bool:
    """True for a side line (schema 4 on: written exactly as record.memory_line makes one)."""
    return line.startswith(SIDE_PREFIX)


def is_end(line: bytes) -> bool:
    """True for parse's end line (written exactly as record.end_line makes it)."""
    return line.startswith(END_PREFIX)


#: Bytes read at each end of a regular file by ``check_file_ending`` (a record line is a few kB).
ENDS_BYTES = 1 << 20


def check_file_ending(stream: IO[bytes], path: str) -> None:
    """Before any output: raise the InputError of Ending.done when ``stream`` is a regular file whose first record
    is of schema 2 or later and whose last line is not parse's end line. Other streams (pipes) are checked as
    they end, after the rows of what came before (prof is a streaming filter)."""
    try:
        fd, pos = stream.fileno(), stream.tell()
        st = os.fstat(fd)
    except (OSError, AttributeError, ValueError, io.UnsupportedOperation):
        return
    if not stat.S_ISREG(st.st_mode):
        return
    if st.st_size <= pos:
        raise empty_input(path)
    head = os.pread(fd, min(ENDS_BYTES, st.st_size - pos), pos)
    if pos + len(head) == st.st_size and not head.strip():
        raise empty_input(path)
    first = next((x for x in head.split(b"\n") if x.strip()), b"")
    at = head.find(first) if first else 0
    if first and head.find(b"\n", at) < 0 and pos + len(head) < st.st_size:
        # A first line longer than what was read (a header naming a GPU at length, a record of megabytes): read it
        # whole, as the rows' reader will, or a file is refused (or let through) where a pipe of it is not.
        first = _line_at(fd, pos + at, st.st_size)
    lineno = 1 + head[:at].count(b"\n")
    if is_header(first):  # schema 3 on: the header says the schema
        Header().read(first, path, lineno)
        ending = Ending(path)
        ending.required = True
        return _check_tail(fd, pos, st.st_size, ending)
    if b'"schema":' not in first:  # schema 1 records and PyProf's dict lines need no end line
        return
    try:
        import orjson

        d = orjson.loads(first)
    except ValueError:
        return  # the reader names the line
    ending = Ending(path)
    if type(d) is dict and not is_end(first):
        ending.record(d, lineno)
    _check_tail(fd, pos, st.st_size, ending)


def _line_at(fd: int, pos: int, size: int) -> bytes:
    """The file's line from ``pos`` to its newline (or the file's end), without it."""
    blocks: list = []
    while pos < size:
        block = os.pread(fd, ENDS_BYTES, pos)
        if not block:
            break
        end = block.find(b"\n")
        blocks.append(block if end < 0 else block[:end])
        if end >= 0:
            break
        pos += len(block)
    return b"".join(blocks)


def _check_tail(fd: int, pos: int, size: int, ending: "Ending") -> None:
    at = max(pos, size - ENDS_BYTES)
    tail = os.pread(fd, size - at, at)
    last = next((x for x in reversed(tail.split(b"\n")) if x.strip()), b"")
    if is_end(last):
        ending.end()
    ending.seen = True  # the file has a first line: not empty, whatever its end says
    ending.done()


def empty_input(path: str) -> InputError:
    """The error for an input with no line at all (blank lines aside): not "a profile without GPU activity", which
    parse writes as a header and an end line, but what a refused ``pyprof parse F > x.dict`` leaves behind."""
    return InputError(path, "empty: no header line (was its parse refused?)")


class Ending:
    """Whether a stream of records ended as parse ends one: records of schema 2 and later are followed by parse's
    end line once all of them are out; a stream whose last line is a record was cut short. Older records and the
    original PyProf's dict lines end anyhow."""

    __slots__ = ("path", "required", "ended", "seen")

    def __init__(self, path: str) -> None:
        self.path = path
        self.required = False
        self.ended = False
        self.seen = False  # a header, record or end line was read: the input is not empty

    def header(self) -> None:
        """Parse's header line was read: the records after it end with an end line (schema 3 on)."""
        self.required = True
        self.ended = False
        self.seen = True

    def record(self, d: dict, lineno: int) -> None:
        """A record line was read: the first of the stream, or the first after an end line (each run of records
        comes from one parse, so its schema is that run's; a newer one is refused here, on the paths that check
        only some keys of each record)."""
        _known_schema(d, self.path, lineno)
        self.seen = True
        if not self.required:
            schema = d.get("schema")
            self.required = type(schema) is int and schema >= 2
        self.ended = False

    def end(self) -> None:
        """Parse's end line was read."""
        self.ended = True
        self.seen = True

    def done(self) -> None:
        """The input is over: raise InputError if it was empty or cut short."""
        if not self.seen:
            raise empty_input(self.path)
        if self.required and not self.ended:
            raise InputError(self.path, "the records end without parse's end line: the parse that wrote them did not "
                                        "finish (it failed or was stopped part way); parse the profile again")


__all__ = ["TYPES", "FAST_TYPES", "FullRecord", "typed_loads", "MAX_DEPTH", "END_KEY", "check", "deeper_than", "is_end",
           "is_side", "Ending", "empty_input", "check_file_ending"]
