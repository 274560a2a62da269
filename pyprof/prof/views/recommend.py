"""Recommendations: rules that fire on measured facts, each naming the kernels or lines it is about and what to
do (docs/actionable.md explains them; thresholds below, and in docs/views.md). A rule whose facts are not in
the records (data loading share, pageable vs pinned host memory) does not fire."""
from __future__ import annotations

from pyprof.prof.aggregate import Aggregate
from pyprof.prof.groups import Group
from pyprof.prof.tables import Table
from pyprof.prof.steps import steps
from pyprof.prof.views.registry import view
from pyprof.prof.views.common import merged, ms, pct, short_lines, total

HOTSPOT_SHARE = 5.0  # % of GPU time for a line/kernel to count as a hotspot
NEAR_ROOFLINE = 60.0  # roofline % at or above which a hotspot is near what the GPU can do
FAR_ROOFLINE = 20.0  # roofline % below which a hotspot has room
IDLE_SHARE = 20.0  # % of the profiled span (all steps' windows) with the GPU idle
TINY_SHARE = 50.0  # % of kernels shorter than TINY_NS
LOW_OCCUPANCY = 25.0  # estimated occupancy %
LOW_OCC_SHARE = 10.0  # % of kernel time in low-occupancy kernels
MAX_ROWS_PER_RULE = 5


def misaligned(tc_dims: tuple) -> list[str]:
    """The sizes among a formula's ``tc_dims`` (registry.Estimate: a GEMM's M, N, K, a convolution's C, K) that
    are not multiples of 8, as ``NAME=VALUE``. A negative size (a corrupt marker) names nothing to pad."""
    return [f"{name}={size}" for name, size in tc_dims if size >= 0 and size % 8]


def _top(names: list[str], n: int = 3) -> str:
    return ", ".join(names[:n]) + (f" (+{len(names) - n} more)" if len(names) > n else "")


