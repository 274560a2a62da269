"""The one reader of Kineto traces (kineto_json.TraceReader): output that does not depend on where blocks are cut or
how the JSON is laid out, what odd files yield (each expected value says why), the one-line errors of damaged files,
and the byte guard against a byte-by-byte count."""
from __future__ import annotations

import gzip
import io
import json
import random
from pathlib import Path

import pytest

import pyprof.parse.readers.kineto_json as kineto_json
from pyprof.common import InputError
from pyprof.parse import parse_file
from pyprof.parse.readers.kineto import KinetoSource
from pyprof.record import read_lines
from test_kineto import kernel, launch, op, trace

DATA = Path(__file__).resolve().parents[1] / "data"


def output(path) -> str:
    out = io.StringIO()
    parse_file(str(path), out)
    return out.getvalue()


def records(path) -> list[dict]:
    return list(read_lines(output(path).splitlines()))


def source(path) -> KinetoSource:
    s = KinetoSource(str(path), gzipped=str(path).endswith(".gz"))
    s.check()
    return s


def error(path) -> str:
    with pytest.raises(InputError) as e:
        output(path)
    return e.value.problem


def _write(tmp_path, data: bytes, name="t.json") -> Path:
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return path


@pytest.mark.parametrize("block_bytes", [64, 1000])
@pytest.mark.parametrize("fixture", ["kineto/lenet.pt.trace.json.gz", "kineto/checkpoint.pt.trace.json.gz",
                                     "paths/kineto_full.pt.trace.json.gz"])
def test_blocks_of_any_size_give_the_same_output(monkeypatch, fixture, block_bytes):
    # Blocks of 64 bytes cut inside every event (each is read on until one ends); 1 MB, the default, holds these
    # traces' events in one or a few blocks.
    path = DATA / fixture
    expected = output(path)
    monkeypatch.setattr(kineto_json, "BLOCK_BYTES", block_bytes)
    assert output(path) == expected


def _layouts() -> dict[str, bytes]:
    t = trace()
    events = t["traceEvents"]
    plain = json.dumps(t).encode()
    return {
        "compact": json.dumps(t, separators=(",", ":")).encode(),
        "indented": json.dumps(t, indent=2).encode(),
        "events first, devices after": json.dumps({"traceEvents": events, "deviceProperties":
                                                   t["deviceProperties"]}).encode(),
        "distributedInfo after (not read)": json.dumps({**t, "distributedInfo": {"rank": 3}}).encode(),
        "elements that are not objects": json.dumps(dict(t, traceEvents=[1, [{"ph": "X"}], "x"] + events[:3] +
                                                         [None, {}, 2.5] + events[3:] + [[], 7])).encode(),
        "an event's keys twice (the last counts)": plain.replace(b'"ph": "X"', b'"ph": "i", "ph": "X"'),
        "whitespace around": b"\n\t " + plain + b"\r\n",
        "byte-order mark": b"\xef\xbb\xbf" + plain,
    }


@pytest.mark.parametrize("name", list(_layouts()))
def test_every_layout_gives_the_plain_traces_output(tmp_path, monkeypatch, name):
    expected = output(_write(tmp_path, json.dumps(trace()).encode(), "plain.json"))
    path = _write(tmp_path, _layouts()[name])
    monkeypatch.setattr(kineto_json, "BLOCK_BYTES", 97)  # cuts inside names, keys and numbers
    assert output(path) == expected


def test_names_with_braces_and_keys_inside(tmp_path, monkeypatch):
    # "}, {" and '"traceEvents": [' inside names are no place where an event ends, nor the events' key: both ops
    # are read, with their names whole.
    t = trace()
    names = ['{"op": "x", "args": [{"a": 1}, {"b": "}, {"}]}', '"traceEvents": [']
    t["traceEvents"] += [op(names[0], 1012.0, 1.0), op(names[1], 1013.0, 1.0)]
    monkeypatch.setattr(kineto_json, "BLOCK_BYTES", 97)
    s = source(_write(tmp_path, json.dumps(t).encode()))
    assert [r[3] for r in s.ranges() if r[3] in names] == names


