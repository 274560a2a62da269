"""The JSON of a Kineto trace, read in one pass: its bytes, guarded as they are read, and its events, decoded
block by block (``TraceReader``).

The root object's keys are read one at a time; the ``traceEvents`` array is cut into runs of whole events, each
decoded with msgspec into ``Event`` structs whose ``args`` stay undecoded bytes until the event is one pyprof keeps
(most of a trace's bytes are arguments it never reads: call stacks, async events). Numbers decode as JSON has them:
an integer literal as ``int``, any other as ``Decimal`` of its text (exact microseconds). What an odd file yields
is decided here too: every ``traceEvents`` array's events, every ``deviceProperties`` array's devices, the first
``distributedInfo`` object before the events, elements that are not objects skipped.
"""
from __future__ import annotations

import re
from decimal import Decimal
from typing import IO, Iterator, Union

import msgspec

from pyprof.common import BoundedDict, InputError, too_expanded

#: The longest stretch between two string boundaries a trace may hold (a real kernel name or call stack is kB):
#: an event is held whole while it is decoded.
MAX_STRING_BYTES = 64 << 20
#: Bytes read at a time: the decoded events of a block are what the reader holds beside the events kept (1 MB:
#: 17 MB less peak memory than 4 MB on a 15 MB trace, as fast).
BLOCK_BYTES = 1 << 20
#: JSON nested deeper than this is not a trace (events nest 4-6 levels: traceEvents, event, args, Input Dims).
MAX_DEPTH = 64

UNSET = msgspec.UNSET


class Guarded:
    """The bytes of a trace as they are read, watched for JSON nested deeper than MAX_DEPTH (whose objects would
    grow without bound in memory), counting brackets as they pass (brackets inside strings too: they are balanced
    in real names, and only inflate the count), for a string longer than MAX_STRING_BYTES (held whole in memory)
    and for a compressed file expanding past its cap."""

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
    """The keys of a trace event that pyprof reads. A key that is absent reads as None (``cat``: ""), except ``ph``
    and ``dur``, whose absence differs from null (UNSET); a key written twice reads as its last value.
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
    graph_id: object = _field("graph id")
    graph_node_id: object = _field("graph node id")
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

_decode_args = msgspec.json.Decoder(Args, float_hook=Decimal).decode
_decode_any = msgspec.json.Decoder(float_hook=Decimal).decode
#: An element of the events array that is not an object decodes as itself, and is skipped.
_decode_events = msgspec.json.Decoder(list[Union[Event, list, str, int, float, bool, None]],
                                      float_hook=Decimal).decode
_decode_str = msgspec.json.Decoder(str).decode


def args_of(raw: msgspec.Raw) -> Args:
    """An event's ``args`` decoded; anything but an object is no arguments."""
    if memoryview(raw)[:1] != b"{":
        return NO_ARGS
    return _decode_args(raw)


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


_NOT_WS = re.compile(rb"[^ \t\n\r]")  # JSON's whitespace is these four (bytes.strip() would take more)
#: A place where an event may end: a closing brace, then the comma or bracket that follows an element.
_EVENT_END = re.compile(rb"\}[ \t\n\r]*[,\]]")
#: The end of a block searched first for the last place where an event may end (events are kB).
_LOOK_BACK = 1 << 16
#: Places tried per block: in a real trace the last is an event's end, or the one before it (a "}," inside one
#: that is not complete yet).
_TRIES = 4
#: The most bytes of one value outside the events that are held, and decoded (real traces: a few kB of device
#: properties); a longer one is only scanned for its end, as a string or a bracket's match.
MAX_OUTSIDE_BYTES = 16 << 20
_STRUCTURE = re.compile(rb'["\[\]{}]')
_SCALAR_END = re.compile(rb"[,\]} \t\n\r]")
#: An escaped UTF-16 surrogate: JSON allows a lone one, msgspec refuses it (_decode_lone_surrogates).
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")
#: One with the escape after it, where an even number of backslashes precedes it (it is an escape, not text).
_LOW_ESCAPE = re.compile(rb"\\u[dD][c-fC-F][0-9a-fA-F]{2}")
_HIGH_ESCAPE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}")


def _escapes(data: bytes, i: int) -> bool:
    """Whether the backslash at ``i`` starts an escape: an even number of backslashes precede it."""
    k = i
    while k and data[k - 1] == 92:
        k -= 1
    return (i - k) % 2 == 0


