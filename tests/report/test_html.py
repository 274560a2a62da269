"""The HTML page: self-contained, every string escaped, data embedded as it was; and the report command."""
from __future__ import annotations

import io
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from pyprof.report import html
from pyprof.report.cli import is_records, main
from pyprof.report.model import Table

DATA = pathlib.Path(__file__).parents[1] / "data" / "nsys" / "pyprof"
EVIL = "</script><script>alert(1)</script><!-- &amp; <b>x</b>"


def _page(tables, trace_events=None, meta=None) -> str:
    out = io.StringIO()
    html.render(tables, meta or {"title": "t"}, trace_events, out)
    return out.getvalue()


def _embedded(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="pyprof-data">(.*?)</script>', page, re.S)
    return json.loads(m.group(1))


def _table(**kw) -> Table:
    t = Table("kernels", "Kernels", ["key", "depth", "ns"], ["Kernel", "Depth", "Time (ns)"],
              [[EVIL, 0, 5], ["void f<int>(T&)", 1, None]], notes=[EVIL], chart={"type": "bar", "label": "key",
                                                                              "values": ["ns"]}, tree_column="depth")
    for k, v in kw.items():
        setattr(t, k, v)
    return t


def test_escaped_and_round_trips():
    page = _page([_table()], meta={"title": EVIL, "source": "a<b>&c"})
    assert "<script>alert" not in page and "<b>x</b>" not in page and "<!-- &amp;" not in page
    assert "<title>&lt;/script&gt;&lt;script&gt;alert(1)" in page and "a&lt;b&gt;&amp;c" in page
    data = _embedded(page)  # the JSON decodes back to exactly the strings given
    assert data["tables"][0]["rows"][0][0] == EVIL and data["tables"][0]["notes"] == [EVIL]
    assert data["tables"][0]["rows"][1] == ["void f<int>(T&)", 1, None]


def test_self_contained():
    page = _page([_table()], trace_events=[{"ph": "X", "name": "k", "pid": 1, "tid": 1, "ts": 1.0, "dur": 2.0}])
    # The only URL is the SVG namespace name that createElementNS needs: a name, never fetched.
    assert set(re.findall(r"https?://[^\s\"'<>)]+", page)) == {"http://www.w3.org/2000/svg"}
    assert not re.search(r"<(script|img|iframe)[^>]*\ssrc=|<link\b|@import|url\((?!#)|fetch\(|XMLHttpRequest", page)
    assert page.count("<script") == 3  # data, timeline, report: all inline


def test_timeline_cap_and_rows():
    evs = [{"ph": "M", "name": "process_name", "pid": 7, "args": {"name": "GPU 0 (H200)"}},
           {"ph": "M", "name": "thread_name", "pid": 7, "tid": 1, "args": {"name": "stream 7"}}]
    evs += [{"ph": "X", "name": f"k{i % 3}", "pid": 7, "tid": 1, "ts": 1000.0 + i, "dur": 0.5,
             "args": {"op": "conv2d"}} for i in range(50)]
    evs += [{"ph": "X", "name": "cudaLaunchKernel", "pid": 3, "tid": 4, "ts": 999.0, "dur": 0.25}]
    tl = html.timeline(evs, cap=51)
    assert tl["rows"] == ["GPU 0 \u00b7 stream 7", "pid 3 \u00b7 4"]  # GPU rows first
    assert len(tl["ev"]) == 51 * 5 and tl["t0_us"] == 999.0 and tl["names"] == ["k0", "k1", "k2", "cudaLaunchKernel"]
    assert tl["ev"][:5] == [0, 1.0, 0.5, 0, 1]  # row, ts from t0, dur, name, tip
    assert len(html.timeline(evs, cap=10)["ev"]) == 10 * 5


def test_is_records(tmp_path):
    rec = tmp_path / "r.dict"
    rec.write_text('{"kind":"kernel","kShortName":"k","schema":1}\n')
    legacy = tmp_path / "l.dict"
    legacy.write_text("{'kShortName': 'k', 'op': []}\n")
    kineto = tmp_path / "t.json"
    kineto.write_text('{\n "traceEvents": []\n}\n')
    assert is_records(str(rec)) and is_records(str(legacy))
    assert not is_records(str(kineto)) and not is_records(str(DATA / "lenet.sqlite.xz"))


def test_report_from_export_and_trace(tmp_path):
    out, trace = tmp_path / "r.html", tmp_path / "t.json"
    assert main([str(DATA / "lenet.sqlite.xz"), "-o", str(out), "--trace", str(trace)]) == 0
    data = _embedded(out.read_text())
    names = [t["name"] for t in data["tables"]]
    assert "operators" in names and "kernels" in names
    t = json.loads(trace.read_text())
    assert t["otherData"]["activities"] == t["otherData"]["activities_in_input"] == data["meta"]["trace_total"]
    assert len(data["timeline"]["ev"]) // 5 >= data["meta"]["trace_shown"]  # activities plus their launches
    assert oct(os.stat(out).st_mode & 0o777) != "0o600"
    assert sorted(os.listdir(tmp_path)) == ["r.html", "t.json"]  # no temporary left behind


def test_bad_input_writes_nothing(tmp_path, capsys):
    bad = tmp_path / "bad.dict"
    bad.write_text('{"kind":"kernel","kShortName":"k","schema":1}\nnot json at all\n')
    out = tmp_path / "r.html"
    assert main([str(bad), "-o", str(out), "--trace", str(tmp_path / "t.json")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("pyprof report: error: ") and err.count("\n") == 1 and "line 2" in err
    assert sorted(os.listdir(tmp_path)) == ["bad.dict"]
    assert main([str(tmp_path / "missing.sqlite"), "-o", str(out)]) == 1
    assert "missing.sqlite" in capsys.readouterr().err


def test_usage_errors(tmp_path, capsys):
    assert main([]) == 2
    assert main([str(DATA / "lenet.sqlite.xz")]) == 2  # -o is required
    assert main([str(DATA / "lenet.sqlite.xz"), "-o", str(tmp_path / "r.html"), "--max-trace-events", "-1"]) == 2
    assert "--max-trace-events" in capsys.readouterr().err


@pytest.mark.parametrize("cmd", [["pyprof", "report"], [sys.executable, "-m", "pyprof.report"]])
def test_console_script_and_module(tmp_path, cmd):
    out = tmp_path / "r.html"
    p = subprocess.run(cmd + [str(DATA / "lenet.sqlite.xz"), "-o", str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert out.read_text().startswith("<!DOCTYPE html>")
    p = subprocess.run(cmd + ["-o", str(out)], capture_output=True, text=True)
    assert p.returncode == 2 and "usage" in p.stderr


def test_fallback_tables(tmp_path):
    # Used only where pyprof.report.views is absent: operators and kernels by prof's group keys.
    from pyprof.report.cli import _fallback_tables

    recs = tmp_path / "r.dict"
    recs.write_text('{"kind":"kernel","kShortName":"a","kDuration":3000000,"op":["mm"],"schema":1}\n'
                    '{"kind":"kernel","kShortName":"b","kDuration":1000000,"op":["mm"],"schema":1}\n')
    tables, n = _fallback_tables([("r", str(recs))])
    assert n == 2 and [t.name for t in tables] == ["op", "kernel"]
    assert tables[0].rows == [["mm", 2, 4.0]] and tables[1].rows == [["a", 1, 3.0], ["b", 1, 1.0]]
