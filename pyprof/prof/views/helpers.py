"""Small helpers shared by the views: unit conversions (rounded for people, exact enough for sorting) and
merging one worker's groups with another's."""
from __future__ import annotations

import os

from pyprof.prof.aggregate import WorkerData
from pyprof.prof.table.groups import merged as merge_groups


def ms(ns: float | None) -> float | None:
    """Nanoseconds as milliseconds, rounded to 0.1 us."""
    return None if ns is None else round(ns / 1e6, 4)


def pct(part: float | None, whole: float | None) -> float | None:
    """part / whole in percent, 2 decimals; None when whole is 0 or either is unknown."""
    if part is None or not whole:
        return None
    return round(100.0 * part / whole, 2)


def _round(v: float | None, digits: int) -> float | None:
    return None if v is None else round(v, digits)


def modelled_cols(g) -> list:
    """A group's (pyprof.prof.table.groups.Group) FLOPs, TFLOP/s, roofline % and TC %, rounded as the tables show them:
    None (na) where the group's numbers say none is known or applies, as ``pyprof prof --group-by`` shows them."""
    return [g.known_flops, _round(g.tflops, 3), _round(g.roofline_pct, 2), _round(g.tc_pct, 2)]


def merged(workers: list[WorkerData], attr: str) -> dict:
    """The named groups (a dict of pyprof.prof.table.groups.Group) of several workers, summed key by key."""
    return merge_groups([getattr(w, attr) for w in workers])


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
