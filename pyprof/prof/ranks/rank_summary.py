"""One rank file reduced to what the ranks view needs of it: per process, the figures of its row (steps, span,
idle, communication against computation) and its communication kernels (name, start) for matching collectives
across the ranks. A summary is a few numbers plus two entries per communication kernel: a job's thousand rank
files of a million kernels each combine in one process, however many processes or machines summarised them
(pyprof.prof.ranks.rank_files, rank_dask; docs/cluster.md).

The ranks view of an aggregate in this process is built from these same summaries (views/ranks.py), so every
path gives the same tables by construction.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

import numpy as np

from pyprof import cleanup
from pyprof.common import PARSED_EXPORT_HELD, InputError, TellingWrites, UsageError
from pyprof.prof.aggregate import KERNEL, WorkerData, aggregate, numbered_file, worker_name
from pyprof.prof.table.coverage import Coverage
from pyprof.prof.host_time import Intervals
from pyprof.prof.model.roofline import Peaks
from pyprof.prof.step_marker import StepMarker
from pyprof.prof.steps import steps


class Comm:
    """A worker's communication against its computation, in ns: ``comm_ns`` the time at least one communication
    kernel ran, ``compute_ns`` the time at least one other kernel ran, ``hidden_ns`` the communication time during
    which a computation kernel ran too (on its GPU: a rank's process drives one), ``sum_ns`` the communication
    kernels' durations summed (``comm_ns`` unless they overlap one another)."""

    def __init__(self, w: WorkerData) -> None:
        n = len(w.start_ns)
        start = np.frombuffer(w.start_ns, np.int64) if n else np.zeros(0, np.int64)
        end = np.maximum(np.frombuffer(w.end_ns, np.int64), start) if n else start
        kernel = np.frombuffer(w.kind, np.int8) == KERNEL if n else np.zeros(0, bool)
        comm = np.zeros(n, bool)
        comm[np.asarray(w.comm_at, np.int64)] = True
        comm_iv = Intervals.of(start[comm], end[comm])
        compute_iv = Intervals.of(start[kernel & ~comm], end[kernel & ~comm])
        self.comm_ns = comm_iv.total()
        self.compute_ns = compute_iv.total()
        self.hidden_ns = self.comm_ns - comm_iv.minus(compute_iv).total()
        self.sum_ns = int((end[comm] - start[comm]).sum())


@dataclass
class RankSummary:
    """One worker (a process of one input) as the ranks view sees it; times in ns. ``comm_names``,
    ``comm_start_ns`` and ``comm_end_ns`` are its communication kernels' short names, starts and ends, in input
    order (the ends tell whether a collective's kernels on the ranks overlap: views/collectives.py)."""

    name: str  # the worker's name in the job (aggregate's: worker_name)
    pid: object  # the process id its records carry (None: activities without a process)
    dist: dict | None  # the input's rank, world size, backend (parse's header), where known
    devices: list  # CUDA device ids its activities ran on, sorted
    steps: int
    span_ns: int  # its steps' windows summed: its profiled span
    idle_ns: int
    comm_ns: int
    compute_ns: int
    hidden_ns: int
    sum_ns: int
    comm_names: list[str] = field(default_factory=list)
    comm_start_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    comm_end_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


@dataclass
class FileSummary:
    """One input's summaries, every process of it (the name of each as if it were the only input), and the
    coverage of the modelling of its records (the end-of-run lines)."""

    input: str  # the input's display name
    ranks: list[RankSummary]
    coverage: Coverage


def summarize_worker(w: WorkerData) -> RankSummary:
    """The RankSummary of an aggregated worker."""
    sts, _source = steps(w)
    c = Comm(w)
    start = np.frombuffer(w.start_ns, np.int64) if len(w.start_ns) else np.zeros(0, np.int64)
    end = np.frombuffer(w.end_ns, np.int64) if len(w.end_ns) else np.zeros(0, np.int64)
    comm = np.asarray(w.comm_at, np.int64)
    return RankSummary(w.name, w.pid, w.dist, sorted(w.devices), len(sts), sum(s.span_ns for s in sts),
                       sum(s.idle_ns for s in sts), c.comm_ns, c.compute_ns, c.hidden_ns, c.sum_ns,
                       list(w.comm_names), start[comm].copy(), end[comm].copy())


def summarize_file(path: str, display: str | None = None, peaks: Peaks | None = None,
                   step_marker: str | None = None) -> FileSummary:
    """Summarise one rank file: parse's records, or a profiler export (a PyTorch profiler trace, an nsys
    export) parsed first to a temporary file. ``display`` names it (default: its base name); ``step_marker``, the
    name of the ranges that are its steps (``--step-marker``: pyprof.prof.step_marker). One file is aggregated at
    a time: memory is that of its aggregate (about 55 bytes an activity, docs/views.md). Raises InputError for a
    file that cannot be read or parsed, or where no activity ran under a range ``step_marker`` names."""
    display = display or os.path.basename(path)
    try:
        return _summarize(path, display, peaks, step_marker)
    except UsageError as e:  # a marker this rank's file lacks: its steps cannot be set beside the others'
        raise InputError(path, str(e)) from None


def _summarize(path: str, display: str, peaks: Peaks | None, step_marker: str | None) -> FileSummary:
    from pyprof.prof.load.reader import is_records

    if is_records(path):
        return _summarize_records(path, display, peaks, step_marker)
    from pyprof.parse import parse_file

    with cleanup.temporary_folder("pyprof-rank-") as tmp:  # (registered: removed by a worker stopped by a signal)
        records = os.path.join(tmp, "records.dict")
        with open(records, "w", encoding="utf-8") as f:
            out = TellingWrites(f, tmp, PARSED_EXPORT_HELD)  # a full TMPDIR: one line naming it
            parse_file(path, out)
            out.flush()
        return _summarize_records(records, display, peaks, step_marker)


def _summarize_records(path: str, display: str, peaks: Peaks | None, step_marker: str | None) -> FileSummary:
    marker = None if step_marker is None else StepMarker(step_marker)
    agg = aggregate([(display, numbered_file(path, display))], peaks, marker=marker)
    return FileSummary(display, [summarize_worker(w) for w in agg.workers.values()], agg.coverage)


def job_ranks(files: list[FileSummary]) -> list[RankSummary]:
    """The summaries of a job's inputs, named as one pass over all of them names its workers (worker_name:
    ``INPUT``, or ``INPUT:PID`` for an input of several processes, with several inputs), in input order."""
    return [replace(r, name=worker_name(f.input, r.pid, len(files), len(f.ranks))) for f in files for r in f.ranks]
