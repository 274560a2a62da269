"""Rank 0 against rank 1 of the DDP run on 2 H200s (tests/data/dist, issue 20): the diff names the collective the
faster rank waited in, and its change agrees with the rank view's communication time, a second computation (the
union of each rank's NCCL kernel intervals, not a sum per op)."""
from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

from pyprof.diff.compare import compare
from pyprof.diff.runs import load
from pyprof.prof.aggregate import aggregate, numbered_file
from pyprof.prof.views import build
from pyprof.report.cli import records_sources

DIST = Path(__file__).resolve().parents[1] / "data" / "dist"
RANK0, RANK1 = DIST / "ddp.pt.trace.rank0.json.gz", DIST / "ddp.pt.trace.rank1.json.gz"


def test_rank1_waits_in_the_all_reduce_for_rank0():
    with ExitStack() as stack:
        base = load("rank0", records_sources([str(RANK0)], stack))
        new = load("rank1", records_sources([str(RANK1)], stack))
        both = records_sources([str(RANK0), str(RANK1)], stack)
        (rt, *_rest) = build(aggregate([(s.name, numbered_file(s.path, s.given)) for s in both]), ["ranks"])
    diff = compare(base, new)
    (ops,) = [t for t in diff.tables if t.name == "diff_op"]
    rows = [dict(zip(ops.columns, r)) for r in ops.rows]
    # the largest change: the gradients' all-reduce, in backward; rank 1 arrived first at each and waited
    assert rows[0]["op"] == "allreduce_ (bprop)" and rows[0]["delta_ms"] > 0
    comm = {r[rt.columns.index("rank")]: r[rt.columns.index("comm_ms")] for r in rt.rows}
    (runs,) = [t for t in diff.tables if t.name == "diff_runs"]
    steps = runs.rows[0][runs.columns.index("steps")]
    assert steps == runs.rows[1][runs.columns.index("steps")] == 2
    # NCCL ops per step in the diff (the all-reduce and the harness's barrier) x steps = the rank view's comm change
    nccl_delta = sum(r["delta_ms"] for r in rows if r["op"] in ("allreduce_ (bprop)", "barrier"))
    assert abs(nccl_delta * steps - (comm["rank 1"] - comm["rank 0"])) < 0.01
