"""The recommendations' rules about what the host makes the GPU do or wait for: the optimizer step, idle gaps
(launch overhead, host work, data loading), synchronising copies, copies between host and device. Each checks
the evidence it rests on (timestamps, launch times, shapes, the optimizer's class) before it speaks."""
from __future__ import annotations

import numpy as np

from pyprof.prof.host_time import Intervals
from pyprof.prof.steps import steps
from pyprof.prof.views.helpers import merged, total
from pyprof.prof.views.findings import (ADAM_CLASSES, COPY_SHARE, DATA_LOADING_SHARE, FUSED_ADAM_PASSES,
                                        GAP_IDLE_SHARE, LAUNCH_IDLE_SHARE, NO_SHAPES, OPT_LOOP_SHARE, OPT_SHARE,
                                        Ctx, Finding, at_target, cap_rows, fmt_ms, groups_over, share, top)
from pyprof.prof.views.gaps import gaps
from pyprof.prof.views.idle import SHORT_GAP_NS  # launch overhead below, host work above


def optimizer(c: Ctx) -> list[Finding]:
    """Optimizer steps: foreach (not fused) or per-parameter loops."""
    opt = merged(c.ws, "optimizer")
    ns = sum(g.ns for g in opt.values())
    if not ns or 100.0 * ns / c.gpu_ns < OPT_SHARE or any(op.startswith("_fused_") for op in opt):
        return []
    n = sum(g.count for g in opt.values())
    ideal = sum(g.ideal_ns for g in opt.values())
    roof_ns = sum(g.roof_ns for g in opt.values())
    moved = sum(g.bytes for g in opt.values())
    multi = sum(g.count for op, g in opt.items() if op.startswith("_foreach_"))
    names = sorted({r.split("#", 1)[1].split(".")[0] for w in c.ws for r in w.opt_ranges if "#" in r})
    which = "/".join(names) or "optimizer"
    lines = {line for w in c.ws for (line, op) in w.line_ops if op in opt}
    top_ops = [f"{op} x{g.count}" for op, g in sorted(opt.items(), key=lambda kv: -kv[1].ns)]
    about = f"{which} step at {top(sorted(c.line(x, text=True) for x in lines))}"
    known = f" at {share(ideal, roof_ns)} of their roofline" if roof_ns else "; no roofline known for them"
    what = f"{n} kernels, {fmt_ms(ns)} ({share(ns, c.gpu_ns)} of GPU time){known}"
    if 100.0 * (n - multi) / n >= OPT_LOOP_SHARE:
        return [Finding(
            "optimizer", about, f"per-parameter loop: {what}; {n - multi} kernels outside foreach ops "
            f"({top(top_ops)})" + ("" if roof_ns else "; saving not estimated"),
            at_target(roof_ns, ideal) if roof_ns else None,
            f"{which}(..., foreach=True) or fused=True: one kernel per op (or one in all) for every parameter "
            "instead of one per parameter", ns)]
    subject = f"what fused=True would save on the {which} step ({fmt_ms(ns)})"
    per_step = sum(b for w in c.ws for b in w.opt_list_bytes.values())
    if not per_step or not moved:
        c.cannot("optimizer", subject, NO_SHAPES)
        return []
    if not set(names) & ADAM_CLASSES or set(names) - ADAM_CLASSES:
        c.cannot("optimizer", subject, f"its basis ({FUSED_ADAM_PASSES} passes over the parameters) is Adam(W)'s, "
                 "and the step is " + (f"{which}'s" if names else "of no recorded class (no Optimizer.step range)"))
        return []
    passes = moved / per_step
    saving = ns * (1.0 - min(FUSED_ADAM_PASSES, passes) / passes)
    if saving <= 0:
        return []
    return [Finding(
        "optimizer", about,
        f"foreach, not fused: {what}; {top(top_ops)}; they move {moved / 1e9:.2f} GB, {passes:.1f} passes over "
        f"the parameters' {per_step / 1e6:.1f} MB (summed over steps), where a fused step makes "
        f"{FUSED_ADAM_PASSES}", saving,
        f"{which}(..., fused=True): one kernel reads and writes each parameter and state once", ns)]


