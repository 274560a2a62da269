"""The overview: per step, where the GPU's wall time went (kernel, memcpy, memset, idle; overlapping time
charged once in that order, as the PyTorch profiler's TensorBoard plugin did), GPU utilisation, estimated SM
efficiency and estimated achieved occupancy. Steps are windows that partition each worker's GPU timeline
(pyprof.prof.steps)."""
from __future__ import annotations

import numpy as np

from pyprof.prof.aggregate import Aggregate
from pyprof.prof.forwards import forwards
from pyprof.prof.inflation import program_step
from pyprof.prof.tables import Table
from pyprof.prof.steps import Step, assign, busy_pct, no_process, span_window, steps
from pyprof.prof.load.window import window_of
from pyprof.prof.views.view_registry import view
from pyprof.prof.views.helpers import ms
from pyprof.record import launched_no_gpu

COLUMNS = [("step", "Step"), ("span_ms", "Span (ms)"), ("kernel_ms", "Kernel (ms)"), ("memcpy_ms", "Memcpy (ms)"),
           ("memset_ms", "Memset (ms)"), ("idle_ms", "Idle (ms)"), ("gpu_util_pct", "GPU util %"),
           ("sm_efficiency_pct", "Est. SM eff. %"), ("occupancy_pct", "Est. occupancy %"), ("kernels", "Kernels"),
           ("kernel_sum_ms", "Kernel sum (ms)")]


def step_row(st: Step) -> list:
    """One step's values in COLUMNS order (without the worker column)."""
    return _row(st.label, [st])


def _row(label: str, sts: list[Step]) -> list:
    """The row of one step, or the mean row of a worker's steps. Means of times and counts over the steps;
    the percentages are ratios of the sums (over a worker's steps: its whole profiled span, since the windows
    partition it), never means of the steps' percentages."""
    n = len(sts)
    span = sum(s.span_ns for s in sts)
    busy = sum(s.busy_ns for s in sts)
    sm = None if any(s.sm_busy_ns is None for s in sts) else sum(s.sm_busy_ns for s in sts)
    occ_known = sum(s.occ_known_ns for s in sts)
    sm_known = sum(s.sm_known_ns for s in sts)
    kernel_ns = sum(s.kernel_ns for s in sts)
    kernel_sum = sum(s.kernel_sum_ns for s in sts)
    if not _judged(sm_known, kernel_sum):
        sm = None  # the kernels without a grid would count as idle SMs
    elif sm is not None and sm_known < kernel_sum:
        sm *= kernel_sum / sm_known  # the few kernels without a grid as full as the others
    # SM time is kernel time x the share of SMs a grid fills: never more than the time a kernel ran (concurrent
    # kernels each count their own, and may add up beyond it)
    sm_eff = None if sm is None or not span else round(100.0 * min(sm, kernel_ns) / span, 2)
    occ = round(100.0 * sum(s.occ_x_ns for s in sts) / occ_known, 2) if _judged(occ_known, kernel_sum) else None
    kernels = sum(s.kernels for s in sts)
    return [label, ms(span / n), ms(kernel_ns / n), ms(sum(s.memcpy_ns for s in sts) / n),
            ms(sum(s.memset_ns for s in sts) / n), ms(sum(s.idle_ns for s in sts) / n), busy_pct(busy, span), sm_eff,
            occ, kernels if n == 1 else round(kernels / n, 4), ms(sum(s.kernel_sum_ns for s in sts) / n)]


#: A first step whose CPU range began this long before the GPU's first activity (a share of that range, and at
#: least LATE_GPU_MIN_NS) is said: the host worked that long with the GPU idle, before any step's window.
LATE_GPU_SHARE = 0.2
LATE_GPU_MIN_NS = 1_000_000