def test_argument_lists_of_every_json_kind(tmp_path):
    # Numbers as JSON has them: an integer literal an int (2**70 too), any other a Decimal of its text.
    from decimal import Decimal

    t = trace()
    t["traceEvents"].append(op("aten::add", 1014.0, 1.0, **{
        "Sequence number": 9, "Input Dims": [[1, 2], [], 3, "x", None, 2 ** 70],
        "Input type": ["float", 1.25, True], "Concrete Inputs": ["", "1", [{}]]}))
    s = source(_write(tmp_path, json.dumps(t).encode().replace(b"1.25", b"1.2500e0")))
    (m,) = [r[5] for r in s.ranges() if r[3] == "aten::add"]
    assert m.raw_sizes == [[1, 2], [], 3, "x", None, 2 ** 70]
    assert m.dtypes == ["float", Decimal("1.2500e0"), True] and str(m.dtypes[1]) == "1.2500"
    assert m.concrete == ["", "1", [{}]]


def test_pytorch_1_8_bare_array_of_events(tmp_path):
    # no traceEvents object: the events are the document; the 3 kernels and 1 copy of trace() are its records
    assert len(records(_write(tmp_path, json.dumps(trace()["traceEvents"]).encode()))) == 4


def _twice(t) -> dict[str, bytes]:
    plain = json.dumps(t).encode()
    return {
        "traceEvents": plain[:-1] + b', "traceEvents": [' + json.dumps(launch(5.0, 99)).encode() + b"]}",
        "deviceProperties": plain[:-1] + b', "deviceProperties": [{"id": 0, "name": "other"}]}',
        "distributedInfo": b'{"distributedInfo": 5, "distributedInfo": {"rank": 1}, "distributedInfo": {"rank": 2},'
                           + plain[1:],
    }


def test_keys_of_the_root_written_twice(tmp_path):
    twice = _twice(trace())
    # every traceEvents array is read: trace()'s 3 launch calls and the second array's one
    s = source(_write(tmp_path, twice["traceEvents"], "a.json.gz"))
    assert [x.key for x in s.launches()] == [99, 11, 12, 13]
    # every deviceProperties array: the later device 0 replaces the earlier
    assert {r["gpu"] for r in records(_write(tmp_path, twice["deviceProperties"], "b.json"))} == {"other"}
    # the first distributedInfo that is an object
    assert source(_write(tmp_path, twice["distributedInfo"], "c.json")).dist()["rank"] == 1


def test_what_odd_traces_yield(tmp_path):
    t = trace()
    no_args = dict(t, traceEvents=[dict(e, args=[1]) if e["cat"] == "cuda_runtime" else e for e in t["traceEvents"]])
    # launch calls whose arguments are no object have no correlation: the kernels have no launch call
    assert [r["api"] for r in records(_write(tmp_path, json.dumps(no_args).encode()))] == [None] * 4
    for events in ({}, []):  # a trace with no events is no error, and has no records
        assert records(_write(tmp_path, json.dumps(dict(t, traceEvents=events)).encode())) == []
    # yajl, the parser of earlier versions, read a lone high surrogate as "?" (and a pair as one code point)
    lone = json.dumps(t).encode().replace(b'"layer:encoder"', b'"layer:\\ud800"')
    assert records(_write(tmp_path, lone))[0]["layer"] == ["?"]
    pair = json.dumps(t).encode().replace(b'"layer:encoder"', b'"layer:\\ud83d\\ude00"')
    assert records(_write(tmp_path, pair))[0]["layer"] == ["\U0001F600"]


def test_a_long_value_beside_the_events_is_scanned_not_held(tmp_path, monkeypatch):
    # a tool's own data of 100 kB beside or instead of the events, past a bound lowered to 10 kB
    monkeypatch.setattr(kineto_json, "MAX_OUTSIDE_BYTES", 10_000)
    other = {"calls": [{"name": "x]}[{\\\"" * 3, "v": [k, {"k": "}"}]} for k in range(2000)]}
    assert len(json.dumps(other)) > 100_000
    assert len(records(_write(tmp_path, json.dumps({"tool": other, **trace()}).encode()))) == 4
    assert error(_write(tmp_path, json.dumps({"tool": other}).encode())) == \
        "JSON without 'traceEvents': not a PyTorch profiler trace"


