"""Steps of a worker as a partition of its GPU timeline, and each step's GPU time breakdown (the overview's
numbers; docs/views.md).

The worker's profiled span runs from its first GPU activity start to its last GPU activity end; without a step
marker, the profiled window of its input (parse's window line: an nsys capture's bounds, an nvprof export's first
to last CUDA API call) widens it, so that a capture of 880 ms whose GPU ran one 1.5 us memset is 880 ms long, not
1.5 us. A PyTorch profiler trace keeps its GPU span (``span_window``).

Which step launched an activity: the step ranges (``ProfilerStep#N``, else user ranges named like a step or
iteration, else the whole capture as one step) enclose the launches of the threads that opened them. Activities
launched by other threads (autograd's backward thread) carry no step range: they belong to the step whose launch
window holds their launch time, the window of step N running from its first launch to the first launch of the
next step (the last one is open-ended). Activities of a step thread outside every step range belong to no step.

Where a step sits on the GPU: its window starts where the GPU began the step's work (the earliest start among
the activities it launched, never before the previous window's start), the first window at the span start, and
each window ends where the next begins, the last at the span end. The windows partition the span. When the CPU
runs ahead of the GPU (a GPU-bound loop) a step's kernels still run while the next steps are being launched:
"first launch to last GPU end" would make steps overlap and count the queue's wait as idle time.

Everything the GPU ran inside a window, clipped to it, is the step's: its busy time whoever launched it, its
kernels (by start), and its share of each kernel's duration and estimates. Overlap is charged once in the order
kernel > memcpy > memset. The arithmetic is numpy over the worker's flat arrays: one sort of the intervals, no
Python object per activity.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pyprof.prof.aggregate import KERNEL, MEMCPY, WorkerData
from pyprof.prof.step_marker import NO_STEP
from pyprof.prof.load.window import WindowRun, window_of


@dataclass(frozen=True)
class Step:
    """One step's GPU window and what ran in it; times in ns, overlap charged once (kernel > memcpy > memset)."""

    label: str
    start_ns: int  # where the window starts on the GPU's clock
    end_ns: int  # where the next step's window starts (the span end for the last step)
    kernels: int = 0  # kernels that started in the window
    kernel_sum_ns: int = 0  # kernel durations clipped to the window, summed (overlapping kernels counted twice)
    kernel_ns: int = 0  # time at least one kernel ran
    memcpy_ns: int = 0  # time a copy ran and no kernel
    memset_ns: int = 0  # time a memset ran and neither a kernel nor a copy
    sm_busy_ns: float | None = None  # sum of clipped duration x min(1, blocks / SMs); None when unknown
    sm_known_ns: int = 0  # clipped duration of the kernels whose grid (so SM share) is known
    occ_x_ns: float = 0.0  # sum of clipped duration x estimated occupancy, over kernels where it is known
    occ_known_ns: int = 0  # clipped duration of those kernels

    @property
    def span_ns(self) -> int:
        """The window's length."""
        return self.end_ns - self.start_ns

    @property
    def busy_ns(self) -> int:
        """Time the GPU ran anything in the window."""
        return self.kernel_ns + self.memcpy_ns + self.memset_ns

    @property
    def idle_ns(self) -> int:
        """Time the GPU ran nothing in the window."""
        return self.span_ns - self.busy_ns


#: The name aggregate gives the process of activities that have none (no launch call in the export).
NO_PROCESS = "unknown"


def no_process(w: WorkerData) -> bool:
    """True for the worker that holds an input's activities without a process (named ``unknown``, or
    ``INPUT:unknown`` with several inputs): the GPU timeline of no real process."""
    return w.name == NO_PROCESS or w.name.endswith(":" + NO_PROCESS)


def step_source(w: WorkerData) -> str:
    """How the worker's steps were found: 'ProfilerStep', 'user ranges', 'step marker' (pyprof.prof.step_marker)
    or 'whole capture'."""
    if len(w.profiler_step) and (_ints(w.profiler_step) != NO_STEP).any():
        return "ProfilerStep"
    if len(w.user_step) and (_ints(w.user_step) != NO_STEP).any():
        return "step marker" if w.step_marker is not None else "user ranges"
    return "whole capture"


def _ints(a) -> np.ndarray:
    """A zero-copy numpy view of an ``array`` of the worker (released when the caller drops it)."""
    return np.frombuffer(a, dtype=np.dtype(a.typecode)) if len(a) else np.zeros(0, dtype=np.dtype(a.typecode))


