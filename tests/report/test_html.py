"""The HTML page: self-contained, every string escaped, data embedded as it was; and the report command."""
from __future__ import annotations

import contextlib
import io
import json
import os
import pathlib
import re
import stat
import subprocess
import sys
from html.parser import HTMLParser

import pytest

from pyprof.report import page as report_page
from pyprof.report.cli import is_records, main
from pyprof.prof.tables import Table

DATA = pathlib.Path(__file__).parents[1] / "data" / "nsys" / "pyprof"
EVIL = "</script><script>alert(1)</script><!-- &amp; <b>x</b>"


def _page(tables, trace_events=None, meta=None) -> str:
    out = io.StringIO()
    report_page.render(tables, meta or {"title": "t"}, trace_events, out)
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
    tl = report_page.timeline(evs, cap=51)
    assert tl["rows"] == ["GPU 0 \u00b7 stream 7", "pid 3 \u00b7 4"]  # GPU rows first
    assert len(tl["ev"]) == 51 * 6 and tl["t0_us"] == 999.0
    assert sorted(tl["names"]) == ["cudaLaunchKernel", "k0", "k1", "k2"]
    k0 = tl["names"].index("k0")
    assert tl["ev"][:6] == [0, 1.0, 0.5, k0, 1, 0]  # row, ts from t0, dur, name, tip, lane
    assert tl["lanes"] == [1, 1]  # 0.5 us kernels 1 us apart never overlap
    assert len(report_page.timeline(evs, cap=10)["ev"]) == 10 * 6


def test_a_tip_keeps_a_long_value_short():
    # issue 44: a foreach optimizer call's tip listed 52 parameter shapes and covered half the screen
    shapes = str([[512, 512]] * 52)
    evs = [{"ph": "X", "name": "k", "pid": 7, "tid": 1, "ts": 1000.0, "dur": 1.0,
            "args": {"op": "_foreach_add_", "shapes": shapes, "callsite": "train.py:9"}}]
    (tip,) = [t for t in report_page.timeline(evs)["tips"] if t]
    assert "op: _foreach_add_" in tip and "callsite: train.py:9" in tip
    (line,) = [x for x in tip.splitlines() if x.startswith("shapes: ")]
    assert len(line) <= len("shapes: ") + report_page.TIP_VALUE_CHARS + 10
    assert f"({len(shapes):,} characters; the tables have it whole)" in line


def test_timeline_lanes_nest_ranges_over_launches():
    # A thread's step range holds two op ranges, each holding a launch: three depths, so three lanes; a
    # second row's lone event stays in lane 0.
    evs = [{"ph": "X", "name": "step", "cat": "range", "pid": 3, "tid": 4, "ts": 0.0, "dur": 10.0},
           {"ph": "X", "name": "linear", "cat": "range", "pid": 3, "tid": 4, "ts": 0.0, "dur": 4.0},
           {"ph": "X", "name": "relu", "cat": "range", "pid": 3, "tid": 4, "ts": 5.0, "dur": 5.0},
           {"ph": "X", "name": "cudaLaunchKernel", "pid": 3, "tid": 4, "ts": 1.0, "dur": 2.0},
           {"ph": "X", "name": "cudaLaunchKernel", "pid": 3, "tid": 4, "ts": 6.0, "dur": 2.0},
           {"ph": "X", "name": "k", "pid": 3, "tid": 9, "ts": 2.0, "dur": 1.0}]
    tl = report_page.timeline(evs)
    assert tl["lanes"] == [3, 1]
    by_name_lane = sorted((tl["names"][tl["ev"][i + 3]], tl["ev"][i + 5]) for i in range(0, len(tl["ev"]), 6))
    assert by_name_lane == [("cudaLaunchKernel", 2), ("cudaLaunchKernel", 2), ("k", 0), ("linear", 1),
                            ("relu", 1), ("step", 0)]


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


# -- Hostile names in a whole report, read back by a real HTML parser (issue 13) -------------------------------

HOSTILE = ["</script><script>window.pwned=1</script>", "<!--", "<!-- <script>", "</SCRIPT >x",
           "<img src=x onerror=alert(1)>", "a\u2028b\u2029c", "&lt;amp&gt; &amp;", "\x1b[31mred\x1b[0m", "q'\"`"]


