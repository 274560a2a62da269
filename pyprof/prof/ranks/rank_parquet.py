"""A rank file's summary (pyprof.prof.ranks.rank_summary.FileSummary) as one Parquet file: the intermediate result a
Dask task leaves in the spill folder and the driver reads back (pyprof.prof.ranks.rank_dask). Needs pyarrow (the
``cluster`` extra), imported only here.

One row per process of the rank file: its name, process id, dist and devices (JSON text: they keep their types),
its figures (int64, ns) and its communication kernels (``comm_names`` list<string>, ``comm_start_ns`` and
``comm_end_ns`` list<int64>). The schema's metadata holds the input's name, the coverage (JSON) and the layout's
version. Layout 1 had no kernel ends; a summary is the spill of one run, written and read by one version, so an
older layout is refused rather than read without them.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict

import numpy as np

from pyprof.common import InputError, OutputError, write_error
from pyprof.prof.table.coverage import Coverage
from pyprof.prof.ranks.rank_summary import FileSummary, RankSummary, summarize_file
from pyprof.prof.model.roofline import Peaks

#: The layout's version: a reader refuses any other (2: the communication kernels' ends).
VERSION = 2
_FIGURES = ("steps", "span_ns", "idle_ns", "comm_ns", "compute_ns", "hidden_ns", "sum_ns")
_JSON = ("pid", "dist", "devices")


def _pyarrow():
    import pyarrow as pa
    import pyarrow.parquet as pq

    return pa, pq


def write_summary(summary: FileSummary, path: str) -> None:
    """Write ``summary`` to ``path`` as Parquet, whole or not at all (a temporary name beside it, renamed).
    Raises OutputError when it cannot be written."""
    pa, pq = _pyarrow()
    ranks = summary.ranks
    columns = {"name": pa.array([r.name for r in ranks], pa.string())}
    for k in _JSON:
        columns[k] = pa.array([json.dumps(getattr(r, k)) for r in ranks], pa.string())
    for k in _FIGURES:
        columns[k] = pa.array([int(getattr(r, k)) for r in ranks], pa.int64())
    columns["comm_names"] = pa.array([r.comm_names for r in ranks], pa.list_(pa.string()))
    columns["comm_start_ns"] = pa.array([r.comm_start_ns for r in ranks], pa.list_(pa.int64()))
    columns["comm_end_ns"] = pa.array([r.comm_end_ns for r in ranks], pa.list_(pa.int64()))
    meta = {"pyprof.version": str(VERSION), "pyprof.input": summary.input,
            "pyprof.coverage": json.dumps(asdict(summary.coverage))}
    table = pa.table(columns).replace_schema_metadata(meta)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    except OSError as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise OutputError(path, write_error(e)) from None


def read_summary(path: str) -> FileSummary:
    """The FileSummary written at ``path``. Raises InputError for a file that is not one, or of a newer
    layout."""
    pa, pq = _pyarrow()
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as e:
        raise InputError(path, f"not a rank summary ({e})") from None
    meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    if "pyprof.version" not in meta:
        raise InputError(path, "not a rank summary (no pyprof.version in its Parquet metadata)")
    if int(meta["pyprof.version"]) != VERSION:
        raise InputError(path, f"rank summary layout {meta['pyprof.version']}, not this pyprof's ({VERSION}): "
                               "summarise with one version")
    cols = table.to_pydict()
    ranks = []
    for i, name in enumerate(cols["name"]):
        loaded = {k: json.loads(cols[k][i]) for k in _JSON}
        ranks.append(RankSummary(name, loaded["pid"], loaded["dist"], loaded["devices"],
                                 *(cols[k][i] for k in _FIGURES), list(cols["comm_names"][i]),
                                 np.array(cols["comm_start_ns"][i], np.int64),
                                 np.array(cols["comm_end_ns"][i], np.int64)))
    return FileSummary(meta["pyprof.input"], ranks, Coverage(**json.loads(meta["pyprof.coverage"])))


def summarize_to_parquet(path: str, display: str, peaks: Peaks | None, out: str,
                         step_marker: str | None = None) -> str:
    """One task: summarise the rank file at ``path`` (named ``display``; its steps the ranges ``step_marker``
    names, where given) and write its summary to ``out``; returns ``out``. Raises InputError (the rank file) or
    OutputError (``out``)."""
    write_summary(summarize_file(path, display, peaks, step_marker), out)
    return out
