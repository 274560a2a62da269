"""The JSON of a Kineto trace: its bytes, guarded as they are read, and its events, decoded block by block.

Two readers give the same events. The block reader (``BlockReader``) cuts the ``traceEvents`` array into runs of
whole events and decodes each run with msgspec into ``Event`` structs, whose ``args`` stay undecoded bytes until
the event is one pyprof keeps (most of a trace's bytes are arguments it never reads: call stacks, async events).
It vouches only for the layouts every profiler writes; for anything else it raises ``NotBlocks`` and the caller
reads the file again with ijson's event stream (kineto.py), which is the reference: it defines every error message
and what an odd file (duplicate keys, events that are not objects) yields.

Both decode numbers alike: an integer literal as ``int``, any other as ``Decimal`` of its text (exact microseconds).
"""
from __future__ import annotations

import re
from decimal import Decimal
from typing import IO, Iterator

import msgspec

from pyprof.common import BoundedDict, InputError, too_expanded

#: Bytes the reference reader (ijson) reads at a time: yajl copies a string that spans reads once per read, so a
#: string's cost grows with its length squared over this (a 20 MB name: 1.5 s at ijson's default 64 kB, 0.1 s at
#: 4 MB).
READ_BYTES = 4 << 20
#: The longest stretch between two string boundaries a trace may hold (a real kernel name or call stack is kB;
#: one of this length costs yajl about 0.5 s).
MAX_STRING_BYTES = 64 << 20
#: Bytes the block reader reads at a time: its decoded events, a block's worth, are what it holds beside the
#: events kept (1 MB: 17 MB less peak memory than 4 MB on a 15 MB trace, as fast).
BLOCK_BYTES = 1 << 20
#: JSON nested deeper than this is not a trace (events nest 4-6 levels: traceEvents, event, args, Input Dims).
MAX_DEPTH = 64

UNSET = msgspec.UNSET


class Guarded:
    """The bytes of a trace as they are read, watched for JSON nested deeper than MAX_DEPTH (whose objects would
    grow without bound in memory), counting brackets as they pass (brackets inside strings too: they are balanced
    in real names, and only inflate the count), for a string longer than MAX_STRING_BYTES (whose cost in yajl grows
    as its square) and for a compressed file expanding past its cap."""

    def __init__(self, f: IO[bytes], path: str, cap_bytes: int | None) -> None:
        self.f = f
        self.path = path
        self.depth = 0
        self.cap_bytes = cap_bytes  # decompressed bytes allowed (detect.expansion_cap); None: not compressed
        self.read_bytes = 0
        self.since_quote = 0  # bytes since the last quote that surely bounds a string
        self.last_byte = 0

    def read(self, n: int = -1) -> bytes:
        data = self.f.read(n)
        self.read_bytes += len(data)
        if self.cap_bytes is not None and self.read_bytes > self.cap_bytes:
            raise too_expanded(self.path)
        if data:
            self._strings(data)
            # The running depth is summed over the brackets alone (a few bytes in a hundred: bytes.translate drops
            # the rest at memory speed); its highest point is at one of them.
            brackets = data.translate(None, _NOT_BRACKETS)
            if brackets:
                import numpy as np

                levels = np.cumsum(_BRACKET_STEP[np.frombuffer(brackets, np.uint8)], dtype=np.int64)
                if self.depth + int(levels.max()) > MAX_DEPTH:
                    raise InputError(self.path, f"JSON nested deeper than {MAX_DEPTH} levels: not a PyTorch "
                                                "profiler trace")
                self.depth += int(levels[-1])
        return data

    def _strings(self, data: bytes) -> None:
        # A quote that no backslash precedes bounds a string (inside one, a quote is escaped); one after a
        # backslash may not, so it is not counted: the stretch measured is never shorter than the string.
        # Within a block no stretch is longer than the block: unless the bound is shorter, only the stretches
        # across blocks are measured, from the first and the last bounding quote.
        if len(data) > MAX_STRING_BYTES:
            first, last, longest = self._bounds_within(data)
        else:
            first = _bounding_quote(data, self.last_byte, data.find, 1)
            last = _bounding_quote(data, self.last_byte, data.rfind, -1) if first >= 0 else -1
            longest = 0
        if first >= 0:
            longest = max(self.since_quote + first, longest)
            self.since_quote = len(data) - last - 1
        else:
            longest = self.since_quote = self.since_quote + len(data)
        self.last_byte = data[-1]
        if longest > MAX_STRING_BYTES:
            raise InputError(self.path, f"a JSON string or value longer than {MAX_STRING_BYTES >> 20} MB: not a "
                                        "PyTorch profiler trace")

    def _bounds_within(self, data: bytes) -> tuple[int, int, int]:
        """(first, last bounding quote or -1, the longest stretch between two of them) of a block."""
        import numpy as np

        b = np.frombuffer(data, np.uint8)
        quotes = np.flatnonzero(b == 34)
        if quotes.size:
            before = b[np.maximum(quotes - 1, 0)]
            if quotes[0] == 0:
                before[0] = self.last_byte
            quotes = quotes[before != 92]
        if not quotes.size:
            return -1, -1, 0
        return int(quotes[0]), int(quotes[-1]), int(np.diff(quotes).max()) if quotes.size > 1 else 0


