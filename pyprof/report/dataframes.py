"""``pyprof.load``: the records of a profile as pandas DataFrames, for notebooks. One row per GPU activity with
prof's numbers (the report's table of every activity: pyprof.report.activity_table), and the views as DataFrames,
from one pass over the records; an export (Nsight Systems, nvprof, a PyTorch profiler trace) is parsed on the
way. pandas is an optional extra (``pip install 'pyprof[notebook]'``): parse, prof and report never need it.
"""
from __future__ import annotations

import os
import tempfile
from typing import NamedTuple

import numpy as np

from pyprof.common import InputError, UsageError


class Loaded(NamedTuple):
    """``activities``: one row per GPU activity; ``views``: each view's table by name (``operators``, ``lines``
    ...), the columns named by their keys (docs/views.md)."""

    activities: object  # pandas.DataFrame
    views: dict


def _pandas():
    try:
        import pandas
    except ImportError:
        raise UsageError("pyprof.load needs pandas: pip install 'pyprof[notebook]' (or pip install pandas)") \
            from None
    return pandas


def load(path: str, views: bool = False, step_marker: str | None = None):
    """The GPU activities of ``path`` (records, or an export parsed on the way) as a DataFrame: start (ms from
    the first activity), duration (us), kernel, op, dir, line, layer, FLOPs, bytes, TFLOP/s, roofline %,
    Tensor Cores (True, False, or NA where the question does not apply) and worker. With ``views=True``, a
    ``Loaded`` of that DataFrame and every view's table as a DataFrame, its steps the ranges ``step_marker``
    names where given (pyprof.prof.step_marker, as ``--step-marker``). Raises InputError for bad input and
    UsageError without pandas, or for a step marker no activity ran under."""
    pd = _pandas()
    from pyprof.prof import views as view_registry
    from pyprof.prof.aggregate import aggregate, numbered_file
    from pyprof.report.activity_table import ActivityTable
    from pyprof.prof.load.reader import is_records
    from pyprof.prof.step_marker import StepMarker

    if os.path.isdir(path):
        raise InputError(path, "is a directory")
    marker = None if step_marker is None else StepMarker(step_marker)
    with tempfile.TemporaryDirectory(prefix="pyprof-load-") as tmp:
        records = path
        if not is_records(path):
            from pyprof.parse import parse_file

            records = os.path.join(tmp, "records.dict")
            with open(records, "w", encoding="utf-8") as out:
                parse_file(path, out)
        acts = ActivityTable()
        agg = aggregate([(os.path.basename(path), numbered_file(records, path))], observe=acts, marker=marker)
    frame = _activities(pd, acts.to_dict())
    if not views:
        return frame
    tables = {t.name: pd.DataFrame(t.rows, columns=t.columns) for t in view_registry.build(agg)}
    return Loaded(frame, tables)


def _activities(pd, a: dict):
    cols: dict = {}
    for c in a["columns"]:
        v = a[c]
        if c in a["strings"]:
            strings, codes = a["strings"][c], np.asarray(v, dtype=np.int32)
            # ids into the column's strings: a categorical column as it is (two ids of one text, as two kernels
            # sharing a label could be, are merged by value)
            cols[c] = pd.Categorical.from_codes(codes, categories=strings) if len(set(strings)) == len(strings) \
                else pd.Categorical(np.asarray(strings, dtype=object)[codes])
        elif c in ("flops", "bytes"):
            cols[c] = pd.array(v if isinstance(v, list) else v.tolist(), dtype="Int64")
        elif c == "tc":
            cols[c] = pd.array([None if x is None else bool(x) for x in v], dtype="boolean")
        else:
            cols[c] = np.asarray([np.nan if x is None else x for x in v] if isinstance(v, list) else v,
                                 dtype=np.float64)
    return pd.DataFrame(cols)
