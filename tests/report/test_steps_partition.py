"""Steps partition the GPU timeline, on random activities (seeded: the same cases every run): each step's
numbers recounted by brute force, one nanosecond at a time, over the window the step reports (never with the
code under test)."""
from __future__ import annotations

import random

import pytest
from report_helpers import kernel

from pyprof.prof.aggregate import aggregate
from pyprof.prof.steps import steps

_KINDS = ("kernel", "memcpy", "memset")



def _activities(seed: int) -> list[tuple]:
    """(start, duration, kind, step or -1, thread, launch time, stream): steps on thread 1, backward-like
    launches on thread 2, zero-length activities, overlaps and gaps, launches in any order."""
    rnd = random.Random(seed)
    return [(rnd.randint(0, 300), rnd.choice((0, rnd.randint(1, 40))), rnd.choice(_KINDS), rnd.randint(-1, 3),
             rnd.randint(1, 2), rnd.randint(0, 400), rnd.randint(1, 3)) for _ in range(rnd.randint(1, 25))]


def _covered(intervals, lo: int, hi: int) -> int:
    """ns in [lo, hi) inside at least one [s, e): counted one by one."""
    return sum(1 for t in range(lo, hi) if any(s <= t < e for s, e in intervals))


@pytest.mark.parametrize("seed", range(150))
def test_windows_partition_the_span_and_hold_what_ran_in_them(seed):
    recs = []
    for start, dur, kind, step, tid, launch, stream in _activities(seed):
        ranges = [f"ProfilerStep#{step}"] if step >= 0 and tid == 1 else []
        recs.append(kernel(1000 + start, dur, kind=kind, ranges=ranges, tid=tid, api_start_ns=launch,
                           stream=stream))
    (w,) = aggregate([("x", recs)]).workers.values()
    got, _ = steps(w)
    iv = [(r["start_ns"], r["end_ns"]) for r in recs]
    lo, hi = min(s for s, _ in iv), max(e for _, e in iv)
    kernels = [(r["start_ns"], r["end_ns"]) for r in recs if r["kind"] == "kernel"]
    not_set = [(r["start_ns"], r["end_ns"]) for r in recs if r["kind"] != "memset"]
    # The windows tile [first GPU start, last GPU end).
    assert got[0].start_ns == lo and got[-1].end_ns == hi
    assert all(a.end_ns == b.start_ns for a, b in zip(got, got[1:]))
    assert sum(s.span_ns for s in got) == hi - lo
    for s in got:
        a, b = s.start_ns, s.end_ns
        assert s.span_ns >= 0
        assert s.kernel_ns == _covered(kernels, a, b)
        assert s.kernel_ns + s.memcpy_ns == _covered(not_set, a, b)
        assert s.busy_ns == _covered(iv, a, b)
        assert s.idle_ns == s.span_ns - s.busy_ns >= 0
        # kernel time clipped to the window, summed (overlap counted twice)
        assert s.kernel_sum_ns == sum(max(0, min(e, b) - max(k, a)) for k, e in kernels)
    # Every kernel counted once, in the window it started in (one starting at the span end: the last window).
    assert sum(s.kernels for s in got) == len(kernels)
    assert sum(s.busy_ns for s in got) == _covered(iv, lo, hi)
