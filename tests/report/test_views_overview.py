"""The overview (steps, breakdown, utilisation, occupancy) on the real captures, checked against sums computed
with sqlite3 from the export itself, and on hand-built records whose answer is known by construction."""
from __future__ import annotations

import sqlite3

import pytest
from report_helpers import kernel

from pyprof.report.aggregate import aggregate
from pyprof.report.occupancy import est_occupancy, limits
from pyprof.report.steps import steps
from pyprof.report.views import build


def _sqlite_steps(path) -> list[tuple[str, int, int, int]]:
    """(name, kernels, summed kernel ns, ns covered by kernels) per ProfilerStep range: every kernel whose launch call (any
    thread of the process) starts inside the range (it spans the whole iteration on the main thread)."""
    c = sqlite3.connect(path)
    rng = c.execute("SELECT n.start, n.end, coalesce(n.text, s.value) FROM NVTX_EVENTS n LEFT JOIN StringIds s "
                    "ON n.textId = s.id WHERE coalesce(n.text, s.value) LIKE 'ProfilerStep#%' ORDER BY n.start")
    out = []
    for start, end, name in rng.fetchall():
        q = ("SELECT count(*), coalesce(sum(k.end - k.start), 0) FROM {t} k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
             "ON r.correlationId = k.correlationId AND (r.globalTid >> 24) = (k.globalPid >> 24) "
             "WHERE r.start >= ? AND r.start <= ?")
        n_k, ns = c.execute(q.format(t="CUPTI_ACTIVITY_KIND_KERNEL"), (start, end)).fetchone()
        iv = c.execute(q.replace("count(*), coalesce(sum(k.end - k.start), 0)", "k.start, k.end")
                       .format(t="CUPTI_ACTIVITY_KIND_KERNEL"), (start, end)).fetchall()
        # time covered by at least one kernel: walk the ends in start order
        covered, reach = 0, None
        for s, e in sorted(iv):
            if reach is None or s >= reach:
                covered += e - s
                reach = e
            elif e > reach:
                covered += e - reach
                reach = e
        out.append((name, n_k, ns, covered))
    return out


@pytest.mark.parametrize("example", ["transformer", "resnet", "lenet", "user_annotation"])
def test_steps_match_sqlite(example, records, sqlite_path):
    expected = _sqlite_steps(sqlite_path(example))
    agg = aggregate([(example, records(f"nsys/pyprof/{example}.sqlite.xz"))])
    (w,) = agg.workers.values()
    got, source = steps(w)
    assert source == "ProfilerStep"
    assert [(s.label, s.kernels, s.kernel_sum_ns, s.kernel_ns) for s in got] == expected
    for s in got:
        assert s.busy_ns + s.idle_ns == s.span_ns
        assert 0 < s.busy_ns <= s.span_ns


def test_overview_table_rows(records):
    (t,) = build(aggregate([("t", records("nsys/pyprof/transformer.sqlite.xz"))]), ["overview"])
    assert [r[0] for r in t.rows] == ["ProfilerStep#0", "ProfilerStep#1", "mean"]
    c = t.columns
    for r in t.rows[:2]:
        parts = sum(r[c.index(k)] for k in ("kernel_ms", "memcpy_ms", "memset_ms", "idle_ms"))
        assert parts == pytest.approx(r[c.index("span_ms")], abs=1e-3)
        assert 0 < r[c.index("sm_efficiency_pct")] <= 100
        assert 0 < r[c.index("occupancy_pct")] <= 100
    assert t.chart["type"] == "stacked"
    assert any("CPU events" in n for n in t.notes)


def test_kineto_without_step_ranges_is_one_step(records):
    agg = aggregate([("k", records("kineto/transformer.pt.trace.json.gz"))])
    (w,) = agg.workers.values()
    got, source = steps(w)
    assert source == "whole capture" and [s.label for s in got] == ["all"]
    assert got[0].kernels == sum(1 for d in records("kineto/transformer.pt.trace.json.gz") if d["kind"] == "kernel")
    (t,) = build(agg, ["overview"])
    assert t.rows[0][t.columns.index("occupancy_pct")] is None  # Kineto gives no static/dynamic shared memory


def test_overlap_charged_once_kernel_then_memcpy_then_memset():
    recs = [kernel(1000, 100),  # kernel 1000..1100
            kernel(1050, 100, kind="memcpy", copy_kind="DtoD", bytes=64),  # 1050..1150: 50 not under a kernel
            kernel(1120, 80, kind="memset", bytes=64),  # 1120..1200: 50 under neither
            kernel(1300, 100)]  # gap 1200..1300 idle
    (w,) = aggregate([("x", recs)]).workers.values()
    (s,), _ = steps(w)
    # span: first launch (1000 - 1000 = 0) to last end 1400
    assert (s.span_ns, s.kernel_ns, s.memcpy_ns, s.memset_ns) == (1400, 200, 50, 50)
    assert s.idle_ns == 1400 - 300


def test_backward_thread_kernels_join_the_step_of_their_launch_window():
    recs = [kernel(10_000, 10, ranges=["ProfilerStep#4"]),
            kernel(12_000, 10, tid=2),  # launched at 11_000: step 4
            kernel(20_000, 10, ranges=["ProfilerStep#5"]),
            kernel(25_000, 10, tid=2),  # launched at 24_000: step 5 (the last window is open-ended)
            kernel(26_000, 10)]  # main thread, outside any step range: no step
    (w,) = aggregate([("x", recs)]).workers.values()
    got, _ = steps(w)
    assert [(s.label, s.kernels) for s in got] == [("ProfilerStep#4", 2), ("ProfilerStep#5", 2)]


def test_user_step_ranges_when_no_profiler_step():
    recs = [kernel(10_000, 10, ranges=["layer:train_step 1"]), kernel(20_000, 10, ranges=["iteration#2", "x"])]
    (w,) = aggregate([("x", recs)]).workers.values()
    got, source = steps(w)
    assert source == "user ranges" and [s.label for s in got] == ["step 1", "step 2"]


H200 = {"smCount": 132, "maxWarpsPerSm": 64, "maxRegistersPerSm": 65536, "maxShmemPerSm": 233472,
        "computeMajor": 9, "computeMinor": 0}


@pytest.mark.parametrize("grid,block,regs,smem,expected", [
    # 8 warps/block; 32 regs -> 1024 regs/warp -> 64 warps -> 8 blocks; 8 blocks x 8 warps / 64 = 1.0
    ([132 * 8, 1, 1], [256, 1, 1], 32, 0, 1.0),
    # 128 regs -> 4096 regs/warp -> 16 warps -> 2 blocks of 8 warps: 16/64
    ([132 * 8, 1, 1], [256, 1, 1], 128, 0, 0.25),
    # 66 blocks on 132 SMs: 0.5 block per SM x 8 warps / 64
    ([66, 1, 1], [256, 1, 1], 32, 0, 0.0625),
    # 100 KB smem + 1 KB reserved per block: 233472 // 103424 = 2 blocks x 8 warps / 64
    ([132 * 8, 1, 1], [256, 1, 1], 32, 100 * 1024, 0.25),
])
def test_estimated_occupancy(grid, block, regs, smem, expected):
    assert est_occupancy(grid, block, regs, smem, 0, limits(H200)) == pytest.approx(expected)


def test_occupancy_na_without_limits():
    assert est_occupancy([1, 1, 1], [32, 1, 1], 32, 0, 0, limits(None)) is None
    assert est_occupancy([1, 1, 1], [32, 1, 1], 32, None, None, limits(H200)) is None
