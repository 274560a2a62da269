"""Host lines: where each process's CPU time went, as the union of its threads' intervals per category
(record.HOST_CATEGORIES: steps, data loading, CUDA API calls, PyTorch ops), written after the records in runs
(record.host_line). The host view splits each step's CPU time by them (pyprof.prof.views.host).

Readers give raw intervals (Source.host_intervals); overlaps and nesting (an op inside an op, the autograd
thread's ops beside the main thread's) are merged here, so a line holds disjoint intervals in time order.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from pyprof.record import HOST_CATEGORIES, HOST_RUN, host_line
from pyprof.parse.activities import Source


def host_lines(source: Source) -> Iterator[str]:
    """The host lines of ``source``: per (process, category), its intervals merged (steps kept apart, with their
    names), in runs of HOST_RUN."""
    return lines_of(source.host_intervals())


def lines_of(found: dict[tuple, tuple]) -> Iterator[str]:
    """The host lines of the intervals a reader found (Source.host_intervals)."""
    # in one order whatever the reader's: by process, then category as record.HOST_CATEGORIES lists them
    for pid, category in sorted(found, key=lambda k: (k[0] is None, k[0] or 0, HOST_CATEGORIES.index(k[1]))):
        starts, ends, names = found[(pid, category)]
        lo, hi = np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
        if category == "step":  # each step as it is, named (steps run back to back: a union would join them)
            order = np.argsort(lo, kind="stable")
            lo, hi, named = lo[order], hi[order], [names[i] for i in order.tolist()]
        else:
            lo, hi = union(lo, hi)
            named = None
        for k in range(0, len(lo), HOST_RUN):
            yield host_line(pid, category, lo[k:k + HOST_RUN].tolist(), hi[k:k + HOST_RUN].tolist(),
                            None if named is None else named[k:k + HOST_RUN])


def union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The disjoint intervals covering [starts[i], ends[i]) for all i, in time order (touching ones joined)."""
    # Copies of millions of intervals (a 1M-kernel export's API calls) are made only where needed: nothing is
    # left out of a sound export, and blocks merged in time order come sorted already (a stable sort keeps them).
    keep = ends >= starts
    if not keep.all():
        starts, ends = starts[keep], ends[keep]
    del keep
    if not len(starts):
        return starts, ends
    s, e = starts, ends
    if not (starts[1:] >= starts[:-1]).all():
        order = np.argsort(starts, kind="stable")
        s, e = starts[order], ends[order]
        del order
    reach = np.maximum.accumulate(e)
    # an interval starts a new group when it begins after everything before it has ended
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    np.greater(s[1:], reach[:-1], out=new[1:])
    del reach
    first = np.flatnonzero(new)
    del new
    return s[first], np.maximum.reduceat(e, first)
