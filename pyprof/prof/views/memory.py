"""Memory: allocated and reserved over time, the peak and what held it, and what each op and source line allocated,
from parse's memory lines (pyprof.prof.memory_timeline). The PyTorch profiler's ``profile_memory=True`` events are the
caching allocator's; Nsight Systems' ``--cuda-memory-usage=true`` events are the driver's (what the allocator
reserves)."""
from __future__ import annotations

import numpy as np

from pyprof.prof.aggregate import Aggregate
from pyprof.prof.table.groups import callsite_key, layer_key, op_key
from pyprof.prof.memory_timeline import Timeline, series, timelines
from pyprof.prof.tables import Table
from pyprof.prof.views.absent import older_inputs, older_note
from pyprof.prof.views.view_registry import view

MIB = 2 ** 20
NO_EVENTS = ("No memory events in this input: record them with torch.profiler's profile_memory=True (pyprof run "
             "--backend torch does), or nsys's --cuda-memory-usage=true.")


def mib(n: int | float) -> float:
    return round(float(n) / MIB, 1)


@view("memory")
def memory(agg: Aggregate, worker: str | None = None) -> list[Table]:
    """Per process and device: the peak, when, what was allocated before the profiled window; then per op and
    line: what they allocated and what of the peak they held."""
    named = [(w.name, t) for w in agg.select(worker) for t in timelines(w.memory)]
    named.sort(key=lambda wt: not wt[1].device.startswith("cuda"))  # GPUs first, each worker's order kept
    summary = Table.of("memory", "Memory: the peak and when", [
        ("worker", "Worker"), ("device", "Device"), ("level", "Counts"), ("events", "Events"),
        ("peak_mib", "Peak (MiB)"), ("reserved_mib", "Peak reserved (MiB)"), ("before_mib", "Before (MiB)"),
        ("end_mib", "At end (MiB)"), ("peak_at_ms", "Peak at (ms)"), ("peak_op", "Peak in op"),
        ("peak_line", "Peak at line")])
    sites = Table.of("memory_ops", "Memory by op and line: what they allocated and what held the peak", [
        ("device", "Device"), ("op", "Op"), ("line", "Line"), ("layer", "Layer"), ("allocs", "Allocs"),
        ("allocated_mib", "Allocated (MiB)"), ("held_mib", "Held at peak (MiB)"), ("held_pct", "% of peak")],
        chart={"type": "bar", "label": ["op", "layer"], "values": ["held_mib"]})
    if not named:
        older = older_inputs(agg)
        summary.empty = older_note("memory events", older, len(older) == len(agg.inputs)) if older else NO_EVENTS
        return [summary, sites]
    charts = []
    for wname, t in named:
        summary.rows.append(_summary_row(wname, t))
        sites.rows += _site_rows(t)
        if t.device.startswith("cuda") or len(named) == 1:
            charts.append({"label": f"{wname} {t.device}", **series(t)})
    summary.chart = {"type": "series", "unit": "MiB", "series": charts[:8]}
    sites.rows.sort(key=lambda r: (-(r[6] or 0), -r[5], r[1], r[2]))
    tls = [t for _, t in named if len(t.t_ns)]
    summary.notes += _level_notes(tls)
    if tls:
        summary.notes.append("Peak at: ms from the first memory event; the op and line are those of the allocation "
                             "that reached it.")
    sites.notes += _site_notes(tls)
    return [summary, sites]


def _level_notes(tls: list[Timeline]) -> list[str]:
    """What Peak, Peak reserved and Before mean, for the levels (and totals) these timelines have."""
    out = []
    if any(t.level == "allocator" and t.allocated is not None for t in tls):
        out.append("Counts 'allocator': PyTorch's caching allocator (torch.profiler's profile_memory=True): Peak is "
                   "its highest allocated total over the profiled window (on a GPU, torch.cuda.max_memory_allocated()),"
                   " Peak reserved the most it held from the driver, Before what was allocated before the window's "
                   "first event (parameters, optimizer state, the inputs).")
    if any(t.level == "allocator" and t.allocated is None for t in tls):
        out.append("Counts 'allocator' without totals: the events carry no allocated or reserved totals, so Peak is "
                   "the highest running sum of the window's own events (what was allocated before the window is not "
                   "in it), and Peak reserved and Before are na.")
    flat = sorted({t.device for t in tls if t.allocated is not None and not _reserves(t)})
    if flat:
        out.append(f"Peak reserved is na on {', '.join(flat)}: its allocator's events give a reserve of 0 throughout "
                   "while it allocated (it reports none).")
    if any(t.level == "driver" for t in tls):
        out.append("Counts 'driver': memory taken from the CUDA driver (cudaMalloc, Nsight Systems' "
                   "--cuda-memory-usage=true): what the caching allocator reserves plus other libraries' own "
                   "allocations; Peak is the running sum of its events (a ranged capture reports what was held when "
                   "it began as events at its start), so Before and Peak reserved are na.")
    return out


