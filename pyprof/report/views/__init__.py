"""The views: functions of an Aggregate (and an optional worker) returning Tables, registered by name with
``@view("name")``. ``build`` runs them; the terminal (``pyprof prof --view``) and the HTML page render the
Tables they return (pyprof.report.model). Columns, formulas and caveats: docs/views.md.
"""
from __future__ import annotations

from typing import Callable

from pyprof.common import UsageError
from pyprof.prof.columns import ABOVE_ROOFLINE
from pyprof.report.aggregate import Aggregate
from pyprof.report.model import Table

VIEWS: dict[str, Callable[..., list[Table]]] = {}


def view(name: str):
    """Decorator registering ``fn(agg, worker=None) -> Table | list[Table]`` under ``name`` (no duplicates)."""
    def deco(fn):
        if name in VIEWS:
            raise UsageError(f"view {name!r} is already registered to {VIEWS[name].__qualname__}")
        VIEWS[name] = fn
        return fn
    return deco


def build(agg: Aggregate, names: list[str] | None = None, worker: str | None = None) -> list[Table]:
    """The Tables of the named views (all, in registry order, for None), about one worker or all of them.
    Raises UsageError for an unknown view or worker."""
    _load()
    names = list(VIEWS) if names is None else names
    for n in names:
        if n not in VIEWS:
            raise UsageError(f"--view {n!r}: choose one of {', '.join(VIEWS)} or all")
    agg.select(worker)  # validates the name before any work
    out: list[Table] = []
    for n in names:
        t = VIEWS[n](agg, worker)
        for table in (t if isinstance(t, list) else [t]):
            table.worker = worker
            _explain_above_roofline(table)
            out.append(table)
    return out


def _explain_above_roofline(table: Table) -> None:
    """A number no GPU reaches needs its reason beside it: a note when a row is above 100% of its roofline."""
    if "roofline_pct" not in table.columns:
        return
    i = table.columns.index("roofline_pct")
    above = sum(1 for row in table.rows if isinstance(row[i], (int, float)) and row[i] > 100.0)
    if above:
        table.notes.append(f"{above} row(s) above 100%: {ABOVE_ROOFLINE}.")


def names() -> list[str]:
    """The registered view names, in the order ``--view all`` shows them."""
    _load()
    return list(VIEWS)


def _load() -> None:
    """Kept for callers that want to be explicit; the views register when this package is imported."""


# Importing the modules registers their views; the order here is the order of --view all (at the end of the
# package, so that importing one view module first still registers all of them in this order).
from pyprof.report.views import overview, groups, layers, recommend, workers  # noqa: E402,F401
