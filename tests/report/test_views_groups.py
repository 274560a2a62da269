"""Operators, kernels, lines and layers on the real captures: totals against sums taken straight from the
records, call counts from the markers' call ids, and the source text of a line found by path suffix."""
from __future__ import annotations

from collections import Counter

import pytest
from report_helpers import ROOT, kernel

from pyprof.prof.aggregate import aggregate
from pyprof.prof.views import build
from pyprof.record import read_lines


CAPTURES = ["nsys/pyprof/transformer.sqlite.xz", "nsys/pyprof/resnet.sqlite.xz",
            "nsys/emit_nvtx/transformer.sqlite.xz", "kineto/resnet.pt.trace.json.gz"]


def _col(t, name):
    return [r[t.columns.index(name)] for r in t.rows]


@pytest.mark.parametrize("capture", CAPTURES)
def test_totals_equal_gpu_time(capture, records):
    recs = records(capture)
    gpu_ms = sum(d["kDuration"] for d in recs) / 1e6
    kernel_ms = sum(d["kDuration"] for d in recs if d["kind"] == "kernel") / 1e6
    ops, lines, layers, kernels = build(aggregate([("x", recs)]), ["operators", "lines", "layers", "kernels"])
    assert sum(_col(lines, "gpu_ms")) == pytest.approx(gpu_ms, abs=1e-3)
    assert sum(_col(ops, "device_ms")) == pytest.approx(gpu_ms, abs=1e-3)
    roots = [r for r in layers.rows if r[layers.columns.index("depth")] == 0]
    assert sum(r[layers.columns.index("gpu_ms")] for r in roots) == pytest.approx(gpu_ms, abs=1e-3)
    assert sum(_col(kernels, "total_ms")) == pytest.approx(kernel_ms, abs=1e-3)
    assert sum(_col(kernels, "calls")) == sum(1 for d in recs if d["kind"] == "kernel")
    assert _col(lines, "gpu_ms") == sorted(_col(lines, "gpu_ms"), reverse=True)


def test_kernel_min_max_mean(records):
    recs = records("nsys/pyprof/transformer.sqlite.xz")
    (t,) = build(aggregate([("x", recs)]), ["kernels"])
    row = t.rows[0]
    durs = [d["kDuration"] for d in recs if d["kind"] == "kernel" and d["kShortName"] == row[0]]
    c = t.columns
    assert (row[c.index("calls")], row[c.index("min_us")], row[c.index("max_us")]) == \
        (len(durs), min(durs) / 1e3, max(durs) / 1e3)
    assert row[c.index("mean_us")] == pytest.approx(sum(durs) / len(durs) / 1e3, abs=1e-3)


def test_operator_calls_are_distinct_marker_calls(records):
    recs = records("nsys/pyprof/transformer.sqlite.xz")
    (t,) = build(aggregate([("x", recs)]), ["operators"])
    calls = dict(zip(_col(t, "op"), _col(t, "calls")))
    # forward linear calls: distinct call ids of the outermost op marker of forward kernels
    ids = {d["marker"][0]["call"] for d in recs if d["dir"] == "fprop" and d["op"] and d["op"][0] == "linear"}
    assert calls["linear"] == len(ids)
    # backward: one call per backward node instance (seq) of a linear's gradient
    nodes = {(d["tid"], d["seqId"][0]) for d in recs if d["dir"] == "bprop" and (d.get("fwd") or {}).get("op") ==
             "linear"}
    assert calls["linear (bprop)"] == len(nodes)


def test_backward_time_charged_to_forward_line(records):
    recs = records("nsys/pyprof/transformer.sqlite.xz")
    (t,) = build(aggregate([("x", recs)]), ["lines"])
    by_line = {r[0]: r for r in t.rows}
    row = by_line["transformer.py:31"]
    c = t.columns
    expected_bwd = sum(d["kDuration"] for d in recs if d["dir"] == "bprop" and
                       (d.get("fwd") or {}).get("callsite", "").endswith("transformer.py:31")) / 1e6
    assert row[c.index("bwd_ms")] == pytest.approx(expected_bwd, abs=1e-4) and expected_bwd > 0
    assert row[c.index("source")] == "return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))"