@view("recommendations")
def recommendations(agg: Aggregate, worker: str | None = None) -> Table:
    """The rules that fire, most GPU time first within each rule."""
    ws = agg.select(worker)
    cols = [("rule", "Rule"), ("about", "About"), ("evidence", "Evidence"), ("advice", "What to do"),
            ("time_ms", "Time (ms)"), ("time_pct", "Time %")]
    t = Table.of("recommendations", "Recommendations", cols)
    gpu_ns = total(ws, "gpu_ns")
    kernel_ns = total(ws, "kernel_ns")
    rows = t.rows
    all_lines = merged(ws, "lines")
    prefix, short = short_lines(all_lines)

    # 1. fp16/bf16 GEMM/conv/attention kernels not on Tensor Cores
    miss: dict = {}
    for (op, kernel, params, line, dims), group in merged(ws, "tc_miss").items():
        # per op and params: its kernels, their names and lines; the params decide the sizes, so one tc_dims
        g, knames, lnames, _ = miss.setdefault((op, params), (Group(), set(), set(), dims))
        g.merge(group)
        knames.add(kernel)
        lnames.add(line)
    for (op, params), (g, knames, lnames, dims) in sorted(miss.items(),
                                                          key=lambda kv: -kv[1][0].ns)[:MAX_ROWS_PER_RULE]:
        n, ns = g.count, g.ns
        bad = misaligned(dims)
        why = (f"dimensions not multiples of 8: {', '.join(bad)}" if bad else "dimensions are multiples of 8")
        at = sorted(short.get(x, x) for x in lnames)
        rows.append(["tensor_cores", f"{op} at {_top(at)}; kernels {_top(sorted(knames))}",
                     f"{n} fp16/bf16 kernels ({params}) ran without Tensor Cores; {why}",
                     "Pad the named dimensions to multiples of 8 (16 for fp8/int8)" if bad else
                     "Check the layout (channels-last for convolutions) and the library's choice of kernel",
                     ms(ns), pct(ns, gpu_ns)])

    # 2. hotspots near / far from the roofline: by source line, else by kernel
    lines = {k: g for k, g in all_lines.items() if k != "-"}
    if sum(g.ns for g in lines.values()) >= 0.5 * gpu_ns and lines:
        spots = [(short[k], g.ns, g.ideal_ns) for k, g in lines.items()]
        what = "line"
    else:
        spots = [(k, g.ns, g.ideal_ns) for k, g in merged(ws, "kernels").items()]
        what = "kernel"
    spots = [s for s in sorted(spots, key=lambda s: -s[1]) if 100.0 * s[1] / (gpu_ns or 1) >= HOTSPOT_SHARE]
    near = [s for s in spots if s[2] and 100.0 * s[2] / s[1] >= NEAR_ROOFLINE]
    far = [s for s in spots if s[2] and 100.0 * s[2] / s[1] < FAR_ROOFLINE]
    for k, ns, ideal in near[:MAX_ROWS_PER_RULE]:
        rows.append(["near_roofline", f"{what} {k}", f"{pct(ns, gpu_ns)}% of GPU time at {pct(ideal, ns)}% of "
                     "its roofline", "Its kernels are close to what the GPU can do: do less of this work (fuse, "
                     "skip, lower precision) rather than tune it", ms(ns), pct(ns, gpu_ns)])
    for k, ns, ideal in far[:MAX_ROWS_PER_RULE]:
        rows.append(["far_from_roofline", f"{what} {k}", f"{pct(ns, gpu_ns)}% of GPU time at only "
                     f"{pct(ideal, ns)}% of its roofline", "Room to improve: check its launch configuration, "
                     "dtype and shapes (kernels view: occupancy, TC)", ms(ns), pct(ns, gpu_ns)])

    # 3. GPU idle within the profiled span (the steps' windows partition each worker's span)
    named = [(f"{w.name} {s.label}" if len(ws) > 1 else s.label, s) for w in ws for s in steps(w)[0]]
    span = sum(s.span_ns for _, s in named)
    idle = sum(s.idle_ns for _, s in named)
    if span and 100.0 * idle / span >= IDLE_SHARE:
        worst = sorted((x for x in named if x[1].span_ns), key=lambda x: -x[1].idle_ns / x[1].span_ns)
        rows.append(["gpu_idle", f"steps {_top([label for label, _ in worst])}",
                     f"the GPU is idle {pct(idle, span)}% of the profiled time (first GPU activity to last GPU "
                     "end)", "The GPU waits for the CPU: look at the host side (launch overhead, synchronisations, "
                     "data loading) with a CPU profiler; CUDA graphs or torch.compile cut launch gaps",
                     ms(idle), pct(idle, span)])

    # 4. many tiny kernels
    n_k = total(ws, "kernels")
    tiny, tiny_ns = total(ws, "tiny_kernels"), total(ws, "tiny_ns")
    if n_k and 100.0 * tiny / n_k >= TINY_SHARE:
        ops = sorted(((k, g.tiny) for k, g in merged(ws, "ops").items() if g.tiny), key=lambda kv: -kv[1])
        rows.append(["tiny_kernels", f"ops {_top([f'{k} ({n})' for k, n in ops])}",
                     f"{tiny} of {n_k} kernels ({pct(tiny, n_k)}%) ran under 10 us, {ms(tiny_ns)} ms in all",
                     "Launch-bound: fuse (torch.compile), use CUDA graphs, foreach/fused optimizers, larger batches",
                     ms(tiny_ns), pct(tiny_ns, gpu_ns)])

    # 5. copies between host and device
    copies = merged(ws, "copies")
    if copies:
        n = sum(g.count for g in copies.values())
        ns = sum(g.ns for g in copies.values())
        nbytes = sum(g.bytes for g in copies.values())
        by_line: dict = {}
        for (_ck, line), g in copies.items():
            by_line[line] = by_line.get(line, 0) + g.ns
        top_lines = [short.get(k, k) if k != "-" else "(no call site recorded)"
                     for k, _ in sorted(by_line.items(), key=lambda kv: -kv[1])]
        rows.append(["host_copies", f"lines {_top(top_lines)}",
                     f"copies between host and device: {n}, {ms(ns)} ms, {nbytes} bytes "
                     "(whether the host memory was pinned is not recorded)",
                     "Use pinned memory and non_blocking=True so copies overlap compute; avoid .item()/.cpu()/print "
                     "of GPU tensors inside the loop", ms(ns), pct(ns, gpu_ns)])

    # 6. low estimated occupancy
    # Tensor Core GEMM/conv kernels are built to run one large block per SM (their latency is hidden by
    # asynchronous copies, not by warps): low occupancy is their design, not a problem. Left out.
    low = [(k, g.ns, 100.0 * g.occ_x_ns / g.occ_ns) for k, g in merged(ws, "kernels").items()
           if g.occ_ns and not g.tc_ns and 100.0 * g.occ_x_ns / g.occ_ns < LOW_OCCUPANCY]
    low_ns = sum(x[1] for x in low)
    if kernel_ns and 100.0 * low_ns / kernel_ns >= LOW_OCC_SHARE:
        low.sort(key=lambda x: -x[1])
        rows.append(["low_occupancy", f"kernels {_top([f'{k} ({o:.0f}%)' for k, _, o in low])}",
                     f"{pct(low_ns, kernel_ns)}% of kernel time in kernels (not on Tensor Cores) with estimated occupancy under "
                     f"{LOW_OCCUPANCY:.0f}%", "Grids smaller than the GPU or too many registers/shared memory per "
                     "block: larger batches, fused ops, or another kernel configuration", ms(low_ns),
                     pct(low_ns, gpu_ns)])
    if prefix:
        t.notes.append(f"Lines are relative to {prefix}.")
    t.notes += ["Rules and thresholds: docs/views.md. Data-loading share is not in the records, so that rule "
                "never fires here."]
    if not rows:
        t.notes.append("No rule fired.")
    return t
