"""Workers side by side (processes of one input, or one input per rank): step time, GPU busy share, kernel,
copy and communication time; the slowest worker is named in the notes, as the plugin's distributed view did."""
from __future__ import annotations

from pyprof.prof.aggregate import Aggregate
from pyprof.prof.tables import Table
from pyprof.prof.steps import no_process, steps
from pyprof.prof.views.registry import view
from pyprof.prof.views.common import ms, pct


@view("workers")
def workers(agg: Aggregate, worker: str | None = None) -> Table:
    """One row per worker: steps, mean and max step (GPU window), GPU busy % over the profiled span,
    kernel/memcpy time per step, communication time."""
    ws = agg.select(worker)
    cols = [("worker", "Worker"), ("gpu", "GPU"), ("steps", "Steps"), ("step_ms", "Mean step (ms)"),
            ("max_step_ms", "Max step (ms)"), ("gpu_busy_pct", "GPU busy %"), ("kernel_ms", "Kernel/step (ms)"),
            ("memcpy_ms", "Memcpy/step (ms)"), ("comm_ms", "Comm total (ms)"), ("comm_pct", "Comm % of kernels"),
            ("kernels", "Kernels")]
    t = Table.of("workers", "Workers", cols,
                 chart={"type": "bar", "label": "worker", "values": ["step_ms"]})
    slowest = None
    for w in ws:
        sts, _source = steps(w)
        n = len(sts) or 1
        span = sum(s.span_ns for s in sts)  # the profiled span: the windows partition it
        mean_ns = span / n if sts else None
        t.rows.append([w.name, ", ".join(sorted(w.gpus)) or None, len(sts), ms(mean_ns),
                       ms(max((s.span_ns for s in sts), default=None)), pct(sum(s.busy_ns for s in sts), span),
                       ms(sum(s.kernel_ns for s in sts) / n if sts else None),
                       ms(sum(s.memcpy_ns for s in sts) / n if sts else None),
                       ms(w.totals["comm_ns"]), pct(w.totals["comm_ns"], w.totals["kernel_ns"]),
                       w.totals["kernels"]])
        if no_process(w):
            continue  # not a process: it waits for no collective
        if mean_ns is not None and (slowest is None or mean_ns > slowest[1]):
            slowest = (w.name, mean_ns)
    t.notes.append("A step is its window on the worker's GPU timeline (overview rules): the mean step is the "
                   "profiled span (first GPU activity to last GPU end) over the steps, GPU busy % is over that "
                   "span. Per-step figures average the worker's steps. Comm = kernels named nccl*.")
    timed = [r for w, r in zip(ws, t.rows) if r[3] is not None and not no_process(w)]
    if len(timed) > 1 and slowest:
        fastest = min(timed, key=lambda r: r[3])
        t.notes.append(f"Slowest worker: {slowest[0]} ({ms(slowest[1])} ms per step; fastest {fastest[0]} "
                       f"{fastest[3]} ms). The others wait for it at every collective.")
    return t