def test_optimizer_time_is_neither_forward_nor_backward(records):
    # opt.step() (transformer.py:60) runs AdamW's foreach ops: all of that line's time is the optimizer's, none
    # forward; the other lines have none. Recounted from the records: the _foreach_ ops' kernels at that line.
    recs = records("nsys/pyprof/transformer.sqlite.xz")
    (t,) = build(aggregate([("x", recs)]), ["lines"])
    c = t.columns
    by_line = {r[0]: r for r in t.rows}
    opt = sum(d["kDuration"] for d in recs if (d.get("callsite") or "").endswith("transformer.py:60")
              and d["op"] and d["op"][0].startswith("_foreach_")) / 1e6
    row = by_line["transformer.py:60"]
    assert opt > 1.0  # ms: a quarter of the capture's GPU time
    assert row[c.index("opt_ms")] == pytest.approx(opt, abs=1e-4) == pytest.approx(row[c.index("gpu_ms")], abs=1e-4)
    assert row[c.index("fwd_ms")] == 0
    assert all(r[c.index("opt_ms")] == 0 for k, r in by_line.items() if k != "transformer.py:60")
    for r in t.rows:  # the three parts add up to the line's time
        assert r[c.index("fwd_ms")] + r[c.index("bwd_ms")] + r[c.index("opt_ms")] == \
            pytest.approx(r[c.index("gpu_ms")], abs=3e-4)


def test_host_time_per_op_is_its_ranges_cpu_time(records, tmp_path):
    # The forward linear calls' host time: their pyprof op ranges (torch.nn.functional.linear) on the CPU,
    # recounted with sqlite3 from the export: 34 ranges (17 calls a step, two steps)
    import lzma
    import sqlite3

    db = tmp_path / "t.sqlite"
    db.write_bytes(lzma.decompress((ROOT / "tests/data/nsys/pyprof/transformer.sqlite.xz").read_bytes()))
    con = sqlite3.connect(db)
    n, ns = con.execute(
        "SELECT count(*), sum(n.end - n.start) FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
        "WHERE n.eventType = 59 AND coalesce(n.text, s.value) LIKE "
        "'{\"pyprof\":1,\"mod\":\"torch.nn.functional\",\"op\":\"linear\"%'").fetchone()
    con.close()
    assert n == 34
    (t,) = build(aggregate([("x", records("nsys/pyprof/transformer.sqlite.xz"))]), ["operators"])
    c = t.columns
    row = next(r for r in t.rows if r[0] == "linear")
    assert row[c.index("host_ms")] == round(ns / 1e6, 4)
    memset = next(r for r in t.rows if r[0] == "memset")
    assert memset[c.index("host_ms")] is None  # a memset's own call has no op range of its own: na, not 0


def test_source_found_by_path_suffix(monkeypatch):
    monkeypatch.chdir(ROOT)
    recs = [kernel(1000, 50, callsite="/elsewhere/checkout/examples/transformer.py:31"),
            kernel(2000, 50, callsite="/elsewhere/nothing_here.py:3")]
    (t,) = build(aggregate([("x", recs)]), ["lines"])
    src = dict(zip(_col(t, "line"), _col(t, "source")))
    # shown relative to the common folder of the recorded paths (/elsewhere)
    assert src["checkout/examples/transformer.py:31"].startswith("return x + self.fc2(")
    assert src["nothing_here.py:3"] is None


def test_operators_shapes_use_forward_shapes_for_backward(records):
    recs = records("nsys/pyprof/transformer.sqlite.xz")
    (t,) = build(aggregate([("x", recs)]), ["operators_shapes"])
    keys = Counter(r[0] for r in t.rows)
    assert keys["linear (bprop)"] > 1  # several weight shapes
    assert ("linear (bprop)", "[[8, 511, 1024], [32000, 1024], []]") in {(r[0], r[1]) for r in t.rows}


def test_layer_tree_is_inclusive(records):
    recs = records("nsys/pyprof/transformer.sqlite.xz")
    (t,) = build(aggregate([("x", recs)]), ["layers"])
    c = t.columns
    assert t.tree_column == "depth"
    for i, r in enumerate(t.rows):
        depth = r[c.index("depth")]
        kids = []
        for r2 in t.rows[i + 1:]:
            if r2[c.index("depth")] <= depth:
                break
            if r2[c.index("depth")] == depth + 1:
                kids.append(r2[c.index("gpu_ms")])
        assert r[c.index("gpu_ms")] == pytest.approx(sum(kids) + r[c.index("self_ms")], abs=1e-3)