def _late_gpu_note(w, many: bool) -> str | None:
    """The first step, where its CPU range (the input's step ranges on the host) began well before the worker's
    first GPU activity: the windows start there, so that stretch, the GPU idle, is in no step's span and no idle
    figure. Measured from the host lines, the activities' starts and their launches; None otherwise."""
    cpu = {name: (int(lo), int(hi)) for r in w.host if r.category == "step" and r.names
           for name, lo, hi in zip(r.names, r.start_ns, r.end_ns)}
    sts, source = steps(w)
    if not cpu or not sts or sts[0].label not in cpu or span_window(w, source) is not None:
        return None  # (a capture's window widens the span: the time before the GPU's first work is in it)
    t0, t1 = cpu[sts[0].label]
    lead = sts[0].start_ns - t0
    if lead < LATE_GPU_MIN_NS or lead < LATE_GPU_SHARE * (t1 - t0):
        return None
    _labels, which, _source = assign(w)
    launch = np.frombuffer(w.launch_ns, np.int64)[which == 0]
    first = f"; its first launch came {ms(max(int(launch.min()) - t0, 0))} ms in" if len(launch) else ""
    who = f"{w.name}: " if many else ""
    return (f"{who}{sts[0].label} began on the CPU {ms(lead)} ms before the GPU ran anything (its CPU range "
            f"{ms(t1 - t0)} ms{first}). The steps' windows start at the GPU's first activity, so that time, the "
            "GPU idle, is in no step's span and no idle figure; the host view splits the step's CPU time.")


def _unknown_grids(name: str | None, sts: list[Step]) -> list[str]:
    """Why the SM efficiency (and occupancy) is na for a worker, where too much kernel time has no grid."""
    kernel_sum = sum(s.kernel_sum_ns for s in sts)
    sm_known = sum(s.sm_known_ns for s in sts)
    if not kernel_sum or _judged(sm_known, kernel_sum):
        return []
    return [f"{name + ': ' if name else ''}Est. SM eff. % and Est. occupancy % are na: "
            f"{100.0 * (1 - sm_known / kernel_sum):.1f}% of kernel time ran in kernels whose grid the input does "
            "not record (a PyTorch-profiler trace records none for kernels replayed from a CUDA graph), and "
            "counting them as idle SMs would be a guess."]


#: The share of kernel time whose grid (and for occupancy, registers and shared memory) a figure needs known:
#: below it the kernels that lack them (a Kineto trace's replayed graph kernels carry no grid) decide the figure.
KNOWN_SHARE_MIN = 0.95


def _judged(known_ns: float, kernel_sum_ns: float) -> bool:
    return kernel_sum_ns > 0 and known_ns >= KNOWN_SHARE_MIN * kernel_sum_ns


