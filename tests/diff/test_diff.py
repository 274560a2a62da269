"""The diff of real captures (tests/data/diff: the transformer example on an H100 with AdamW foreach, with AdamW
fused, and the foreach run through the PyTorch profiler instead of nsys). Expected values come from the exports
themselves, recounted with sqlite3, or from what must hold whatever the code does (a run against itself)."""
from __future__ import annotations

import lzma
import shutil
import sqlite3
from contextlib import ExitStack
from pathlib import Path

import pytest

from pyprof.diff.compare import compare
from pyprof.diff.runs import load
from pyprof.report.cli import records_sources

DATA = Path(__file__).resolve().parents[1] / "data"
FOREACH = DATA / "diff" / "transformer_foreach.sqlite.xz"
FUSED = DATA / "diff" / "transformer_fused.sqlite.xz"
FOREACH_TRACE = DATA / "diff" / "transformer_foreach.pt.trace.json.gz"


@pytest.fixture(scope="module")
def runs():
    """The three runs, each parsed and aggregated once."""
    with ExitStack() as stack:
        out = {name: load("run", records_sources([str(path)], stack))
               for name, path in (("foreach", FOREACH), ("fused", FUSED), ("trace", FOREACH_TRACE))}
    return out


def _rows(table) -> list[dict]:
    return [dict(zip(table.columns, r)) for r in table.rows]


def _table(diff, name):
    (t,) = [t for t in diff.tables if t.name == name]
    return _rows(t)


