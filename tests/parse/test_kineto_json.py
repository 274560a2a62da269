"""The block reader of Kineto traces (kineto_json.BlockReader) against the reference, ijson's event stream: the same
output on every layout, whichever reader reads it, and the byte guard against a byte-by-byte count."""
from __future__ import annotations

import gzip
import io
import json
import random
from pathlib import Path

import pytest

import pyprof.parse.kineto_json as kineto_json
from pyprof.common import InputError
from pyprof.parse import parse_file
from pyprof.parse.kineto import KinetoSource
from test_kineto import kernel, launch, op, trace

DATA = Path(__file__).resolve().parents[1] / "data"


def output(path) -> str:
    out = io.StringIO()
    parse_file(str(path), out)
    return out.getvalue()


def reference_output(path, monkeypatch) -> str:
    """The output when ijson's stream reads the file (the block reader refuses it at once)."""
    with monkeypatch.context() as m:
        m.setattr(KinetoSource, "_read_blocks", _refuse)
        return output(path)


def blocks_output(path, monkeypatch) -> str:
    """The output when the block reader reads the file; fails if it hands the file to the reference."""
    with monkeypatch.context() as m:
        m.setattr(KinetoSource, "_read_stream", _fail)
        return output(path)


def _refuse(self):
    raise kineto_json.NotBlocks("test: the reference reads this")


def _fail(self, ijson):
    raise AssertionError("the block reader handed this file to the reference")


def _write(tmp_path, data: bytes, name="t.json") -> Path:
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return path


@pytest.mark.parametrize("block_bytes", [64, 1000, 1 << 20])
@pytest.mark.parametrize("fixture", ["kineto/lenet.pt.trace.json.gz", "kineto/checkpoint.pt.trace.json.gz",
                                     "paths/kineto_full.pt.trace.json.gz"])
def test_blocks_of_any_size_read_what_the_reference_reads(monkeypatch, fixture, block_bytes):
    # Blocks of 64 bytes cut inside every event (each is read on until one ends); 1 MB is the default.
    path = DATA / fixture
    expected = reference_output(path, monkeypatch)
    monkeypatch.setattr(kineto_json, "BLOCK_BYTES", block_bytes)
    assert blocks_output(path, monkeypatch) == expected


def _layouts() -> dict[str, bytes]:
    t = trace()
    events = t["traceEvents"]
    plain = json.dumps(t).encode()
    odd_names = dict(t, traceEvents=events + [
        op('{"op": "x", "args": [{"a": 1}, {"b": "}, {"}]}', 1012.0, 1.0),  # "}, {" inside a name
        op('"traceEvents": [', 1013.0, 1.0)])
    return {
        "plain": plain,
        "compact": json.dumps(t, separators=(",", ":")).encode(),
        "indented": json.dumps(t, indent=2).encode(),
        "events first, devices after": json.dumps({"traceEvents": events, "deviceProperties":
                                                   t["deviceProperties"]}).encode(),
        "distributedInfo before": json.dumps({"distributedInfo": {"rank": 3, "world_size": 4, "backend": "nccl"},
                                              **t}).encode(),
        "distributedInfo after (not read)": json.dumps({**t, "distributedInfo": {"rank": 3}}).encode(),
        "names with braces and keys": json.dumps(odd_names).encode(),
        "argument lists of every JSON kind": json.dumps(dict(t, traceEvents=events + [
            op("aten::add", 1014.0, 1.0, **{"Sequence number": 9, "Input Dims": [[1, 2], [], 3, "x", None, 2 ** 70],
                                            "Input type": ["float", 1.25, True], "Concrete Inputs": ["", "1", [{}]]})
        ])).encode().replace(b"1.25", b"1.2500e0"),  # a number's exact text reaches the marker as a Decimal
        "bare array (PyTorch 1.8)": json.dumps(events).encode(),
        "whitespace around": b"\n\t " + plain + b"\r\n",
        "byte-order mark": b"\xef\xbb\xbf" + plain,
    }


@pytest.mark.parametrize("name", list(_layouts()))
def test_the_block_reader_reads_every_layout_profilers_write(tmp_path, monkeypatch, name):
    path = _write(tmp_path, _layouts()[name])
    expected = reference_output(path, monkeypatch)
    monkeypatch.setattr(kineto_json, "BLOCK_BYTES", 97)  # cuts inside names, keys and numbers
    assert blocks_output(path, monkeypatch) == expected


def _odd_files() -> dict[str, bytes]:
    t = trace()
    plain = json.dumps(t).encode()
    return {
        "traceEvents twice": plain[:-1] + b', "traceEvents": [' + json.dumps(launch(5.0, 99)).encode() + b"]}",
        "deviceProperties twice": plain[:-1] + b', "deviceProperties": [{"id": 0, "name": "other"}]}',
        "distributedInfo twice": b'{"distributedInfo": {"rank": 1}, "distributedInfo": {"rank": 2},' + plain[1:],
        "an event that is not an object": json.dumps(dict(t, traceEvents=[1] + t["traceEvents"])).encode(),
        "arguments that are not an object": json.dumps(dict(t, traceEvents=[
            dict(e, args=[1]) if e["cat"] == "cuda_runtime" else e for e in t["traceEvents"]])).encode(),
        "traceEvents an object": json.dumps(dict(t, traceEvents={})).encode(),
        "no events": json.dumps(dict(t, traceEvents=[])).encode(),
        "a lone surrogate": plain.replace(b'"layer:encoder"', b'"layer:\\ud800"'),
        "a value after the end": plain + b" 1",
        "truncated": plain[:-40],
        "not a trace": b'{"hello": [1, 2, 3]}',
    }


@pytest.mark.parametrize("name", list(_odd_files()))
def test_what_the_block_reader_does_not_vouch_for_reads_as_the_reference_reads_it(tmp_path, monkeypatch, name):
    # The same output or the same one-line error, whoever decides.
    path = _write(tmp_path, _odd_files()[name], "t.json.gz" if "twice" in name else "t.json")

    def outcome(read):
        try:
            return read(path, monkeypatch) if read is reference_output else output(path)
        except InputError as e:
            return f"InputError: {e}"

    assert outcome(output) == outcome(reference_output)


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
