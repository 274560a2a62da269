"""Steps of a worker and their GPU time breakdown (the overview's numbers; docs/views.md).

Which activity belongs to which step: the step ranges (``ProfilerStep#N``, else user ranges named like a step or
iteration, else the whole capture as one step) enclose the launches of the threads that opened them. Kernels
launched by other threads (autograd's backward thread) carry no step range: they belong to the step whose launch
window holds their launch time, the window of step N running from its first launch to the first launch of the
next step (the last one is open-ended). Activities of a step thread outside every step range belong to no step.
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from pyprof.report.aggregate import KERNEL, MEMCPY, NO_STEP, WorkerData


@dataclass
class Step:
    """One step's numbers; times in ns, overlap charged once in the order kernel > memcpy > memset."""

    label: str
    first_launch_ns: int = 0
    last_end_ns: int = 0
    kernels: int = 0
    kernel_sum_ns: int = 0  # plain sum of kernel durations (overlapping kernels counted twice)
    kernel_ns: int = 0  # time at least one kernel ran
    memcpy_ns: int = 0  # time a copy ran and no kernel
    memset_ns: int = 0  # time a memset ran and neither a kernel nor a copy
    sm_busy_ns: float | None = None  # sum of duration x min(1, blocks / SMs), None when unknown
    occ_x_ns: float = 0.0
    occ_known_ns: int = 0

    @property
    def span_ns(self) -> int:
        """First launch to last GPU end."""
        return max(0, self.last_end_ns - self.first_launch_ns)

    @property
    def busy_ns(self) -> int:
        return self.kernel_ns + self.memcpy_ns + self.memset_ns

    @property
    def idle_ns(self) -> int:
        return max(0, self.span_ns - self.busy_ns)


def step_source(w: WorkerData) -> str:
    """How the worker's steps were found: 'ProfilerStep', 'user ranges' or 'whole capture'."""
    if any(v != NO_STEP for v in w.profiler_step):
        return "ProfilerStep"
    if any(v != NO_STEP for v in w.user_step):
        return "user ranges"
    return "whole capture"


def assign(w: WorkerData) -> tuple[list[str], list[int], str]:
    """(step labels in launch order, step index per activity or -1, step source)."""
    source = step_source(w)
    n = len(w.start_ns)
    if source == "whole capture":
        return ["all"], [0] * n, source
    labels = w.profiler_step if source == "ProfilerStep" else w.user_step
    first: dict = {}
    step_threads = set()
    launch = w.launch_ns
    for i in range(n):
        lab = labels[i]
        if lab != NO_STEP:
            step_threads.add(w.thread[i])
            t = launch[i]
            if lab not in first or t < first[lab]:
                first[lab] = t
    order = sorted(first, key=lambda k: first[k])
    index = {lab: j for j, lab in enumerate(order)}
    starts = [first[lab] for lab in order]
    out = [-1] * n
    for i in range(n):
        lab = labels[i]
        if lab != NO_STEP:
            out[i] = index[lab]
        elif w.thread[i] not in step_threads:
            j = bisect_right(starts, launch[i]) - 1
            out[i] = j  # -1 when launched before the first step
    prefix = "ProfilerStep#" if source == "ProfilerStep" else "step "
    return [f"{prefix}{lab}" for lab in order], out, source


def _union_ns(intervals: list) -> int:
    """Total length covered by (start, end) intervals sorted by start."""
    total = 0
    cur_s = cur_e = None
    for s, e in intervals:
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        elif e > cur_e:
            cur_e = e
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def steps(w: WorkerData) -> tuple[list[Step], str]:
    """The worker's steps with their breakdown, and how they were found (computed once per worker)."""
    cached = getattr(w, "_steps", None)
    if cached is not None:
        return cached
    w._steps = _compute(w)
    return w._steps


def _compute(w: WorkerData) -> tuple[list[Step], str]:
    labels, which, source = assign(w)
    out = [Step(lab) for lab in labels]
    per_step: list[list] = [[] for _ in labels]
    for i, j in enumerate(which):
        if j >= 0:
            per_step[j].append(i)
    for st, idx in zip(out, per_step):
        if not idx:
            continue
        st.first_launch_ns = min(w.launch_ns[i] for i in idx)
        st.last_end_ns = max(w.end_ns[i] for i in idx)
        by_level: list[list] = [[], [], []]  # kernels; kernels + copies; everything
        sm = 0.0
        sm_known = False
        for i in idx:
            k = w.kind[i]
            iv = (w.start_ns[i], w.end_ns[i])
            if k == KERNEL:
                by_level[0].append(iv)
                st.kernels += 1
                st.kernel_sum_ns += iv[1] - iv[0]
                if w.sm_busy_ns[i] >= 0:
                    sm += w.sm_busy_ns[i]
                    sm_known = True
                if w.occ_x_ns[i] >= 0:
                    st.occ_x_ns += w.occ_x_ns[i]
                    st.occ_known_ns += iv[1] - iv[0]
            if k <= MEMCPY:
                by_level[1].append(iv)
            by_level[2].append(iv)
        u = [_union_ns(sorted(b)) for b in by_level]
        st.kernel_ns, st.memcpy_ns, st.memset_ns = u[0], u[1] - u[0], u[2] - u[1]
        st.sm_busy_ns = sm if sm_known else None
    return out, source