def assign(w: WorkerData) -> tuple[list[str], np.ndarray, str]:
    """(step labels in launch order, step index per activity or -1, step source). Threads are compared by
    their index in the worker, so a tid of any type (int, string, None) works."""
    source = step_source(w)
    n = len(w.start_ns)
    if source == "whole capture":
        return ["all"], np.zeros(n, dtype=np.int32), source
    labels = _ints(w.profiler_step if source == "ProfilerStep" else w.user_step)
    launch = _ints(w.launch_ns)
    thread = _ints(w.thread)
    marked = labels != NO_STEP
    idx = np.flatnonzero(marked)
    # First launch of each step: the marked activities sorted by (label, launch), the first of each label.
    order = idx[np.lexsort((launch[idx], labels[idx]))]
    firsts = order[np.r_[True, labels[order][1:] != labels[order][:-1]]]
    del order
    by_launch = firsts[np.argsort(launch[firsts], kind="stable")]
    step_labels, starts = labels[by_launch], launch[by_launch]
    out = np.full(n, -1, dtype=np.int32)
    # A marked activity's step: its label's place among the steps sorted by label, mapped to launch order.
    by_label = np.argsort(step_labels, kind="stable")
    out[idx] = by_label[np.searchsorted(step_labels[by_label], labels[idx])]
    others = ~marked & ~np.isin(thread, np.unique(thread[idx]))
    out[others] = np.searchsorted(starts, launch[others], side="right") - 1  # -1: launched before step one
    if source == "step marker":  # labels are push times: the steps are numbered in launch order
        return [f"step {k}" for k in range(1, len(step_labels) + 1)], out, source
    prefix = "ProfilerStep#" if source == "ProfilerStep" else "step "
    return [f"{prefix}{int(lab)}" for lab in step_labels], out, source


#: Window sources that bound the span: not a PyTorch profiler trace's bounds, whose idle share is measured over
#: the GPU's own span, as Holistic Trace Analysis measures it (tests/report/test_steps_hta.py holds pyprof to it);
#: the overview says how much of the trace that span is.
SPAN_SOURCES = frozenset({"capture", "session to last API call", "API calls"})


def span_window(w: WorkerData, source: str) -> WindowRun | None:
    """The profiled window that bounds the worker's span: its input's (window_of), where no step marker does
    (``source`` is "whole capture") and it comes from a capture (SPAN_SOURCES); else None."""
    win = window_of(w.window)
    return win if source == "whole capture" and win is not None and win.source in SPAN_SOURCES else None


def busy_pct(busy_ns: float, span_ns: float) -> float | None:
    """busy / span in percent: 2 decimals, or 2 significant digits below 0.01% (a GPU that ran 1.5 us of 880 ms is
    busy 0.00017%, not 0.0%); None without a span."""
    if not span_ns:
        return None
    value = 100.0 * busy_ns / span_ns
    return float(f"{value:.2g}") if 0 < value < 0.01 else round(value, 2)


def steps(w: WorkerData) -> tuple[list[Step], str]:
    """The worker's steps (windows partitioning its profiled span, in order) and how they were found; no steps
    for a worker without timed activities. Computed once per worker."""
    cached = getattr(w, "_steps", None)
    if cached is not None:
        return cached
    w._steps = _compute(w)
    return w._steps


def _compute(w: WorkerData) -> tuple[list[Step], str]:
    # Memory: every array here is a view of the worker's or a transient of at most a few numbers per
    # activity, made and freed one after another (about 40 MB at the peak for 1M activities).
    labels, which, source = assign(w)
    if not len(w.start_ns):
        return [], source
    start, end, kind = _ints(w.start_ns), _ints(w.end_ns), _ints(w.kind)
    if (end < start).any():  # an end before its start (a clock glitch) is a zero-length activity
        end = np.maximum(end, start)
    span_start, span_end = int(start.min()), int(end.max())
    win = span_window(w, source)
    if win is not None:  # activity outside the window (a clock that drifts, a row past the stated end) widens it
        span_start, span_end = min(span_start, win.start_ns), max(span_end, win.end_ns)
    # Window starts: the earliest GPU start of each step's own activities, kept monotonic.
    first_gpu = np.full(len(labels), span_end, dtype=np.int64)
    mine = which >= 0
    np.minimum.at(first_gpu, which[mine], start[mine])
    del which, mine
    edges = np.append(np.maximum.accumulate(first_gpu), span_end)  # window j is [edges[j], edges[j + 1])
    edges[0] = span_start
    m = len(labels)

    counts, ksum, sm_ns, sm_known_ns, occ_x, occ_ns, any_sm = _kernel_shares(w, edges, start, end, kind == KERNEL)
    order = np.argsort(start, kind="stable")
    s_sorted, e_sorted, k_sorted = start[order], end[order], kind[order]
    del order
    kernel_ns = _covered_by_window(s_sorted, e_sorted, edges, k_sorted == KERNEL)
    upto_copy = _covered_by_window(s_sorted, e_sorted, edges, k_sorted <= MEMCPY)
    del k_sorted
    upto_set = _covered_by_window(s_sorted, e_sorted, edges, None)
    out = [Step(labels[j], int(edges[j]), int(edges[j + 1]), int(counts[j]), int(round(ksum[j])),
                int(kernel_ns[j]), int(upto_copy[j] - kernel_ns[j]), int(upto_set[j] - upto_copy[j]),
                float(sm_ns[j]) if any_sm else None, int(round(sm_known_ns[j])), float(occ_x[j]),
                int(round(occ_ns[j])))
           for j in range(m)]
    return out, source


