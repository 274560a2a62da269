"""Per-kernel rows made as lines of text (columns.compile_line with a format's LineFields) for csv and space:
every line must be what the format's ``rows`` writes for the same values through the csv module and
``printable``, which stay the reference; the rounded floats' text must be ``str(round(v, n))``."""
from __future__ import annotations

import io
import json
import random

import pytest

from pyprof.prof.table.columns import COLUMNS, compile_row, round_text, row_function
from pyprof.prof.table.coverage import Coverage
from pyprof.prof.table.formats import FORMATS
from pyprof.prof.model.modeller import Modeller
from pyprof.prof.table.per_kernel import run_stream
from pyprof.prof.model.roofline import Peaks
from pyprof.prof.table.rows import rows
from pyprof.record import defaults_of

from .helpers import T, parsed, rec

# Field values that the csv module quotes or that printable escapes, and values of other types that compare
# equal to each other (1, 1.0, True) or to a string's text ("1"), in a text column's place one after another:
# a cache of field texts keyed by the value must not give one's text for another.
TRICKY = ["plain", "a,b", 'say "x"', "two\nlines", "cr\rhere", "\x1b[31mred", "a b  c", " lead", "trail ", "",
          "na", "-", "caf\u00e9 \u6838", "sep\u2028x", "x" * 70_000, "1", 1, 1.0, True, "True", None, 2.5, "2.5",
          -0.0, 10**20, float("inf"), float("nan")]


def _by_rows(fmt: str, values: list) -> str:
    out = io.StringIO()
    w = FORMATS[fmt](out, ["idx", "kernel"], ["Idx", "Kernel"])
    w.rows([(i, v) for i, v in enumerate(values)])
    return out.getvalue()


@pytest.mark.parametrize("fmt", ["csv", "space"])
def test_a_field_text_is_what_rows_writes(fmt):
    fields = FORMATS[fmt].fields()
    values = TRICKY * 2  # the second time round, from the cache
    lines = [fields.separator.join([fields.text(i), fields.get(v) or fields.text(v) if type(v) is str
                                    else fields.text(v)]) for i, v in enumerate(values)]
    assert "\n".join(lines) + "\n" == _by_rows(fmt, values)


def _records() -> list[dict]:
    lin = [T([8, 512, 1024], "bfloat16"), T([4096, 1024], "bfloat16"), T([4096], "bfloat16")]
    out = []
    for i, name in enumerate(TRICKY):
        name = name if type(name) is str and name else f"k{i}"
        out.append(rec(name, dur=1000 + i, op="linear", mod="torch.nn.functional", args=lin, seq=(i,), tid=7,
                       layer=["enc", "a,b"], trace=["m.py:1", 'q"uote.py:2'], callsite="x, y.py:3", device=0,
                       stream=7, grid=[132, 1, 1], block=[384, 1, 1], start_ns=i))
    out.append(rec("no_op_kernel", dur=0, seq=(99,)))  # no op, no duration: na and None in numbers
    out.append(rec("gelu_kernel", dur=None, op="gelu", mod="torch.nn.functional", args=[T([8, 4096])], seq=(100,)))
    out.append({**rec("memset", dur=500, seq=(101,)), "kind": "memset", "bytes": 4096, "copy_kind": None})
    return out


@pytest.mark.parametrize("fmt", ["csv", "space"])
@pytest.mark.parametrize("cols", [list(COLUMNS), ["idx", "dir", "sub", "mod", "op", "kernel", "params", "sil", "tc",
                                                  "flops", "tflops", "roofline"]])
def test_lines_equal_rows_on_odd_records(fmt, cols):
    records = list(enumerate(_records(), 1))
    reference = io.StringIO()
    w = FORMATS[fmt](reference, cols, cols)
    row = compile_row(cols, raw=False)
    w.rows([row(i, d, m, r) for i, d, m, r in rows(records, Modeller(share=True), Peaks(), True, Coverage())])
    make, as_lines = row_function(cols, FORMATS[fmt])
    assert as_lines
    got = [make(i, d, m, r) for i, d, m, r in rows(records, Modeller(share=True), Peaks(), True, Coverage())]
    assert "\n".join(got) + "\n" == reference.getvalue()


@pytest.mark.parametrize("fmt", ["csv", "space"])
def test_per_kernel_output_equals_rows_on_a_real_capture(fmt):
    data = parsed("nsys/pyprof/transformer.sqlite.xz")
    cols = list(COLUMNS)
    out = io.StringIO()
    run_stream(io.BytesIO(data), "t", out, cols, fmt, header=False)
    reference = io.StringIO()
    w = FORMATS[fmt](reference, cols, cols)
    row = compile_row(cols, raw=False)
    recs = [(n, json.loads(x)) for n, x in enumerate(data.split(b"\n"), 1) if x.startswith(b'{"kind"')]
    for _n, d in recs:
        defaults_of(d)  # what a schema-3 line leaves out, as the readers put it back
    w.rows([row(i, d, m, r) for i, d, m, r in rows(recs, Modeller(share=True), Peaks(), True, Coverage())])
    assert len(recs) > 500
    assert out.getvalue() == reference.getvalue()


def test_one_column_takes_the_rows():
    # the csv module writes a row of one empty field as "": one column is left to it
    assert row_function(["mod"], FORMATS["csv"])[1] is False
    assert row_function(["mod", "op"], FORMATS["csv"])[1] is True
    assert row_function(["mod", "op"], FORMATS["jsonl"])[1] is False
    assert row_function(["mod", "op"], FORMATS["columns"])[1] is False


def test_round_text_is_str_of_round():
    rng = random.Random(7)
    values = [0.0, -0.0, 1e-20, -1e-20, 0.5, 0.05, 0.005, 0.0005, 0.00005, 2.675, 1.005, 12.0, 100.0,
              999_999_999.9999, -999_999_999.9999, 1e9, -1e9, 123_456_789.123_456, 1e16, 1e300,
              float("inf"), float("-inf"), float("nan")]
    for _ in range(50_000):
        values.append(rng.choice([1, -1]) * 10 ** rng.uniform(-8, 9.5))
        n = rng.randint(1, 4)  # a decimal tie at n digits, and either side of it
        values.append(rng.randint(-10**9, 10**9) / 10**n + rng.choice([0.5, 0.499_999_9, 0.500_000_1]) / 10**n)
    for n in (1, 2, 3, 4, 5, 6):
        for v in values:
            assert round_text(v, n) == str(round(v, n)), (v, n)
