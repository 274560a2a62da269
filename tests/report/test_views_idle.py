"""The idle view: the GPU's idle time by cause and by the op and line it waited for, on a built timeline with
known gaps, and on real captures against the overview's idle time (interval unions per step, another path)."""
from __future__ import annotations

import pytest
from report_helpers import kernel

from pyprof.prof.aggregate import aggregate
from pyprof.prof.views import build


def _rows(recs):
    (t,) = build(aggregate([("x", recs)]), ["idle"])
    return [dict(zip(t.columns, r)) for r in t.rows]


def test_built_gaps_by_cause_and_what_ended_them():
    # a 5 us kernel at 0; the next at 15 us (a 10 us gap: launch overhead); the third at 120 us (100 us after
    # the second ended at 20 us: host work), each kernel its own op and line
    recs = [kernel(0, 5_000, op=["a"], callsite="/p/t.py:1"),
            kernel(15_000, 5_000, op=["b"], callsite="/p/t.py:2"),
            kernel(120_000, 5_000, op=["c"], callsite="/p/t.py:3")]
    rows = _rows(recs)
    assert [(r["cause"], r["op"], r["line"], r["gaps"], r["idle_ms"]) for r in rows] == [
        ("host", "c", "t.py:3", 1, 0.1), ("launch", "b", "t.py:2", 1, 0.01)]
    # the span runs from 0 to 125 us: 100 / 125 = 80%, 10 / 125 = 8%
    assert [r["idle_pct"] for r in rows] == [80.0, 8.0]


def test_a_gap_ended_by_work_queued_before_it_is_not_the_hosts():
    # the same timeline, the third kernel launched at 10 us, before the GPU went idle at 20 us: the 100 us gap is
    # not the host's doing (queued); without any launch time, no cause is claimed (unknown)
    recs = [kernel(0, 5_000, op=["a"], callsite="/p/t.py:1"),
            kernel(15_000, 5_000, op=["b"], callsite="/p/t.py:2"),
            kernel(120_000, 5_000, op=["c"], callsite="/p/t.py:3", api_start_ns=10_000)]
    assert [(r["cause"], r["op"]) for r in _rows(recs)] == [("queued", "c"), ("launch", "b")]
    (t,) = build(aggregate([("x", recs)]), ["idle"])
    assert any(n.startswith("queued: ") for n in t.notes) and not any(n.startswith("host: ") for n in t.notes)
    blind = [dict(r, api_start_ns=None, api_end_ns=None) for r in recs]
    assert {r["cause"] for r in _rows(blind)} == {"unknown"}


def test_work_launched_at_once_that_started_much_later_waited_for_something_else():
    # SGLang's prefill trace (TraceLens): the kernel that ended a 493 ms gap was launched 0.04 ms after the GPU
    # went idle and started 493 ms after its launch: the host was not what the GPU waited for. Built: the third
    # kernel launched at 21 us (1 us late), started at 120 us (99 us after its launch): queued. Launched at 110 us
    # instead (90 us late, starting 10 us after), the host's
    recs = [kernel(0, 5_000, op=["a"], callsite="/p/t.py:1"),
            kernel(15_000, 5_000, op=["b"], callsite="/p/t.py:2"),
            kernel(120_000, 5_000, op=["c"], callsite="/p/t.py:3", api_start_ns=21_000)]
    assert [(r["cause"], r["op"]) for r in _rows(recs)] == [("queued", "c"), ("launch", "b")]
    (t,) = build(aggregate([("x", recs)]), ["recommendations"])
    assert not any(r[0] == "idle_gaps" for r in t.rows)
    recs[2] = dict(recs[2], api_start_ns=110_000)
    assert [(r["cause"], r["op"]) for r in _rows(recs)] == [("host", "c"), ("launch", "b")]
    (t,) = build(aggregate([("x", recs)]), ["recommendations"])
    assert any(r[0] == "idle_gaps" for r in t.rows)


def _idle_action(recs) -> str:
    (t,) = build(aggregate([("x", recs)]), ["recommendations"])
    (row,) = [r for r in t.rows if r[0] == "idle_gaps"]
    return row[t.columns.index("action")]


def test_the_idle_action_speaks_of_what_the_records_hold():
    # a 100 us gap the host left before kernel c: without backward work or an optimizer (an inference server's
    # trace), no zero_grad, optimizer or DataLoader; with a backward kernel, those; with most kernel time replayed
    # from CUDA graphs, no advice to use them
    recs = [kernel(0, 5_000, op=["a"], callsite="/p/t.py:1"),
            kernel(120_000, 5_000, op=["c"], callsite="/p/t.py:3", api_start_ns=110_000)]
    plain = _idle_action(recs)
    assert "CUDA graphs or torch.compile" in plain
    assert not any(w in plain for w in ("zero_grad", "optimizer", "DataLoader"))
    trained = _idle_action(recs + [kernel(126_000, 1_000, op=["mm"], dir="bprop", callsite="/p/t.py:3")])
    assert "zero_grad/optimizer overhead" in trained and "DataLoader" in trained
    graphed = [dict(r, api="cudaGraphLaunch") for r in recs]
    assert "CUDA graphs" not in _idle_action(graphed)


def test_overlapping_streams_leave_no_gap():
    # the second kernel starts on another stream before the first ends: busy throughout
    recs = [kernel(0, 10_000, stream=7), kernel(5_000, 10_000, stream=8)]
    assert _rows(recs) == []


@pytest.mark.parametrize("rel", ["nsys/pyprof/transformer.sqlite.xz", "nsys/pyprof/resnet.sqlite.xz",
                                 "kineto/resnet.pt.trace.json.gz"])
def test_idle_adds_up_to_the_overviews(records, rel):
    agg = aggregate([("x", records(rel))])
    (ov,) = build(agg, ["overview"])
    c = ov.columns
    steps = [r for r in ov.rows if r[c.index("step")] != "mean"]
    overview_idle = sum(r[c.index("idle_ms")] for r in steps)
    (t,) = build(agg, ["idle"])
    idle = sum(r[t.columns.index("idle_ms")] for r in t.rows)
    # each figure is rounded to 0.1 us: the sums may differ by that per row
    assert idle == pytest.approx(overview_idle, abs=1e-4 * (len(t.rows) + len(steps)))
    assert idle > 0


def test_a_synchronising_copy_is_its_own_cause(records):
    recs = records("nsys/pyprof/resnet.sqlite.xz")
    # the capture's .item(): a device-to-host copy under the item op (recounted from the records)
    assert any(d["kind"] == "memcpy" and d.get("copy_kind") == "DtoH" and d["op"] and d["op"][0] == "item"
               for d in recs)
    causes = {r["cause"] for r in _rows(recs)}
    assert "sync" in causes


def test_no_gap_says_so_and_a_gap_is_a_row():
    # two kernels back to back (0-100, 100-250 ns): the span is theirs, with no gap in it
    (t,) = build(aggregate([("x", [kernel(0, 100), kernel(100, 150)])]), ["idle"])
    assert t.rows == [] and t.empty.startswith("No gap in the profiled span")
    # 50 ns between them: one gap, a row, nothing said of emptiness
    (t,) = build(aggregate([("x", [kernel(0, 100), kernel(150, 150)])]), ["idle"])
    assert len(t.rows) == 1 and t.empty is None
    (t,) = build(aggregate([("x", [])]), ["idle"])
    assert t.rows == [] and t.empty.startswith("No profiled span")
