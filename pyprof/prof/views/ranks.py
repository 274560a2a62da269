"""The ranks of one job side by side: step time, compute and communication time, how much of the communication
the computation hid, idle time, and the stragglers (for each collective, the rank that arrived last and by how
much). The inputs of one ``pyprof prof --view ranks`` or ``pyprof report`` are one job: one rank per process
(per-rank PyTorch profiler traces, or one nsys export holding every rank's process). docs/views.md, ranks."""
from __future__ import annotations

import numpy as np

from pyprof.prof.aggregate import KERNEL, Aggregate, WorkerData
from pyprof.prof.host import Intervals
from pyprof.prof.steps import no_process, steps
from pyprof.prof.tables import Table
from pyprof.prof.views.collectives import match
from pyprof.prof.views.common import ms, pct
from pyprof.prof.views.registry import view


class Comm:
    """A worker's communication against its computation, in ns: ``comm_ns`` the time at least one communication
    kernel ran, ``compute_ns`` the time at least one other kernel ran, ``hidden_ns`` the communication time during
    which a computation kernel ran too (on its GPU: a rank's process drives one), ``sum_ns`` the communication
    kernels' durations summed (``comm_ns`` unless they overlap one another)."""

    def __init__(self, w: WorkerData) -> None:
        n = len(w.start_ns)
        start = np.frombuffer(w.start_ns, np.int64) if n else np.zeros(0, np.int64)
        end = np.maximum(np.frombuffer(w.end_ns, np.int64), start) if n else start
        kernel = np.frombuffer(w.kind, np.int8) == KERNEL if n else np.zeros(0, bool)
        comm = np.zeros(n, bool)
        comm[np.asarray(w.comm_at, np.int64)] = True
        comm_iv = Intervals.of(start[comm], end[comm])
        compute_iv = Intervals.of(start[kernel & ~comm], end[kernel & ~comm])
        self.comm_ns = comm_iv.total()
        self.compute_ns = compute_iv.total()
        self.hidden_ns = self.comm_ns - comm_iv.minus(compute_iv).total()
        self.sum_ns = int((end[comm] - start[comm]).sum())


def rank_label(w: WorkerData) -> str:
    """``rank R`` where the input names its rank (the PyTorch profiler's distributedInfo), else the process and
    its GPU: ``pid 1596 (GPU 0)``; the worker's name where it has no process."""
    rank = (w.dist or {}).get("rank")
    if rank is not None:
        return f"rank {rank}"
    if w.pid is None:
        return w.name
    gpus = ", ".join(str(d) for d in sorted(w.devices))
    return f"pid {w.pid} (GPU {gpus})" if gpus else f"pid {w.pid}"


def _order(w: WorkerData) -> tuple:
    rank = (w.dist or {}).get("rank")
    return (rank is None, rank if rank is not None else 0, w.name)


