"""The views: functions of an Aggregate (and an optional worker) returning Tables, registered by name with
``@view("name")``. ``build`` runs them; the terminal (``pyprof prof --view``) and the HTML page render the
Tables they return (pyprof.prof.tables). Columns, formulas and caveats: docs/views.md.
"""
from __future__ import annotations

from pyprof.common import UsageError
from pyprof.prof.aggregate import Aggregate
from pyprof.prof.table.columns import ABOVE_ROOFLINE
from pyprof.prof.tables import Table
# Importing the view modules registers their views; this order is the order of --view all.
from pyprof.prof.views import overview, flat, layers, idle, host, memory, recommend, workers, ranks  # noqa: F401  isort: skip
from pyprof.prof.views.view_registry import VIEWS


def build(agg: Aggregate, names: list[str] | None = None, worker: str | None = None) -> list[Table]:
    """The Tables of the named views (all, in registry order, for None), about one worker or all of them.
    Raises UsageError for an unknown view or worker."""
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
    return list(VIEWS)
