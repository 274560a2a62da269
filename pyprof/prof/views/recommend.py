"""Recommendations: rules that fire on measured facts. Each finding names what it is about (op, line, kernel),
the evidence (times, shares, roofline %, Tensor Core use, the dimensions that matter), an estimate of what
fixing it saves, and what to do; the most at stake first. docs/views.md gives every rule's threshold and the
basis of its saving; docs/actionable.md the reasoning. A rule whose facts are not in the records (data loading
share, pageable vs pinned host memory) does not fire."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pyprof.prof.aggregate import Aggregate, WorkerData
from pyprof.prof.groups import Group
from pyprof.prof.host import Intervals
from pyprof.prof.source_lines import source_line
from pyprof.prof.tables import Table
from pyprof.prof.steps import steps
from pyprof.prof.views.gaps import gaps
from pyprof.prof.views.idle import SHORT_GAP_NS  # launch overhead below, host work above
from pyprof.prof.views.registry import view
from pyprof.prof.views.common import merged, ms, pct, short_lines, total

# Percentages of GPU time (the sum of all activities' durations) unless named otherwise.
HOTSPOT_SHARE = 5.0  # a line (or kernel) with this much GPU time is a hotspot
FAR_ROOFLINE = 50.0  # roofline % under which a hotspot is reported as far from the roofline
NEAR_ROOFLINE = 60.0  # roofline % at or above which a hotspot is near what the GPU can do (one summary row)
TARGET_ROOFLINE = 60.0  # the roofline % a fixed kernel is assumed to reach: savings are time - ideal / 60%
MEM_SHARE = 2.0  # a memory-bound kernel with this much GPU time ...
MEM_FAR = 50.0  # ... reaching less than this % of the peak bandwidth is reported
TC_FP32_SHARE = 1.0  # fp32 matrix kernels not on Tensor Cores (TF32 off) with this much GPU time
LAYOUT_SHARE = 1.0  # NCHW <-> NHWC conversion kernels with this much GPU time
OPT_SHARE = 5.0  # optimizer kernels with this much GPU time
OPT_LOOP_SHARE = 50.0  # % of the optimizer's kernels outside _foreach_/_fused_ ops: a per-parameter loop
FUSED_ADAM_PASSES = 7  # a fused Adam(W) step reads param, grad, exp_avg, exp_avg_sq and writes three of them
LAUNCH_IDLE_SHARE = 10.0  # % of the profiled span idle in short gaps
GAP_IDLE_SHARE = 5.0  # % of the profiled span idle in long gaps before one line's work
COPY_SHARE = 1.0  # copies between host and device with this much GPU time
LOW_OCCUPANCY = 25.0  # estimated occupancy %
LOW_OCC_SHARE = 10.0  # % of kernel time in low-occupancy kernels
MAX_ROWS_PER_RULE = 3
#: Rules whose time is (or includes) GPU idle time rather than activities' time.
DATA_LOADING_SHARE = 5.0  # % of the profiled span the GPU idles while the host is in the DataLoader
IDLE_RULES = frozenset({"launch_bound", "idle_gaps", "sync_copies", "data_loading"})


@dataclass
class Finding:
    """One row: what a rule found. ``saving_ns`` never exceeds ``time_ns``, the time it is about (GPU time of
    its activities, or the idle time for the idle rules)."""

    rule: str
    about: str
    evidence: str
    saving_ns: float
    action: str
    time_ns: float


def misaligned(tc_dims: tuple) -> list[str]:
    """The sizes among a formula's ``tc_dims`` (registry.Estimate: a GEMM's M, N, K, a convolution's C, K) that
    are not multiples of 8, as ``NAME=VALUE``. A negative size (a corrupt marker) names nothing to pad."""
    return [f"{name}={size}" for name, size in tc_dims if size >= 0 and size % 8]


def at_target(ns: float, ideal_ns: float, target_pct: float = TARGET_ROOFLINE) -> float:
    """Time saved when work measured at ``ns``, whose time at the roofline is ``ideal_ns``, reaches
    ``target_pct`` of the roofline: ``ns - ideal / target``, never below 0 nor above ``ns``."""
    return min(ns, max(0.0, ns - ideal_ns * 100.0 / target_pct))


def _top(names: list[str], n: int = 3) -> str:
    return ", ".join(names[:n]) + (f" (+{len(names) - n} more)" if len(names) > n else "")


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms"


def _p(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "na"


class _Ctx:
    """What every rule reads: the workers shown, GPU time, and the lines shortened to the common folder."""

    def __init__(self, ws: list[WorkerData]) -> None:
        self.ws = ws
        self.gpu_ns = total(ws, "gpu_ns")
        self.kernel_ns = total(ws, "kernel_ns")
        self.prefix, self.short = short_lines(merged(ws, "lines"))
        # The profiled span (the steps' windows, wall time on the GPU's clock): what a saving is a share of.
        self.span_ns = sum(s.span_ns for w in ws for s in steps(w)[0])

    def line(self, key: str, text: bool = False) -> str:
        if key == "-":
            return "(no call site)"
        out = self.short.get(key, key)
        src = source_line(key) if text else None
        return f"{out} ({src})" if src else out


@view("recommendations")
def recommendations(agg: Aggregate, worker: str | None = None) -> Table:
    """The findings of every rule, the largest estimated saving first."""
    ws = agg.select(worker)
    cols = [("rule", "Rule"), ("about", "About"), ("evidence", "Evidence"), ("saving_ms", "Saving (ms)"),
            ("saving_pct", "Saving %"), ("action", "Action"), ("time_ms", "Time (ms)"), ("time_pct", "Time %")]
    t = Table.of("recommendations", "Recommendations", cols)
    c = _Ctx(ws)
    found: list[Finding] = []
    for rule in RULES:
        found += rule(c)
    # by the saving as shown (0.1 us: sums of floats differ in their last bits with the order they were added
    # in), ties in a fixed order
    found.sort(key=lambda f: (-round(f.saving_ns / 100), f.rule, f.about))
    for f in found:
        saving = min(f.saving_ns, f.time_ns)
        # Time % is of GPU time for findings about activities; idle time is no GPU time (its share of the span
        # is in the evidence), so na there.
        t.rows.append([f.rule, f.about, f.evidence, ms(saving), pct(saving, c.span_ns or c.gpu_ns), f.action,
                       ms(f.time_ns), None if f.rule in IDLE_RULES else pct(f.time_ns, c.gpu_ns)])
    if c.prefix:
        t.notes.append(f"Lines are relative to {c.prefix}.")
    t.notes += ["Saving: what fixing the finding would save at most, by the rule's basis (docs/views.md); "
                "Saving % is of the profiled span (the steps' windows, wall time; GPU time when no step is found), "
                "Time % of GPU time (na for the idle rules, whose time is idle time). Findings can overlap (a line's kernels are also "
                "kernels): do not add their savings up.",
                "Pageable vs pinned host memory is not in the records: no rule reads it."]
    if not found:
        t.notes.append("No rule fired.")
    return t


# ---- the rules: each takes the context and returns its findings


def tensor_cores(c: _Ctx) -> list[Finding]:
    """fp16/bf16 (and fp8/int8) matrix kernels that could have run on Tensor Cores and did not."""
    miss: dict = {}
    for (op, kernel, params, line, dims, dtype), group in merged(c.ws, "tc_miss").items():
        if dtype == "float32":
            continue
        g, knames, lnames, _ = miss.setdefault((op, params), (Group(), set(), set(), dims))
        g.merge(group)
        knames.add(kernel)
        lnames.add(line)
    out = []
    for (op, params), (g, knames, lnames, dims) in miss.items():
        bad = misaligned(dims)
        why = f"dimensions not multiples of 8: {', '.join(bad)}" if bad else "dimensions are multiples of 8"
        at = sorted(c.line(x) for x in lnames)
        out.append(Finding(
            "tensor_cores", f"{op} at {_top(at)}; kernels {_top(sorted(knames))}",
            f"{g.count} kernels ({params}) ran without Tensor Cores, {_ms(g.ns)} ({_p(g.ns, c.gpu_ns)} of GPU "
            f"time); {why}; {_ms(g.ideal_ns)} at the Tensor Core roofline",
            at_target(g.ns, g.ideal_ns),
            "Pad the named dimensions to multiples of 8 (16 for fp8/int8): vocabulary, hidden size, channels"
            if bad else "Check the layout (channels-last for convolutions) and the library's choice of kernel",
            g.ns))
    return _cap(out)


def fp32_matmul(c: _Ctx) -> list[Finding]:
    """fp32 GEMMs/convolutions on CUDA cores (TF32 off) on a GPU with Tensor Cores: TF32 or bf16 would use them."""
    g, ops, lnames, knames = Group(), {}, set(), set()
    for (op, kernel, _params, line, _dims, dtype), group in merged(c.ws, "tc_miss").items():
        if dtype != "float32" or not group.ideal_ns:  # no ideal: the GPU has no TF32 peak in the table
            continue
        g.merge(group)
        ops[op] = ops.get(op, 0) + group.ns
        lnames.add(line)
        knames.add(kernel)
    if not g.ns or 100.0 * g.ns / c.gpu_ns < TC_FP32_SHARE:
        return []
    top_ops = [k for k, _ in sorted(ops.items(), key=lambda kv: -kv[1])]
    return [Finding(
        "fp32_matmul", f"ops {_top(top_ops)} at {_top(sorted(c.line(x) for x in lnames))}; kernels "
        f"{_top(sorted(knames))}",
        f"{g.count} fp32 matrix kernels ran on CUDA cores (TF32 off), {_ms(g.ns)} ({_p(g.ns, c.gpu_ns)} of GPU "
        f"time); {_ms(g.ideal_ns)} at the TF32 Tensor Core roofline",
        at_target(g.ns, g.ideal_ns),
        "torch.set_float32_matmul_precision('high') (TF32 matmuls), or bf16 autocast "
        "(torch.autocast('cuda', dtype=torch.bfloat16)) for lower precision throughout",
        g.ns)]


def channels_last(c: _Ctx) -> list[Finding]:
    """Convolutions paying for NCHW <-> NHWC conversions."""
    found = _groups_over(c, "layout", LAYOUT_SHARE)
    if found is None:
        return []
    conv, ns, n = found
    ops = sorted({op for op, _k, _l in conv}, key=str)
    kernels = sorted({k for _o, k, _l in conv})
    lines = sorted({c.line(line) for _o, _k, line in conv})
    convs = merged(c.ws, "convs")
    nchw_half = sum(g.ns for (layout, dtype), g in convs.items()
                    if layout == "nchw" and dtype in ("float16", "bfloat16"))
    return [Finding(
        "channels_last", f"ops {_top(ops)} at {_top(lines)}; kernels {_top(kernels)}",
        f"{n} layout conversion kernels (NCHW <-> NHWC), {_ms(ns)} ({_p(ns, c.gpu_ns)} of GPU time); "
        f"fp16/bf16 convolution kernels in NCHW: {_ms(nchw_half)}",
        float(ns),
        "model.to(memory_format=torch.channels_last) and the inputs too (x.to(memory_format=torch.channels_last)): "
        "Tensor Core convolutions take NHWC, so the conversions go",
        ns)]


def hotspots(c: _Ctx) -> list[Finding]:
    """Lines (kernels when lines with a call site cover under half the time) far from their roofline, and one
    summary row for those near it."""
    lines = {k: g for k, g in merged(c.ws, "lines").items() if k != "-"}
    by_line = bool(lines) and sum(g.ns for g in lines.values()) >= 0.5 * c.gpu_ns
    spots = lines if by_line else merged(c.ws, "kernels")
    mem = merged(c.ws, "mem_bound")
    mem_ns: dict = {}
    for (kernel, _op, line), g in mem.items():
        k = line if by_line else kernel
        mem_ns[k] = mem_ns.get(k, 0) + g.ns
    ops: dict = {}
    opt_ns: dict = {}  # a line's optimizer time: the optimizer rule speaks for it, "near the roofline" would not
    opt = merged(c.ws, "optimizer")
    if by_line:
        for (line, op), g in merged(c.ws, "line_ops").items():
            ops.setdefault(line, []).append((g.ns, op))
            if op in opt:
                opt_ns[line] = opt_ns.get(line, 0) + g.ns
    out, near = [], []
    for k, g in spots.items():
        roof = g.roofline_pct
        if roof is None or 100.0 * g.ns / c.gpu_ns < HOTSPOT_SHARE or opt_ns.get(k, 0) >= 0.5 * g.ns:
            continue
        label = f"line {c.line(k, text=True)}" if by_line else f"kernel {k}"
        if roof >= NEAR_ROOFLINE:
            near.append((g.ns, label, roof))
            continue
        if roof >= FAR_ROOFLINE:
            continue
        bound = "memory-bound" if mem_ns.get(k, 0) >= 0.5 * g.roof_ns else "compute-bound"
        top = [op for _, op in sorted(ops.get(k, []), reverse=True)]
        what = f"; ops {_top(top)}" if top else ""
        out.append(Finding(
            "far_from_roofline", label + what,
            f"{_ms(g.ns)} ({_p(g.ns, c.gpu_ns)} of GPU time) at {roof:.1f}% of its roofline, mostly {bound}; " +
            ("no Tensor Core kernels in it" if g.tc_pct is None else f"Tensor Cores {g.tc_pct:.0f}% of its time"),
            at_target(g.ns, g.ideal_ns),
            ("Memory-bound: fuse its element-wise ops (torch.compile), avoid copies (.contiguous, casts), use "
             "lower precision" if bound == "memory-bound" else
             "Compute-bound: check dtype and Tensor Core use (kernels view), shapes (multiples of 8, larger "
             "batches) and the kernels' occupancy"),
            g.ns))
    if near:
        near.sort(reverse=True)
        ns = sum(x[0] for x in near)
        out.append(Finding(
            "near_roofline", _top([x[1] for x in near]),
            ", ".join(f"{x[1].split(' ', 2)[1]} at {x[2]:.0f}%" for x in near[:3]) +
            f" of the roofline: {_p(ns, c.gpu_ns)} of GPU time already close to what the GPU can do",
            0.0, "Not worth tuning: only doing less of this work helps (fuse, skip, lower precision)", ns))
    return out


def memory_bound(c: _Ctx) -> list[Finding]:
    """Memory-bound kernels far below the peak bandwidth."""
    by_kernel: dict = {}
    for (kernel, op, line), g in merged(c.ws, "mem_bound").items():
        kg, ops, lines = by_kernel.setdefault(kernel, (Group(), {}, {}))
        kg.merge(g)
        ops[op] = ops.get(op, 0) + g.ns
        lines[line] = lines.get(line, 0) + g.ns
    out = []
    for kernel, (g, ops, lines) in by_kernel.items():
        if 100.0 * g.ns / c.gpu_ns < MEM_SHARE or g.roofline_pct is None or g.roofline_pct >= MEM_FAR:
            continue
        top_ops = [k for k, _ in sorted(ops.items(), key=lambda kv: -kv[1])]
        top_lines = [c.line(k) for k, _ in sorted(lines.items(), key=lambda kv: -kv[1])]
        out.append(Finding(
            "memory_bound", f"kernel {kernel} (ops {_top(top_ops)} at {_top(top_lines)})",
            f"{g.count} memory-bound kernels, {_ms(g.ns)} ({_p(g.ns, c.gpu_ns)} of GPU time) at "
            f"{g.roofline_pct:.1f}% of the peak bandwidth",
            at_target(g.ns, g.ideal_ns),
            "Small or strided accesses: fuse the element-wise chain (torch.compile), make inputs contiguous, "
            "larger tensors per launch (foreach ops, larger batches)",
            g.ns))
    return _cap(out)


def optimizer(c: _Ctx) -> list[Finding]:
    """Optimizer steps: foreach (not fused) or per-parameter loops."""
    opt = merged(c.ws, "optimizer")
    ns = sum(g.ns for g in opt.values())
    if not ns or 100.0 * ns / c.gpu_ns < OPT_SHARE or any(op.startswith("_fused_") for op in opt):
        return []
    n = sum(g.count for g in opt.values())
    ideal = sum(g.ideal_ns for g in opt.values())
    moved = sum(g.bytes for g in opt.values())
    multi = sum(g.count for op, g in opt.items() if op.startswith("_foreach_"))
    names = sorted({r.split("#", 1)[1].split(".")[0] for w in c.ws for r in w.opt_ranges if "#" in r})
    which = "/".join(names) or "optimizer"
    lines = {line for w in c.ws for (line, op) in w.line_ops if op in opt}
    top_ops = [f"{op} x{g.count}" for op, g in sorted(opt.items(), key=lambda kv: -kv[1].ns)]
    about = f"{which} step at {_top(sorted(c.line(x, text=True) for x in lines))}"
    share = f"{n} kernels, {_ms(ns)} ({_p(ns, c.gpu_ns)} of GPU time) at {_p(ideal, ns)} of their roofline"
    if 100.0 * (n - multi) / n >= OPT_LOOP_SHARE:
        return [Finding(
            "optimizer", about, f"per-parameter loop: {share}; {n - multi} kernels outside foreach ops "
            f"({_top(top_ops)})", at_target(ns, ideal),
            f"{which}(..., foreach=True) or fused=True: one kernel per op (or one in all) for every parameter "
            "instead of one per parameter", ns)]
    per_step = sum(b for w in c.ws for b in w.opt_list_bytes.values())
    if not per_step or not moved:
        return []
    passes = moved / per_step
    saving = ns * (1.0 - min(FUSED_ADAM_PASSES, passes) / passes)
    if saving <= 0:
        return []
    return [Finding(
        "optimizer", about,
        f"foreach, not fused: {share}; {_top(top_ops)}; they move {moved / 1e9:.2f} GB, {passes:.1f} passes over "
        f"the parameters' {per_step / 1e6:.1f} MB (summed over steps), where a fused step makes "
        f"{FUSED_ADAM_PASSES}", saving,
        f"{which}(..., fused=True): one kernel reads and writes each parameter and state once", ns)]


def idle(c: _Ctx) -> list[Finding]:
    """The GPU waiting for the host: short gaps between launches (launch-bound) and long gaps before a line's
    work (host work or a synchronisation in between)."""
    span = sum(s.span_ns for w in c.ws for s in steps(w)[0])
    if not span:
        return []
    parts = [(w, gaps(w)) for w in c.ws]
    out = []
    short = [(w, g, (g.idle_ns < SHORT_GAP_NS) & ~g.after_sync) for w, g in parts]
    short_ns = sum(int(g.idle_ns[m].sum()) for _, g, m in short)
    n_short = sum(int(m.sum()) for _, _, m in short)
    if 100.0 * short_ns / span >= LAUNCH_IDLE_SHARE:
        n_k, tiny = total(c.ws, "kernels"), total(c.ws, "tiny_kernels")
        out.append(Finding(
            "launch_bound", f"before {_top(_by_site(c, short))}; steps {_top(_by_step(c, short))}",
            f"{n_short} gaps under {SHORT_GAP_NS / 1000:.0f} us leave the GPU idle {_ms(short_ns)} "
            f"({_p(short_ns, span)} of the profiled span); {tiny} of {n_k} kernels ran under 10 us",
            float(short_ns),
            "Launch-bound: CUDA graphs (torch.compile(mode='reduce-overhead')), torch.compile to fuse kernels, "
            "larger batches, foreach/fused optimizers", short_ns))
    rows = []
    for w, g in parts:
        long = (g.idle_ns >= SHORT_GAP_NS) & ~g.after_sync
        if not long.any():
            continue
        per_site = np.bincount(g.site[long], weights=g.idle_ns[long])
        for site in np.flatnonzero(per_site):
            ns = int(round(per_site[site]))
            if 100.0 * ns / span < GAP_IDLE_SHARE:
                continue
            mine = long & (g.site == site)
            line, op = w.site_keys[site]
            big = int(np.argmax(np.where(mine, g.idle_ns, -1)))
            wname = w.name if len(c.ws) > 1 else ""
            rows.append(Finding(
                "idle_gaps", f"{wname + ' ' if wname else ''}{op} at {c.line(line, text=True)}; steps "
                f"{_top(_by_step(c, [(w, g, mine)]))}",
                f"{int(mine.sum())} gaps of {SHORT_GAP_NS / 1000:.0f} us or more before it, {_ms(ns)} idle "
                f"({_p(ns, span)} of the profiled span), the largest {_ms(int(g.idle_ns[big]))} in "
                f"{g.labels[g.step[big]]}; its launch came {_ms(int(g.launch_late_ns[mine].sum()))} after the GPU "
                "went idle",
                float(ns),
                "The GPU waits for the host before this line: profile the CPU between the previous GPU work and it "
                "(Python work, data loading, zero_grad/optimizer overhead, synchronisations); CUDA graphs or "
                "torch.compile cut host time, a DataLoader with workers and pin_memory overlaps loading", ns))
    out += _cap(sorted(rows, key=lambda f: -f.saving_ns))
    return out


def data_loading(c: _Ctx) -> list[Finding]:
    """The GPU idle while the host loads the next batch: the DataLoader's ranges (parse's host lines) outside every
    GPU activity, within the steps."""
    out = []
    for w in c.ws:
        loads = Intervals([r for r in w.host if r.category == "dataloader"])
        sts = steps(w)[0]
        if not len(loads.lo) or not sts or not len(w.start_ns):
            continue
        t0, t1 = min(s.start_ns for s in sts), max(s.end_ns for s in sts)
        start = np.frombuffer(w.start_ns, np.int64)
        busy = Intervals.of(start, np.maximum(np.frombuffer(w.end_ns, np.int64), start))
        inside = loads.within(t0, t1)
        idle_ns = inside.minus(busy.within(t0, t1)).total()
        span = t1 - t0
        if not span or 100.0 * idle_ns / span < DATA_LOADING_SHARE:
            continue
        out.append(Finding(
            "data_loading", w.name if len(c.ws) > 1 else "the DataLoader",
            f"the host spent {_ms(inside.total())} in the DataLoader within the steps; the GPU ran nothing for "
            f"{_ms(idle_ns)} of it ({_p(idle_ns, span)} of the profiled span)", float(idle_ns),
            "Load the next batch while the GPU computes: DataLoader(num_workers>0, pin_memory=True, "
            "persistent_workers=True) and .to(device, non_blocking=True); move decoding and augmentation off the "
            "main process", idle_ns))
    return out


def syncs(c: _Ctx) -> list[Finding]:
    """Device-to-host copies that make the host wait (.item(), synchronous cudaMemcpy)."""
    sync = merged(c.ws, "syncs")
    if not sync:
        return []
    n = sum(g.count for g in sync.values())
    ns = sum(g.ns for g in sync.values())
    after = [gaps(w) for w in c.ws]
    idle_ns = sum(int(g.idle_ns[g.after_sync].sum()) for g in after)
    n_after = sum(int(g.after_sync.sum()) for g in after)
    where = sorted({f"{op} at {c.line(line, text=True)}" for op, line in sync})
    return [Finding(
        "sync_copies", _top(where),
        f"{n} device-to-host copies that block the host ({_ms(ns)}); the GPU then sat idle {_ms(idle_ns)} "
        f"in {n_after} gaps right after them, waiting for the host to launch again",
        float(idle_ns + ns),
        "Avoid .item(), .cpu(), print() and Python conditions on GPU tensors inside the loop: accumulate on "
        "the GPU and read once per N steps", idle_ns + ns)]


def host_copies(c: _Ctx) -> list[Finding]:
    """Copies between host and device (not the synchronising ones)."""
    found = _groups_over(c, "copies", COPY_SHARE)
    if found is None:
        return []
    copies, ns, n = found
    nbytes = sum(g.bytes for g in copies.values())
    by_line: dict = {}
    for (_ck, line), g in copies.items():
        by_line[line] = by_line.get(line, 0) + g.ns
    top = [c.line(k) for k, _ in sorted(by_line.items(), key=lambda kv: -kv[1])]
    return [Finding(
        "host_copies", f"lines {_top(top)}",
        f"{n} copies between host and device, {_ms(ns)} ({_p(ns, c.gpu_ns)} of GPU time), {nbytes} bytes "
        "(whether the host memory was pinned is not recorded)", float(ns),
        "Pinned memory (DataLoader(pin_memory=True), tensor.pin_memory()) and .to(device, non_blocking=True) "
        "so copies overlap compute; keep data on the GPU across steps", ns)]


def low_occupancy(c: _Ctx) -> list[Finding]:
    """Kernels (not on Tensor Cores) with low estimated occupancy."""
    # Tensor Core GEMM/conv kernels are built to run one large block per SM (their latency is hidden by
    # asynchronous copies, not by warps): low occupancy is their design, not a problem. Left out.
    low = [(k, g, 100.0 * g.occ_x_ns / g.occ_ns) for k, g in merged(c.ws, "kernels").items()
           if g.occ_ns and not g.tc_ns and 100.0 * g.occ_x_ns / g.occ_ns < LOW_OCCUPANCY]
    low_ns = sum(g.ns for _, g, _ in low)
    if not c.kernel_ns or 100.0 * low_ns / c.kernel_ns < LOW_OCC_SHARE:
        return []
    low.sort(key=lambda x: -x[1].ns)
    saving = sum(at_target(g.ns, g.ideal_ns) for _, g, _ in low if g.roof_ns)
    return [Finding(
        "low_occupancy", f"kernels {_top([f'{k} ({o:.0f}%)' for k, _, o in low])}",
        f"{_p(low_ns, c.kernel_ns)} of kernel time in kernels (not on Tensor Cores) with estimated occupancy "
        f"under {LOW_OCCUPANCY:.0f}%", saving,
        "Grids smaller than the GPU or too many registers/shared memory per block: larger batches, fused ops, "
        "or another kernel configuration", low_ns)]


RULES = (tensor_cores, fp32_matmul, channels_last, hotspots, memory_bound, optimizer, idle, data_loading, syncs,
         host_copies, low_occupancy)


def _groups_over(c: _Ctx, attr: str, share_pct: float) -> tuple[dict, int, int] | None:
    """The workers' groups named ``attr`` merged, their GPU time and activities, when that time is at least
    ``share_pct`` % of GPU time; else None."""
    groups = merged(c.ws, attr)
    ns = sum(g.ns for g in groups.values())
    if not ns or 100.0 * ns / c.gpu_ns < share_pct:
        return None
    return groups, ns, sum(g.count for g in groups.values())


def _cap(found: list[Finding]) -> list[Finding]:
    return sorted(found, key=lambda f: -f.saving_ns)[:MAX_ROWS_PER_RULE]


def _by_site(c: _Ctx, parts: list) -> list[str]:
    """``op at line (x ms)`` for the sites ending the most idle time of the gaps chosen by each (worker, Gaps,
    mask) of ``parts``, most first."""
    acc: dict = {}
    for w, g, m in parts:
        per_site = np.bincount(g.site[m], weights=g.idle_ns[m]) if m.any() else np.empty(0)
        for site in np.flatnonzero(per_site):
            line, op = w.site_keys[site]
            acc[(op, line)] = acc.get((op, line), 0) + int(round(per_site[site]))
    return [f"{op} at {c.line(line)} ({_ms(ns)})" for (op, line), ns in sorted(acc.items(), key=lambda kv: -kv[1])]


def _by_step(c: _Ctx, parts: list) -> list[str]:
    """``STEP (x ms)`` (``WORKER STEP`` with several workers) for the steps holding the most idle time of the
    gaps chosen by each (worker, Gaps, mask) of ``parts``."""
    acc: dict = {}
    for w, g, m in parts:
        per_step = np.bincount(g.step[m], weights=g.idle_ns[m]) if m.any() else np.empty(0)
        for step in np.flatnonzero(per_step):
            key = f"{w.name} {g.labels[step]}" if len(c.ws) > 1 else g.labels[step]
            acc[key] = acc.get(key, 0) + int(round(per_step[step]))
    return [f"{s} ({_ms(ns)})" for s, ns in sorted(acc.items(), key=lambda kv: -kv[1])]

