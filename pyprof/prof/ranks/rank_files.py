"""A job's rank files summarised on this machine, one file per task, in ``jobs`` processes
(concurrent.futures), then combined into the ranks view: ``pyprof prof --view ranks -j N FILES...``. Past one
machine the same per-file function runs on Dask (pyprof.prof.ranks.rank_dask; docs/cluster.md)."""
from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor

from pyprof import forked
from pyprof.common import InputError
from pyprof.prof.table.coverage import Coverage
from pyprof.prof.load.input_names import input_names
from pyprof.prof.ranks.rank_summary import FileSummary, job_ranks, summarize_file
from pyprof.prof.model.roofline import Peaks
from pyprof.prof.tables import Table


def check_files(paths: list[str]) -> None:
    """Raise InputError for a path that is not a readable file: before any task starts, not in one of them."""
    for p in paths:
        if os.path.isdir(p):
            raise InputError(p, "is a directory")
        if not os.path.isfile(p):
            raise InputError(p, "no such file")
        if not os.access(p, os.R_OK):
            raise InputError(p, "cannot open: permission denied")


def summarize_files(paths: list[str], peaks: Peaks | None = None, jobs: int = 1,
                    step_marker: str | None = None) -> list[FileSummary]:
    """The FileSummary of each of ``paths`` (rank files: records or exports), in order, in ``jobs`` worker
    processes (forked where the system can: they inherit the formulas of --plugin), or in this one for
    ``jobs`` <= 1 or a single file; each file's steps the ranges ``step_marker`` names, where given. Raises
    InputError for the first file (in order) that cannot be read, or that ran nothing under such a range."""
    check_files(paths)
    names = input_names(paths)
    if jobs <= 1 or len(paths) < 2:
        return [summarize_file(p, n, peaks, step_marker) for p, n in zip(paths, names)]
    ctx = multiprocessing.get_context("fork") if forked.available() else None
    with ProcessPoolExecutor(max_workers=min(jobs, len(paths)), mp_context=ctx) as pool:
        return list(pool.map(summarize_file, paths, names, [peaks] * len(paths), [step_marker] * len(paths)))


def job_tables(files: list[FileSummary], worker: str | None = None) -> tuple[list[Table], Coverage]:
    """The ranks view of a job's summarised files, and the coverage of the modelling over all of them."""
    from pyprof.prof.views.ranks import rank_tables

    coverage = Coverage()
    for f in files:
        coverage.merge(f.coverage)
    return rank_tables(job_ranks(files), len(files), worker), coverage
