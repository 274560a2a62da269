"""pyprof parse --timing (pyprof/parse/side/join.py): a light capture's times joined to a marked capture's attribution,
on the committed H200/H100 captures of the same examples (tests/data/README.md).

Expected values come from the exports themselves, read here with sqlite3 and json: each step's kernel sequence is
recounted by SQL (kernels in the step whose launch call started inside its ProfilerStep range, in GPU start order),
never from the code under test.
"""
from __future__ import annotations

import gzip
import json
import lzma
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from pyprof.common import InputError
from pyprof.parse import close_source, open_source
from pyprof.parse.cli import main
from pyprof.parse.side.join import join, read_pass
from pyprof.record import SIDE_KEY, read_lines

DATA = Path(__file__).resolve().parents[1] / "data"
#: What each case joins: (attribution pass, timing pass), both of the same example.
FILES = {
    "pyprof_transformer": DATA / "nsys/pyprof/transformer.sqlite.xz",  # pyprof.init() markers
    "emit_transformer": DATA / "nsys/emit_nvtx/transformer.sqlite.xz",  # the same steps, emit_nvtx only
    "foreach": DATA / "diff/transformer_foreach.sqlite.xz",  # AdamW foreach=True
    "fused": DATA / "diff/transformer_fused.sqlite.xz",  # the same model with AdamW fused=True
    "pyprof_lenet": DATA / "nsys/pyprof/lenet.sqlite.xz",
}
KINETO_LENET = DATA / "kineto/lenet.pt.trace.json.gz"