@view("overview")
def overview(agg: Aggregate, worker: str | None = None) -> Table:
    """Per step (and per worker when there are several): span, kernel/memcpy/memset/idle time, GPU
    utilisation, estimated SM efficiency and occupancy; after each worker's steps, its mean row when it has
    several steps."""
    workers = agg.select(worker)
    many = len(workers) > 1
    cols = ([("worker", "Worker")] if many else []) + COLUMNS
    table = Table.of("overview", "Overview: GPU time per step", cols,
                     chart={"type": "stacked", "label": "step", "values": ["kernel_ms", "memcpy_ms", "memset_ms",
                                                                           "idle_ms"]})
    sources = set()
    n_steps = 0
    for w in workers:
        sts, source = steps(w)
        if not sts:
            continue
        sources.add(source)
        n_steps += len(sts)
        head = [w.name] if many else []
        fw = forwards(w)
        table.rows += [head + (step_row(st) if fw is None or st.label not in fw.kinds else
                               _row(f"{st.label} {fw.kinds[st.label]} ({fw.tokens[st.label]} tokens)", [st]))
                       for st in sts]
        if len(sts) > 1:
            table.rows.append(head + _row("mean", sts))
        table.notes += _unknown_grids(w.name if many else None, sts)
    launched = sum(win.launches for w in workers if not w.totals["records"] and (win := window_of(w.window)))
    if not sum(w.totals["records"] for w in workers):
        table.empty = (
            f"{launched_no_gpu(launched)} (no kernel, copy or memset in the input), so no steps." if launched else
            "No GPU activity in the records: no kernels, copies or memsets (pyprof parse writes its header and end "
            "lines alone for such a profile), so no steps.")
    elif launched:
        idle = [w.name for w in workers if not w.totals["records"] and window_of(w.window)
                and window_of(w.window).launches]
        table.notes.append(f"{', '.join(idle)}: {launched_no_gpu(launched)} for that process.")
    elif n_steps:
        marked = sorted({w.step_marker for w in workers if w.step_marker is not None})
        found = sorted(f"the ranges --step-marker {', '.join(map(repr, marked))} names" if s == "step marker" else s
                       for s in sources)
        table.notes += [
            f"Steps found from: {', '.join(found)}. A step's span is its window on the GPU's timeline: "
            "from where the GPU began the step's work (its earliest activity, the first step from the worker's "
            "first GPU activity) to where the next step's began (the last step to the worker's last GPU end). "
            "The windows partition the profiled span, so the spans add up to it even when the CPU runs ahead "
            "of the GPU.",
            *_untimed_marker_notes(workers, many),
            "Everything the GPU ran inside a window, clipped to it, is the step's, whoever launched it. "
            "Overlapping GPU time is charged once, in the order kernel > memcpy > memset; idle = span - busy; "
            "GPU util % = busy / span. Kernels: those that started in the window; Kernel sum: their durations "
            "clipped to the window.",
            "Est. SM eff. % = sum over kernels of clipped duration x min(1, blocks / SM count) / span (capped "
            "at 100). Est. occupancy % = clipped-duration-weighted mean over kernels of min(blocks an SM can "
            "hold, blocks per SM) x warps per block / max warps per SM, from grid, block, registers, shared "
            "memory and the GPU's limits; na where the export lacks them.",
            "CUDA runtime, data loading and CPU execution time (the TensorBoard plugin's other categories) are the "
            "host's side of a step: the host view splits each step's CPU time into them.",
        ]
    if any(len(steps(w)[0]) > 1 for w in workers):
        table.notes.append("A mean row follows each worker's steps: times and counts are the mean per step, the "
                           "percentages are over the worker's whole profiled span (ratios of the sums). Workers "
                           "are never averaged together: each has its own GPU timeline (compare them in the "
                           "workers view).")
    table.notes += [_window_note(w, many) for w in workers if steps(w)[0] and window_of(w.window) is not None]
    table.notes += [note for w in workers if (note := _late_gpu_note(w, many))]
    table.notes += [note for w in workers if (note := _program_note(w, many))]
    table.notes += [note for w in workers if (note := _forwards_note(w, many))]
    table.notes += [_join_note(name, run, len(agg.inputs) > 1) for name, run in agg.joins.items()
                    if worker is None or len(agg.inputs) == 1 or any(w.name == name or w.name.startswith(name + ":")
                                                                     for w in workers)]
    lost = [w.name for w in workers if no_process(w) and steps(w)[0]]
    if lost:
        table.notes.append(f"Worker {', '.join(lost)}: activities with no process, because the export has no "
                           "launch call for them (launched before the capture began, as when the CPU runs ahead "
                           "of the GPU, or by a thread the profiler did not trace). Their GPU time is not on "
                           "the timeline of the process that launched them.")
    untimed = sum(w.untimed for w in workers)
    if untimed:
        table.notes.append(f"{untimed} activities have no start/end times (original PyProf dict lines): they are "
                           "in the other views but not in the steps.")
    return table


def _program_note(w, many: bool) -> str | None:
    """The program's own step beside the captured one, and the program's GPU idle per step that follows (None
    without a program line: pyprof.prof.inflation)."""
    p = program_step(w)
    if p is None:
        return None
    whose = f"{w.name}: " if many else ""
    captured = "their median, timed the same way" if p.captured_from == "the same timing" else "the mean span above"
    u = p.unit
    return (f"{whose}Program {u} {ms(p.unprofiled_ns)} ms unprofiled (median of {p.unprofiled_steps} {u}s run with "
            f"nothing of the capture on; {p.how}), captured {ms(p.captured_ns)} ms ({captured}): the capture inflated "
            f"the {u} {p.inflation:.2f}x. The GPU's busy time per captured {u} is {ms(p.busy_ns)} ms (kernel time "
            f"barely moves under a capture), so the program's GPU idle per {u} is {ms(p.unprofiled_ns)} - "
            f"{ms(p.busy_ns)} = {ms(p.program_idle_ns)} ms, where the capture shows {ms(p.trace_idle_ns)} ms.")


