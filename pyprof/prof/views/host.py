"""Where each step's CPU time went: data loading, CUDA API calls, PyTorch ops and the rest (Python, the host's
own work), from parse's host lines (pyprof.prof.host). The PyTorch profiler's TensorBoard plugin split a step so;
here the parts are the union of all the process's threads and add up to the step's CPU time."""
from __future__ import annotations

from pyprof.prof.aggregate import Aggregate
from pyprof.prof.host import Intervals, split
from pyprof.prof.tables import Table
from pyprof.prof.views.common import ms, pct
from pyprof.prof.views.registry import view

PARTS = ("dataloader", "runtime", "op", "other")
NO_LINES = ("No host time in this input: records parsed by a pyprof older than record schema 4 carry none; "
            "parse the capture again.")


@view("host")
def host(agg: Aggregate, worker: str | None = None) -> Table:
    """Per worker and step: the step's CPU time, split into data loading, CUDA API calls, ops and other."""
    cols = [("worker", "Worker"), ("step", "Step"), ("cpu_ms", "CPU (ms)"), ("dataloader_ms", "Data loading (ms)"),
            ("runtime_ms", "CUDA API (ms)"), ("op_ms", "Ops (ms)"), ("other_ms", "Other (ms)"),
            ("dataloader_pct", "Data loading %"), ("runtime_pct", "CUDA API %"), ("op_pct", "Ops %"),
            ("other_pct", "Other %")]
    t = Table.of("host", "Host time per step: data loading, CUDA API, ops, other", cols,
                 chart={"type": "stacked", "label": "step",  # the page puts the worker before it
                        "values": ["dataloader_ms", "runtime_ms", "op_ms", "other_ms"]})
    any_lines = False
    for w in agg.select(worker):
        if not w.host:
            continue
        any_lines = True
        windows = [(name, int(lo), int(hi)) for r in w.host if r.category == "step"
                   for name, lo, hi in zip(r.names or [""] * len(r.start_ns), r.start_ns, r.end_ns)]
        if not windows:  # no step ranges: the span of everything the host lines hold
            every = Intervals(w.host)
            windows = [("all", int(every.lo.min()), int(every.hi.max()))] if len(every.lo) else []
        for label, t0, t1 in windows:
            parts = split(w.host, t0, t1)
            span = t1 - t0
            t.rows.append([w.name, label, ms(span)] + [ms(parts[p]) for p in PARTS] +
                          [pct(parts[p], span) for p in PARTS])
    if not any_lines:
        t.notes.append(NO_LINES)
    t.notes += [
        "Each step's CPU time (its ProfilerStep range, start to end) is split so that the parts add up to it, over "
        "all the process's threads together: Data loading (the DataLoader's ranges), then CUDA API (runtime and "
        "driver calls outside data loading: launches, copies, synchronisations, which is where the host waits for "
        "the GPU), then Ops (PyTorch op and autograd-node ranges outside both), then Other (Python between ops, "
        "the host's own work).",
        "Without step ranges (ProfilerStep#N) one row covers everything the host lines hold.",
    ]
    return t