def _bounding_quote(data: bytes, last_byte: int, find, direction: int) -> int:
    """The first (direction 1, find: data.find) or last (-1, data.rfind) quote of a block that no backslash
    precedes, or -1. A run of escaped quotes longer than a few is measured with numpy instead."""
    i = find(b'"')
    for _ in range(64):
        if i < 0 or (data[i - 1] if i else last_byte) != 92:
            return i
        i = find(b'"', i + 1) if direction > 0 else find(b'"', 0, i)
    import numpy as np

    b = np.frombuffer(data, np.uint8)
    quotes = np.flatnonzero(b == 34)
    before = b[np.maximum(quotes - 1, 0)]
    if quotes[0] == 0:
        before[0] = last_byte
    quotes = quotes[before != 92]
    return -1 if not quotes.size else int(quotes[0] if direction > 0 else quotes[-1])


_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")


def _bracket_steps():
    import numpy as np

    step = np.zeros(256, np.int8)
    step[[ord("["), ord("{")]] = 1
    step[[ord("]"), ord("}")]] = -1
    return step


_BRACKET_STEP = _bracket_steps()


def _field(key: str):
    return msgspec.field(default=None, name=key)


class Event(msgspec.Struct):
    """The keys of a trace event that pyprof reads. A key that is absent reads as the reference reader's
    ``ev.get(key)`` does (None; ``cat`` ""), except ``ph`` and ``dur``, whose absence differs from null (UNSET).
    ``args``: the event's arguments as undecoded JSON (``Args`` on demand: args_of), empty where absent."""

    ph: object = UNSET
    cat: object = ""
    name: object = None
    pid: object = None
    tid: object = None
    ts: object = None
    dur: object = UNSET
    args: msgspec.Raw = msgspec.Raw()


class Args(msgspec.Struct):
    """The arguments pyprof reads of a kernel, copy, launch, op or ``[memory]`` event; absent ones are None,
    except ``seq``, whose presence tells a PyTorch 1.8-1.9 op from a plain range (UNSET). An op's argument lists
    stay undecoded JSON (empty where absent; ``SharedValues`` decodes them): a trace repeats a few hundred of them
    tens of thousands of times."""

    correlation: object = None
    device: object = None
    stream: object = None
    grid: object = None
    block: object = None
    registers: object = _field("registers per thread")
    smem: object = _field("shared memory")
    occupancy: object = _field("est. achieved occupancy %")
    nbytes: object = _field("bytes")
    seq: object = msgspec.field(default=UNSET, name="Sequence number")
    dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input Dims")
    dims_18: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input dims")  # PyTorch 1.8 previews
    types: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input type")
    concrete: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Concrete Inputs")
    fwd_tid: object = _field("Fwd thread id")
    mem_bytes: object = _field("Bytes")
    device_type: object = _field("Device Type")
    device_id: object = _field("Device Id")
    allocated: object = _field("Total Allocated")
    reserved: object = _field("Total Reserved")
    addr: object = _field("Addr")


NO_ARGS = Args()
_ARG_NAMES = {f.encode_name: f.name for f in msgspec.structs.fields(Args)}
_RAW_ARGS = frozenset(f.name for f in msgspec.structs.fields(Args) if f.type is msgspec.Raw)
_EVENT_KEYS = frozenset(f.name for f in msgspec.structs.fields(Event)) - {"args"}

