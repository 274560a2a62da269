"""DLProf's nsys export of a small network under the original PyProf's markers (apex.pyprof, PyTorch 1.10):
its ``traceMarker`` ranges record the whole call stack, torch's frames included (``conv.py:443`` innermost for both
convolutions). A kernel's call site is the innermost frame outside torch, the user's line, on both parse paths, and
the two user convolutions (``dummy_network.py:25`` and ``:26``, ``Conv2d::_call_impl`` and ``_call_impl(2)`` in the
``funcStack``) are told apart. Expected values are read from the export's NVTX texts with sqlite3."""
from __future__ import annotations

import ast
import io
import sqlite3

import pytest

from shared_files import require_shared

from pyprof.cli import main
from pyprof.parse.write import native
from pyprof.parse import parse_file
from pyprof.record import read_lines

NAME = "external-2026-12/dlprof_nsys2022.1_pyprof_markers.sqlite"
SCRIPT = "dummy_network.py"  # the user's script: every other file in the stacks is under site-packages/torch


def _expected(path) -> list[tuple[int, str | None, int]]:
    """Per GPU activity with a launch (by start): (start, the innermost line of SCRIPT in the innermost traceMarker
    range around its launch call, duration)."""
    db = sqlite3.connect(path)
    ranges: dict = {}
    for tid, start, end, text in db.execute(
            "SELECT e.globalTid, e.start, e.end, COALESCE(e.text, s.value) FROM NVTX_EVENTS e "
            "LEFT JOIN StringIds s ON s.id = e.textId WHERE e.eventType = 59 AND e.end IS NOT NULL"):
        if text and text.startswith("{'traceMarker'"):
            ranges.setdefault(tid, []).append((start, end, ast.literal_eval(text)["traceMarker"]))
    out = []
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        for start, end, tid, c0, c1 in db.execute(
                f"SELECT a.start, a.end, r.globalTid, r.start, r.end FROM {table} a JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
                "ON r.correlationId = a.correlationId"):
            around = [stack for s, e, stack in sorted(ranges.get(tid, ())) if s <= c0 and e >= c1]
            user = [f for f in around[-1] if f.startswith(SCRIPT + ":")] if around else []
            out.append((start, user[-1] if user else None, end - start))
    db.close()
    return sorted(out)


@pytest.fixture(scope="module")
def export():
    path = require_shared() / "corpus" / NAME
    return path, _expected(path)


@pytest.mark.parametrize("pure", [True, False])
def test_call_site_is_the_users_line_on_both_paths(export, monkeypatch, pure):
    path, expected = export
    monkeypatch.setenv(native.PURE_PYTHON_ENV, "1" if pure else "0")
    out = io.StringIO()
    parse_file(str(path), out)
    recs = sorted((r for r in read_lines(out.getvalue().splitlines()) if "start_ns" in r and r.get("api")),
                  key=lambda r: r["start_ns"])
    assert len(recs) == len(expected) == 62
    assert [r["callsite"] for r in recs] == [site for _, site, _ in expected]
    convs = {r["callsite"] for r in recs if r["op"] == ["conv2d"]}
    assert convs == {f"{SCRIPT}:25", f"{SCRIPT}:26"}


def test_lines_view_charges_the_two_convolutions_to_their_own_lines(export, tmp_path, capsys):
    path, expected = export
    records = tmp_path / "x.dict"
    with open(records, "w") as f:
        parse_file(str(path), f)
    capsys.readouterr()
    assert main(["prof", "--view", "lines", str(records)]) == 0
    printed = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line.split() for line in printed if line.startswith(SCRIPT)}
    for site in (f"{SCRIPT}:25", f"{SCRIPT}:26"):
        # Activities and GPU ms of the line: the recount's, its durations summed (ns -> ms, 4 decimals as printed).
        mine = [d for _, s, d in expected if s == site]
        assert int(rows[site][2]) == len(mine) and float(rows[site][3]) == round(sum(mine) / 1e6, 4)
    assert sorted(rows) == sorted({s for _, s, _ in expected})
    assert not any("site-packages" in line for line in printed)