def _forwards_note(w, many: bool) -> str | None:
    """What the forward steps were (pyprof.prof.forwards): prefill and decode, and the time per output token."""
    fw = forwards(w)
    if fw is None:
        return None
    whose = f"{w.name}: " if many else ""
    head = (f"{whose}Each step is one forward of the model (each outermost module call: pyprof.forward_steps, "
            "pyprof run --forward-steps).")
    if not fw.kinds:
        return head + (f" Every captured forward's embedding lookup read {fw.decode_tokens} tokens: all of one kind, so "
                       "none is told apart as a prefill or a decode (a window holding a generate() call's first "
                       "forward shows both)." if fw.decode_tokens else
                       " No forward has an embedding lookup with its input's shape: prefill and decode cannot be "
                       "told apart.")
    text = (f"{head} By the tokens their embedding lookup read: {fw.prefills} prefill, {fw.decodes} decode "
            f"({fw.decode_tokens} tokens each: one per sequence).")
    if fw.decode_span_ns is not None:
        text += f" A decode forward's captured span: median {ms(fw.decode_span_ns)} ms."
    p = program_step(w)
    if p is not None and p.unit == "forward":
        text += (f" Time per output token, the program's own: {ms(p.unprofiled_ns)} ms (its forward, unprofiled, "
                 f"above: decode forwards are most of them, so the median is a decode's).")
    return text


def _join_note(name: str, run, many: bool) -> str:
    """Where an input's times come from when parse joined a timing pass to it (its join line,
    pyprof.prof.load.joined): only what the line counts."""
    whose = f"{name}: " if many else ""
    steps = f"{run.steps} ProfilerStep ranges" if run.steps_by == "ProfilerStep" else "the whole window"
    return (f"{whose}Times from a timing pass ({run.timing}, {run.timing_format}): {run.matched} of its "
            f"{run.timing_records} activities paired with {run.attribution}'s records ({run.attribution_format}) by "
            f"kernel {run.names_by}, steps by {steps}; {_unpaired(run.timing_unmatched_ns, run.timing_ns)} of its GPU "
            f"time has no attribution{_names(run.timing_unmatched_names)}, {run.attribution_unmatched} attribution "
            f"records left out ({_unpaired(run.attribution_unmatched_ns, run.attribution_ns)} of their GPU time"
            f"{_names(run.attribution_unmatched_names, ': ')}).")


def _untimed_marker_notes(workers: list, many: bool) -> list[str]:
    """Activities under a --step-marker range whose push time the records lack, said per worker."""
    return [f"{w.name + ': ' if many else ''}{w.marker_untimed} activities ran under a range --step-marker names "
            "whose push time the records lack (records of a pyprof before range times, or a replayed graph node's "
            "range, pushed at its capture): they are placed as unmarked work is (by launch time where their thread "
            "marked no step, else in no step)." for w in workers if w.marker_untimed]


def _unpaired(ns: int, total_ns: int) -> str:
    share = 100.0 * ns / total_ns if total_ns else 0.0
    return "<0.1%" if ns and share < 0.1 else f"{share:.1f}%"


def _names(named: tuple, lead: str = " (") -> str:
    text = ", ".join(f"{n} x{c}" for n, c in named)
    return "" if not text else f"{lead}{text}" + (")" if lead == " (" else "")


#: What each window source is, in words (record.WINDOW_SOURCES).
_SOURCE_WORDS = {"capture": "the capture's duration as the nsys export states it (ANALYSIS_DETAILS)",
                 "session to last API call": "from the nsys session's start to its last CUDA API call",
                 "API calls": "from the first to the last CUDA API call",
                 "trace": "the trace's first to last event"}


def _window_note(w, many: bool) -> str:
    """How much of its profiled window the worker's GPU ran, and whether the window is its span."""
    win = window_of(w.window)
    sts, source = steps(w)
    busy = sum(s.busy_ns for s in sts)
    whose = f"{w.name}: " if many else ""
    length = max(win.end_ns, max(s.end_ns for s in sts)) - min(win.start_ns, sts[0].start_ns)
    said = f"{ms(length)} ms, {_SOURCE_WORDS.get(win.source, win.source)}"
    ran = f"the GPU ran {ms(busy)} ms of it (busy {busy_pct(busy, length)}%)"
    if span_window(w, source) is not None:
        return f"{whose}Profiled window: {said}; {ran}. With no step marker it is the span of the step 'all'."
    why = ("steps mark the spans" if source != "whole capture" else
           "the span is the GPU's own, first to last GPU activity, as Holistic Trace Analysis measures idle time")
    return f"{whose}Profiled window: {said}; {ran}. {why[0].upper() + why[1:]}."