class _Parsed(HTMLParser):
    """Every element the page holds, the text of its title and the bodies of its script elements."""

    def __init__(self, page: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.scripts: list[tuple[dict, str]] = []
        self.title = ""
        self._in: str | None = None
        self._attrs: dict = {}
        self.feed(page)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self._in, self._attrs = tag, dict(attrs)
        if tag == "script":
            self.scripts.append((self._attrs, ""))

    def handle_data(self, data):
        if self._in == "script":
            self.scripts[-1] = (self._attrs, self.scripts[-1][1] + data)
        elif self._in == "title":
            self.title += data

    def handle_endtag(self, tag):
        self._in = None


def _strings(obj) -> set:
    out, stack = set(), [obj]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            out.add(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return out


def _records_named(path: pathlib.Path, names: list[str]) -> pathlib.Path:
    lines = []
    for i, n in enumerate(names):
        t = 10_000 * i
        lines.append(json.dumps({
            "kind": "kernel", "kShortName": n, "kLongName": f"void {n}<float>()", "kDuration": 500, "start_ns": t,
            "end_ns": t + 500, "pid": 1, "tid": 2, "device": 0, "stream": 7, "correlation_id": i + 1,
            "api": "cudaLaunchKernel", "api_start_ns": t - 100, "api_end_ns": t - 50, "gpu": "NVIDIA H100 80GB HBM3",
            "op": [n], "mod": ["torch"], "layer": ["Net", n], "callsite": f"/src/{n}.py:7", "dir": "fprop",
            "seqId": [i], "args": [{"type": "tensor", "shape": [4, 8], "dtype": "float32"}], "schema": 1}))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_hostile_names_stay_text_for_an_html_parser(tmp_path):
    """A page of records whose kernel, op, layer and call site are hostile, against the same page with plain
    names: the same elements, no script beyond the page's three, and every name back as it was from the data."""
    pages = {}
    for kind, names, title in (("plain", [f"name{i}" for i in range(len(HOSTILE))], "plain title"),
                               ("hostile", HOSTILE, "</title><script>window.pwned=1</script> & <b>")):
        recs = _records_named(tmp_path / f"{kind}.dict", names)
        out = tmp_path / f"{kind}.html"
        assert main([str(recs), "-o", str(out), "--title", title, "--trace", str(tmp_path / f"{kind}.json")]) == 0
        pages[kind] = _Parsed(out.read_text(encoding="utf-8"))
    plain, hostile = pages["plain"], pages["hostile"]
    assert hostile.tags == plain.tags  # no element injected, none closed early
    assert hostile.title == "</title><script>window.pwned=1</script> & <b>"  # shown as text, literally
    assert [a for a, _ in hostile.scripts] == [{"type": "application/json", "id": "pyprof-data"}, {}, {}]
    data = json.loads(hostile.scripts[0][1])
    strings = _strings(data)
    for name in HOSTILE:
        assert name in strings, name  # a kernels row, an op row, a timeline name: the text as it was
        assert f"/src/{name}.py:7" in strings or any(name in s for s in strings)
    trace = json.loads((tmp_path / "hostile.json").read_text(encoding="utf-8"))
    assert {e["name"] for e in trace["traceEvents"] if e.get("cat") == "kernel"} == set(HOSTILE)


@pytest.mark.parametrize("text,records", [
    ('{"kind":"kernel","kLongName":"void k<' + "x" * (3 << 20) + '>()","schema":1}\n', True),  # 3 MB first line
    ('{"args":' + "[" * 100_000 + "]" * 100_000 + ',"kShortName":"k"}\n', True),  # sorted keys, a deep value
    ('\n\n  {"pyprof_end":true,"schema":2,"records":0}\n', True),  # parse's end line alone: no GPU activity
    ('{"schemaVersion":1,"traceEvents":[' + '{"ph":"X"},' * 200_000 + '{}]}', False),  # a one-line Kineto trace
    ('{\n  "traceEvents": []\n}\n', False), ("[{}]\n", False), ("{}\n", False), ("not json\n", False),
], ids=["long-first-line", "deep-value", "end-line", "kineto-one-line", "kineto", "array", "empty-object", "text"])
def test_is_records_by_its_first_key(tmp_path, text, records):
    path = tmp_path / "in"
    path.write_text(text)
    assert is_records(str(path)) is records


def _report_to(tmp_path, *extra) -> tuple[int, str]:
    recs = _records_named(tmp_path / "net.dict", ["k0", "k1"])
    with io.StringIO() as err, contextlib.redirect_stderr(err):
        code = main([str(recs), *extra])
        return code, err.getvalue()


def _device(path, minor: int) -> str:
    """A private node of a memory device (3: null, 7: full): never the machine's own, which a rename would
    replace."""
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
    except OSError:
        pytest.skip("mknod not allowed here")
    return str(path)


# A read-only folder: tests/robustness/test_report_robust.py (it needs chattr as root).
@pytest.mark.parametrize("where", ["-o folder", "--trace folder", "missing folder", "-o full disk",
                                   "--trace full disk", "same file twice"])
def test_output_that_cannot_be_written(tmp_path, where):
    """One line naming the path at fault, exit 1 (2 for the usage error), and nothing left: no page, no trace,
    no temporary; a folder keeps what it held and a device stays a device."""
    out = tmp_path / "out"
    out.mkdir()
    folder = out / "adir"
    folder.mkdir()
    (folder / "keep.txt").write_text("the user's")
    page, trace = str(out / "r.html"), str(out / "t.json")
    bad = {"-o folder": str(folder), "--trace folder": str(folder), "missing folder": str(out / "no" / "r.html"),
           "same file twice": page}.get(where) or _device(out / "full", 7)
    before = sorted(os.listdir(out))
    args = ["-o", page, "--trace", bad] if where.startswith("--trace") or where == "same file twice" \
        else ["-o", bad, "--trace", trace]
    code, err = _report_to(tmp_path, *args)
    assert code == (2 if where == "same file twice" else 1)
    assert err.count("\n") == 1 and err.startswith("pyprof report: error: ") and bad in err, err
    assert sorted(os.listdir(out)) == before and os.listdir(folder) == ["keep.txt"]
    if where.endswith("full disk"):
        assert stat.S_ISCHR(os.lstat(bad).st_mode)


def test_a_device_is_written_in_place(tmp_path):
    null = _device(tmp_path / "null", 3)
    code, err = _report_to(tmp_path, "-o", null, "--trace", null)  # a device takes both
    assert code == 0, err
    assert stat.S_ISCHR(os.lstat(null).st_mode)
    assert sorted(os.listdir(tmp_path)) == ["net.dict", "null"]