def _damaged() -> dict[str, tuple[bytes, str]]:
    plain = json.dumps(trace()).encode()
    at = plain.index(b"}, {") + 1
    bad = plain.index(b"aten::linear") + 2
    low = plain.index(b'"tid"') + 2
    return {
        "a value after the end": (plain + b" 1", "malformed or truncated JSON trace (parse error: trailing garbage)"),
        "truncated": (plain[:-40], "malformed or truncated JSON trace (parse error: premature EOF)"),
        "cut in the events": (plain[:at + 30], "malformed or truncated JSON trace (parse error: premature EOF)"),
        "not a trace": (b'{"hello": [1, 2, 3]}', "JSON without 'traceEvents': not a PyTorch profiler trace"),
        "an array without events": (b'[1, {"a": 2}]', "JSON array without trace events: not a PyTorch profiler trace"),
        # the byte named is the second comma's (the first's offset + 1)
        "two commas": (plain[:at] + b"," + plain[at:], f"malformed or truncated JSON trace (invalid character at "
                                                       f"byte {at + 1})"),
        "a byte that is no UTF-8, in a name": (plain[:bad] + b"\xff" + plain[bad + 1:],
                                               f"JSON trace that is not UTF-8 (byte {bad})"),
        "an escaped lone low surrogate, in a key no one reads": (
            plain[:low] + b"\\udc01" + plain[low + 1:],
            f"JSON trace that is not UTF-8 (a lone \\udc01 at byte {low})"),
        "NaN": (plain.replace(b'"schemaVersion": 1', b'"schemaVersion": NaN'), "malformed or truncated JSON trace "
                f"(invalid character at byte {plain.index(b'1')})"),
    }


@pytest.mark.parametrize("name", list(_damaged()))
@pytest.mark.parametrize("block_bytes", [97, 1 << 20])
def test_damaged_traces_are_refused_in_one_line_naming_what_is_wrong(tmp_path, monkeypatch, name, block_bytes):
    data, expected = _damaged()[name]
    monkeypatch.setattr(kineto_json, "BLOCK_BYTES", block_bytes)
    for file in ("t.json", "t.json.gz"):
        assert error(_write(tmp_path, data, file)) == expected


def _depth_and_string_oracle(data: bytes, block: int, max_string: int) -> str | None:
    """Which bound a byte-by-byte count says the bytes break first ("string" or "depth"), block by block as
    read, the string bound checked first in a block; None for neither. A quote bounds a string unless a
    backslash precedes it; a stretch across blocks counts the bytes between two quotes, one within a block the
    distance between them."""
    depth, since, last = 0, 0, 0
    for k in range(0, len(data), block):
        b = data[k:k + block]
        quotes = [i for i, c in enumerate(b) if c == ord('"') and (b[i - 1] if i else last) != ord("\\")]
        if quotes:
            longest = max([since + quotes[0]] + [q - p for p, q in zip(quotes, quotes[1:])])
            since = len(b) - quotes[-1] - 1
        else:
            since += len(b)
            longest = since
        last = b[-1]
        if longest > max_string:
            return "string"
        for c in b:
            depth += 1 if c in b"[{" else -1 if c in b"]}" else 0
            if depth > kineto_json.MAX_DEPTH:
                return "depth"
    return None


def test_the_byte_guard_agrees_with_a_byte_by_byte_count(monkeypatch):
    rnd = random.Random(19)
    max_string = 40
    monkeypatch.setattr(kineto_json, "MAX_STRING_BYTES", max_string)
    outcomes = set()
    for case in range(400):
        # Brackets biased to open in some cases (the depth bound), quotes rare in others (the string bound),
        # runs of escaped quotes in others (past the guard's quick search).
        alphabet = rnd.choice([b'[[[{]}x"', b'x' * 30 + b'"[]', b'\\"' * 40 + b'x"', b'[]{}"\\ab'])
        data = bytes(rnd.choice(alphabet) for _ in range(rnd.randrange(1, 600)))
        block = rnd.choice([1, 7, max_string - 1, max_string, max_string + 1, 100, 1000])
        expected = _depth_and_string_oracle(data, block, max_string)
        guard = kineto_json.Guarded(io.BytesIO(data), "x.json", None)
        try:
            while guard.read(block):
                pass
            got = None
        except InputError as e:
            got = "string" if "longer than" in str(e) else "depth" if "nested deeper" in str(e) else str(e)
        assert got == expected, (case, data, block)
        outcomes.add(got)
    assert outcomes == {None, "string", "depth"}
