"""The output formats with names from a hostile or broken writer: one line per row, nothing raw reaches the
terminal, -w holds, huge names cut (issue 13). Expected texts are written out by hand."""
from __future__ import annotations

import csv
import io
import json

import pytest

from pyprof.common import MAX_FIELD_CHARS, printable
from pyprof.prof.table.formats import FORMATS

COLUMNS = ["idx", "kernel", "sil"]
HEADERS = ["Idx", "Kernel", "Sil(ns)"]


def _write(fmt: str, rows: list[tuple], width: int = 0) -> str:
    out = io.StringIO()
    w = FORMATS[fmt](out, COLUMNS, HEADERS, width)
    w.header()
    w.rows(rows)
    w.close()
    return out.getvalue()


@pytest.mark.parametrize("raw,shown", [
    ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),  # ESC: the rest of the sequence is harmless text
    ("two\nlines", "two\\nlines"), ("over\rwrite", "over\\rwrite"), ("tab\there", "tab\\there"),
    ("nul\x00", "nul\\x00"), ("del\x7f", "del\\x7f"), ("next\x85line", "next\\x85line"),  # C1
    ("sep\u2028line\u2029para", "sep\\u2028line\\u2029para"), ("\u202eevil", "\\u202eevil"),  # bidi override
    ("no\u00a0break", "no\\xa0break"), ("lone\ud800", "lone\\ud800"),
    ("back\\slash \"quote\" <b> caf\u00e9 \u6838", "back\\slash \"quote\" <b> caf\u00e9 \u6838"),  # printable: kept
])
def test_printable_escapes_what_a_terminal_would_act_on(raw, shown):
    assert printable(raw) == shown


def test_printable_cuts_a_huge_name_with_a_marker():
    name = "void k<" + "x" * 100_000 + ">()"  # 100,010 characters
    out = printable(name)
    assert out == name[:MAX_FIELD_CHARS] + f"...[{100_010 - 65_536} more characters]"
    assert printable("x" * 10, limit=4) == "xxxx...[6 more characters]"


HOSTILE = "\x1b]0;title\x07a b\nc,\"d\"\u2028e"


def test_space_one_line_per_row_and_one_field_per_column():
    text = _write("space", [(0, HOSTILE, 500), (1, "gemm", 20)])
    assert text == ("Idx Kernel Sil(ns)\n"
                    "0 \\x1b]0;title\\x07a_b\\nc,\"d\"\\u2028e 500\n"
                    "1 gemm 20\n")


def test_csv_quotes_commas_and_escapes_line_breaks():
    text = _write("csv", [(0, HOSTILE, 500), (1, "gemm", 20)])
    assert text.count("\n") == 3  # a header and two rows, one line each
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[1] == ["0", "\\x1b]0;title\\x07a b\\nc,\"d\"\\u2028e", "500"]
    assert rows[2] == ["1", "gemm", "20"]


def test_csv_of_plain_names_is_unchanged():
    # The fast path: no field needs escaping, the csv module's text as it is (a comma quotes the field).
    assert _write("csv", [(0, "M=4,N=2", 5)]) == 'Idx,Kernel,Sil(ns)\n0,"M=4,N=2",5\n'


@pytest.mark.parametrize("name", [HOSTILE, "e\u0301" * 50, "\u6838" * 40, "x" * 200_000])
def test_columns_never_wider_than_width(name):
    text = _write("columns", [(0, name, 500), (1, "gemm", 20)], width=40)
    lines = text.split("\n")
    assert lines.pop() == "" and len(lines) == 3
    assert all(len(line) <= 40 for line in lines), lines
    assert lines[0].split() == ["Idx", "Kernel", "Sil(ns)"] and lines[2].split() == ["1", "gemm", "20"]
    assert "\x1b" not in text and "\u2028" not in text


def test_columns_pad_with_two_spaces():
    # numbers stand right-aligned, text left-aligned
    assert _write("columns", [(0, "gemm", 500), (10, "k", 7)], width=80) == ("Idx  Kernel  Sil(ns)\n"
                                                                             "  0  gemm        500\n"
                                                                             " 10  k             7\n")


def test_jsonl_keeps_names_whole_and_escaped():
    name = "\x1b[31m</script>\u2028" + "x" * 100_000
    text = _write("jsonl", [(0, name, 500)])
    assert text.count("\n") == 1 and "\x1b" not in text and "\u2028" not in text
    assert json.loads(text) == {"idx": 0, "kernel": name, "sil": 500}