#: The actions where the steps are forwards of an inference loop (Ctx.inference): a decode forward runs small
#: kernels for one token per sequence, so its time is the host's launches and the loop's work between forwards.
_LAUNCH_BOUND_INFERENCE = ("Launch-bound decoding: run the decode step as a CUDA graph (generate(..., "
                           "cache_implementation='static') compiles it so; torch.compile(mode='reduce-overhead') "
                           "for a loop of your own), and batch more sequences per forward")
_IDLE_INFERENCE = ("The GPU waits for the host before this line: between forwards that is sampling and the loop's "
                   "bookkeeping (a stopping check that reads a GPU value is a synchronisation every token); keep "
                   "sampling on the GPU, check for the end every few tokens, run the decode step as a CUDA graph, "
                   "batch more sequences")


#: Where this share of kernel time is replayed from CUDA graphs already, the actions do not advise them.
GRAPHED_SHARE = 0.5


def _launch_action(c: Ctx) -> str:
    """What to do about launch-bound steps: for the loop the records show (training or not, graphs or not)."""
    if c.inference:
        return _LAUNCH_BOUND_INFERENCE
    graphs = c.graph_share >= GRAPHED_SHARE
    parts = ["Launch-bound: " + ("the work outside the CUDA graphs the step replays already is launched one kernel "
                                 "at a time: capture it too, or torch.compile to fuse it" if graphs else
                                 "CUDA graphs (torch.compile(mode='reduce-overhead')), torch.compile to fuse kernels"),
             "larger batches"]
    if c.training:
        parts.append("foreach/fused optimizers")
    return ", ".join(parts)


def _idle_action(c: Ctx) -> str:
    """What to do about long gaps the host left: the host work the records make possible, and the remedies that
    apply (no zero_grad or DataLoader without training, no CUDA graphs where the step replays them)."""
    if c.inference:
        return _IDLE_INFERENCE
    work = "Python work, data loading, zero_grad/optimizer overhead, synchronisations" if c.training else \
        "Python work, preparing inputs, synchronisations"
    cures = ["torch.compile cuts host time" if c.graph_share >= GRAPHED_SHARE else
             "CUDA graphs or torch.compile cut host time"]
    if c.training:
        cures.append("a DataLoader with workers and pin_memory overlaps loading")
    return f"The GPU waits for the host before this line: profile the CPU between the previous GPU work and it " \
           f"({work}); {', '.join(cures)}"


