"""Collectives matched across the ranks of one job, and who arrived last at each (the ranks view's stragglers).

A collective runs one communication kernel on every rank that takes part, and none of them can finish before
the last one has started: the rank whose kernel starts last is the one the others waited for, by the difference
between the latest start and the earliest. The n-th kernel of one name on one rank is matched with the n-th of
that name on every other rank: NCCL runs a communicator's collectives in the order they were issued, the same on
every rank, and picks one algorithm and protocol (the kernel's name) for a collective on all of them. The
traces carry nothing better to match on: Kineto's NCCL kernels name the collective (``Collective name``) but
give no sequence number, and an nsys export has only the kernels' names.

Who waited for whom is decided here and nowhere else (``judge``): the ranks view's columns and stragglers, and
the workers view's one sentence, read the same Waits. It is only judged where the evidence holds: two ranks or
more ran collectives, no two inputs claim one rank or disagree on the world's size, a kernel name is common to
the ranks, and every matched collective's kernels overlap in time on the ranks (none can end before the last
has started: kernels that do not overlap are not one collective on one clock, so their start times say nothing
about who waited).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from pyprof.prof.ranks.rank_summary import RankSummary
from pyprof.prof.steps import no_process
from pyprof.prof.views.helpers import ms


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
    comm_names, comm_start_ns and comm_end_ns), matched by name and order. A collective whose kernels all start
    at once has no last rank: it is counted with ``last`` = ``first`` and a delay of 0. Where several ranks
    start last at the same nanosecond, ``last`` is the first of them in ``workers``' order."""
    return _match(workers)[0]


def _match(workers: list[RankSummary]) -> tuple[Matched, list[tuple[Collective, int, int]]]:
    """``match``, and the matched collectives whose kernels do not all overlap in time: (the collective, the
    worker whose kernel ended first, the worker whose kernel started last), in the collectives' order."""
    kernels: list[dict[str, tuple[np.ndarray, np.ndarray]]] = []
    for w in workers:
        by_name: dict[str, list[int]] = {}
        for i, name in enumerate(w.comm_names):
            by_name.setdefault(name, []).append(i)
        start, end = np.asarray(w.comm_start_ns, np.int64), np.asarray(w.comm_end_ns, np.int64)
        of_name = {}
        for name, at in by_name.items():
            at = np.asarray(at, np.int64)
            at = at[np.argsort(start[at], kind="stable")]
            of_name[name] = (start[at], end[at])
        kernels.append(of_name)
    names = sorted({name for s in kernels for name in s})
    out: list[tuple[int, Collective, int, int]] = []
    unmatched: dict[str, list[int]] = {}
    for name in names:
        counts = [len(s[name][0]) if name in s else 0 for s in kernels]
        if len(set(counts)) > 1:
            unmatched[name] = counts
        for n in range(min(counts)):
            at = np.array([s[name][0][n] for s in kernels], np.int64)
            ends = np.array([s[name][1][n] for s in kernels], np.int64)
            last, first, ended = int(np.argmax(at)), int(np.argmin(at)), int(np.argmin(ends))
            out.append((int(at[first]), Collective(name, n, last, first, int(at[last] - at[first])), ended,
                        int(ends[ended] - at[last])))
    out.sort(key=lambda x: x[0])
    apart = [(c, ended, c.last) for _t, c, ended, gap in out if gap < 0]
    return Matched([c for _t, c, _e, _g in out], unmatched), apart


class Waits(NamedTuple):
    """Who kept whom waiting among a job's ranks (``judge``), or why that cannot be judged (``reason``, then no
    figures). ``talking``: indices (into the job) of the ranks that ran communication kernels, those matched;
    the collectives' ``last`` and ``first`` index ``talking``. Per rank of the job: ``last_at`` the matched
    collectives it arrived last at (with a delay), ``caused_ns`` their delays summed, ``max_ns`` the longest;
    None for a rank that ran no communication kernel. ``world``: the job's world size where the inputs say it."""

    matched: Matched | None
    talking: list[int]
    last_at: list[int | None]
    caused_ns: list[int | None]
    max_ns: list[int | None]
    world: int | None
    reason: str | None


