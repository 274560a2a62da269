"""Host time from parse's host lines (record.HOST_CATEGORIES): a process's CPU time in steps, data loading, CUDA
API calls and PyTorch ops, as disjoint intervals, and the split of a window of time between them."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from pyprof.common import InputError
from pyprof.parse.side.host import union  # parse merges the host lines' intervals with it: one union of intervals
from pyprof.record import HOST_CATEGORIES

_INT64 = (-(2 ** 63), 2 ** 63 - 1)


@dataclass
class HostRun:
    """The intervals of one host line: disjoint, in time order."""

    pid: int | None
    category: str
    start_ns: np.ndarray
    end_ns: np.ndarray
    names: list[str] | None = None  # steps' range texts

    KIND: ClassVar[str] = "host"  # its side lines' kind, and the WorkerData list it joins

    @classmethod
    def read(cls, d: dict, path: str, lineno: int) -> "HostRun":
        """The run of a decoded host line. Raises InputError naming the line for one that is damaged."""
        def bad(what: str) -> InputError:
            return InputError(path, f"line {lineno}: a damaged host line ({what})")

        pid, category, s, e = d.get("pid"), d.get("category"), d.get("start_ns"), d.get("end_ns")
        if not (pid is None or type(pid) is int) or category not in HOST_CATEGORIES:
            raise bad("pid or category")
        if type(s) is not list or type(e) is not list or len(s) != len(e):
            raise bad("start_ns and end_ns: expected two lists of one length")
        if not all(type(x) is int and _INT64[0] <= x <= _INT64[1] for x in (*s, *e)):
            raise bad("start_ns and end_ns: expected integers")
        names = d.get("names")
        if names is not None and (type(names) is not list or len(names) != len(s)
                                  or not all(type(n) is str for n in names)):
            raise bad("names: expected one string per interval")
        lo, hi = np.array(s, dtype=np.int64), np.array(e, dtype=np.int64)
        if len(lo) and (np.any(hi < lo) or np.any(lo[1:] < (lo[:-1] if category == "step" else hi[:-1]))):
            raise bad("intervals not in time order" + ("" if category == "step" else ", or overlapping"))
        return cls(pid, category, lo, hi, names)


class Intervals:
    """Disjoint intervals in time order (several host lines of one category joined)."""

    def __init__(self, runs: list[HostRun]) -> None:
        self.lo = np.concatenate([r.start_ns for r in runs]) if runs else np.zeros(0, np.int64)
        self.hi = np.concatenate([r.end_ns for r in runs]) if runs else np.zeros(0, np.int64)
        order = np.argsort(self.lo, kind="stable")
        self.lo, self.hi = self.lo[order], self.hi[order]

    @classmethod
    def of(cls, starts: np.ndarray, ends: np.ndarray) -> "Intervals":
        """The union of the intervals [starts[i], ends[i]) (any order, overlapping or not) as disjoint ones."""
        out = cls([])
        out.lo, out.hi = union(np.asarray(starts, np.int64), np.asarray(ends, np.int64))
        return out

    def within(self, t0: int, t1: int) -> "Intervals":
        """These intervals cut to [t0, t1)."""
        out = Intervals([])
        k0, k1 = np.searchsorted(self.hi, t0, "right"), np.searchsorted(self.lo, t1, "left")
        out.lo = np.clip(self.lo[k0:k1], t0, t1)
        out.hi = np.clip(self.hi[k0:k1], t0, t1)
        return out

    def total(self) -> int:
        return int((self.hi - self.lo).sum())

    def minus(self, other: "Intervals") -> "Intervals":
        """The parts of these intervals outside ``other`` (both disjoint and sorted)."""
        out = Intervals([])
        if not len(other.lo) or not len(self.lo):
            out.lo, out.hi = self.lo.copy(), self.hi.copy()
            return out
        # boundaries of both; a point is kept where it is inside self and outside other
        edges = np.unique(np.concatenate([self.lo, self.hi, other.lo, other.hi]))
        mids_lo, mids_hi = edges[:-1], edges[1:]
        inside = _covers(self, mids_lo) & ~_covers(other, mids_lo)
        lo, hi = mids_lo[inside], mids_hi[inside]
        if len(lo):  # join touching pieces
            new = np.r_[True, lo[1:] > hi[:-1]]
            first = np.flatnonzero(new)
            lo, hi = lo[first], np.maximum.reduceat(hi, first)
        out.lo, out.hi = lo, hi
        return out


def _covers(iv: Intervals, t: np.ndarray) -> np.ndarray:
    """Whether each time of ``t`` lies in one of the intervals ([lo, hi))."""
    k = np.searchsorted(iv.lo, t, "right") - 1
    ok = k >= 0
    out = np.zeros(len(t), bool)
    out[ok] = t[ok] < iv.hi[k[ok]]
    return out


def split(runs: list[HostRun], t0: int, t1: int) -> dict[str, int]:
    """The window [t0, t1) of one process's CPU time split so that the parts add up to it: ``dataloader`` first,
    then ``runtime`` (CUDA API calls outside data loading), then ``op`` (PyTorch ops outside both), and ``other``
    (Python and anything else): ns each."""
    by: dict = {}
    for r in runs:
        by.setdefault(r.category, []).append(r)
    taken = Intervals([])
    out = {}
    for category in ("dataloader", "runtime", "op"):
        part = Intervals(by.get(category, [])).within(t0, t1).minus(taken)
        out[category] = part.total()
        taken = _join(taken, part)
    out["other"] = (t1 - t0) - sum(out.values())
    return out


def _join(a: Intervals, b: Intervals) -> Intervals:
    out = Intervals([])
    lo, hi = np.concatenate([a.lo, b.lo]), np.concatenate([a.hi, b.hi])
    order = np.argsort(lo, kind="stable")
    out.lo, out.hi = lo[order], hi[order]
    return out
