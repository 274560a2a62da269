"""Where the GPU sat idle: each gap of a worker's timeline (no activity running), the activity that ended it
(its op and line: the work the GPU was waiting for), whether a synchronising copy came just before it, and the
step it fell in. The recommendations' idle rules read these (docs/views.md, recommendations)."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from pyprof.prof.aggregate import WorkerData
from pyprof.prof.steps import steps


#: Work that waited longer than this after its launch (and longer than its launch came late) waited for something
#: other than the host: an event, another stream, a copy the runtime does on its own. A launch takes microseconds.
QUEUED_AFTER_LAUNCH_NS = 50_000


class Gaps(NamedTuple):
    """A worker's idle gaps, in time order, as columns (a million-kernel input has about as many gaps): each
    gap is a stretch of its profiled span with nothing running on its GPU."""

    start_ns: np.ndarray  # where the GPU went idle
    idle_ns: np.ndarray
    site: np.ndarray  # index into WorkerData.site_keys: (line, op key) of the activity that ended the gap
    step: np.ndarray  # index into ``labels``: the step window that holds the gap's start
    labels: list
    after_sync: np.ndarray  # the last activity before it was a synchronising copy (WorkerData.syncs)
    launch_late_ns: np.ndarray  # how long after the gap began that activity was launched (0: launched before)

    @property
    def host_waited(self) -> np.ndarray:
        """The gaps the GPU spent waiting for the host: ended by work launched after the GPU went idle, which then
        started within QUEUED_AFTER_LAUNCH_NS of its launch or sooner than the launch came. A launch that came at
        once, its work starting half a second later, left the GPU waiting for something else (queued)."""
        after_launch = self.idle_ns - self.launch_late_ns
        return (self.launch_late_ns > 0) & ((after_launch < QUEUED_AFTER_LAUNCH_NS)
                                            | (after_launch <= self.launch_late_ns))


def launch_times(w: WorkerData) -> bool:
    """Whether the worker's activities carry launch (CUDA API) times: without them every launch time is the
    activity's start, and "launched after the GPU went idle" cannot be told. Computed once per worker."""
    cached = getattr(w, "_launch_times", None)
    if cached is None:
        cached = w._launch_times = bool(len(w.start_ns)) and bool(np.any(_view(w.launch_ns) != _view(w.start_ns)))
    return cached


def _view(a) -> np.ndarray:
    return np.frombuffer(a, dtype=np.dtype(a.typecode))


def gaps(w: WorkerData) -> Gaps:
    """The worker's idle gaps, in time order. Overlapping activities (several streams) count as one busy
    stretch; an activity whose end precedes its start (a clock glitch) counts as zero-length. Computed once
    per worker."""
    cached = getattr(w, "_gaps", None)
    if cached is None:
        cached = w._gaps = _compute(w)
    return cached


def _none() -> Gaps:
    empty = np.empty(0, np.int64)
    return Gaps(empty, empty, empty, empty, ["all"], np.empty(0, bool), empty)


def _compute(w: WorkerData) -> Gaps:
    n = len(w.start_ns)
    if n < 2:
        return _none()
    start, end = _view(w.start_ns), _view(w.end_ns)
    end = np.maximum(end, start)
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    idle = s[1:] - reach[:-1]
    at = np.flatnonzero(idle > 0)
    if not len(at):
        return _none()
    launch = _view(w.launch_ns)
    site = _view(w.site)
    windows = steps(w)[0]
    edges = np.array([x.start_ns for x in windows], dtype=np.int64)
    nxt = order[at + 1]  # the activity that ends each gap
    began = reach[at]
    step = np.maximum(np.searchsorted(edges, began, side="right") - 1, 0) if windows else np.zeros(len(at), np.int64)
    sync_ends = np.unique(end[np.asarray(w.sync_at, dtype=np.int64)]) if w.sync_at else np.empty(0, np.int64)
    return Gaps(began, idle[at], site[nxt].astype(np.int64), step, [x.label for x in windows] or ["all"],
                np.isin(began, sync_ends), np.maximum(launch[nxt] - began, 0))
