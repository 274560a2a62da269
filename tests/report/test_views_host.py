"""The host view: each step's CPU time split into data loading, CUDA API calls, ops and other, on built intervals
with the arithmetic beside them, and on real captures against a recount of the trace's events (Lightning's, with
DataLoader ranges) and a sqlite3 recount of an nsys export."""
from __future__ import annotations

import gzip
import json
import lzma
import sqlite3
import subprocess
import sys

import numpy as np
import pytest
from report_helpers import DATA, ROOT

from pyprof.common import InputError
from pyprof.prof.aggregate import aggregate_files
from pyprof.prof.host_time import HostRun, split
from pyprof.prof.views import build


def _run(category, pairs, names=None):
    return HostRun(1, category, np.array([a for a, _ in pairs], np.int64), np.array([b for _, b in pairs], np.int64),
                   names)


def test_split_gives_each_instant_to_one_part():
    # window [0, 100): data loading [0, 10); CUDA calls [5, 20) and [50, 60); ops [15, 70)
    runs = [_run("dataloader", [(0, 10)]), _run("runtime", [(5, 20), (50, 60)]), _run("op", [(15, 70)])]
    parts = split(runs, 0, 100)
    # runtime outside data loading: [10, 20) + [50, 60) = 20; ops outside both: [20, 50) + [60, 70) = 40;
    # other: 100 - 10 - 20 - 40 = 30
    assert parts == {"dataloader": 10, "runtime": 20, "op": 40, "other": 30}
    # a window cuts the intervals: [55, 65) holds runtime [55, 60) and ops [60, 65)
    assert split(runs, 55, 65) == {"dataloader": 0, "runtime": 5, "op": 5, "other": 0}


def _union_ns(intervals, t0, t1, minus=()):
    """Plain sort-and-merge union length of intervals cut to [t0, t1), less the parts inside ``minus``."""
    pts = sorted((max(a, t0), min(b, t1)) for a, b in intervals if b > t0 and a < t1)
    merged: list = []
    for a, b in pts:
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    total = 0
    for a, b in merged:
        total += b - a
        for c, d in minus:
            total -= max(0, min(b, d) - max(a, c))
    return total


@pytest.fixture(scope="module")
def lightning(tmp_path_factory):
    out = tmp_path_factory.mktemp("host") / "lightning.jsonl"
    with open(out, "wb") as f:
        p = subprocess.run([sys.executable, "-m", "pyprof.parse", str(DATA / "paths" / "lightning.pt.trace.json.gz")],
                           stdout=f, stderr=subprocess.PIPE, cwd=ROOT)
    assert p.returncode == 0, p.stderr.decode()[-400:]
    return out


def test_lightning_steps_split_against_the_traces_events(lightning):
    with gzip.open(DATA / "paths" / "lightning.pt.trace.json.gz") as f:
        events = json.load(f)["traceEvents"]
    ns = lambda us: int(round(us * 1000))  # noqa: E731
    steps = {e["name"]: (ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in events
             if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")}
    loads = [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in events
             if e.get("cat") == "user_annotation" and e["name"].startswith("enumerate(DataLoader)")]
    calls = [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    (t,) = build(aggregate_files([str(lightning)]), ["host"])
    rows = {r[1]: dict(zip(t.columns, r)) for r in t.rows}
    assert set(rows) == set(steps) == {"ProfilerStep#2", "ProfilerStep#3"}  # Lightning's schedule: steps 3-4 of 6
    for name, (t0, t1) in steps.items():
        r = rows[name]
        assert r["cpu_ms"] == pytest.approx((t1 - t0) / 1e6, abs=1e-4)
        dl = _union_ns(loads, t0, t1)
        assert dl > 0 and r["dataloader_ms"] == pytest.approx(dl / 1e6, abs=1e-4)
        dl_cut = [(max(a, t0), min(b, t1)) for a, b in loads if b > t0 and a < t1]
        rt = _union_ns(calls, t0, t1, minus=dl_cut)
        assert r["runtime_ms"] == pytest.approx(rt / 1e6, abs=1e-4)
        parts = r["dataloader_ms"] + r["runtime_ms"] + r["op_ms"] + r["other_ms"]
        assert parts == pytest.approx(r["cpu_ms"], abs=4e-4)  # four figures rounded to 0.1 us


def test_nsys_steps_and_cuda_calls_against_sqlite(tmp_path):
    src = DATA / "nsys" / "pyprof" / "transformer.sqlite.xz"
    db = tmp_path / "t.sqlite"
    db.write_bytes(lzma.decompress(src.read_bytes()))
    con = sqlite3.connect(db)
    steps = con.execute("SELECT COALESCE(e.text, s.value), e.start, e.end FROM NVTX_EVENTS e LEFT JOIN StringIds s "
                        "ON s.id = e.textId WHERE e.eventType = 59 AND COALESCE(e.text, s.value) LIKE "
                        "'ProfilerStep#%' ORDER BY e.start").fetchall()
    calls = con.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchall()
    con.close()
    out = tmp_path / "t.jsonl"
    with open(out, "wb") as f:
        assert subprocess.run([sys.executable, "-m", "pyprof.parse", str(src)], stdout=f, cwd=ROOT,
                              stderr=subprocess.DEVNULL).returncode == 0
    (t,) = build(aggregate_files([str(out)]), ["host"])
    assert [r[1] for r in t.rows] == [name for name, _, _ in steps] == ["ProfilerStep#0", "ProfilerStep#1"]
    for r, (_name, t0, t1) in zip(t.rows, steps):
        d = dict(zip(t.columns, r))
        assert d["cpu_ms"] == pytest.approx((t1 - t0) / 1e6, abs=1e-4)
        assert d["dataloader_ms"] is None  # the example feeds one tensor: no DataLoader ranges, na not 0
        assert d["runtime_ms"] == pytest.approx(_union_ns(calls, t0, t1) / 1e6, abs=1e-4)
        assert d["op_ms"] > d["runtime_ms"] > 0


@pytest.mark.parametrize("change,message", [
    (lambda d: d.update(category="disk"), "pid or category"),
    (lambda d: d["end_ns"].pop(), "two lists of one length"),
    (lambda d: d.update(start_ns=d["start_ns"][::-1], end_ns=d["end_ns"][::-1]), "not in time order"),
])
def test_a_damaged_host_line_is_one_error_naming_its_line(lightning, tmp_path, change, message):
    lines = lightning.read_bytes().splitlines()
    k = next(i for i, x in enumerate(lines) if x.startswith(b'{"pyprof_side":"host"') and b'"runtime"' in x)
    d = json.loads(lines[k])
    change(d)
    lines[k] = json.dumps(d, separators=(",", ":")).encode()
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(InputError, match=f"line {k + 1}: a damaged host line") as e:
        aggregate_files([str(bad)])
    assert message in str(e.value)


def test_a_side_line_of_an_unknown_kind_is_skipped(lightning, tmp_path):
    # a newer pyprof's side line: the records and the known side lines still read, as before it
    lines = lightning.read_bytes().splitlines()
    lines.insert(-1, b'{"pyprof_side":"power","pid":1,"watts":[300]}')
    newer = tmp_path / "newer.jsonl"
    newer.write_bytes(b"\n".join(lines) + b"\n")
    (a,) = build(aggregate_files([str(lightning)]), ["host"])
    (b,) = build(aggregate_files([str(newer)]), ["host"])
    assert a.rows == b.rows and len(a.rows) == 2
