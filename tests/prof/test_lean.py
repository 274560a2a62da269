"""Lean decoding (reader.lean_loads): prof builds only the record fields its model and columns read, keeping
arguments as raw JSON. The rows must be exactly those of decoding every line whole."""
from __future__ import annotations

import json
import lzma
import os
import shutil
import subprocess
import sys

import pytest

from pyprof.common import InputError
from pyprof.prof.load import reader
from pyprof.prof.table.columns import COLUMNS, compile_row
from pyprof.prof.model.modeller import Modeller
from pyprof.prof.table.coverage import Coverage
from pyprof.prof.table.rows import lean_decoder, process_lines
from pyprof.prof.model.roofline import Peaks

from .helpers import T, rec

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data")
ALL = list(COLUMNS)


def _rows(lines: list[bytes], lean) -> tuple[list, str]:
    cov = Coverage()
    rows, _n, _r = process_lines(lines, "in", 0, 0, Modeller(share=True), compile_row(ALL, raw=True), Peaks(), True,
                                 cov, lean)
    return rows, cov.text()


def _parsed(rel: str, tmp_path) -> list[bytes]:
    src = os.path.join(DATA, rel)
    path = str(tmp_path / os.path.basename(rel).replace(".xz", ""))
    if rel.endswith(".xz"):
        with lzma.open(src) as f, open(path, "wb") as out:
            shutil.copyfileobj(f, out)
    else:
        path = src
    p = subprocess.run([sys.executable, "-m", "pyprof.parse", path], capture_output=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": ROOT})
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    return p.stdout.split(b"\n")


@pytest.mark.parametrize("rel", ["nsys/pyprof/transformer.sqlite.xz", "nsys/emit_nvtx/resnet.sqlite.xz",
                                 "kineto/resnet.pt.trace.json.gz"])
def test_rows_equal_those_of_the_full_decode_on_real_captures(rel, tmp_path):
    lines = _parsed(rel, tmp_path)
    lean = lean_decoder(ALL)
    first = lean(lines[0])
    assert "ranges" not in first and "marker" not in first  # it really skips fields
    # (side lines never reach a decoder of records: the readers skip them first)
    assert sum(type(lean(x).get("args")) is reader.Raw for x in lines if x and not x.startswith(b'{"pyprof_side":')) \
        > 100
    full_rows, full_cov = _rows(lines, None)
    lean_rows, lean_cov = _rows(lines, lean)
    assert len(full_rows) > 100
    assert lean_rows == full_rows
    assert lean_cov == full_cov
    # backward kernels with forward links were among them, and got numbers through the raw forward arguments
    fwd = [json.loads(x) for x in lines if x and b'"fwd":{' in x]
    assert fwd and any(r[ALL.index("flops")] for r, x in zip(full_rows, lines) if b'"fwd":{' in x)


def _lines(*objs) -> list[bytes]:
    return [o if isinstance(o, bytes) else json.dumps(o).encode() for o in objs]


def test_lines_it_refuses_take_the_full_decode():
    lin = [T([4, 8]), T([16, 8]), T([16])]
    good = rec("sm90_xmma_gemm_bf16", op="linear", mod="torch.nn.functional", args=lin)
    empty_fwd = rec("nvjet_tst_x", op="AddmmBackward0", mod="aten", dir="bprop", fwd={}, seq=(2,))
    spaced = json.dumps(rec("sm90_xmma_gemm_bf16", op="linear", mod="torch.nn.functional", args=lin, seq=(3,)),
                        indent=None, separators=(" , ", " : ")).encode()
    legacy = repr({"kShortName": "k", "kDuration": 5, "op": ["relu"], "mod": ["torch.nn.functional"],
                   "dir": "fprop", "marker": [], "seqId": [4], "subSeqId": 0, "tid": 1}).encode()
    lines = _lines(good, empty_fwd, spaced, b"", b"   ", legacy, good)
    lean = lean_decoder(ALL)
    with pytest.raises(reader.LEAN_ERRORS):
        lean(lines[5])
    assert _rows(lines, lean) == _rows(lines, None)
    rows, _ = _rows(lines, lean)
    assert [r[ALL.index("idx")] for r in rows] == [0, 1, 2, 4, 5]  # the line of spaces keeps its index
    flops, note = ALL.index("flops"), ALL.index("note")
    assert rows[0][flops] == rows[2][flops] == 2 * 4 * 16 * 8  # raw arguments, whitespace and all, decoded
    assert rows[1][note].endswith("and no forward link")  # an empty link is none, as when decoded whole


@pytest.mark.parametrize("bad,problem", [
    (b"[1, 2]", "expected one record object per line, got list"),
    (b"{not json", "not a JSON record nor a PyProf dict line"),
    (json.dumps(rec("k", op="AddmmBackward0", dir="bprop", fwd=3)).encode(), "a record field has an unexpected type"),
])
def test_malformed_lines_get_the_full_paths_message(bad, problem):
    lines = _lines(rec("k"), bad)
    problems = []
    for lean in (None, lean_decoder(ALL)):
        with pytest.raises(InputError) as e:
            _rows(lines, lean)
        problems.append(e.value.problem)
    assert problems[0] == problems[1]
    assert problems[0].startswith(f"line 2: {problem}")


def test_args_decoder_decodes_each_argument_once_on_a_real_optimizer_step(tmp_path):
    # AdamW's _foreach_div_ carries the same tensor list each step beside a step-dependent scalar: the model's
    # cache misses on every step, and the decoder then takes the tensor list it decoded on the step before.
    lines = _parsed("nsys/pyprof/transformer.sqlite.xz", tmp_path)
    lean = lean_decoder(ALL)
    raws = [d["args"] for d in (lean(x) for x in lines if b'"_foreach_div_"' in x) if d.get("op") == ["_foreach_div_"]]
    distinct = {bytes(r): r for r in raws}
    assert len(distinct) >= 2  # the two steps' calls differ (in their scalar)
    decode = reader.ArgsDecoder()
    values = [decode(r) for r in distinct.values()]
    assert values == [json.loads(bytes(r)) for r in distinct.values()]  # stdlib json, the independent reading
    lists = [v[0] for v in values]
    assert lists[0]["type"] == "tensorlist" and len(lists[0]["items"]) > 10
    assert all(x is lists[0] for x in lists)  # one decoded tensor list, shared by the calls
    assert values[0][1] is not values[1][1] and values[0][1] != values[1][1]  # the scalars, each its own


def test_args_decoder_keeps_no_argument_too_short_or_too_long():
    # a scalar's bytes change from call to call, and a huge argument would make the cache's memory the input's
    small = b'{"type": "float", "value": 0.5}'  # 32 bytes
    huge = json.dumps({"type": "tensorlist", "items": [T([i + 1, 8]) for i in range(2000)]}).encode()
    assert len(small) < reader.ArgsDecoder.CACHED_BYTES and len(huge) > 64 << 10
    decode, lean = reader.ArgsDecoder(), reader.lean_loads(["args"])
    for arg in (small, huge):
        raw = lean(b'{"args": [' + arg + b"]}")["args"]
        first, again = decode(raw), decode(raw)
        assert first == again == [json.loads(arg)] and first[0] is not again[0]


@pytest.mark.parametrize("raw,value,problem", [
    (b"null", None, "args: expected a list of argument objects"),  # as the whole decode, which refuses it too
    (b"[]", [], None),
    (b"{\"type\": \"int\"}", None, "args: expected a list of argument objects"),
    (b"[{\"type\": \"int\", \"value\": 3}, 4]", None, "args: expected a list of argument objects"),
    (b"[{\"a\": " + b"[" * 30 + b"]" * 30 + b"}]", None, "arguments nested deeper than 24 levels"),
    (b"[{\"a\": " + b"[" * 20 + b"]" * 20 + b"}]", [{"a": json.loads(b"[" * 20 + b"]" * 20)}], None),
])
def test_args_decoder_refuses_what_the_whole_decode_refuses(raw, value, problem):
    decode = reader.ArgsDecoder()
    lean = reader.lean_loads(["args"])
    r = lean(b'{"args": ' + raw + b"}")["args"]
    if problem is None:
        assert decode(r) == reader.raw_value(r) == value
        return
    for fn in (decode, reader.raw_value):
        with pytest.raises(ValueError, match=problem):
            fn(r)