@view("ranks")
def ranks(agg: Aggregate, worker: str | None = None) -> list[Table]:
    """Two tables: one row per rank (step, compute, communication and idle time, the share of communication
    hidden under computation and exposed, how often it arrived last at a collective and the delay it caused),
    and one row per collective matched across the ranks (who arrived last, by how much), longest delay first."""
    job = sorted((w for w in agg.workers.values() if not no_process(w)), key=_order)
    shown = agg.select(worker) if worker is not None else job
    labels = {id(w): rank_label(w) for w in job}
    talking = [w for w in job if w.comm_at]
    matched = match(talking) if len(talking) > 1 else None
    caused: dict[int, list[int]] = {}  # id(worker) -> delays of the collectives it arrived last at
    if matched is not None:
        for c in matched.collectives:
            if c.delay_ns > 0:
                caused.setdefault(id(talking[c.last]), []).append(c.delay_ns)

    cols = [("rank", "Rank"), ("worker", "Worker"), ("steps", "Steps"), ("step_ms", "Mean step (ms)"),
            ("compute_ms", "Compute (ms)"), ("comm_ms", "Comm (ms)"), ("hidden_pct", "Comm hidden %"),
            ("exposed_pct", "Comm exposed %"), ("exposed_ms", "Exposed comm (ms)"), ("idle_ms", "Idle (ms)"),
            ("idle_pct", "Idle %"), ("last_at", "Last at"), ("caused_ms", "Delay caused (ms)"),
            ("max_delay_ms", "Max delay (ms)")]
    t = Table.of("ranks", "Ranks: compute, communication and stragglers", cols,
                 chart={"type": "stacked", "label": "rank", "values": ["compute_ms", "exposed_ms", "idle_ms"]})
    overlapping = []
    for w in shown:
        sts, _source = steps(w)
        span = sum(s.span_ns for s in sts)
        idle = sum(s.idle_ns for s in sts)
        c = Comm(w)
        if c.sum_ns != c.comm_ns:
            overlapping.append(f"{labels.get(id(w), w.name)} {ms(c.sum_ns)} ms summed, {ms(c.comm_ns)} ms of time")
        delays = caused.get(id(w), [])
        straggler = [len(delays), ms(sum(delays)), ms(max(delays, default=0))] if matched is not None and \
            w in talking else [None, None, None]
        t.rows.append([labels.get(id(w), rank_label(w)), w.name, len(sts), ms(span / len(sts)) if sts else None,
                       ms(c.compute_ns), ms(c.comm_ns), pct(c.hidden_ns, c.comm_ns),
                       pct(c.comm_ns - c.hidden_ns, c.comm_ns), ms(c.comm_ns - c.hidden_ns), ms(idle),
                       pct(idle, span), *straggler])
    t.notes.append("Over each rank's profiled span (its steps' windows, overview rules). Comm: the time at least one "
                   "communication kernel (NCCL, RCCL: named nccl*) ran; compute: the time at least one other "
                   "kernel ran. Hidden: the share of the comm time during which a compute kernel ran too on the "
                   "rank's GPU; exposed: the rest, time the rank only communicated (or waited for a peer inside "
                   "a NCCL kernel). A rank's kernels on several GPUs are taken together.")
    if overlapping:
        t.notes.append("Communication kernels overlapping one another (several communicators at once): "
                       + "; ".join(overlapping) + ".")
    tables = [t]
    if matched is not None:
        tables.append(_stragglers(matched, talking, labels, agg))
    else:
        t.notes.append("No straggler figures: fewer than two ranks ran communication kernels.")
    return tables


def _stragglers(matched, talking: list[WorkerData], labels: dict, agg: Aggregate) -> Table:
    cols = [("collective", "Collective"), ("n", "#"), ("last", "Last to arrive"), ("delay_ms", "Delay (ms)"),
            ("first", "First to arrive")]
    t = Table.of("stragglers", "Stragglers: who each collective waited for", cols,
                 chart={"type": "bar", "label": ["collective", "n"], "values": ["delay_ms"]})
    for c in sorted(matched.collectives, key=lambda c: -c.delay_ns):
        t.rows.append([c.name, c.n + 1, labels[id(talking[c.last])] if c.delay_ns else None, ms(c.delay_ns),
                       labels[id(talking[c.first])] if c.delay_ns else None])
    t.notes.append(f"{len(matched.collectives)} collectives matched across {len(talking)} ranks: the n-th "
                   "communication kernel of a name on one rank with the n-th of that name on the others. The rank "
                   "whose kernel started last kept the others waiting by the delay (latest start - earliest).")
    for name, counts in matched.unmatched.items():
        t.notes.append(f"{name}: {', '.join(str(n) for n in counts)} kernels on the ranks (in the order of the "
                       "rank table): only the first of each are matched.")
    t.notes.append("Clocks: per-rank traces (one input per rank) carry their host's clock: on one host they agree; "
                   "across hosts a delay is only as good as the hosts' clock synchronisation." if len(agg.inputs) > 1
                   else "Clocks: the ranks of one input (an nsys export of every rank) share one clock.")
    return t