def _lone_low(data: bytes) -> int:
    """The offset of the first escaped low surrogate that no escaped high one precedes, or -1."""
    for m in _LOW_ESCAPE.finditer(data):
        i = m.start()
        if _escapes(data, i) and not (i >= 6 and _HIGH_ESCAPE.match(data, i - 6) and _escapes(data, i - 6)):
            return i
    return -1


_SURROGATE_ESCAPE = re.compile(rb"(?<!\\)((?:\\\\)*)\\u([dD][89a-fA-F][0-9a-fA-F]{2})(\\u[0-9a-fA-F]{4})?")
_OPEN, _COMMA, _CLOSE_ARRAY, _CLOSE_OBJECT, _QUOTE, _COLON = b"[", ord(","), ord("]"), ord("}"), ord('"'), ord(":")


class TraceReader:
    """The events of one trace, read through ``f`` (a Guarded stream) in blocks. ``blocks()`` yields lists of
    events in file order (Event structs; an element that is not an object as itself); after it is exhausted,
    ``devices`` holds the elements of every ``deviceProperties`` array, ``dist`` the first ``distributedInfo``
    object before ``traceEvents`` (None without one), ``events_key`` whether the root has a ``traceEvents`` key.
    Raises InputError (naming ``path``) for JSON that is malformed, truncated or not UTF-8; errors of reading (the
    guard's InputError, OSError, EOFError, zlib.error) pass through."""

    def __init__(self, f: Guarded, path: str) -> None:
        self.f = f
        self.path = path
        self.buf = b""
        self.pos = 0
        self.base = 0  # the file offset of buf[0]
        self.eof = False
        self.devices: list = []
        self.dist = None
        self.events_key = False
        self.root_is_array = False

    def _more(self) -> bool:
        """Read on: the buffer keeps what is not consumed yet. False at the end of the file."""
        data = b"" if self.eof else self.f.read(BLOCK_BYTES)
        if not data:
            self.eof = True
            return False
        self.base += self.pos
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

    def _malformed(self, problem: str) -> InputError:
        return InputError(self.path, f"malformed or truncated JSON trace ({problem})")

    def _expect(self) -> int:
        """The next byte that is not whitespace, which must be there (raises premature EOF)."""
        c = self._next_byte()
        if c < 0:
            raise self._malformed("parse error: premature EOF")
        return c

    def _unexpected(self, expected: str) -> InputError:
        """An error at pos, worded as msgspec words it where the events' decoder meets it."""
        return self._malformed(f"{expected} at byte {self.base + self.pos}")

    def blocks(self) -> Iterator[list]:
        """The events, a run of whole ones at a time, in file order (raises as the class says)."""
        c = self._expect()
        if c == _OPEN[0]:
            self.root_is_array = True
            yield from self._array()
        elif c == ord("{"):
            yield from self._object()
        else:
            self._value()  # a number or a string: JSON, and no trace
        if self._next_byte() >= 0:
            raise self._malformed("parse error: trailing garbage")

    def _object(self) -> Iterator[list]:
        """The root object, key by key: the events of each traceEvents array; the other values decoded whole."""
        self.pos += 1
        c = self._expect()
        if c == _CLOSE_OBJECT:
            self.pos += 1
            return
        while True:
            if c != _QUOTE:
                raise self._unexpected("object keys must be strings")
            key = self._value()
            if self._expect() != _COLON:
                raise self._unexpected("expected ':'")
            self.pos += 1
            c = self._expect()
            if key == "traceEvents" and c == _OPEN[0]:
                self.events_key = True
                yield from self._array()
            else:
                value = self._value()
                if key == "traceEvents":
                    self.events_key = True
                elif key == "deviceProperties" and type(value) is list:
                    self.devices += value
                elif key == "distributedInfo" and type(value) is dict and self.dist is None \
                        and not self.events_key:
                    self.dist = value
            if self._past_separator(_CLOSE_OBJECT, "expected ',' or '}'"):
                return
            c = self._expect()

    def _array(self) -> Iterator[list]:
        """An array of events, from its "[" to past its "]"."""
        self.pos += 1
        if self._expect() == _CLOSE_ARRAY:
            self.pos += 1
            return
        while True:
            if self.buf[self.pos] == ord("{"):
                yield self._events()
            else:
                self._value()  # an element that is not an object: no event
            if self._past_separator(_CLOSE_ARRAY, "expected ',' or ']'"):
                return
            self._expect()

    def _past_separator(self, close: int, expected: str) -> bool:
        """Past what follows a member or element: True at the container's ``close``, False after a comma.
        Raises InputError (``expected``) at anything else."""
        c = self._expect()
        self.pos += 1
        if c == close:
            return True
        if c != _COMMA:
            self.pos -= 1
            raise self._unexpected(expected)
        return False

    def _value(self):
        """The JSON value at pos, decoded (None for one longer than MAX_OUTSIDE_BYTES: scanned, not held); pos past
        it."""
        start = self.base + self.pos
        end = self._value_end()
        if end == self.pos:
            raise self._unexpected("invalid character")
        if self.base + self.pos != start:
            self.pos = end
            return None
        data = self.buf[self.pos:end]
        value = self._decode(data, _decode_str if data[:1] == b'"' else _decode_any)
        self.pos = end
        return value

    def _value_end(self) -> int:
        """Where the value at pos ends (reading on as needed). The brackets of one are counted outside its strings;
        a string ends at a quote that an even number of backslashes precedes."""
        i, depth, start = self.pos, 0, self.base + self.pos
        while True:
            if i - self.pos > MAX_OUTSIDE_BYTES:
                self.pos = i  # too long to hold (a tool's other data beside or instead of the events): let go
            buf = self.buf
            if depth == 0 and buf[i] not in b'"[{':
                m = _SCALAR_END.search(buf, i)
                if m is not None:
                    return m.start()
            else:
                m = _STRUCTURE.search(buf, i)
                while m is not None:
                    j = m.start()
                    c = buf[j]
                    if c == _QUOTE:
                        j = self._string_end(j)
                        if j < 0:
                            break
                    else:
                        depth += 1 if c in b"[{" else -1
                    i = j + 1
                    if depth == 0:
                        return i
                    m = _STRUCTURE.search(buf, i)
            pos = self.pos
            if not self._more():
                if depth == 0 and buf[i:i + 1] not in b'"[{':
                    return len(self.buf)  # a number at the very end
                if self.base + self.pos == start:  # held whole: the decoder's error says why it does not end
                    self._decode(self.buf[self.pos:], _decode_any)
                raise self._malformed("parse error: premature EOF")
            i -= pos

    def _string_end(self, quote: int) -> int:
        """The index of the quote that closes the string opened at ``quote``; -1 where the buffer ends first."""
        buf = self.buf
        j = buf.find(b'"', quote + 1)
        while j >= 0:
            k = j
            while buf[k - 1] == 92:
                k -= 1
            if (j - k) % 2 == 0:
                return j
            j = buf.find(b'"', j + 1)
        return -1

    def _decode(self, data: bytes, decode, at: int | None = None):
        """``data`` (at file offset ``at``, pos by default) decoded, the errors of its JSON as InputError."""
        try:
            value = decode(data)
            self._check_text(data, self.base + self.pos if at is None else at)
            return value
        except msgspec.DecodeError as e:
            if _SURROGATE.search(data):
                try:
                    value = self._decode_lone_surrogates(data, decode)
                    self._check_text(data, self.base + self.pos if at is None else at)
                    return value
                except msgspec.DecodeError as j:
                    e = j
            raise self._json_error(e, data, self.base + self.pos if at is None else at) from None

    def _check_text(self, data: bytes, at: int) -> None:
        """Raise where ``data`` (at file offset ``at``), decoded, holds bytes that are not UTF-8 or an escaped lone
        low surrogate (yajl refused both; msgspec reads the keys and values it skips without a look)."""
        if not data.isascii():
            try:
                data.decode("utf-8")
            except UnicodeDecodeError as u:
                raise InputError(self.path, f"JSON trace that is not UTF-8 (byte {at + u.start})") from None
        if b"\\" in data:  # memchr: most blocks have no backslash (a two-byte search costs 1 ms a MB)
            i = _lone_low(data)
            if i >= 0:
                raise InputError(self.path, f"JSON trace that is not UTF-8 (a lone {data[i:i + 6].decode()} at "
                                            f"byte {at + i})")

    @staticmethod
    def _decode_lone_surrogates(data: bytes, decode):
        """``data`` decoded as the yajl parser (earlier pyprof's reader) reads escaped UTF-16 surrogates: a high one
        and the escape after it as one code point (a surrogate pair), a high one before anything else as "?", a lone
        low one as no UTF-8. msgspec refuses the last two."""
        def code_point(m) -> bytes:
            high = int(m.group(2), 16)
            if high >= 0xDC00:
                return m.group(1) + b"\xff"  # no UTF-8: yajl wrote the surrogate as UTF-8 would a code point
            if not m.group(3):
                return m.group(1) + b"?"
            low = int(m.group(3)[2:], 16)
            cp = ((high & 0x3F) << 10) | ((((high >> 6) & 0xF) + 1) << 16) | (low & 0x3FF)
            return m.group(1) + chr(cp).encode("utf-8")

        return decode(_SURROGATE_ESCAPE.sub(code_point, data))

    def _json_error(self, e: Exception, data: bytes, at: int) -> InputError:
        text = str(e)
        if "UTF-8" in text:
            self._check_text(data, at)
        if "truncated" in text:
            return self._malformed("parse error: premature EOF")
        if "trailing characters" in text:
            return self._malformed("parse error: trailing garbage")
        m = re.search(r"\(byte (\d+)\)$", text)
        reason = text.replace("JSON is malformed: ", "")
        if m is not None:
            reason = f"{reason[:reason.rindex(' (byte')]} at byte {at + int(m.group(1))}"
        return self._malformed(reason)

    def _events(self) -> list:
        """The next run of whole events, from pos (an event's "{"). Where no place in the buffer ends one, it is
        tried again once it has doubled, so that an event longer than a block costs linear time."""
        tried = 0
        while True:
            size = len(self.buf) - self.pos
            if size >= 2 * tried or (self.eof and size > tried):
                events = self._cut()
                if events is not None:
                    return events
                if size > MAX_STRING_BYTES + BLOCK_BYTES:
                    raise InputError(self.path, f"an event longer than {MAX_STRING_BYTES >> 20} MB: not a PyTorch "
                                                "profiler trace")
                tried = size
            if self.eof:
                # No place ends an event: the decoder's error for what is left says why (offsets: the "[").
                self._decode(b"[" + self.buf[self.pos:], _decode_events, self.base + self.pos - 1)
                raise self._malformed("parse error: premature EOF")
            self._more()

    def _cut(self) -> list | None:
        """The events from pos up to the last place in the buffer where one ends, decoded; None where none does.

        A cut right after a "}" that decodes, bracketed, as an array is the end of an element of the events array:
        a decoder reads the same bytes from the same start alike, so one that ends there in a complete value ends
        there in the file too. An error before the first place tried is an error of the file's; bytes after a
        complete array, the events' own "]" before the places tried."""
        buf, start = self.buf, self.pos
        ends = [m.start() for m in _EVENT_END.finditer(buf, max(start, len(buf) - _LOOK_BACK))]
        if not ends:
            ends = [m.start() for m in _EVENT_END.finditer(buf, start)]
        ends = ends[-_TRIES:]
        for end in reversed(ends):
            data = b"[" + buf[start:end + 1] + b"]"
            try:
                events = _decode_events(data)
                self._check_text(data, self.base + start - 1)
            except msgspec.DecodeError as e:
                if _SURROGATE.search(data):
                    try:
                        events = self._decode_lone_surrogates(data, _decode_events)
                    except msgspec.DecodeError:
                        continue
                    self._check_text(data, self.base + start - 1)
                else:
                    at = re.search(r"\(byte (\d+)\)$", str(e))
                    at = None if at is None else start - 1 + int(at.group(1))  # in buf
                    if "trailing characters" in str(e):
                        before = [m.start() for m in _EVENT_END.finditer(buf, start, at)][-1:]
                        if before and before[0] < end:
                            return self._cut_before(before[0])
                    if "UTF-8" in str(e) or at is not None and at <= ends[0]:
                        raise self._json_error(e, data, self.base + start - 1) from None
                    continue
            self.pos = end + 1
            return events
        return None

    def _cut_before(self, end: int) -> list | None:
        """The events from pos to ``end`` (a place where one may end), decoded; None where they do not decode."""
        data = b"[" + self.buf[self.pos:end + 1] + b"]"
        try:
            events = _decode_events(data)
        except msgspec.DecodeError:
            return None
        self._check_text(data, self.base + self.pos - 1)
        self.pos = end + 1
        return events
