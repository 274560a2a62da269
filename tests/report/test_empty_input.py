"""A profile without GPU activity: ``pyprof parse`` writes its header and end lines and no record, exits 0,
and ``pyprof report`` and ``pyprof prof --view`` take that file (or the export itself) and say there is no GPU activity,
exit 0. On two real Nsight Systems exports of the shared corpus whose SQLite has no CUPTI activity table (the
corpus README lists 0 kernels for both; sqlite3 recounts it here)."""
from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys

import pytest
from report_helpers import ROOT

from pyprof.record import end_line
from pyprof.report.cli import is_records, main

EXPORTS = ["nsys/nsys2026.1_jacc_report1.sqlite", "nsys/nsys2024.6_no_cuda.sqlite"]
_ACTIVITY = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")


def _activities(path) -> int:
    """GPU activities in the export, by sqlite3: rows of the CUPTI kernel/memcpy/memset tables present."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = {t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return sum(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in _ACTIVITY if t in tables)
    finally:
        con.close()


def _embedded(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="pyprof-data">(.*?)</script>', page, re.S)
    return json.loads(m.group(1))


@pytest.fixture(params=EXPORTS)
def empty_records(request, corpus, tmp_path):
    """(export path, the records file parse wrote for it)."""
    export = corpus / request.param
    assert _activities(export) == 0
    p = subprocess.run([sys.executable, "-m", "pyprof.parse", str(export)], capture_output=True, cwd=ROOT)
    # no records: parse's header line (the GPUs the export describes, if any) and its end line
    # ({"pyprof_end":true, ..., "records":0}), the sign that parse finished
    assert p.returncode == 0 and "no GPU kernels" in p.stderr.decode()
    header, end = p.stdout.splitlines()
    assert json.loads(header)["pyprof_header"] is True and json.loads(header)["schema"] == 4
    assert json.loads(end) == {"pyprof_end": True, "schema": 4, "records": 0}
    out = tmp_path / "empty.dict"
    out.write_bytes(p.stdout)
    return export, out


def test_report_takes_the_empty_records_and_says_so(empty_records, tmp_path):
    export, recs = empty_records
    for src in (recs, export):  # the records parse wrote, and the export parsed on the way
        page_path = tmp_path / "r.html"
        assert main([str(src), "-o", str(page_path)]) == 0
        page = page_path.read_text()
        assert '<p class="notice" id="notice">No GPU activity in the input' in page  # shown without scripts too
        data = _embedded(page)
        assert data["meta"]["trace_total"] == 0 and data["timeline"] is None
        (overview,) = [t for t in data["tables"] if t["name"] == "overview"]
        assert overview["rows"] == [] and overview["empty"].startswith("No GPU activity in the records")


def test_prof_view_takes_the_empty_records_and_says_so(empty_records):
    _export, recs = empty_records
    p = subprocess.run([sys.executable, "-m", "pyprof.prof", "-v", "--view", "overview", str(recs)],
                       capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[1:] == []  # the header alone
    assert "pyprof prof: overview: No GPU activity in the records" in p.stderr


# A 0-byte or blank records file is what a refused ``pyprof parse F > x.dict`` leaves: no header line, so not
# "a program that used no GPU" (parse writes that as a header and an end line, above). Until issue 39 such a file
# read as no GPU activity, exit 0; now prof and report refuse it in one line, exit 1, nothing on stdout, no page.
EMPTY_SAYS = "empty: no header line (was its parse refused?)"


@pytest.mark.parametrize("content", [b"", b"\n  \n"])
@pytest.mark.parametrize("argv", [["--view", "overview"], [], ["--group-by", "op"]])
def test_prof_refuses_an_empty_file(tmp_path, content, argv):
    path = tmp_path / "x.dict"
    path.write_bytes(content)
    assert is_records(str(path))  # records-shaped (report reads it as records, not an export) ...
    p = subprocess.run([sys.executable, "-m", "pyprof.prof", *argv, str(path)], capture_output=True, text=True,
                       cwd=ROOT)
    assert (p.returncode, p.stdout) == (1, "")  # ... and refused
    assert p.stderr == f"pyprof prof: error: {path}: {EMPTY_SAYS}\n"


def test_a_refused_parse_piped_into_prof_fails(corpus):
    # DLProf's own database is not an export (the corpus README): parse refuses it, writing nothing
    refused = corpus / "external-2026-12/dlprof_dldb_not_nsys.sqlite"
    parse = subprocess.run([sys.executable, "-m", "pyprof.parse", str(refused)], capture_output=True, cwd=ROOT)
    assert parse.returncode == 1 and parse.stdout == b""
    p = subprocess.run([sys.executable, "-m", "pyprof.prof", "-"], input=parse.stdout, capture_output=True,
                       cwd=ROOT)
    assert (p.returncode, p.stdout) == (1, b"")
    assert p.stderr.decode() == f"pyprof prof: error: <stdin>: {EMPTY_SAYS}\n"


def test_report_refuses_an_empty_file_and_leaves_no_page(tmp_path, capsys):
    path, page = tmp_path / "x.dict", tmp_path / "r.html"
    path.write_bytes(b"")
    assert main([str(path), "-o", str(page)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err == f"pyprof report: error: {path}: {EMPTY_SAYS}\n"
    assert not page.exists()


def test_a_page_with_activity_has_no_notice(records, tmp_path):
    recs = tmp_path / "l.dict"
    lenet = records("nsys/pyprof/lenet.sqlite.xz")
    recs.write_text("".join(json.dumps(d) + "\n" for d in lenet) + end_line(len(lenet)) + "\n")
    out = tmp_path / "r.html"
    assert main([str(recs), "-o", str(out)]) == 0
    page = out.read_text()
    assert 'class="notice"' not in page and _embedded(page)["meta"]["notice"] is None