_decode_args = msgspec.json.Decoder(Args, float_hook=Decimal).decode
_decode_any = msgspec.json.Decoder(float_hook=Decimal).decode
_decode_events = msgspec.json.Decoder(list[Event], float_hook=Decimal).decode
_decode_keys = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode
_encode = msgspec.json.Encoder(decimal_format="number").encode


def args_of(raw: msgspec.Raw) -> Args:
    """An event's ``args`` decoded; anything but an object is no arguments, as for the reference reader."""
    if memoryview(raw)[:1] != b"{":
        return NO_ARGS
    return _decode_args(raw)


def from_dict(ev: dict) -> tuple[Event, Args]:
    """An event as ijson's reference reader builds it -> the block reader's (Event, Args). The argument lists
    kept undecoded are encoded again: JSON of the same values (a Decimal as its exact text), which decodes to
    what ijson gave."""
    args = ev.get("args")
    if type(args) is not dict:
        return Event(**{k: v for k, v in ev.items() if k in _EVENT_KEYS}), NO_ARGS
    fields = {}
    for key, value in args.items():
        name = _ARG_NAMES.get(key)
        if name is not None:
            fields[name] = msgspec.Raw(_encode(value)) if name in _RAW_ARGS else value
    return Event(**{k: v for k, v in ev.items() if k in _EVENT_KEYS}), Args(**fields)


class SharedValues:
    """Decoded argument lists by their JSON text, so that every op with the same text shares one value: the
    values are read, never changed, downstream (markers keep them, records copy them into JSON). Texts longer
    than SHARED_BYTES are decoded each time (a real one is a few hundred bytes)."""

    def __init__(self) -> None:
        self.values = BoundedDict(1 << 12)

    def get(self, raw: msgspec.Raw) -> object:
        """The value of ``raw``; None where it is empty (the key was absent)."""
        if not raw:
            return None
        if len(raw) > SHARED_BYTES:
            return _decode_any(raw)
        key = bytes(raw)
        value = self.values.get(key, _MISSING)
        if value is _MISSING:
            value = _decode_any(raw)
            self.values.add(key, value)
        return value


SHARED_BYTES = 1 << 12
_MISSING = object()


class NotBlocks(Exception):
    """The block reader does not vouch for this file's layout: the reference reader reads it."""


_NOT_WS = re.compile(rb"[^ \t\n\r]")  # JSON's whitespace is these four (bytes.strip() would take more)
#: A place where an event may end: a closing brace, then the comma or bracket that follows an element.
_EVENT_END = re.compile(rb"\}[ \t\n\r]*[,\]]")
#: The end of a block searched first for the last place where an event may end (events are kB).
_LOOK_BACK = 1 << 16
#: Places tried per block: in a real trace the last is an event's end, or the one before it (a "}," inside one
#: that is not complete yet).
_TRIES = 4
#: The most bytes of keys and values before or after the events that the block reader holds at once (real traces:
#: a few kB of device properties).
MAX_OUTSIDE_BYTES = 16 << 20