def _site_notes(tls: list[Timeline]) -> list[str]:
    """The memory_ops notes that hold for these timelines."""
    if not tls:
        return []
    out = ["Allocated: the bytes each op and line allocated over the window (a tensor allocated and freed many "
           "times counts each time). Held at peak: of the allocations made in the window, those still alive at the "
           "peak (each free paired with its allocation by address), by the op and line that made them."]
    if any(t.level == "allocator" and t.allocated is not None for t in tls):
        out.append("The '(before the window)' row holds the rest of an allocator peak: what was allocated before "
                   "the window's first event.")
    blind = sorted({t.device for t in tls if not _paired(t)})
    if blind:
        out.append(f"Held at peak is na on {', '.join(blind)}: cannot tell what was alive at the peak, the frees "
                   "carry no addresses to pair with their allocations.")
    if any(s.get("dir") == "bprop" and s.get("fwd") for t in tls for s in t.sites):
        out.append("Backward work is named by its forward op (linear (bprop)) and line, as in the other views.")
    return out


def _reserves(t: Timeline) -> bool:
    """Whether the allocator reports a reserve: its totals given, and the reserve above 0 once it has allocated
    (the PyTorch profiler's CPU allocator events say 0 throughout)."""
    return t.allocated is not None and (int(t.reserved.max()) > 0 or int(t.allocated.max()) <= 0)


def _paired(t: Timeline) -> bool:
    """Whether every free carries an address, so that it can be paired with its allocation."""
    frees = t.bytes < 0
    return not frees.any() or bool((t.addr[frees] >= 0).all())

def _summary_row(wname: str, t: Timeline) -> list:
    if not len(t.t_ns):
        return [wname, t.device, t.level, 0, None, None, None, None, None, "", ""]
    i = t.peak_index()
    s = t.sites[int(t.site[i])]
    totals = t.allocated is not None  # the allocator's own totals: a reserve, and what came before the window
    reserved = mib(int(t.reserved.max())) if _reserves(t) else None
    return [wname, t.device, t.level, len(t.t_ns), mib(int(t.held[i])), reserved,
            mib(t.before_bytes()) if totals else None,
            mib(int(t.held[-1])), round((int(t.t_ns[i]) - int(t.t_ns[0])) / 1e6, 3), _op(s), callsite_key(s)]


def _site_rows(t: Timeline) -> list[list]:
    n = len(t.t_ns)
    if not n:
        return []
    i = t.peak_index()
    peak = int(t.held[i])
    alloc = t.bytes > 0
    by_site_n = np.bincount(t.site[alloc], minlength=len(t.sites))
    by_site_bytes = np.bincount(t.site[alloc], weights=t.bytes[alloc], minlength=len(t.sites))
    paired = _paired(t)
    live = t.live_at(i) if paired else np.empty(0, np.int64)
    held = np.bincount(t.site[live], weights=t.bytes[live], minlength=len(t.sites)) if len(live) else \
        np.zeros(len(t.sites))
    acc: dict = {}  # (op, line, layer) -> [allocations, bytes, held bytes]
    for k, s in enumerate(t.sites):
        if not by_site_n[k] and not held[k]:
            continue
        cur = acc.setdefault((_op(s), callsite_key(s), layer_key(s)), [0, 0.0, 0.0])
        cur[0] += int(by_site_n[k])
        cur[1] += float(by_site_bytes[k])
        cur[2] += float(held[k])
    rows = [[t.device, op, line, layer, n_alloc, mib(b), mib(h) if paired else None,
             round(100.0 * h / peak, 1) if peak and paired else None]
            for (op, line, layer), (n_alloc, b, h) in acc.items()]
    before = peak - int(held.sum())
    if t.allocated is not None and paired and before > 0:
        rows.append([t.device, "(before the window)", "-", "-", 0, 0.0, mib(before), round(100.0 * before / peak, 1)])
    return rows


def _op(site: dict) -> str:
    return op_key(site) if site.get("op") else "-"
