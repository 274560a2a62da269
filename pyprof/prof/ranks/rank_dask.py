"""A job's rank files summarised on Dask (``pyprof prof --view ranks --engine dask[://HOST:PORT]``): one task per
rank file runs the per-file function (pyprof.prof.ranks.rank_summary.summarize_file) on a worker and writes the
summary as Parquet into a spill folder (pyprof.prof.ranks.rank_parquet); this process reads them back and combines
them (rank_files.job_tables), as the in-process path does. Dask schedules; pyprof has no scheduler of its own.

Dask's distributed scheduler and pyarrow are the ``cluster`` extra, imported only here and only when asked for:
importing pyprof imports neither. docs/cluster.md is the recipe.
"""
from __future__ import annotations

import os
import shutil
import tempfile

from pyprof.common import PyprofError, UsageError
from pyprof.prof.load.input_names import input_names
from pyprof.prof.ranks.rank_files import check_files
from pyprof.prof.ranks.rank_summary import FileSummary
from pyprof.prof.model.roofline import Peaks

#: What --engine takes: ``dask`` (a local cluster) or ``dask://HOST:PORT`` (a running scheduler).
SCHEME = "dask://"
INSTALL = "pip install pyprof[cluster]"
#: How long ``dask://HOST:PORT`` waits for the scheduler to answer. Dask's own default is 30 s (its
#: ``distributed.comm.timeouts.connect``), a long wait for a typo in the port; a running scheduler on the
#: network answers in milliseconds, one still starting can be asked again.
CONNECT_TIMEOUT_S = 10


class SchedulerError(PyprofError):
    """The Dask scheduler named by ``--engine dask://HOST:PORT`` cannot be reached, or dropped the connection
    (exit code 1)."""


def scheduler_address(engine: str) -> str | None:
    """The scheduler's address for ``--engine``: None for ``dask`` (a local cluster), ``tcp://HOST:PORT`` for
    ``dask://HOST:PORT``. Raises UsageError for anything else."""
    if engine == "dask":
        return None
    if engine.startswith(SCHEME) and len(engine) > len(SCHEME):
        rest = engine[len(SCHEME):]
        address = rest if "://" in rest else f"tcp://{rest}"
        host, _, port = address.split("://", 1)[1].rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise UsageError(f"--engine {engine!r}: give the scheduler's port, dask://HOST:PORT (1 to 65535)")
        return address
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
                         workers: int = 1, spill: str | None = None,
                         step_marker: str | None = None) -> list[FileSummary]:
    """The FileSummary of each of ``paths``, in order, each made by a Dask task that wrote it as Parquet into
    ``spill``: on the scheduler at ``address`` (its workers read ``paths`` and write ``spill``: both on a
    filesystem they share with this process), or on a local cluster of ``workers`` processes. Without
    ``spill`` (a local cluster only) a temporary folder holds the Parquet files and is removed after. Each
    file's steps are the ranges ``step_marker`` names, where given. Raises UsageError (no dask, no spill folder
    for a remote cluster), InputError (a rank file), OutputError (the spill folder)."""
    from pyprof.prof.ranks.rank_parquet import read_summary, summarize_to_parquet

    Client, LocalCluster = _modules()
    check_files(paths)
    if spill is None and address is not None:
        raise UsageError("--engine dask://HOST:PORT needs --spill DIR, a folder on a filesystem the workers "
                         "share with this machine (the rank files' too)")
    if address is not None:
        _reachable(address)  # before the spill folder is made: a refusal leaves nothing
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
            with _client(Client, cluster, address) as client:
                futures = client.map(summarize_to_parquet, [os.path.abspath(p) for p in paths], names,
                                     [peaks] * len(paths), outs, [step_marker] * len(paths), pure=False)
                written = client.gather(futures)  # raises the first failed task's error, as it raised it
        finally:
            if cluster is not None:
                cluster.close()
        return [read_summary(p) for p in written]
    finally:
        if own_spill:
            shutil.rmtree(spill, ignore_errors=True)


def _reachable(address: str) -> None:
    """Raise SchedulerError unless a Dask scheduler answers at ``address`` within CONNECT_TIMEOUT_S: nothing
    listening (Dask retries until its timeout, then an OSError), or something that is not a scheduler (it
    closes the connection or answers otherwise: CommClosedError, an OSError too)."""
    from distributed import Client

    try:
        _listening(address)
        with Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False):
            pass
    except OSError as e:
        raise SchedulerError(f"cannot reach a Dask scheduler at {address}: {_reason(e)}") from None


def _listening(address: str) -> None:
    """For a ``tcp://`` address, one plain connection first: a port where nothing listens refuses it at once,
    where Dask would try again until its timeout. Raises OSError."""
    import socket

    from distributed.comm.addressing import parse_address, parse_host_port

    scheme, location = parse_address(address)
    if scheme != "tcp":
        return
    host, port = parse_host_port(location)
    socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()


def _client(Client, cluster, address: str | None):
    """The client of the local ``cluster``, or of the scheduler at ``address`` (checked by _reachable: a
    connection that drops now is one line too)."""
    if cluster is not None:
        return Client(cluster)
    try:
        return Client(address, timeout=CONNECT_TIMEOUT_S)
    except OSError as e:
        raise SchedulerError(f"cannot reach a Dask scheduler at {address}: {_reason(e)}") from None


def _reason(e: OSError) -> str:
    """Dask's words, less the connection object it names (``in <TCP (closed) local=... remote=...>: ``)."""
    if isinstance(e, ConnectionRefusedError):
        return "connection refused (nothing listens on that port)"
    text = str(e) or type(e).__name__
    if text.startswith("in <") and ">: " in text:
        text = text[text.index(">: ") + 3:]
    return text