class Recount:
    """An export's numbers straight from its SQLite tables."""

    def __init__(self, xz: Path, tmp: Path) -> None:
        path = tmp / xz.name.removesuffix(".xz")
        with lzma.open(xz) as src, open(path, "wb") as dst:
            shutil.copyfileobj(src, dst)
        self.db = sqlite3.connect(path)

    def one(self, sql: str):
        return self.db.execute(sql).fetchone()[0]

    @property
    def steps(self) -> int:
        return self.one("SELECT count(*) FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
                        "WHERE coalesce(e.text, s.value) LIKE 'ProfilerStep#%'")

    def ns(self, table: str) -> int:
        has = self.one(f"SELECT count(*) FROM sqlite_master WHERE name = '{table}'")
        return self.one(f"SELECT coalesce(sum(end - start), 0) FROM {table}") if has else 0

    def kernels_by_name(self) -> dict[str, int]:
        return dict(self.db.execute("SELECT s.value, sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                                    "JOIN StringIds s ON s.id = k.demangledName GROUP BY 1"))


@pytest.fixture(scope="module")
def recount(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sqlite")
    return {"foreach": Recount(FOREACH, tmp), "fused": Recount(FUSED, tmp)}


@pytest.mark.parametrize("by", ["op", "shape", "line", "kernel"])
def test_a_run_against_itself_shows_no_change(runs, by):
    d = compare(runs["foreach"], runs["foreach"], by)
    rows = _table(d, f"diff_{by}")
    assert rows and all(r["delta_ms"] == 0 and r["present"] == "both" for r in rows)
    assert all(r["base_ms"] == r["new_ms"] for r in rows)
    assert all(r["delta_ms"] == 0 for r in _table(d, "diff_steps"))
    assert _table(d, "diff_kernels_only") == []
    assert d.matched_pct == 100.0 and d.base_step_ns == d.new_step_ns


@pytest.mark.parametrize("run", ["foreach", "fused"])
@pytest.mark.parametrize("by", ["op", "shape", "line"])
def test_each_sides_rows_add_up_to_its_gpu_time_per_step(runs, recount, run, by):
    """GPU time per step, recounted from the export: every kernel's and memset's (and memcpy's) duration over the
    number of ProfilerStep ranges (2 in each capture)."""
    r = recount[run]
    assert r.steps == 2
    per_step_ms = (r.ns("CUPTI_ACTIVITY_KIND_KERNEL") + r.ns("CUPTI_ACTIVITY_KIND_MEMSET")
                   + r.ns("CUPTI_ACTIVITY_KIND_MEMCPY")) / r.steps / 1e6
    other = "fused" if run == "foreach" else "foreach"
    rows = _table(compare(runs[run], runs[other], by), f"diff_{by}")
    # each row rounded to 0.1 us: the sum is off by at most half of that per row
    assert sum(x["base_ms"] for x in rows) == pytest.approx(per_step_ms, abs=0.5e-4 * len(rows))
    rows = _table(compare(runs[other], runs[run], by), f"diff_{by}")
    assert sum(x["new_ms"] for x in rows) == pytest.approx(per_step_ms, abs=0.5e-4 * len(rows))


def test_the_kernel_rows_add_up_to_the_kernel_time_per_step(runs, recount):
    r = recount["foreach"]
    rows = _table(compare(runs["foreach"], runs["fused"], "kernel"), "diff_kernel")
    assert sum(x["base_ms"] for x in rows) == pytest.approx(
        r.ns("CUPTI_ACTIVITY_KIND_KERNEL") / r.steps / 1e6, abs=0.5e-4 * len(rows))


def test_foreach_against_fused_the_optimizer_changes(runs, recount):
    d = compare(runs["foreach"], runs["fused"], "op")
    rows = {r["op"]: r for r in _table(d, "diff_op")}
    # AdamW(foreach=True) runs its update as _foreach_* ops; fused=True as one _fused_adamw_ op per step
    gone = {k for k, r in rows.items() if r["present"] == "base"}
    assert gone == {"_foreach_mul_", "_foreach_addcdiv_", "_foreach_addcmul_", "_foreach_lerp_", "_foreach_div_",
                    "_foreach_sqrt"}
    assert rows["_fused_adamw_"]["present"] == "new" and rows["_fused_adamw_"]["new_calls"] == 1.0
    # the step counter's increment stays a _foreach_add_ in both (torch.optim bumps the fused path's `step`
    # tensors with one _foreach_add_ too), the parameters' update leaves it: almost all its time goes
    assert rows["_foreach_add_"]["present"] == "both" and rows["_foreach_add_"]["delta_pct"] < -95
    # The forward and backward ops run the same kernels on the same shapes on the same GPU: a row of 0.1 ms per
    # step or more changes by less than 5% (what an H100 varies between two runs of one kernel, clocks and
    # caches); shorter rows are a few microseconds, where that jitter is a large share.
    same = [r for r in rows.values() if not r["op"].startswith(("_foreach_", "_fused_")) and r["base_ms"] >= 0.1]
    assert len(same) == 11 and all(r["present"] == "both" and abs(r["delta_pct"]) < 5 for r in same)
    assert all(r["delta_calls"] == 0 for r in rows.values() if r["present"] == "both" and r["op"] != "_foreach_add_")


def test_foreach_against_fused_kernels_in_one_run_only(runs, recount):
    """The kernels only one export ran, by full name straight from each export's StringIds."""
    fe, fu = recount["foreach"].kernels_by_name(), recount["fused"].kernels_by_name()
    only = _table(compare(runs["foreach"], runs["fused"]), "diff_kernels_only")
    base_only, new_only = [r for r in only if r["present"] == "base"], [r for r in only if r["present"] == "new"]
    assert len(base_only) == len(set(fe) - set(fu)) == 7  # foreach's functors of multi_tensor_apply_kernel
    assert len(new_only) == len(set(fu) - set(fe)) == 2  # FusedAdamMathFunctor, and the fp32 step counter's add
    assert sum(r["base_ms"] for r in base_only) == pytest.approx(
        sum(fe[k] for k in set(fe) - set(fu)) / 2 / 1e6, abs=0.5e-4 * len(base_only))
    assert sum(r["new_ms"] for r in new_only) == pytest.approx(
        sum(fu[k] for k in set(fu) - set(fe)) / 2 / 1e6, abs=0.5e-4 * len(new_only))
    assert any("FusedAdamMathFunctor" in r["kernel"] for r in new_only)
    assert all(r["kernel"].startswith("multi_tensor_apply_kernel<") for r in only)


def test_the_step_change_is_kernel_copy_and_idle(runs):
    for base, new in (("foreach", "fused"), ("foreach", "trace"), ("fused", "foreach")):
        steps = {r["part"]: r for r in _table(compare(runs[base], runs[new]), "diff_steps")}
        for side in ("base_ms", "new_ms", "delta_ms"):
            parts = steps["kernel"][side] + steps["copy"][side] + steps["idle"][side]
            assert steps["step"][side] == pytest.approx(parts, abs=2e-4)  # four values rounded to 0.1 us


def test_nsys_against_the_pytorch_profiler_of_the_same_run(runs):
    """One run seen by two profilers: the same ops, kernels and shapes, named and written differently. Measured:
    100.0% of the GPU time matched by op, by op and shapes, and by kernel. The floor leaves room for an op the
    next PyTorch names differently (1% of this step is any op but linear)."""
    base, new = runs["foreach"], runs["trace"]
    assert new.steps == 2 and new.step_sources == ["optimizer steps"]  # the trace has no ProfilerStep ranges
    for by in ("op", "shape", "kernel"):
        assert compare(base, new, by).matched_pct >= 99.0, by
    rows = _table(compare(base, new, "op"), "diff_op")
    assert all(r["delta_calls"] == 0 for r in rows)  # the same calls, counted from two profilers' ranges
    # the same kernels timed by two profilers in two runs: within 2% per step in total (measured 0.58%)
    kernel = {r["part"]: r for r in _table(compare(base, new), "diff_steps")}["kernel"]
    assert abs(kernel["delta_pct"]) < 2
    # the trace records no call sites: by line, nothing matches, and the table says why
    d = compare(base, new, "line")
    assert d.matched_pct == 0.0
    assert any("no activity of run has a recorded line" in n for n in [n for t in d.tables for n in t.notes])


def test_top_keeps_the_rows_that_changed_most(runs):
    full = _table(compare(runs["foreach"], runs["fused"]), "diff_op")
    top = _table(compare(runs["foreach"], runs["fused"], top=3), "diff_op")
    assert top == full[:3]
    assert [abs(r["delta_ms"]) for r in full] == sorted((abs(r["delta_ms"]) for r in full), reverse=True)


@pytest.mark.parametrize("rel", ["kineto/transformer.pt.trace.json.gz", "kineto/checkpoint.pt.trace.json.gz",
                                 "nsys/pyprof/transformer.sqlite.xz"])
def test_a_side_aggregated_by_workers_is_the_one_pass_side(rel, monkeypatch):
    """One records file per side goes to the views' workers (pyprof.prof.aggregate_jobs): in chunks of 20 kB, an
    optimizer step's run of kernels (the step count of a trace without ProfilerStep ranges) crosses several seams,
    and must still count once. Every table of the diff, and the steps, are the one pass's."""
    from pyprof.prof import aggregate_jobs

    monkeypatch.setattr(aggregate_jobs, "CHUNK_BYTES", 20_000)
    monkeypatch.setattr(aggregate_jobs, "MIN_BYTES", 0)
    with ExitStack() as stack:
        sources = records_sources([str(DATA / rel)], stack)  # parsed into a temporary records file
        sides = {jobs: load("run", sources, jobs=jobs) for jobs in (1, 3)}
    one, workers = sides[1], sides[3]
    assert (workers.steps, workers.step_sources, workers.times, workers.gpu_ns) == \
        (one.steps, one.step_sources, one.times, one.gpu_ns)
    assert one.steps == 2  # two training steps captured (the examples' harness)
    for a, b in zip(compare(one, one, "op").tables, compare(workers, workers, "op").tables, strict=True):
        assert a.to_dict() == b.to_dict(), a.name
