"""The ranks of one job side by side: step time, compute and communication time, how much of the communication
the computation hid, idle time, and the stragglers (for each collective, the rank that arrived last and by how
much). The inputs of one ``pyprof prof --view ranks`` or ``pyprof report`` are one job: one rank per process
(per-rank PyTorch profiler traces, or one nsys export holding every rank's process). docs/views.md, ranks."""
from __future__ import annotations

from pyprof.prof.aggregate import Aggregate, pick
from pyprof.prof.ranks.rank_summary import RankSummary, summarize_worker
from pyprof.prof.tables import Table
from pyprof.prof.views.collectives import job_order, judge, verdict
from pyprof.prof.views.helpers import ms, pct
from pyprof.prof.views.view_registry import view


def rank_label(w: RankSummary) -> str:
    """``rank R`` where the input names its rank (the PyTorch profiler's distributedInfo), else the process and
    its GPU: ``pid 1596 (GPU 0)``; the worker's name where it has no process."""
    rank = (w.dist or {}).get("rank")
    if rank is not None:
        return f"rank {rank}"
    if w.pid is None:
        return w.name
    gpus = ", ".join(str(d) for d in sorted(w.devices))
    return f"pid {w.pid} (GPU {gpus})" if gpus else f"pid {w.pid}"


@view("ranks")
def ranks(agg: Aggregate, worker: str | None = None) -> list[Table]:
    """Two tables: one row per rank (step, compute, communication and idle time, the share of communication
    hidden under computation and exposed, how often it arrived last at a collective and the delay it caused),
    and one row per collective matched across the ranks (who arrived last, by how much), longest delay first."""
    return rank_tables([summarize_worker(w) for w in agg.workers.values()], len(agg.inputs), worker)


def rank_tables(summaries: list[RankSummary], inputs: int, worker: str | None = None) -> list[Table]:
    """The ranks view (see ``ranks``) of a job's workers, summarised (pyprof.prof.ranks.rank_summary): in this process
    from an aggregate, or in other processes and machines one rank file each (job_ranks names them). ``inputs``:
    how many inputs the job came in. Raises UsageError for a ``worker`` no summary names."""
    job = job_order(summaries)
    shown = pick({w.name: w for w in summaries}, worker) if worker is not None else job
    names = [rank_label(w) for w in job]
    labels = {id(w): name for w, name in zip(job, names)}
    waits = judge(job, names)
    at = {id(w): i for i, w in enumerate(job)}

    cols = [("rank", "Rank"), ("worker", "Worker"), ("steps", "Steps"), ("step_ms", "Mean step (ms)"),
            ("compute_ms", "Compute (ms)"), ("comm_ms", "Comm (ms)"), ("hidden_pct", "Comm hidden %"),
            ("exposed_pct", "Comm exposed %"), ("exposed_ms", "Exposed comm (ms)"), ("idle_ms", "Idle (ms)"),
            ("idle_pct", "Idle %"), ("last_at", "Last at"), ("caused_ms", "Delay caused (ms)"),
            ("max_delay_ms", "Max delay (ms)")]
    t = Table.of("ranks", "Ranks: compute, communication and stragglers", cols,
                 chart={"type": "stacked", "label": "rank", "values": ["compute_ms", "exposed_ms", "idle_ms"]})
    overlapping = []
    for c in shown:
        if c.sum_ns != c.comm_ns:
            overlapping.append(f"{labels.get(id(c), c.name)} {ms(c.sum_ns)} ms summed, {ms(c.comm_ns)} ms of time")
        i = at.get(id(c))
        straggler = [None, None, None] if i is None else \
            [waits.last_at[i], ms(waits.caused_ns[i]), ms(waits.max_ns[i])]
        t.rows.append([labels.get(id(c), rank_label(c)), c.name, c.steps,
                       ms(c.span_ns / c.steps) if c.steps else None, ms(c.compute_ns), ms(c.comm_ns),
                       pct(c.hidden_ns, c.comm_ns), pct(c.comm_ns - c.hidden_ns, c.comm_ns),
                       ms(c.comm_ns - c.hidden_ns), ms(c.idle_ns), pct(c.idle_ns, c.span_ns), *straggler])
    t.notes.append("Over each rank's profiled span (its steps' windows, overview rules). Comm: the time at least one "
                   "communication kernel (NCCL, RCCL: named nccl*; DeepEP's all-to-all) ran; compute: the time at least one other "
                   "kernel ran. Hidden: the share of the comm time during which a compute kernel ran too on the "
                   "rank's GPU; exposed: the rest, time the rank only communicated (or waited for a peer inside "
                   "a NCCL kernel). A rank's kernels on several GPUs are taken together.")
    if overlapping:
        t.notes.append("Communication kernels overlapping one another (several communicators at once): "
                       + "; ".join(overlapping) + ".")
    t.notes.append(verdict(waits, names))
    tables = [t]
    if waits.reason is None:
        tables.append(_stragglers(waits.matched, [job[i] for i in waits.talking], labels, inputs))
    return tables


#: The stragglers table, built only where collectives were matched across ranks (pyprof.schemas reads it here).
STRAGGLERS = ("stragglers", "Stragglers: who each collective waited for",
              [("collective", "Collective"), ("n", "#"), ("last", "Last to arrive"), ("delay_ms", "Delay (ms)"),
               ("first", "First to arrive")])


def _stragglers(matched, talking: list[RankSummary], labels: dict, inputs: int) -> Table:
    t = Table.of(*STRAGGLERS,
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
                   "across hosts a delay is only as good as the hosts' clock synchronisation." if inputs > 1
                   else "Clocks: the ranks of one input (an nsys export of every rank) share one clock.")
    return t
