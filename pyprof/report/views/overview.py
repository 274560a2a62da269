"""The overview: per step, where the GPU's wall time went (kernel, memcpy, memset, idle; overlapping time
charged once in that order, as the PyTorch profiler's TensorBoard plugin did), GPU utilisation, estimated SM
efficiency and estimated achieved occupancy."""
from __future__ import annotations

from pyprof.report.aggregate import Aggregate
from pyprof.report.model import Table
from pyprof.report.steps import Step, steps
from pyprof.report.views import view
from pyprof.report.views.common import ms, pct

COLUMNS = [("step", "Step"), ("span_ms", "Span (ms)"), ("kernel_ms", "Kernel (ms)"), ("memcpy_ms", "Memcpy (ms)"),
           ("memset_ms", "Memset (ms)"), ("idle_ms", "Idle (ms)"), ("gpu_util_pct", "GPU util %"),
           ("sm_efficiency_pct", "Est. SM eff. %"), ("occupancy_pct", "Est. occupancy %"), ("kernels", "Kernels"),
           ("kernel_sum_ms", "Kernel sum (ms)")]


def step_row(st: Step) -> list:
    """One step's values in COLUMNS order (without the worker column)."""
    span = st.span_ns
    sm_eff = None if st.sm_busy_ns is None or not span else round(min(100.0, 100.0 * st.sm_busy_ns / span), 2)
    occ = round(100.0 * st.occ_x_ns / st.occ_known_ns, 2) if st.occ_known_ns else None
    return [st.label, ms(span), ms(st.kernel_ns), ms(st.memcpy_ns), ms(st.memset_ns), ms(st.idle_ns),
            pct(st.busy_ns, span), sm_eff, occ, st.kernels, ms(st.kernel_sum_ns)]


@view("overview")
def overview(agg: Aggregate, worker: str | None = None) -> Table:
    """Per step (and per worker when there are several): span, kernel/memcpy/memset/idle time, GPU
    utilisation, estimated SM efficiency and occupancy; a mean row when there are several steps."""
    workers = agg.select(worker)
    many = len(workers) > 1
    cols = ([("worker", "Worker")] if many else []) + COLUMNS
    table = Table.of("overview", "Overview: GPU time per step", cols,
                     chart={"type": "stacked", "label": "step", "values": ["kernel_ms", "memcpy_ms", "memset_ms",
                                                                           "idle_ms"]})
    sources = set()
    all_steps: list[Step] = []
    for w in workers:
        sts, source = steps(w)
        sources.add(source)
        for st in sts:
            all_steps.append(st)
            table.rows.append(([w.name] if many else []) + step_row(st))
    if len(all_steps) > 1:
        first = 2 if many else 1
        mean = [None] * len(cols)
        for i in range(first, len(cols)):
            vals = [r[i] for r in table.rows if r[i] is not None]
            mean[i] = sum(vals) / len(vals) if vals else None
        mean[1 if many else 0] = "mean"
        if many:
            mean[0] = "all"
        table.rows.append([round(v, 4) if isinstance(v, float) else v for v in mean])
    table.notes += [
        f"Steps found from: {', '.join(sorted(sources)) or 'none'}. A step runs from its first launch to the end "
        "of its last GPU activity; kernels launched on other threads (backward) belong to the step whose launch "
        "window holds their launch time.",
        "Overlapping GPU time is charged once, in the order kernel > memcpy > memset; idle = span - busy; "
        "GPU util % = busy / span.",
        "Est. SM eff. % = sum over kernels of duration x min(1, blocks / SM count) / span (capped at 100). "
        "Est. occupancy % = duration-weighted mean over kernels of min(blocks an SM can hold, blocks per SM) x "
        "warps per block / max warps per SM, from grid, block, registers, shared memory and the GPU's limits; "
        "na where the export lacks them.",
        "CUDA runtime, data loading and CPU execution time (the TensorBoard plugin's other categories) need CPU "
        "events that the records do not carry: not shown.",
    ]
    untimed = sum(w.untimed for w in workers)
    if untimed:
        table.notes.append(f"{untimed} activities have no start/end times (original PyProf dict lines): they are "
                           "in the other views but not in the steps.")
    if len(all_steps) > 1:
        table.notes.append("The mean row averages the step rows (na left out).")
    return table