@pytest.fixture(scope="module")
def dbs(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("join")
    out = {}
    for name, xz in FILES.items():
        out[name] = tmp / f"{name}.sqlite"
        with lzma.open(xz) as src, open(out[name], "wb") as dst:
            shutil.copyfileobj(src, dst)
    return out


def _pass(path):
    src = open_source(str(path))
    try:
        return read_pass(src, worker=False)
    finally:
        close_source(src)


def _joined(full, light):
    lines, st = join(_pass(full), _pass(light))
    return [json.loads(x) for x in lines], st


def _steps_sql(db: Path) -> list[list[tuple]]:
    """Each ProfilerStep range's kernels, in GPU start order, as (short name, grid, block, start, duration, long
    name), a kernel in the step whose launch call started inside the range."""
    con = sqlite3.connect(db)
    steps = con.execute("SELECT start, end FROM NVTX_EVENTS WHERE eventType = 59 AND COALESCE(text, "
                        "(SELECT value FROM StringIds WHERE id = textId)) LIKE 'ProfilerStep#%' ORDER BY start").fetchall()
    rows = con.execute(
        "SELECT r.start, s.value, k.gridX, k.gridY, k.gridZ, k.blockX, k.blockY, k.blockZ, k.start, k.end - k.start, "
        "l.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = "
        "k.correlationId AND r.globalTid / 16777216 = k.globalPid / 16777216 JOIN StringIds s ON s.id = k.shortName "
        "JOIN StringIds l ON l.id = k.demangledName ORDER BY k.start").fetchall()
    out = []
    for lo, hi in steps:
        out.append([(name, (gx, gy, gz), (bx, by, bz), t, ns, long)
                    for launch, name, gx, gy, gz, bx, by, bz, t, ns, long in rows if lo <= launch < hi])
    con.close()
    return out


def _activities_sql(db: Path) -> tuple[int, int]:
    """(kernels + copies + memsets, their summed duration in ns)."""
    con = sqlite3.connect(db)
    tables = {t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    count = total = 0
    for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        if t in tables:
            c, s = con.execute(f"SELECT COUNT(*), SUM(end - start) FROM {t}").fetchone()
            count, total = count + c, total + s
    con.close()
    return count, total


def _records(lines: list[dict]) -> list[dict]:
    return list(read_lines(json.dumps(d) for d in lines))


def _side(lines: list[dict], kind: str) -> list[dict]:
    return [d for d in lines if d.get(SIDE_KEY) == kind]


def test_every_kernel_of_each_step_pairs_and_carries_the_timing_pass_times(dbs):
    full_steps, light_steps = _steps_sql(dbs["pyprof_transformer"]), _steps_sql(dbs["emit_transformer"])
    # the recount: two steps, the same kernel sequence (name, grid, block) in each capture
    assert len(full_steps) == len(light_steps) == 2
    for f, l in zip(full_steps, light_steps):
        assert [k[:3] for k in f] == [k[:3] for k in l] and len(f) == 221  # 442 kernels / 2 steps
    lines, st = _joined(dbs["pyprof_transformer"], dbs["emit_transformer"])
    activities, light_ns = _activities_sql(dbs["emit_transformer"])
    assert (st.steps_by, st.steps) == ("ProfilerStep", 2)
    assert st.matched == st.timing_records == st.attribution_records == activities == 538
    assert (st.timing_unmatched, st.attribution_unmatched, st.timing_ns) == (0, 0, light_ns)
    records = _records(lines)
    kernels = [r for r in records if r["kind"] == "kernel"]
    # times: the timing pass's, kernel for kernel (its SQL rows in start order)
    light_rows = [k for step in light_steps for k in step]
    assert [(r["start_ns"], r["kDuration"]) for r in kernels] == [(k[3], k[4]) for k in light_rows]
    # attribution: the marked pass's (pyprof.init() names the torch call with the user's line; emit_nvtx only aten)
    assert all(r["op"] for r in kernels)
    fprop = [r for r in kernels if r["dir"] == "fprop"]
    assert fprop and all(r["callsite"].rsplit("/", 1)[-1].startswith("transformer.py:") for r in fprop)
    light_records = list(read_lines(_pass(dbs["emit_transformer"]).lines))
    assert not any(d["callsite"] for d in light_records)  # emit_nvtx has no lines
    assert {r["mod"][0] for r in kernels if r["dir"] == "fprop"} & {"torch.nn.functional", "torch"}
    # host_ns is a time too: the timing pass's own (emit_nvtx has aten ranges), never the marked pass's
    assert [r["host_ns"] for r in records] == [d["host_ns"] for d in light_records]
    join_line, = _side(lines, "join")
    assert join_line["matched"] == 538 and join_line["steps_by"] == "ProfilerStep"
    # the side lines are the timing pass's: its window and steps, on its clock
    window, = _side(lines, "window")
    con = sqlite3.connect(dbs["emit_transformer"])
    (pid,), = con.execute("SELECT DISTINCT globalPid / 16777216 % 16777216 FROM CUPTI_ACTIVITY_KIND_KERNEL")
    assert window["pid"] == pid
    steps_line = [d for d in _side(lines, "host") if d["category"] == "step"]
    assert steps_line[0]["start_ns"] == [s for (s,) in con.execute(
        "SELECT start FROM NVTX_EVENTS WHERE text LIKE 'ProfilerStep#%' ORDER BY start")]


def test_a_different_optimizer_is_counted_as_unmatched_with_its_share_of_gpu_time(dbs, capsys):
    full_steps, light_steps = _steps_sql(dbs["foreach"]), _steps_sql(dbs["fused"])
    full_keys = {k[5:] + k[1:3] for s in full_steps for k in s}
    light_keys = {k[5:] + k[1:3] for s in light_steps for k in s}
    f_only = [k for s in full_steps for k in s if k[5:] + k[1:3] not in light_keys]
    l_only = [k for s in light_steps for k in s if k[5:] + k[1:3] not in full_keys]
    # the recount: with the kernels that only one capture has taken out, each step's sequences are the same, so
    # the best alignment pairs everything else and leaves out exactly those (both ran the same 96 memsets)
    for f, l in zip(full_steps, light_steps):
        assert ([k[5:] + k[1:3] for k in f if k[5:] + k[1:3] in light_keys]
                == [k[5:] + k[1:3] for k in l if k[5:] + k[1:3] in full_keys])
    assert (len(f_only), len(l_only)) == (96, 14)  # foreach's 48 optimizer kernels a step; fused's 7
    assert {k[0] for k in f_only + l_only} == {"multi_tensor_apply_kernel"}
    f_total, l_total = _activities_sql(dbs["foreach"])[1], _activities_sql(dbs["fused"])[1]
    lines, st = _joined(dbs["foreach"], dbs["fused"])
    assert st.names_by == "full name"  # both nsys: one spelling
    assert (st.attribution_unmatched, st.attribution_unmatched_ns) == (96, sum(k[4] for k in f_only))
    assert (st.timing_unmatched, st.timing_unmatched_ns) == (14, sum(k[4] for k in l_only))
    assert st.matched == 538 - 96 == 456 - 14
    share = 100.0 * sum(k[4] for k in f_only) / f_total  # 3,834,265 / 14,644,796 ns
    assert round(share, 1) == 26.2
    records = _records(lines)
    assert len(records) == 456  # every timing activity, paired or not: the GPU's timeline is the timing pass's
    assert sum(r["kDuration"] for r in records) == l_total
    # the CLI's summary says it, with the share
    assert main([str(dbs["foreach"]), "--timing", str(dbs["fused"]), "-o", "/dev/null"]) == 0
    err = capsys.readouterr().err
    assert "14 timing activities without attribution, 12.1% of its GPU time (multi_tensor_apply_kernel x14)" in err
    assert "96 attribution records with no timing activity (left out), 26.2% of its GPU time" in err


def test_the_pytorch_profiler_as_timing_pass_adds_kernels_without_a_launch(tmp_path):
    # pyprof run's two captures of examples/train_plain.py: nsys with pyprof.init(), and the PyTorch profiler
    db = tmp_path / "run_nsys.sqlite"
    with lzma.open(DATA / "paths/run_nsys.sqlite.xz") as src, open(db, "wb") as dst:
        shutil.copyfileobj(src, dst)
    trace = DATA / "paths/run_torch.pt.trace.json.gz"
    with gzip.open(trace, "rt") as f:
        events = json.load(f)["traceEvents"]
    launched = {e["args"].get("correlation") for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")}
    kernels = [e for e in events if e.get("cat") == "kernel"]
    orphans = [e for e in kernels if e["args"].get("correlation") not in launched]
    con = sqlite3.connect(db)
    (nsys_kernels,), = con.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    # the recount: the trace's kernels are nsys's and 5 more, which have no launch call in the trace (work of a step
    # before the profiler's window, still running when it opened)
    assert (len(kernels), nsys_kernels, len(orphans)) == (668, 663, 5)
    lines, st = _joined(db, trace)
    assert (st.steps_by, st.steps) == ("ProfilerStep", 3)
    assert (st.timing_unmatched, st.attribution_unmatched) == (5, 0)
    # the trace's durations are microseconds (with fractions): within a nanosecond a kernel of rounding
    assert abs(st.timing_unmatched_ns - sum(1000 * e["dur"] for e in orphans)) <= len(orphans)
    assert dict(st.timing_unmatched_names) == {"multi_tensor_apply_kernel": 5} == Counter(
        e["name"].split("<")[0].split("::")[-1] for e in orphans)


def test_two_programs_are_refused_in_one_line(dbs, tmp_path, capsys):
    out = tmp_path / "r.dict"
    rc = main([str(dbs["pyprof_lenet"]), "--timing", str(dbs["pyprof_transformer"]), "-o", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1 and not out.exists()
    assert err[0].startswith("pyprof parse: error: ") and "not the same program as" in err[0]


def test_the_whole_window_pairs_where_one_pass_has_no_step_markers(dbs):
    with gzip.open(KINETO_LENET, "rt") as f:
        events = json.load(f)["traceEvents"]
    # the recount: the PyTorch profiler's trace of lenet has no ProfilerStep, and its kernels are nsys's
    assert not [e for e in events if str(e.get("name", "")).startswith("ProfilerStep")]
    gpu = Counter(e.get("cat") for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memset",
                                                                                          "gpu_memcpy"))
    con = sqlite3.connect(dbs["pyprof_lenet"])
    (nsys_kernels,), = con.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    assert gpu["kernel"] == nsys_kernels == 114
    lines, st = _joined(dbs["pyprof_lenet"], KINETO_LENET)
    assert (st.steps_by, st.steps, st.names_by) == ("window", 0, "short name")
    assert st.steps_note.startswith(f"no ProfilerStep ranges in {KINETO_LENET}")
    assert st.matched == sum(gpu.values()) == 124 and st.timing_unmatched == st.attribution_unmatched == 0
    join_line, = _side(lines, "join")
    assert (join_line["attribution_format"], join_line["timing_format"]) == ("nsys", "kineto")


def test_steps_pair_only_where_both_passes_mark_as_many(dbs):
    # Pairing by step fires where both mark two steps; where one pass lost a step's marker (built here from a real
    # pass by dropping its second step), the whole window pairs instead and the reason names both counts.
    from pyprof.parse.side.join import _step_pairing

    full, light = _pass(dbs["foreach"]), _pass(dbs["fused"])
    assert _step_pairing(full, light) == (2, "")
    light.steps = {pid: v[:1] for pid, v in light.steps.items()}
    n, note = _step_pairing(full, light)
    assert n == 0 and note == f"2 ProfilerStep ranges in {full.path}, 1 in {light.path}"


def test_usage(dbs, capsys):
    assert main([str(dbs["foreach"]), str(dbs["fused"]), "--timing", str(dbs["fused"])]) == 2
    assert "--timing pairs one capture with one" in capsys.readouterr().err


def test_streams_of_other_ids_pair_by_order_of_first_use():
    # a built case: the timing run created its streams in another order, so its ids differ
    from pyprof.parse.side.join import Pass
    from pyprof.parse.attribute.correlate import Stats

    def rec(stream, name, t):
        return {"kind": "kernel", "kShortName": name, "kLongName": name, "kDuration": 10, "start_ns": t,
                "device": 0, "stream": stream, "grid": [1, 1, 1], "block": [32, 1, 1], "op": [f"op_{name}"]}

    header = {"pyprof_header": True, "schema": 4, "gpus": {}}
    def lines(*recs):
        return [json.dumps(r) for r in recs]

    full = Pass("full", "nsys", header, lines(rec(7, "a", 0), rec(13, "b", 5), rec(7, "c", 20), rec(13, "d", 25)),
                [], {}, Stats())
    light = Pass("light", "nsys", header, lines(rec(7, "a", 100), rec(21, "b", 105), rec(7, "c", 120),
                                                rec(21, "d", 125)), [], {}, Stats())
    lines, st = join(full, light)
    records = _records([json.loads(x) for x in lines])
    assert st.matched == 4 and st.steps_note.startswith("no ProfilerStep ranges in full and light")
    assert [(r["stream"], r["start_ns"], r["op"]) for r in records] == [
        (7, 100, ["op_a"]), (21, 105, ["op_b"]), (7, 120, ["op_c"]), (21, 125, ["op_d"])]


def test_the_joined_line_is_the_timing_activity_with_the_attribution_as_decoded(dbs):
    # The join cuts lines at their first attribution key instead of decoding them; on real lines of both passes
    # (the timing pass's host_ns taken out, as an nsys -t cuda pass has none), each cut line must decode to the
    # same record as the merge of the two decoded lines, and carry no host_ns of the marked pass.
    from pyprof.parse.side.join import Pass, _merged, _pairs

    full, fused = _pass(dbs["foreach"]), _pass(dbs["fused"])
    bare = [json.dumps({k: v for k, v in json.loads(x).items() if k != "host_ns"}, separators=(",", ":"))
            for x in fused.lines]
    light = Pass(fused.path, fused.format, fused.header, bare, fused.side, fused.steps, fused.stats)
    assert any('"host_ns":' in x for x in full.lines) and all(s >= 0 for s in full.split + light.split)
    lines, st = join(full, light)
    out = [json.loads(x) for x in lines][1:1 + len(bare)]
    pairs = dict(_pairs(full, light, True, True))
    assert len(pairs) == st.matched == 442
    for j, i in pairs.items():
        assert out[j] == _merged(json.loads(full.lines[i]), json.loads(bare[j]))
        assert "host_ns" not in out[j] and out[j]["op"] == json.loads(full.lines[i])["op"]


def test_a_pytorch_profiler_trace_of_cuda_activity_only_as_timing_pass(dbs, tmp_path):
    # What torch.profiler.profile(activities=[CUDA]) keeps, built from the real trace of the same steps: the GPU
    # activity, the runtime and driver calls and their flows, no op, no Python, no user range (so no step).
    with gzip.open(DATA / "kineto/transformer.pt.trace.json.gz", "rt") as f:
        trace = json.load(f)
    keep = {"kernel", "gpu_memset", "gpu_memcpy", "cuda_runtime", "cuda_driver", "ac2g", "Trace", None}
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("cat") in keep]
    gpu = [e for e in trace["traceEvents"] if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")]
    light = tmp_path / "cuda_only.pt.trace.json"
    light.write_text(json.dumps(trace))
    lines, st = _joined(dbs["pyprof_transformer"], light)
    assert st.matched == len(gpu) == 538 and (st.steps_by, st.timing_unmatched) == ("window", 0)
    records = _records(lines)
    assert all(r["op"] for r in records if r["kind"] == "kernel")  # the marked pass's attribution
    assert all(r["host_ns"] is None for r in records)  # the timing pass has no op range to time
    assert sorted(r["start_ns"] for r in records) == sorted(round(e["ts"] * 1000) for e in gpu)
