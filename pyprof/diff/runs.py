"""One side of a diff: the records of a run (one file per rank, or several ranks in one file) aggregated once by
prof's views' pass, with the number of steps its times are divided by and its mean step's breakdown.

Runs are compared per step, since two captures rarely hold the same number of steps. A worker's steps are the
overview's (pyprof.prof.steps: ``ProfilerStep#N``, else user step ranges); a capture with neither (a PyTorch
profiler trace exported without a schedule) is one window, and then counts as many steps as it ran optimizer
steps (PyTorch's ``Optimizer.step#...`` range, or a ``_foreach_``/``_fused_`` op:
pyprof.prof.table.groups.is_optimizer), one step of training being one optimizer step. With several workers
(ranks) the divisor is the sum of their steps: a time per step is the mean rank's.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pyprof.prof.aggregate import Aggregate, WorkerData, aggregate, numbered_file
from pyprof.prof.aggregate_jobs import Fallback, aggregate_file_jobs, parallel_ok
from pyprof.prof.table.groups import is_optimizer
from pyprof.prof.model.roofline import Peaks
from pyprof.prof.forwards import forwards
from pyprof.prof.step_marker import StepMarker
from pyprof.prof.steps import no_process, steps

WHOLE = "whole capture"
OPTIMIZER = "optimizer steps"
FORWARDS = "forwards of an inference loop"  # steps that are forwards (pyprof.prof.forwards): a time per forward


@dataclass
class StepTimes:
    """A run's steps summed over its workers, in ns, overlap charged once as the overview charges it
    (kernel > memcpy > memset), so span = kernel + memcpy + memset + idle for each step and for the sums."""

    span_ns: int = 0
    kernel_ns: int = 0
    memcpy_ns: int = 0
    memset_ns: int = 0
    idle_ns: int = 0


@dataclass
class Run:
    """One side of the diff. ``steps`` divides every time and count shown for it (at least 1)."""

    label: str  # "base" or "new"
    inputs: list[str]
    agg: Aggregate
    steps: int
    step_sources: list[str]  # how each worker's steps were found, without repeats
    times: StepTimes = field(default_factory=StepTimes)
    gpu_ns: int = 0  # every activity's duration summed (kernels, copies, memsets; overlap counted twice)
    timed: bool = True  # False when no activity has start/end times: no steps, ``times`` all 0

    @property
    def workers(self) -> list[WorkerData]:
        return list(self.agg.workers.values())


class _OptimizerSteps:
    """``aggregate``'s observer counting each worker's optimizer steps: runs of consecutive optimizer activities
    in the records' order (an optimizer step launches its kernels one after another, with no forward or backward
    work between them). Keyed by id() of the worker object, whose name is set only once aggregate returns."""

    def __init__(self) -> None:
        self.count: dict[int, int] = {}
        self._inside: dict[int, bool] = {}  # the worker's last activity so far is an optimizer's
        self._first: dict[int, bool] = {}  # its first one is
        self._workers: dict[int, WorkerData] = {}  # the objects themselves: their id() does not survive a pipe

    def __call__(self, w: WorkerData, d: dict, _m, _r) -> None:
        opt = d.get("dir") != "bprop" and is_optimizer(d)
        key = id(w)
        if key not in self._first:
            self._first[key] = opt
            self._workers[key] = w
        if opt and not self._inside.get(key):
            self.count[key] = self.count.get(key, 0) + 1
        self._inside[key] = opt

    def merge(self, part: "_OptimizerSteps", workers: dict) -> None:
        """Add ``part``, the counts of the activities right after these (a chunk of the views' pass in a worker
        process: pyprof.prof.aggregate_jobs); ``workers`` maps id() of its WorkerData to the merged ones. A run
        that ends one chunk and starts the next is one step."""
        for key, first in part._first.items():
            merged = workers[id(part._workers[key])]
            mkey = id(merged)
            n = part.count.get(key, 0)
            if first and self._inside.get(mkey):
                n -= 1
            if mkey not in self._first:
                self._first[mkey] = first
                self._workers[mkey] = merged
            self.count[mkey] = self.count.get(mkey, 0) + n
            self._inside[mkey] = part._inside[key]


def load(label: str, sources: list, peaks: Peaks | None = None, jobs: int = 1, marker: StepMarker | None = None) -> Run:
    """The Run of ``sources`` (report.cli.Source: the input's name, its records file, the path as given), one per
    input: one large records file is aggregated in
    ``jobs`` worker processes (pyprof.prof.aggregate_jobs), else in this one; ``marker``: the ranges that are
    steps (pyprof.prof.step_marker; UsageError where the run has none). Raises InputError (naming the file
    and line) for a malformed record."""
    agg = None
    if len(sources) == 1 and parallel_ok(sources[0][1], jobs):
        try:
            agg, opt = aggregate_file_jobs(sources[0][1], sources[0][0], jobs, peaks, make_observer=_OptimizerSteps,
                                           merge_observer=_OptimizerSteps.merge, marker=marker)
        except Fallback:  # what the workers cannot judge: the one pass says it
            agg = None
    if agg is None:
        opt = _OptimizerSteps()
        agg = aggregate([(s.name, numbered_file(s.path, s.given)) for s in sources], peaks, observe=opt, marker=marker)
    run = Run(label, [s.name for s in sources], agg, 0, [])
    timed = [w for w in agg.workers.values() if not no_process(w)] or list(agg.workers.values())
    for w in agg.workers.values():
        run.gpu_ns += w.totals["gpu_ns"]
    for w in timed:
        sts, source = steps(w)
        if not sts:
            continue
        n = len(sts)
        if source == WHOLE and opt.count.get(id(w), 0) > 1:
            n, source = opt.count[id(w)], OPTIMIZER
        elif forwards(w) is not None:
            source = FORWARDS
        if source not in run.step_sources:
            run.step_sources.append(source)
        run.steps += n
        t = run.times
        for st in sts:
            t.span_ns += st.span_ns
            t.kernel_ns += st.kernel_ns
            t.memcpy_ns += st.memcpy_ns
            t.memset_ns += st.memset_ns
            t.idle_ns += st.idle_ns
    if run.steps == 0:  # no timed activity (legacy dict lines, or none at all): totals as they are
        run.steps, run.timed = 1, False
        run.step_sources.append("no steps (no timed GPU activity)")
    return run
