"""``pyprof diff`` as users run it: the console command and ``python -m pyprof.diff``, its formats, its exit codes
and its messages."""
from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pyprof.diff.cli import SLOWER, main
from pyprof.parse import parse_file
from pyprof.record import end_line, header_line

DATA = Path(__file__).resolve().parents[1] / "data"
FOREACH = str(DATA / "diff" / "transformer_foreach.sqlite.xz")
FUSED = str(DATA / "diff" / "transformer_fused.sqlite.xz")
TRACE = str(DATA / "kineto" / "transformer.pt.trace.json.gz")


def _run(capsys, *argv) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_console_command_and_python_m_agree():
    exe = shutil.which("pyprof")
    assert exe, "the pyprof console command is not installed (pip install -e .)"
    runs = [subprocess.run(argv + ["diff", FOREACH, FUSED, "--jsonl", "-q"], capture_output=True, text=True)
            for argv in ([exe], [sys.executable, "-m", "pyprof.cli"])]
    via_m = subprocess.run([sys.executable, "-m", "pyprof.diff", FOREACH, FUSED, "--jsonl", "-q"], capture_output=True,
                           text=True)
    assert runs[0].returncode == runs[1].returncode == via_m.returncode == 0, runs[0].stderr
    assert runs[0].stdout == runs[1].stdout == via_m.stdout and not via_m.stderr
    h = subprocess.run([sys.executable, "-m", "pyprof.diff", "-h"], capture_output=True, text=True)
    assert h.returncode == 0 and h.stdout.startswith("usage: pyprof diff [-h]")


def test_csv_and_jsonl_columns_are_named_base_new_delta(capsys):
    rc, out, _ = _run(capsys, FOREACH, FUSED, "--csv", "--table", "rows", "-q")
    assert rc == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert list(rows[0]) == ["op", "base_ms", "new_ms", "delta_ms", "delta_pct", "base_calls", "new_calls",
                             "delta_calls", "present"]
    assert rows[0]["op"] == "_fused_adamw_" and float(rows[0]["delta_ms"]) > 0  # the largest change: new in fused
    rc, out, _ = _run(capsys, FOREACH, FUSED, "--jsonl", "-q")
    lines = [json.loads(x) for x in out.splitlines()]
    assert {x["view"] for x in lines} == {"diff_runs", "diff_steps", "diff_op", "diff_kernels_only"}
    for x in lines:
        if x["view"] != "diff_runs":
            assert {"base_ms", "new_ms", "delta_ms"} <= set(x)
            # each of the three rounded to 0.1 us on its own
            assert x["delta_ms"] == pytest.approx(x["new_ms"] - x["base_ms"], abs=1.5e-4)


def test_fail_if_slower_both_ways(capsys):
    # fused's mean step is 15.954 ms against foreach's 12.386 (+28.8%): its GPU idles longer between kernels
    rc, out, err = _run(capsys, FOREACH, FUSED, "--fail-if-slower", "10", "-q", "--table", "steps")
    assert rc == SLOWER == 3 and out  # the diff is written all the same
    assert err.count("\n") == 1 and "NEW is 28.81% slower than BASE" in err and "--fail-if-slower 10%" in err
    rc, _, err = _run(capsys, FOREACH, FUSED, "--fail-if-slower", "30", "-q")
    assert rc == 0 and not err
    rc, _, err = _run(capsys, FUSED, FOREACH, "--fail-if-slower", "0", "-q")  # faster: never fails
    assert rc == 0 and not err


def test_records_and_exports_both_sides_and_ranks_joined_by_commas(capsys, tmp_path):
    records = tmp_path / "transformer.dict"
    with open(records, "w") as f:
        parse_file(TRACE, f)
    # the export against its own records: no change
    rc, out, _ = _run(capsys, TRACE, str(records), "--jsonl", "-q", "--table", "rows")
    assert rc == 0 and all(json.loads(x)["delta_ms"] == 0 for x in out.splitlines())
    # two ranks that ran the same as one: per step (the mean rank's), nothing changes; twice the steps
    rc, out, _ = _run(capsys, f"{records},{TRACE}", str(records), "--jsonl", "-q")
    lines = [json.loads(x) for x in out.splitlines()]
    base, new = [x for x in lines if x["view"] == "diff_runs"]
    assert (base["workers"], base["steps"]) == (2, 2 * new["steps"])
    assert all(x["delta_ms"] == 0 for x in lines if x["view"] in ("diff_op", "diff_steps"))


def test_the_html_page(capsys, tmp_path):
    page = tmp_path / "diff.html"
    rc, out, _ = _run(capsys, FOREACH, FUSED, "-o", str(page), "-q", "--top", "5")
    assert rc == 0 and out.startswith("# Runs compared")
    html = page.read_text()
    for name in ("diff_runs", "diff_steps", "diff_op", "diff_kernels_only"):
        assert f'"name":"{name}"' in html
    assert "_fused_adamw_" in html and "<title>pyprof diff:" in html
    assert [p.name for p in tmp_path.iterdir()] == ["diff.html"]  # no temporary left beside it


def test_bad_input_one_line_naming_the_file_nothing_written(capsys, tmp_path):
    bad = tmp_path / "notes.sqlite"
    bad.write_text("not a profile\n")
    page = tmp_path / "diff.html"
    for argv in ([FOREACH, str(bad)], [str(bad), FOREACH], [FOREACH, str(tmp_path / "missing.dict")]):
        rc, out, err = _run(capsys, *argv, "-o", str(page))
        assert rc == 1 and out == "" and err.count("\n") == 1, argv
        assert err.startswith("pyprof diff: error: ") and (str(bad) in err or "missing.dict" in err)
        assert not page.exists() and os.listdir(tmp_path) == ["notes.sqlite"]


@pytest.mark.parametrize("argv,says", [
    (["--top", "0"], "--top must be positive"),
    (["--fail-if-slower", "-1"], "--fail-if-slower"),
    (["-o", "-"], "-o -"),
    (["-j", "0"], "--jobs must be >= 1"),
])
def test_usage_errors_exit_2(capsys, argv, says):
    rc, out, err = _run(capsys, FOREACH, FUSED, *argv)
    assert rc == 2 and out == "" and says in err and err.count("\n") == 1


def test_a_list_with_an_empty_name_is_a_usage_error(capsys):
    rc, out, err = _run(capsys, f"{FOREACH},", FUSED)
    assert rc == 2 and out == "" and "empty file name" in err


def test_a_run_without_gpu_activity(capsys, tmp_path):
    # what pyprof parse writes for a profile without GPU activity: its header and end lines, no record (a 0-byte
    # file is refused: what a refused parse leaves)
    empty = tmp_path / "empty.dict"
    empty.write_text(header_line({}) + "\n" + end_line(0) + "\n")
    rc, out, _ = _run(capsys, FOREACH, str(empty), "--jsonl", "-q", "--table", "steps")
    # no step windows on one side: GPU time per step only (7.3224 ms: the recount of test_diff)
    assert rc == 0 and [json.loads(x) for x in out.splitlines()] == [
        {"part": "gpu_time", "base_ms": 7.3224, "new_ms": 0.0, "delta_ms": -7.3224, "delta_pct": -100.0}]
    rc, out, err = _run(capsys, str(empty), FOREACH, "--fail-if-slower", "5")
    assert rc == 1 and out == "" and str(empty) in err and err.count("\n") == 1
