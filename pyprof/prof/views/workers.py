"""Workers side by side (processes of one input, or one input per rank): step time, GPU busy share, kernel,
copy and communication time. Who kept whom waiting is not read off the step times (in a synchronous job the rank
that waits has the longer step window, as its waits are inside it): the notes give the collectives' verdict,
the one the ranks view computes (views/collectives.py), or why it cannot be judged."""
from __future__ import annotations

from pyprof.prof.aggregate import Aggregate
from pyprof.prof.ranks.rank_summary import RankSummary, summarize_worker
from pyprof.prof.tables import Table
from pyprof.prof.steps import no_process, steps
from pyprof.prof.views.collectives import job_order, judge, verdict
from pyprof.prof.views.view_registry import view
from pyprof.prof.views.helpers import ms, pct


@view("workers")
def workers(agg: Aggregate, worker: str | None = None) -> Table:
    """One row per worker: steps, mean and max step (GPU window), GPU busy % over the profiled span,
    kernel/memcpy time per step, communication time; in the notes (all workers only), who kept the others
    waiting at the collectives."""
    ws = agg.select(worker)
    cols = [("worker", "Worker"), ("gpu", "GPU"), ("steps", "Steps"), ("step_ms", "Mean step (ms)"),
            ("max_step_ms", "Max step (ms)"), ("gpu_busy_pct", "GPU busy %"), ("kernel_ms", "Kernel/step (ms)"),
            ("memcpy_ms", "Memcpy/step (ms)"), ("comm_ms", "Comm total (ms)"), ("comm_pct", "Comm % of kernels"),
            ("kernels", "Kernels")]
    t = Table.of("workers", "Workers", cols,
                 chart={"type": "bar", "label": "worker", "values": ["step_ms"]})
    for w in ws:
        sts, _source = steps(w)
        n = len(sts) or 1
        span = sum(s.span_ns for s in sts)  # the profiled span: the windows partition it
        t.rows.append([w.name, ", ".join(sorted(w.gpus)) or None, len(sts), ms(span / n if sts else None),
                       ms(max((s.span_ns for s in sts), default=None)), pct(sum(s.busy_ns for s in sts), span),
                       ms(sum(s.kernel_ns for s in sts) / n if sts else None),
                       ms(sum(s.memcpy_ns for s in sts) / n if sts else None),
                       ms(w.totals["comm_ns"]), pct(w.totals["comm_ns"], w.totals["kernel_ns"]),
                       w.totals["kernels"]])
    t.notes.append("A step is its window on the worker's GPU timeline (overview rules): the mean step is the "
                   "profiled span (first GPU activity to last GPU end) over the steps, GPU busy % is over that "
                   "span. Per-step figures average the worker's steps. Comm total: the durations of the communication "
                   "kernels (named nccl*, and DeepEP's all-to-all) summed (the ranks view gives the time they ran, overlaps counted once).")
    if worker is None and sum(1 for w in agg.workers.values() if not no_process(w)) > 1:
        job = job_order([summarize_worker(w) for w in agg.workers.values()])
        names = [_label(w) for w in job]
        t.notes.append(verdict(judge(job, names), names))
    return t


def _label(w: RankSummary) -> str:
    # the worker's name, as the table's rows have it, and its rank where the input names one
    rank = (w.dist or {}).get("rank")
    return w.name if rank is None else f"{w.name} (rank {rank})"