class BlockReader:
    """The events of one trace, read through ``f`` (a Guarded stream) in blocks. ``blocks()`` yields lists of
    Events in file order; after it is exhausted, ``devices`` and ``dist`` hold the decoded ``deviceProperties``
    and ``distributedInfo`` (None where absent; dist only when it precedes the events, as the reference reads it).
    Raises NotBlocks (or msgspec.DecodeError) where it cannot vouch for what it read; errors of reading (the
    guard's InputError, OSError, EOFError, zlib.error) pass through."""

    def __init__(self, f: Guarded) -> None:
        self.f = f
        self.buf = b""
        self.pos = 0
        self.devices = self.dist = None
        self.devices_read = False
        self.root_is_array = False

    def _more(self) -> bool:
        """Read on: the buffer keeps what is not consumed yet. False at the end of the file."""
        data = self.f.read(BLOCK_BYTES)
        if not data:
            return False
        self.buf = self.buf[self.pos:] + data
        self.pos = 0
        return True

    def _next_byte(self) -> int:
        """The next byte that is not whitespace, pos at it (reading on as needed); -1 at the end of the file."""
        while True:
            m = _NOT_WS.search(self.buf, self.pos)
            if m is not None:
                self.pos = m.start()
                return self.buf[self.pos]
            self.pos = len(self.buf)
            if not self._more():
                return -1

    def blocks(self) -> Iterator[list[Event]]:
        """The events, a run of whole ones at a time, in file order (raises as the class says)."""
        first = self._next_byte()
        if first == ord("["):
            self.root_is_array = True
        elif first == ord("{"):
            self._head()
        else:
            raise NotBlocks("neither an object nor an array")
        self.pos += 1  # past the events' "["
        if self._next_byte() == ord("]"):
            raise NotBlocks("no events")  # the reference says what a trace without events is
        while True:
            yield self._events()
            c = self._next_byte()
            if c == ord("]"):
                break
            if c != ord(","):
                raise NotBlocks("no ',' after an event")
            self.pos += 1
            self._next_byte()
        self.pos += 1  # past the events' "]"
        self._tail()

    def _head(self) -> None:
        """Up to the events' "[": the keys before ``traceEvents``, checked to be the root object's own."""
        while True:
            at = self.buf.find(b'"traceEvents"', self.pos)
            if at >= 0:
                break
            if len(self.buf) - self.pos > MAX_OUTSIDE_BYTES or not self._more():
                raise NotBlocks("no traceEvents key where expected")
        head = self.buf[self.pos:at]
        # Only the root object's own key closes it here: one inside a value leaves brackets open, one inside a
        # string is not followed by a valid key. A key read must be there once (the reference reads every
        # deviceProperties and the first distributedInfo object; a dict keeps one).
        keys = _decode_keys(head + b'"":0}')
        if head.count(b'"deviceProperties"') > 1 or head.count(b'"distributedInfo"') > 1:
            raise NotBlocks("a key twice")
        if "deviceProperties" in keys:
            self.devices, self.devices_read = _decode_any(keys["deviceProperties"]), True
        if "distributedInfo" in keys:
            self.dist = _decode_any(keys["distributedInfo"])
        self.pos = at + len(b'"traceEvents"')
        if self._next_byte() != ord(":"):
            raise NotBlocks("no ':' after traceEvents")
        self.pos += 1
        if self._next_byte() != ord("["):
            raise NotBlocks("traceEvents is not an array")

    def _events(self) -> list[Event]:
        """The next run of whole events, from pos (an event's first byte). Where no place in the buffer ends one,
        it is tried again once it has doubled, so that an event longer than a block costs linear time."""
        tried, eof = 0, False
        while True:
            size = len(self.buf) - self.pos
            if size >= 2 * tried or (eof and size > tried):
                events = self._cut()
                if events is not None:
                    return events
                if size > MAX_STRING_BYTES + BLOCK_BYTES:
                    raise NotBlocks("no event ends where one may")
                tried = size
            if eof:
                raise NotBlocks("the events do not end")
            eof = not self._more()

    def _cut(self) -> list[Event] | None:
        """The events from pos up to the last place in the buffer where one ends, decoded; None where none does.

        A cut right after a "}" that decodes, bracketed, as an array of objects is the end of an element of the
        events array: a cut inside a string leaves it open, one inside an event leaves brackets open."""
        buf, start = self.buf, self.pos
        ends = [m.start() for m in _EVENT_END.finditer(buf, max(start, len(buf) - _LOOK_BACK))]
        if not ends:
            ends = [m.start() for m in _EVENT_END.finditer(buf, start)]
        for end in reversed(ends[-_TRIES:]):
            try:
                events = _decode_events(b"[" + buf[start:end + 1] + b"]")
            except msgspec.DecodeError:
                continue
            self.pos = end + 1
            return events
        return None

    def _tail(self) -> None:
        """After the events' "]": the root object's other keys (deviceProperties may come here), then the end."""
        while self._more():
            if len(self.buf) - self.pos > MAX_OUTSIDE_BYTES:
                raise NotBlocks("too much after the events")
        tail = self.buf[self.pos:]
        if self.root_is_array:
            if _NOT_WS.search(tail):
                raise NotBlocks("bytes after the events")
            return
        keys = _decode_keys(b'{"":0' + tail)
        if b'"traceEvents"' in tail or tail.count(b'"deviceProperties"') > 1:
            raise NotBlocks("a key twice")
        if "deviceProperties" in keys:
            if self.devices_read:
                raise NotBlocks("deviceProperties twice")
            self.devices, self.devices_read = _decode_any(keys["deviceProperties"]), True