def _window(edges: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The window holding each time (a time on an edge belongs to the window that starts there; the span end
    to the last window)."""
    return np.minimum(np.searchsorted(edges, t, side="right") - 1, len(edges) - 2).astype(np.int32)


def _kernel_shares(w: WorkerData, edges: np.ndarray, start: np.ndarray, end: np.ndarray, is_k: np.ndarray):
    """Per window: kernels that started in it, and the kernels' duration, SM time, occupancy x time and the
    time of kernels with a known occupancy, each kernel's shared between the windows it runs in by the time it
    spends in each (whole ns: float64 sums are exact below 104 days). A zero-length kernel goes to the window
    of its start. Returns (counts, duration, sm, SM-known time, occupancy x time, occupancy-known time, any SM
    figure)."""
    m = len(edges) - 1
    ws = _window(edges, start)
    we = _window(edges, np.maximum(end - 1, start))
    counts = np.bincount(ws, weights=is_k, minlength=m)
    inside = is_k & (ws == we)
    del we
    dur = (end - start).astype(np.float64)
    sm, occ = _ints(w.sm_busy_ns), _ints(w.occ_x_ns)
    sm_known, occ_known = is_k & (sm >= 0), is_k & (occ >= 0)

    def per_window(weights: np.ndarray, keep: np.ndarray) -> np.ndarray:
        return np.bincount(ws, weights=np.where(inside & keep, weights, 0.0), minlength=m)

    ksum, sm_ns, sm_ns_known = per_window(dur, is_k), per_window(sm, sm_known), per_window(dur, sm_known)
    occ_x, occ_ns = per_window(occ, occ_known), per_window(dur, occ_known)
    # Few kernels cross an edge (those running while the next step's work begins): split them here.
    for i in np.flatnonzero(is_k & ~inside):
        s, e = int(start[i]), int(end[i])
        j = int(ws[i])
        while j < m and edges[j] < e:
            part = min(e, int(edges[j + 1])) - max(s, int(edges[j]))
            if part > 0:
                share = part / (e - s)
                ksum[j] += part
                if sm_known[i]:
                    sm_ns[j] += sm[i] * share
                    sm_ns_known[j] += part
                if occ_known[i]:
                    occ_x[j] += occ[i] * share
                    occ_ns[j] += part
            j += 1
    return counts, ksum, sm_ns, sm_ns_known, occ_x, occ_ns, bool(sm_known.any())


def _covered_by_window(s: np.ndarray, e: np.ndarray, edges: np.ndarray, keep: np.ndarray | None) -> np.ndarray:
    """Time covered by at least one of the intervals (sorted by start; those ``keep`` selects, or all), in each
    window. Without ``keep`` it overwrites ``e``."""
    if keep is not None:
        s, e = s[keep], e[keep]
    if not len(s):
        return np.zeros(len(edges) - 1, dtype=np.int64)
    reach = np.maximum.accumulate(e, out=e)
    new = np.empty(len(s), dtype=bool)  # an interval that starts after everything before it has ended
    new[0] = True
    np.greater(s[1:], reach[:-1], out=new[1:])
    a = s[new]
    b = np.append(reach[:-1][new[1:]], reach[-1])  # each merged run ends at the reach before the next starts
    before = np.append(0, np.cumsum(b - a))  # covered time before each merged run
    i = np.searchsorted(a, edges, side="right") - 1
    at = np.maximum(i, 0)
    covered_until = np.where(i >= 0, before[at] + np.clip(edges - a[at], 0, (b - a)[at]), 0)
    return np.diff(covered_until)
