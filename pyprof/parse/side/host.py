"""Host lines: where each process's CPU time went, as the union of its threads' intervals per category
(record.HOST_CATEGORIES: steps, data loading, CUDA API calls, PyTorch ops), written after the records in runs
(record.host_line). The host view splits each step's CPU time by them (pyprof.prof.views.host).

Readers give raw intervals (Source.host_intervals); overlaps and nesting (an op inside an op, the autograd
thread's ops beside the main thread's) are merged here, so a line holds disjoint intervals in time order.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from pyprof.record import HOST_CATEGORIES, HOST_RUN, host_line
from pyprof.parse.write import native


#: The longest gap or interval a packed group holds (32 bits of nanoseconds: 4.3 s); a group with a longer one is
#: kept as it came.
_PACKED_MAX_NS = np.iinfo(np.uint32).max


@dataclass(frozen=True)
class Packed:
    """A category's merged intervals (disjoint, in time order) in half the memory of two int64 arrays: the first
    start, then each interval's gap from the end before it (0 for the first) and its length, 32 bits each."""

    first_ns: int
    gaps_ns: np.ndarray  # uint32
    lengths_ns: np.ndarray  # uint32

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """The intervals' starts and ends (int64 views of one array)."""
        times = np.empty(2 * len(self.gaps_ns), dtype=np.int64)
        times[0::2] = self.gaps_ns
        times[1::2] = self.lengths_ns
        np.cumsum(times, out=times)
        times += self.first_ns
        return times[0::2], times[1::2]


def packed(found: dict[tuple, tuple]) -> dict[tuple, tuple]:
    """``found`` (Source.host_intervals) with each category but steps merged now and packed (Packed) where its
    gaps and intervals fit: what lines_of writes of it is the same. Parse keeps the intervals while it writes the
    records (they are written after them): 4.3M API calls and op ranges of a 1M-kernel export held 69 MB as
    int64 arrays, in the writer and in the sweep worker it forks. ``found`` is emptied as its groups are packed."""
    out = {}
    for key in list(found):
        starts, ends, names = found.pop(key)
        if key[1] != "step" and len(starts) > 1:
            lo, hi = np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
            if not ((hi >= lo).all() and (lo[1:] > hi[:-1]).all()):  # not merged yet (union joins touching ones)
                lo, hi = union(lo, hi)
            small = _packed(lo, hi)
            starts, ends = (lo, hi) if small is None else (small, None)
        out[key] = (starts, ends, names)
    return out


def _packed(lo: np.ndarray, hi: np.ndarray) -> Packed | None:
    """Disjoint intervals in time order, packed; None where a gap or an interval is longer than 32 bits hold."""
    lengths = hi - lo
    if not len(lo) or lengths.max() > _PACKED_MAX_NS:
        return None
    lengths = lengths.astype(np.uint32)
    gaps = np.empty(len(lo), dtype=np.int64)
    gaps[0] = 0
    np.subtract(lo[1:], hi[:-1], out=gaps[1:])
    if gaps.max() > _PACKED_MAX_NS:
        return None
    return Packed(int(lo[0]), gaps.astype(np.uint32), lengths)


def lines_of(found: dict[tuple, tuple]) -> Iterator[str]:
    """The host lines of the intervals a reader found (Source.host_intervals), or of those packed()."""
    int_list = native.int64_json()  # the same text as json's of the lists, written in C where the core is built
    # in one order whatever the reader's: by process, then category as record.HOST_CATEGORIES lists them
    for pid, category in sorted(found, key=lambda k: (k[0] is None, k[0] or 0, HOST_CATEGORIES.index(k[1]))):
        starts, ends, names = found[(pid, category)]
        named = None
        if type(starts) is Packed:  # merged already
            lo, hi = starts.bounds()
        else:
            lo, hi = np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
            if category == "step":  # each step as it is, named (steps run back to back: a union would join them)
                order = np.argsort(lo, kind="stable")
                lo, hi, named = lo[order], hi[order], [names[i] for i in order.tolist()]
            else:
                lo, hi = union(lo, hi)
        for k in range(0, len(lo), HOST_RUN):
            starts, ends = lo[k:k + HOST_RUN], hi[k:k + HOST_RUN]
            if int_list is None:
                starts, ends = starts.tolist(), ends.tolist()
            yield host_line(pid, category, starts, ends, None if named is None else named[k:k + HOST_RUN], int_list)


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
