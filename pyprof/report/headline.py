"""The report's headline: the few numbers a reader wants before any table (step time, how busy the GPU was,
where the time went, how much of it the FLOP model covers, what the top findings would save), read off the
views' tables and the aggregate so that the headline and the tables below it never disagree."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from pyprof.prof.aggregate import Aggregate
from pyprof.prof.inflation import program_step
from pyprof.prof.steps import busy_pct, no_process, steps
from pyprof.prof.tables import Table
from pyprof.record import LAUNCHED_NO_GPU

#: Entries per list of the headline (ops, lines, findings).
TOP = 3


@dataclass
class Entry:
    """One line of a headline list: what (an op, a line, a finding), its time and share, what more the page
    shows of it (a line's source, a finding's evidence), and for a finding its estimated saving."""

    label: str
    ms: float | None
    pct: float | None
    detail: str | None = None
    saving_ms: float | None = None


@dataclass
class Headline:
    step_ms: float | None  # mean step window over every worker's steps (the overview's mean row)
    steps: int
    gpu_busy_pct: float | None  # time anything ran on the GPU / the steps' windows
    gpu_ms: float  # summed durations of every activity
    activities: int
    modelled_pct: float | None  # share of GPU time whose activity (or its op call) has modelled FLOPs and bytes
    flops_pct: float | None  # share of GPU time on activities that carry modelled FLOPs
    # The program's own step (pyprof.prof.inflation): the mean over the workers that measured one of their median
    # unprofiled step, of their captured step timed the same way, and how many times longer that is; None without
    # a program line
    program_step_ms: float | None = None
    captured_step_ms: float | None = None
    inflation: float | None = None
    unit: str = "step"  # "forward" where every program line timed forwards (an inference loop's steps)
    top_ops: list[Entry] = field(default_factory=list)
    top_lines: list[Entry] = field(default_factory=list)
    findings: list[Entry] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def _col(t: Table, key: str) -> int | None:
    return t.columns.index(key) if key in t.columns else None


def _top(t: Table | None, label: str, time_key: str, detail: str | None = None) -> list[Entry]:
    if t is None:
        return []
    li, ti, pi = _col(t, label), _col(t, time_key), _col(t, "time_pct")
    di = _col(t, detail) if detail else None
    if li is None or ti is None:
        return []
    rows = sorted((r for r in t.rows if isinstance(r[ti], (int, float))), key=lambda r: -r[ti])[:TOP]
    return [Entry(str(r[li]), r[ti], r[pi] if pi is not None else None,
                  str(r[di]) if di is not None and r[di] is not None else None) for r in rows]


def _findings(t: Table | None) -> list[Entry]:
    if t is None:
        return []
    about, rule, ev = _col(t, "about"), _col(t, "rule"), _col(t, "evidence")
    ti, pi = _col(t, "time_ms"), _col(t, "time_pct")
    si = _col(t, "saving_ms")
    # the view lists them most at stake first
    return [Entry(f"{r[rule]}: {r[about]}", r[ti] if ti is not None else None, r[pi] if pi is not None else None,
                  str(r[ev]) if ev is not None else None, r[si] if si is not None else None) for r in t.rows[:TOP]]


def headline(agg: Aggregate, tables: list[Table], flops_ns: int) -> Headline:
    """The headline of the whole input (all workers). ``tables`` are the views' all-worker tables;
    ``flops_ns`` the GPU time of activities that carry modelled FLOPs (report.activity_table)."""
    by_name = {t.name: t for t in tables if t.worker is None}
    span = busy = n_steps = 0
    for w in agg.workers.values():
        if no_process(w) and len(agg.workers) > 1:
            continue
        sts, _source = steps(w)
        n_steps += len(sts)
        span += sum(s.span_ns for s in sts)
        busy += sum(s.busy_ns for s in sts)
    cov = agg.coverage
    t = cov.time_ns
    progs = [p for w in agg.workers.values() if (p := program_step(w)) is not None]
    program_ms = captured_ms = inflation = None
    if progs:
        program_ms = round(sum(p.unprofiled_ns for p in progs) / len(progs) / 1e6, 4)
        captured_ms = round(sum(p.captured_ns for p in progs) / len(progs) / 1e6, 4)
        inflation = round(captured_ms / program_ms, 2)
    return Headline(
        step_ms=round(span / n_steps / 1e6, 4) if n_steps else None, steps=n_steps,
        gpu_busy_pct=busy_pct(busy, span), gpu_ms=round(t / 1e6, 4),
        activities=cov.kernels,
        modelled_pct=round(100.0 * (cov.own_ns + cov.elsewhere_ns) / t, 2) if t else None,
        flops_pct=round(100.0 * flops_ns / t, 2) if t else None,
        program_step_ms=program_ms, captured_step_ms=captured_ms, inflation=inflation,
        unit="forward" if progs and all(p.unit == "forward" for p in progs) else "step",
        top_ops=_top(by_name.get("operators"), "op", "device_ms"),
        top_lines=_top(by_name.get("lines"), "line", "gpu_ms", "source"),
        findings=_findings(by_name.get("recommendations")))


def no_activity_notice(tables: list[Table], default: str) -> str:
    """The page's notice for an input without GPU activity: the overview's count of kernel launches whose GPU side
    is missing where it has one (the GPU side was not recorded: not a program that used no GPU), else ``default``."""
    overview = next((t for t in tables if t.name == "overview" and t.worker is None), None)
    said = overview.empty if overview is not None and LAUNCHED_NO_GPU in (overview.empty or "") else None
    return default if said is None else f"{said} The views below are empty."
