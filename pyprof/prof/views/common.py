"""Small helpers shared by the views: unit conversions (rounded for people, exact enough for sorting) and
merging one worker's groups with another's."""
from __future__ import annotations

import os

from pyprof.prof.aggregate import WorkerData


def ms(ns: float | None) -> float | None:
    """Nanoseconds as milliseconds, rounded to 0.1 us."""
    return None if ns is None else round(ns / 1e6, 4)


def pct(part: float | None, whole: float | None) -> float | None:
    """part / whole in percent, 2 decimals; None when whole is 0 or either is unknown."""
    if part is None or not whole:
        return None
    return round(100.0 * part / whole, 2)


def tflops(flops: float, ns: float) -> float | None:
    """Achieved TFLOP/s (None without FLOPs or time)."""
    if not flops or not ns:
        return None
    return round(flops / ns / 1e3, 3)


def merged(workers: list[WorkerData], attr: str) -> dict:
    """The named group dicts of several workers merged (their records' ``merge``: field by field)."""
    if len(workers) == 1:
        return getattr(workers[0], attr)
    out: dict = {}
    for w in workers:
        for k, g in getattr(w, attr).items():
            cur = out.get(k)
            if cur is None:
                out[k] = g.copy()
            else:
                cur.merge(g)
    return out


def total(workers: list[WorkerData], key: str) -> float:
    """Sum of one of the workers' totals."""
    return sum(w.totals[key] for w in workers)


def short_lines(callsites) -> tuple[str, dict]:
    """(common folder, {callsite: callsite relative to it}) for ``file:line`` keys: absolute paths from the
    capture machine are long and alike. The folder is '' when the paths share nothing but the root."""
    keys = [k for k in callsites if k != "-"]
    paths = [k.rpartition(":")[0] for k in keys]
    try:
        prefix = os.path.commonpath(paths) if paths else ""
    except ValueError:  # absolute and relative paths together (a call site from another tool): nothing shared
        prefix = ""
    if prefix in paths:  # a single file: keep its name
        prefix = os.path.dirname(prefix)
    if len(prefix) <= 1:
        prefix = ""
    out = {k: k for k in callsites}
    if prefix:
        for k in keys:
            if k.startswith(prefix):
                out[k] = k[len(prefix):].lstrip("/")
    return prefix, out
