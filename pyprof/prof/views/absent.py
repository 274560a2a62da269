"""Why an input carries no side lines of a kind (record.SIDE_KEY: host time, memory events), as the records show
it: a view that has none to show says the reason its data gives, once, never a guessed one.

Side lines came with record schema 4: records of an older parse carry none whatever their capture held, which
parse's header line tells (a file without one holds records of schema 1 or 2). An input of schema 4 without them
held nothing its reader turns into such lines; what that was is the view's to say (pyprof.prof.views.host,
pyprof.prof.views.memory).
"""
from __future__ import annotations

from pyprof.prof.aggregate import Aggregate

#: The record schema that added side lines (record.RECORD_SCHEMA's history).
SIDE_SCHEMA = 4


def schema_text(schema: int | None) -> str:
    return "schema 1 or 2 (no header line)" if schema is None else f"schema {schema}"


def older_inputs(agg: Aggregate, inputs: list[str] | None = None) -> dict[str, int | None]:
    """Of ``inputs`` (default: all of ``agg``'s), those read from a file whose records are older than side lines:
    name -> schema (None: no header line). Inputs whose schema is not known (records not read from a file)
    are left out: nothing is said of them."""
    names = agg.inputs if inputs is None else inputs
    return {n: agg.schemas[n] for n in names
            if n in agg.schemas and (agg.schemas[n] is None or agg.schemas[n] < SIDE_SCHEMA)}


def older_note(what: str, older: dict[str, int | None], everything: bool) -> str:
    """The note for inputs whose records are too old to carry ``what``: one sentence naming their schemas."""
    schemas = sorted({schema_text(s) for s in older.values()})
    which = "" if everything else f" ({', '.join(sorted(older))})"
    return (f"No {what} in {'this input' if everything else 'some inputs'}{which}: its records are of "
            f"{' and '.join(schemas)}, written by a pyprof older than record schema {SIDE_SCHEMA}, which added "
            f"them; parse the capture again with this pyprof.")


def inputs_of(agg: Aggregate, workers: list) -> list[str]:
    """The inputs ``workers`` came from, in input order (aggregate.worker_name: one input names none of its
    workers by it; several name each ``INPUT`` or ``INPUT:PID``)."""
    if len(agg.inputs) == 1:
        return list(agg.inputs) if workers else []
    names = {w.name for w in workers}
    return [i for i in agg.inputs if any(n == i or n.startswith(i + ":") for n in names)]


def names(workers: list, limit: int = 8) -> str:
    """Worker names for a note: the first ``limit``, and how many more."""
    shown = [w.name for w in workers[:limit]]
    return ", ".join(shown) + (f" and {len(workers) - limit} more" if len(workers) > limit else "")