def test_workers_and_worker_filter(records):
    a, b = records("nsys/pyprof/transformer.sqlite.xz"), records("nsys/pyprof/lenet.sqlite.xz")
    agg = aggregate([("rank0", a), ("rank1", b)])
    (t,) = build(agg, ["workers"])
    assert _col(t, "worker") == ["rank0", "rank1"]
    # no NCCL kernel in either capture: who waited for whom is not judged (views/collectives.py), and the
    # longer step names no one
    assert "Cannot judge who waited for whom: 0 of the 2 ranks given ran communication kernels (NCCL's, " \
           "named nccl*, or DeepEP's all-to-all): " \
        "it takes two to see who waited." in t.notes
    (k,) = build(agg, ["kernels"], worker="rank1")
    assert sum(_col(k, "calls")) == sum(1 for d in b if d["kind"] == "kernel")
    (o,) = build(agg, ["overview"])
    # each worker's steps and its own mean row; workers are not averaged together (no "all" row)
    assert set(_col(o, "worker")) == {"rank0", "rank1"} and _col(o, "step").count("mean") == 2


def test_processes_of_one_input_are_workers():
    recs = [kernel(1000, 5000, pid=7), kernel(1000, 8000, pid=9)]
    agg = aggregate([("x", recs)])
    assert list(agg.workers) == ["7", "9"]
    (t,) = build(agg, ["kernels"], worker="9")
    assert t.rows[0][t.columns.index("total_ms")] == 0.008 and t.worker == "9"


def _parse(path) -> list[dict]:
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "pyprof.parse", str(path)], capture_output=True, cwd=ROOT, check=True)
    return list(read_lines(p.stdout.splitlines()))


def test_kernels_that_share_a_short_name_are_two_rows(shared):
    """The B200 vLLM trace (../shared/corpus/external, TraceLens) runs two different elementwise_kernel<128, 4,
    ...> kernels: a direct copy 72 times and a masked fill once. They are two rows, told apart by a word of
    their template arguments, with the calls and time a recount of the JSON gives per full name
    (sum of ``dur``: 380.568 us and 7.712 us). HTA 0.5.0's kernel breakdown (get_gpu_kernel_breakdown) also
    has two rows, 72 calls / 309 us and 1 call / 7 us: its parser rounds times to whole microseconds, so its
    sums are within 1 us per call of these."""
    import gzip
    import json

    trace = shared / "corpus" / "external" / "tracelens_b200_eager_trace.json.gz"
    with gzip.open(trace) as f:
        events = json.load(f)["traceEvents"]
    recount: dict = {}
    for e in events:
        if e.get("cat") == "kernel" and e["name"].startswith("void at::native::elementwise_kernel<128, 4,"):
            g = recount.setdefault(e["name"], [0, 0.0])
            g[0] += 1
            g[1] += e["dur"]
    assert sorted((n, round(us, 3)) for n, us in recount.values()) == [(1, 7.712), (72, 380.568)]
    (t,) = build(aggregate([("b200", _parse(trace))]), ["kernels"])
    rows = {r[0]: r for r in t.rows}
    c = t.columns
    copy, fill = rows["elementwise_kernel<direct_copy_kernel_cuda>"], rows["elementwise_kernel<masked_fill_kernel>"]
    assert (copy[c.index("calls")], fill[c.index("calls")]) == (72, 1)
    assert copy[c.index("total_ms")] == pytest.approx(380.568e-3, abs=0.5e-4)  # the view rounds to 0.1 us
    assert fill[c.index("total_ms")] == pytest.approx(7.712e-3, abs=0.5e-4)
    hta = {"copy": (72, 309.0), "fill": (1, 7.0)}  # HTA 0.5.0, whole microseconds
    for row, (calls, us) in ((copy, hta["copy"]), (fill, hta["fill"])):
        assert row[c.index("calls")] == calls and 0 <= row[c.index("total_ms")] * 1e3 - us < calls
    assert "elementwise_kernel" not in rows  # not merged under the short name


def test_occupancy_from_the_profiler_when_the_record_has_it():
    """A record with est_occupancy_pct (the PyTorch profiler's own "est. achieved occupancy %", passed on by
    parse) shows that figure, not pyprof's estimate: 37.5% over two kernels of equal time stays 37.5%."""
    recs = [kernel(1000, 100, kShortName="k", est_occupancy_pct=37.5), kernel(2000, 100, kShortName="k",
                                                                             est_occupancy_pct=37.5)]
    (t,) = build(aggregate([("x", recs)]), ["kernels"])
    assert t.rows[0][t.columns.index("occupancy_pct")] == 37.5


def test_roofline_is_na_for_groups_with_nothing_modelled():
    """Kernels with no op, on a GPU with no known peak: the op, kernel and line groups show na, not 0%."""
    recs = [kernel(1000, 100, gpu="Radeon 780M"), kernel(2000, 100, gpu="Radeon 780M", callsite="a.py:1")]
    ops, kernels, lines = build(aggregate([("x", recs)]), ["operators", "kernels", "lines"])
    for t in (ops, kernels, lines):
        assert all(r[t.columns.index("roofline_pct")] is None for r in t.rows), t.name
