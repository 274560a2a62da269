"""A job's rank files summarised on Dask (``pyprof prof --view ranks --engine dask[://HOST:PORT]``): one task per
rank file runs the per-file function (pyprof.prof.rank_summary.summarize_file) on a worker and writes the
summary as Parquet into a spill folder (pyprof.prof.rank_parquet); this process reads them back and combines
them (rank_files.job_tables), as the in-process path does. Dask schedules; pyprof has no scheduler of its own.

Dask's distributed scheduler and pyarrow are the ``cluster`` extra, imported only here and only when asked for:
importing pyprof imports neither. docs/cluster.md is the recipe.
"""
from __future__ import annotations

import os
import shutil
import tempfile

from pyprof.common import UsageError
from pyprof.prof.input_names import input_names
from pyprof.prof.rank_files import check_files
from pyprof.prof.rank_summary import FileSummary
from pyprof.prof.roofline import Peaks

#: What --engine takes: ``dask`` (a local cluster) or ``dask://HOST:PORT`` (a running scheduler).
SCHEME = "dask://"
INSTALL = "pip install pyprof[cluster]"


def scheduler_address(engine: str) -> str | None:
    """The scheduler's address for ``--engine``: None for ``dask`` (a local cluster), ``tcp://HOST:PORT`` for
    ``dask://HOST:PORT``. Raises UsageError for anything else."""
    if engine == "dask":
        return None
    if engine.startswith(SCHEME) and len(engine) > len(SCHEME):
        rest = engine[len(SCHEME):]
        return rest if "://" in rest else f"tcp://{rest}"
    raise UsageError(f"--engine {engine!r}: give dask (a local cluster) or dask://HOST:PORT (a running scheduler)")


def _modules():
    try:
        import distributed  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError as e:
        raise UsageError(f"--engine dask needs dask's distributed scheduler and pyarrow ({e.name} is not "
                         f"installed): {INSTALL}") from None
    from distributed import Client, LocalCluster

    return Client, LocalCluster


def summarize_files_dask(paths: list[str], peaks: Peaks | None = None, address: str | None = None,
                         workers: int = 1, spill: str | None = None) -> list[FileSummary]:
    """The FileSummary of each of ``paths``, in order, each made by a Dask task that wrote it as Parquet into
    ``spill``: on the scheduler at ``address`` (its workers read ``paths`` and write ``spill``: both on a
    filesystem they share with this process), or on a local cluster of ``workers`` processes. Without
    ``spill`` (a local cluster only) a temporary folder holds the Parquet files and is removed after.
    Raises UsageError (no dask, no spill folder for a remote cluster), InputError (a rank file), OutputError
    (the spill folder)."""
    from pyprof.prof.rank_parquet import read_summary, summarize_to_parquet

    Client, LocalCluster = _modules()
    check_files(paths)
    if spill is None and address is not None:
        raise UsageError("--engine dask://HOST:PORT needs --spill DIR, a folder on a filesystem the workers "
                         "share with this machine (the rank files' too)")
    own_spill = spill is None
    spill = tempfile.mkdtemp(prefix="pyprof-spill-") if own_spill else os.path.abspath(spill)
    try:
        if not own_spill:
            os.makedirs(spill, exist_ok=True)
        names = input_names(paths)
        outs = [os.path.join(spill, f"{i:06d}-{os.path.basename(p)}.parquet") for i, p in enumerate(paths)]
        cluster = None
        if address is None:
            import logging

            cluster = LocalCluster(n_workers=max(1, workers), threads_per_worker=1, processes=True,
                                   dashboard_address=None, silence_logs=logging.ERROR)
        try:
            with Client(cluster if cluster is not None else address) as client:
                futures = client.map(summarize_to_parquet, [os.path.abspath(p) for p in paths], names,
                                     [peaks] * len(paths), outs, pure=False)
                written = client.gather(futures)  # raises the first failed task's error, as it raised it
        finally:
            if cluster is not None:
                cluster.close()
        return [read_summary(p) for p in written]
    finally:
        if own_spill:
            shutil.rmtree(spill, ignore_errors=True)
