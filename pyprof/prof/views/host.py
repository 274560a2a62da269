"""Where each step's CPU time went: data loading, CUDA API calls, PyTorch ops and the rest (Python, the host's
own work), from parse's host lines (pyprof.prof.host_time). The PyTorch profiler's TensorBoard plugin split a step so;
here the parts are the union of all the process's threads and add up to the step's CPU time.

A part whose kind of interval the input never recorded is na, not 0 (its time is in Other), and a worker without
host lines has its reason said once (pyprof.prof.views.absent)."""
from __future__ import annotations

from pyprof.prof.aggregate import Aggregate, WorkerData
from pyprof.prof.host_time import Intervals, split
from pyprof.prof.tables import Table
from pyprof.prof.views.absent import inputs_of, names, older_inputs, older_note
from pyprof.prof.views.helpers import ms, pct
from pyprof.prof.views.gaps import launch_times
from pyprof.prof.views.view_registry import view

PARTS = ("dataloader", "runtime", "op", "other")
#: A part the input never recorded: its column's name, and what the input lacks.
UNRECORDED = {
    "dataloader": ("Data loading", "no DataLoader ranges (enumerate(DataLoader)#...)"),
    "runtime": ("CUDA API", "no CUDA runtime or driver calls"),
    "op": ("Ops", "no op ranges (PyTorch ops, autograd nodes; in an nsys export, pyprof.init() or emit_nvtx "
                  "markers)"),
}
NO_CPU_SIDE = ("it holds no CPU-side events pyprof reads as host time: no CUDA API calls and no step, DataLoader "
               "or op ranges (an nsys export made without CUDA API trace, a PyTorch profiler trace without CPU "
               "activities)")
NOT_READ = ("its records carry the launch times of CUDA API calls, but pyprof reads host time only from Nsight "
            "Systems exports and PyTorch profiler traces (not nvprof's)")


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
    workers = agg.select(worker)
    unrecorded: dict = {p: [] for p in UNRECORDED}  # part -> the workers whose input never recorded it
    whole = []  # workers without step ranges: one row
    for w in workers:
        if not w.host:
            continue
        have = {r.category for r in w.host}
        for p in UNRECORDED:
            if p not in have:
                unrecorded[p].append(w)
        windows = [(name, int(lo), int(hi)) for r in w.host if r.category == "step"
                   for name, lo, hi in zip(r.names or [""] * len(r.start_ns), r.start_ns, r.end_ns)]
        if not windows:  # no step ranges: the span of everything the host lines hold
            every = Intervals(w.host)
            windows = [("all", int(every.lo.min()), int(every.hi.max()))] if len(every.lo) else []
            whole.append(w)
        for label, t0, t1 in windows:
            parts = split(w.host, t0, t1)
            shown = {p: (None if p in unrecorded and w in unrecorded[p] else parts[p]) for p in PARTS}
            span = t1 - t0
            t.rows.append([w.name, label, ms(span)] + [ms(shown[p]) for p in PARTS] +
                          [pct(shown[p], span) for p in PARTS])
    missing = _missing(agg, workers, len(workers) == len(agg.workers))
    if not t.rows:
        t.empty = " ".join(missing) or None
    else:
        t.notes += missing
        t.notes.append(
            "Each row's CPU time (a ProfilerStep range, start to end) is split so that the parts add up to it, "
            "over all the process's threads together: Data loading (the DataLoader's ranges), then CUDA API "
            "(runtime and driver calls outside data loading: launches, copies, synchronisations; a synchronising "
            "call's time is the host waiting for the GPU), then Ops (PyTorch op and autograd-node ranges outside "
            "both), then Other (the rest: Python between ops, the host's own work).")
    for p, ws in unrecorded.items():
        if ws:
            col, lacks = UNRECORDED[p]
            t.notes.append(f"{col} is na{_for(ws, workers)}: the input has {lacks}, so that time, if any, is in "
                           "Other.")
    if whole:
        t.notes.append(f"No step ranges (ProfilerStep#N){_for(whole, workers)}: one row ('all') covers everything "
                       "its host lines hold.")
    return t


def _for(ws: list, workers: list) -> str:
    return "" if len(ws) == len(workers) else f" for {names(ws)}"


def _missing(agg: Aggregate, workers: list[WorkerData], everything: bool) -> list[str]:
    """The reasons, once each, why workers (or the whole input) have no host lines, as their records show."""
    lacking = [w for w in workers if not w.host]
    if workers and not lacking:
        return []
    none = not any(w.host for w in workers)
    # With no worker at all (an input without records), every input is the one lacking.
    inputs = inputs_of(agg, lacking) if workers else list(agg.inputs)
    older = older_inputs(agg, inputs)
    out = [older_note("host time", older, none and len(older) == len(agg.inputs))] if older else []
    rest = [w for w in lacking if not older or not set(inputs_of(agg, [w])) <= set(older)]
    read = [w for w in rest if launch_times(w)]
    unread = [w for w in rest if w not in read]
    where = "this input" if none and everything else None
    for ws, why in ((read, NOT_READ), (unread, NO_CPU_SIDE)):
        if ws:
            out.append(f"No host time {'in ' + where if where else 'for ' + names(ws)}: {why}.")
    if not workers and not older:
        out.append(f"No host time in this input: {NO_CPU_SIDE}.")
    return out