def job_order(summaries: list[RankSummary]) -> list[RankSummary]:
    """The ranks of a job among ``summaries`` (the processes: not the worker of activities without one), in
    rank order where the inputs name ranks, then by worker name: the one order every view judges them in."""
    def key(w: RankSummary) -> tuple:
        rank = (w.dist or {}).get("rank")
        return (rank is None, rank if rank is not None else 0, w.name)

    return sorted((w for w in summaries if not no_process(w)), key=key)


def judge(job: list[RankSummary], labels: list[str]) -> Waits:
    """Who waited for whom among the ranks ``job`` (job_order's), named ``labels``: the collectives matched
    (``match``) and, per rank, the ones it arrived last at and the delay it caused; or the reason it cannot
    be judged (see the module's docstring)."""
    talking = [i for i, w in enumerate(job) if w.comm_names]
    worlds = sorted({(w.dist or {}).get("world_size") for w in job} - {None})
    world = worlds[0] if len(worlds) == 1 else None
    none = [None] * len(job)

    def cannot(reason: str, matched: Matched | None = None) -> Waits:
        return Waits(matched, talking, none, none, none, world, reason)

    claimed: dict[int, int] = {}
    for i, w in enumerate(job):
        rank = (w.dist or {}).get("rank")
        if rank is not None and rank in claimed:
            return cannot(f"two inputs say they are rank {rank} ({job[claimed[rank]].name}, {w.name}): "
                          "they are not the ranks of one job")
        if rank is not None:
            claimed[rank] = i
    if len(worlds) > 1:
        return cannot(f"the inputs give different world sizes ({', '.join(map(str, sorted(worlds)))}): they "
                      "are not the ranks of one job")
    if len(talking) < 2:
        return cannot(f"{len(talking)} of the {len(job)} ranks given ran communication kernels (NCCL's, "
                      "named nccl*, or DeepEP's all-to-all): it takes two to see who waited")
    matched, apart = _match([job[i] for i in talking])
    if not matched.collectives:
        return cannot("no communication kernel name is common to the ranks, so no collective could be matched")
    if apart:
        c, ended, last = apart[0]
        return cannot(f"at {len(apart)} of the {len(matched.collectives)} matched collectives the ranks' kernels "
                      f"do not overlap in time (the first: {c.name} #{c.n + 1} ended on {labels[talking[ended]]} "
                      f"before it started on {labels[talking[last]]}), so the ranks' n-th kernels of a name are "
                      "not one collective: collectives of different communicators, a trace that starts "
                      "mid-way, or inputs that are not one job's ranks on one clock", matched)
    last_at, caused, longest = list(none), list(none), list(none)
    for i in talking:
        last_at[i], caused[i], longest[i] = 0, 0, 0
    for c in matched.collectives:
        if c.delay_ns > 0:
            i = talking[c.last]
            last_at[i] += 1
            caused[i] += c.delay_ns
            longest[i] = max(longest[i], c.delay_ns)
    return Waits(matched, talking, last_at, caused, longest, world, None)


def verdict(w: Waits, labels: list[str]) -> str:
    """The one sentence on who kept the others waiting (the rank that caused the most delay, with the
    evidence: how many of the matched collectives it arrived last at, the delay in all, the runner-up), or
    ``cannot judge who waited: REASON``."""
    if w.reason is not None:
        return f"Cannot judge who waited for whom: {w.reason}."
    n, ranks = len(w.matched.collectives), len(w.talking)
    order = sorted(w.talking, key=lambda i: -w.caused_ns[i])
    top = order[0]
    if not w.caused_ns[top]:
        return (f"No rank kept another waiting: at each of the {n} collectives matched across {ranks} ranks "
                "their kernels started at the same nanosecond.")
    at = "all" if w.last_at[top] == n else str(w.last_at[top])
    out = (f"Kept the others waiting longest: {labels[top]}, the last to arrive at {at} of the {n} collectives "
           f"matched across {ranks} ranks, {ms(w.caused_ns[top])} ms of delay in all (the longest "
           f"{ms(w.max_ns[top])} ms); next, {labels[order[1]]}: last at {w.last_at[order[1]]}, "
           f"{ms(w.caused_ns[order[1]])} ms.")
    if w.world is not None and w.world > ranks:
        out += (f" {ranks} of the job's {w.world} ranks are given: one not given may have kept them all "
                "waiting.")
    return out
