"""Where and why the GPU waited: the idle gaps of the profiled span (pyprof.prof.views.gaps), by cause and by
the op and line whose work ended each gap, so that "GPU idle 42%" names the lines that kept the GPU waiting."""
from __future__ import annotations

import numpy as np

from pyprof.prof.aggregate import Aggregate
from pyprof.prof.inflation import program_step
from pyprof.prof.steps import steps
from pyprof.prof.tables import Table
from pyprof.prof.views.helpers import ms, pct, short_lines, merged
from pyprof.prof.views.gaps import QUEUED_AFTER_LAUNCH_NS, gaps, launch_times
from pyprof.prof.views.view_registry import view

#: A gap shorter than this is launch overhead (the host issuing kernels one by one); a longer one, host work.
#: The recommendations' idle rules read the same threshold.
SHORT_GAP_NS = 50_000
CAUSES = {
    "sync": "after a synchronising copy (.item(), .cpu(), a synchronous cudaMemcpy): the host waited for the GPU, "
            "then the GPU for the host",
    "launch": f"gaps under {SHORT_GAP_NS // 1000} us ended by work launched after the GPU went idle: the host "
              "issuing work one launch at a time",
    "host": f"gaps of {SHORT_GAP_NS // 1000} us or more ended by work launched after the GPU went idle: host work between launches (Python, data loading, "
            "the optimizer's bookkeeping)",
    "queued": "gaps ended by work launched before the GPU went idle, or launched after but started over "
              f"{QUEUED_AFTER_LAUNCH_NS // 1000} us later than that (and later than the launch came): the GPU did not "
              "wait for the host but for something else (an event or another stream it depends on, a peer's "
              "collective, its own scheduling)",
    "unknown": "gaps in records without launch (CUDA API) times: whether the GPU waited for the host cannot be told",
    "edges": "the profiled window before the first GPU activity and after the last, where the capture's window "
             "is the span (no step marker): start-up and tear-down, or a program that used the GPU for a moment; "
             "no activity of the GPU's ended the time after the last one",
}


@view("idle")
def idle(agg: Aggregate, worker: str | None = None) -> Table:
    """The GPU's idle time by cause, op and line (the activity whose work ended each gap), longest first."""
    ws = agg.select(worker)
    cols = [("cause", "Cause"), ("op", "Op"), ("line", "Line"), ("gaps", "Gaps"), ("idle_ms", "Idle (ms)"),
            ("idle_pct", "Idle % of span"), ("largest_ms", "Largest (ms)"), ("largest_step", "Largest in")]
    t = Table.of("idle", "GPU idle time: why and before what", cols,
                 chart={"type": "bar", "label": ["cause", "op", "line"], "values": ["idle_ms"]})
    span = sum(s.span_ns for w in ws for s in steps(w)[0])
    _prefix, short = short_lines(merged(ws, "lines"))
    acc: dict = {}  # (cause, op, line) -> [gaps, idle ns, largest ns, its step]
    total_idle = 0
    names = ("sync", "launch", "host", "queued", "unknown")
    for w in ws:
        g = gaps(w)
        if not len(g.idle_ns):
            continue
        total_idle += int(g.idle_ns.sum())
        # The cause is computed from the launch times: a gap the host caused ends with work launched after it began
        if launch_times(w):
            waited = np.where(g.host_waited, np.where(g.idle_ns < SHORT_GAP_NS, 1, 2), 3)
        else:
            waited = np.full(len(g.idle_ns), 4)
        cause = np.where(g.after_sync, 0, waited)
        # one group per (cause, site): sorted by group, the longest gap first within each
        group = cause * len(w.site_keys) + g.site
        order = np.lexsort((-g.idle_ns, group))
        sorted_group = group[order]
        firsts = np.flatnonzero(np.r_[True, sorted_group[1:] != sorted_group[:-1]])
        counts = np.diff(np.r_[firsts, len(order)])
        sums = np.add.reduceat(g.idle_ns[order], firsts)
        for first, n, ns in zip(firsts.tolist(), counts.tolist(), sums.tolist()):
            biggest = order[first]
            c, site = divmod(int(sorted_group[first]), len(w.site_keys))
            line, op = w.site_keys[site]
            cur = acc.setdefault((names[c], op, short.get(line, line)), [0, 0, 0, ""])
            cur[0] += n
            cur[1] += ns
            if int(g.idle_ns[biggest]) > cur[2]:
                step = g.labels[g.step[biggest]]
                cur[2], cur[3] = int(g.idle_ns[biggest]), f"{w.name} {step}" if len(ws) > 1 else step
    edge_n, edge_ns, edge_big, edge_step = 0, 0, 0, ""
    for w in ws:
        for part in _edges(w):
            edge_n, edge_ns = edge_n + 1, edge_ns + part
            if part > edge_big:
                edge_big, edge_step = part, f"{w.name} all" if len(ws) > 1 else "all"
    total_idle += edge_ns
    if edge_n:
        acc[("edges", "", "")] = [edge_n, edge_ns, edge_big, edge_step]
    for (cause, op, line), (n, ns, big, step) in sorted(acc.items(), key=lambda kv: (-kv[1][1], kv[0])):
        t.rows.append([cause, op, line, n, ms(ns), pct(ns, span), ms(big), step])
    shown = {row[0] for row in t.rows}
    t.notes += [f"{c}: {text}." for c, text in CAUSES.items() if c in shown]
    t.notes += [
        "A gap is a stretch of the profiled span (the steps' windows) with no kernel, copy or memset running on "
        "the GPU (several streams: any of them); it is charged to the op and line of the activity that ended it, "
        "the work the GPU was waiting for.",
        f"Idle in all: {ms(total_idle)} ms of a {ms(span)} ms span ({pct(total_idle, span)}%)." if span else
        "No profiled span (no timed activity).",
    ]
    t.notes += _programs_own(ws)
    if not t.rows:
        t.empty = ("No gap in the profiled span: the GPU ran something from its first activity to its last." if span
                   else "No profiled span (no timed activity), so no idle time.")
    return t


def _programs_own(ws) -> list[str]:
    """Per worker whose program line measured its own step (pyprof run): the program's idle beside the capture's.
    The gaps above are the capture's: their lengths include the capture's own host time, which no gap says."""
    out = []
    for w in ws:
        p = program_step(w)
        if p is None:
            continue
        who = f"{w.name}: " if len(ws) > 1 else ""
        steps_text = "step" if p.steps == 1 else f"{p.steps} steps"
        out.append(f"{who}The program's own idle: {ms(p.program_idle_ns * p.steps)} ms over its {steps_text} "
                   f"({pct(p.program_idle_ns, p.unprofiled_ns)}% of its {ms(p.unprofiled_ns)} ms step, unprofiled), "
                   f"where the capture shows {ms(p.trace_idle_ns * p.steps)} ms: the rows above are the capture's "
                   f"gaps, {p.idle_factor:.2f} of their time the program's (overview).")
    return out


def _edges(w) -> list[int]:
    """The idle stretches of the worker's span before its first GPU activity and after its last (ns, those above
    0): only a span its profiled window widened has them (pyprof.prof.steps.span_window)."""
    sts = steps(w)[0]
    if not sts:
        return []
    start, end = (np.frombuffer(a, dtype=np.int64) for a in (w.start_ns, w.end_ns))
    lead, tail = int(start.min()) - sts[0].start_ns, sts[-1].end_ns - int(np.maximum(end, start).max())
    return [x for x in (lead, tail) if x > 0]