def idle(c: Ctx) -> list[Finding]:
    """The GPU waiting for the host: short gaps that end with work launched after the GPU went idle
    (launch-bound: computed from the launch times, so it needs them) and long gaps before a line's work."""
    span = c.span_ns
    if not span:
        if c.gpu_ns:
            for rule in ("launch_bound", "idle_gaps"):
                c.cannot(rule, "idle time", "the records carry no start times")
        return []
    parts = [(w, gaps(w)) for w in c.ws]
    launches = {id(w): c.has_launches(w) for w, _ in parts}
    out = []
    short = [(w, g, (g.idle_ns < SHORT_GAP_NS) & ~g.after_sync & g.host_waited) for w, g in parts
             if launches[id(w)]]
    if len(short) < len(parts):
        for rule in ("launch_bound", "idle_gaps"):
            c.cannot(rule, "what the GPU waited for", "the records carry no launch (CUDA API) times, so whether "
                     "the GPU waited for a launch cannot be told")
    trace_ns = sum(int(g.idle_ns[m].sum()) for _, g, m in short)
    # the program's idle: the capture's scaled by each worker's measured step (Ctx.program_idle)
    short_ns = sum(c.program_idle(w, int(g.idle_ns[m].sum())) for w, g, m in short)
    n_short = sum(int(m.sum()) for _, _, m in short)
    if 100.0 * short_ns / span >= LAUNCH_IDLE_SHARE:
        n_k, tiny = total(c.ws, "kernels"), total(c.ws, "tiny_kernels")
        c.idle_said("launch_bound")
        out.append(Finding(
            "launch_bound", f"before {top(_by_site(c, short))}; steps {top(_by_step(c, short))}",
            f"{n_short} gaps under {SHORT_GAP_NS / 1000:.0f} us, each ended by work launched after the GPU went "
            f"idle, leave it idle {_idle_words(c, trace_ns, short_ns)}; {tiny} of {n_k} kernels ran under 10 us",
            short_ns, _launch_action(c), short_ns))
    rows = []
    for w, g in parts:
        if not launches[id(w)]:
            continue  # whether the GPU waited for the host cannot be told: said once below
        # only gaps that ended with work launched after the GPU went idle: the GPU waited for the host. A gap
        # ended by work already queued waited for something else (a stream's event, another stream, a peer).
        long = (g.idle_ns >= SHORT_GAP_NS) & ~g.after_sync & g.host_waited
        if not long.any():
            continue
        per_site = np.bincount(g.site[long], weights=g.idle_ns[long])
        for site in np.flatnonzero(per_site):
            trace_ns = int(round(per_site[site]))
            ns = c.program_idle(w, trace_ns)
            if 100.0 * ns / span < GAP_IDLE_SHARE:
                continue
            mine = long & (g.site == site)
            line, op = w.site_keys[site]
            big = int(np.argmax(np.where(mine, g.idle_ns, -1)))
            wname = w.name if len(c.ws) > 1 else ""
            late = f"; its launches came {fmt_ms(int(g.launch_late_ns[mine].sum()))} in all after the GPU went idle"
            rows.append(Finding(
                "idle_gaps", f"{wname + ' ' if wname else ''}{op} at {c.line(line, text=True)}; steps "
                f"{top(_by_step(c, [(w, g, mine)]))}",
                f"{int(mine.sum())} gaps of {SHORT_GAP_NS / 1000:.0f} us or more before it, idle "
                f"{_idle_words(c, trace_ns, ns)}, the largest {fmt_ms(int(g.idle_ns[big]))} in "
                f"{g.labels[g.step[big]]}{late}",
                ns, _idle_action(c), ns))
    if rows:
        c.idle_said("idle_gaps")
    out += cap_rows(rows)
    return out


def _idle_words(c: Ctx, trace_ns: float, program_ns: float) -> str:
    """Idle time in the evidence: the capture's, a share of the profiled span, and where a program step was
    measured (Ctx.programs) the program's, a share of its own steps."""
    said = f"{fmt_ms(trace_ns)} ({share(trace_ns, c.trace_span_ns)} of the profiled span)"
    if not any(c.programs.values()):
        return said
    return f"{said} in the capture, {fmt_ms(program_ns)} without it ({share(program_ns, c.span_ns)} of the " \
           "program's own steps)"


def data_loading(c: Ctx) -> list[Finding]:
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
        trace_ns = inside.minus(busy.within(t0, t1)).total()
        idle_ns = c.program_idle(w, trace_ns)
        span = c.worker_span_ns(w)
        if not span or 100.0 * idle_ns / span < DATA_LOADING_SHARE:
            continue
        c.idle_said("data_loading")
        said = f"{fmt_ms(trace_ns)} of it ({share(trace_ns, t1 - t0)} of the profiled span)"
        if c.programs[id(w)] is not None:
            said += f", {fmt_ms(idle_ns)} without the capture ({share(idle_ns, span)} of the program's own steps)"
        out.append(Finding(
            "data_loading", w.name if len(c.ws) > 1 else "the DataLoader",
            f"the host spent {fmt_ms(inside.total())} in the DataLoader within the steps (in the capture); the GPU "
            f"ran nothing for {said}", idle_ns,
            "Load the next batch while the GPU computes: DataLoader(num_workers>0, pin_memory=True, "
            "persistent_workers=True) and .to(device, non_blocking=True); move decoding and augmentation off the "
            "main process", idle_ns))
    return out


