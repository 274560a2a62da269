"""Collectives matched across the ranks of one job, and who arrived last at each (the ranks view's stragglers).

A collective runs one communication kernel on every rank that takes part, and none of them can finish before
the last one has started: the rank whose kernel starts last is the one the others waited for, by the difference
between the latest start and the earliest. The n-th kernel of one name on one rank is matched with the n-th of
that name on every other rank: NCCL runs a communicator's collectives in the order they were issued, the same on
every rank, and picks one algorithm and protocol (the kernel's name) for a collective on all of them. The
traces carry nothing better to match on: Kineto's NCCL kernels name the collective (``Collective name``) but
give no sequence number, and an nsys export has only the kernels' names.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from pyprof.prof.rank_summary import RankSummary


class Collective(NamedTuple):
    """One collective on every rank: its kernel's name, its place among that name's collectives (0 first), the
    rank whose kernel started last and the one whose started first (indices into the workers matched), and the
    delay between them."""

    name: str
    n: int
    last: int
    first: int
    delay_ns: int


class Matched(NamedTuple):
    """What matching found: the collectives, in time order of their first start; per kernel name, how many
    kernels each worker has of it where the counts differ (those past the smallest count are not matched)."""

    collectives: list[Collective]
    unmatched: dict[str, list[int]]


def match(workers: list[RankSummary]) -> Matched:
    """The collectives of ``workers`` (one per rank, each with its communication kernels: RankSummary's
    comm_names and comm_start_ns), matched by name and order. A collective whose kernels all start at once has
    no last rank: it is counted with ``last`` = ``first`` and a delay of 0."""
    starts: list[dict[str, np.ndarray]] = []
    for w in workers:
        by_name: dict[str, list[int]] = {}
        for start, name in zip(w.comm_start_ns.tolist(), w.comm_names):
            by_name.setdefault(name, []).append(start)
        starts.append({name: np.sort(np.array(s, np.int64)) for name, s in by_name.items()})
    names = sorted({name for s in starts for name in s})
    out: list[tuple[int, Collective]] = []
    unmatched: dict[str, list[int]] = {}
    for name in names:
        counts = [len(s.get(name, ())) for s in starts]
        if len(set(counts)) > 1:
            unmatched[name] = counts
        for n in range(min(counts)):
            at = np.array([s[name][n] for s in starts], np.int64)
            last, first = int(np.argmax(at)), int(np.argmin(at))
            out.append((int(at[first]), Collective(name, n, last, first, int(at[last] - at[first]))))
    out.sort(key=lambda x: x[0])
    return Matched([c for _t, c in out], unmatched)