def syncs(c: Ctx) -> list[Finding]:
    """Device-to-host copies that make the host wait (.item(), synchronous cudaMemcpy)."""
    sync = merged(c.ws, "syncs")
    if not sync:
        return []
    if not c.span_ns:
        c.cannot("sync_copies", "the idle time after synchronising copies", "the records carry no start times")
        return []
    n = sum(g.count for g in sync.values())
    ns = sum(g.ns for g in sync.values())
    # A gap right after a copy that blocked the host: the host could launch nothing before the copy returned. Where
    # launch times are recorded, only gaps whose work came after the GPU went idle count (not work already queued).
    after = [(w, g, g.after_sync & g.host_waited if c.has_launches(w) else g.after_sync)
             for w, g in ((w, gaps(w)) for w in c.ws)]
    trace_ns = sum(int(g.idle_ns[m].sum()) for _, g, m in after)
    idle_ns = sum(c.program_idle(w, int(g.idle_ns[m].sum())) for w, g, m in after)
    n_after = sum(int(m.sum()) for _, _, m in after)
    where = sorted({f"{op} at {c.line(line, text=True)}" for op, line in sync})
    if n_after:
        c.idle_said("sync_copies")
    return [Finding(
        "sync_copies", top(where),
        f"{n} device-to-host copies that block the host ({fmt_ms(ns)}); " + (
            f"the GPU then sat idle {_idle_words(c, trace_ns, idle_ns)} in {n_after} gaps right after them, "
            "waiting for the host to launch again" if n_after else
            "the GPU did not wait after them (its next work was already queued)"),
        float(idle_ns + ns),
        "Avoid .item(), .cpu(), print() and Python conditions on GPU tensors inside the loop: accumulate on "
        "the GPU and read once per N steps", idle_ns + ns)]


def host_copies(c: Ctx) -> list[Finding]:
    """Copies between host and device (not the synchronising ones)."""
    found = groups_over(c, "copies", COPY_SHARE)
    if found is None:
        return []
    copies, ns, n = found
    nbytes = sum(g.bytes for g in copies.values())
    by_line: dict = {}
    for (_ck, line), g in copies.items():
        by_line[line] = by_line.get(line, 0) + g.ns
    tops = [c.line(k) for k, _ in sorted(by_line.items(), key=lambda kv: -kv[1])]
    return [Finding(
        "host_copies", f"lines {top(tops)}",
        f"{n} copies between host and device, {fmt_ms(ns)} ({share(ns, c.gpu_ns)} of GPU time), {nbytes} bytes "
        "(whether the host memory was pinned is not recorded)", float(ns),
        "Pinned memory (DataLoader(pin_memory=True), tensor.pin_memory()) and .to(device, non_blocking=True) "
        "so copies overlap compute; keep data on the GPU across steps", ns)]


def _by_site(c: Ctx, parts: list) -> list[str]:
    """``op at line (x ms)`` for the sites ending the most idle time of the gaps chosen by each (worker, Gaps,
    mask) of ``parts``, most first."""
    acc: dict = {}
    for w, g, m in parts:
        per_site = np.bincount(g.site[m], weights=g.idle_ns[m]) if m.any() else np.empty(0)
        for site in np.flatnonzero(per_site):
            line, op = w.site_keys[site]
            acc[(op, line)] = acc.get((op, line), 0) + int(round(per_site[site]))
    return [f"{op} at {c.line(line)} ({fmt_ms(ns)})" for (op, line), ns in sorted(acc.items(), key=lambda kv: -kv[1])]


def _by_step(c: Ctx, parts: list) -> list[str]:
    """``STEP (x ms)`` (``WORKER STEP`` with several workers) for the steps holding the most idle time of the
    gaps chosen by each (worker, Gaps, mask) of ``parts``."""
    acc: dict = {}
    for w, g, m in parts:
        per_step = np.bincount(g.step[m], weights=g.idle_ns[m]) if m.any() else np.empty(0)
        for step in np.flatnonzero(per_step):
            key = f"{w.name} {g.labels[step]}" if len(c.ws) > 1 else g.labels[step]
            acc[key] = acc.get(key, 0) + int(round(per_step[step]))
    return [f"{s} ({fmt_ms(ns)})" for s, ns in sorted(acc.items(), key=lambda kv: -kv[1])]
