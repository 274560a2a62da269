"""Tables in the terminal: a view's rows through prof's output formats (space, csv, columns, jsonl) on one
stream, its notes on another (stderr), so that ``pyprof prof --view lines | awk ...`` sees rows only. Titles and
notes can hold names from the input (a worker's file, an op): they are printed through ``printable`` as the
formats print fields, one line each."""
from __future__ import annotations

from typing import IO

from pyprof.common import printable
from pyprof.prof.table.formats import FORMATS, PROG, cut
from pyprof.prof.tables import Table


def print_tables(tables: list[Table], out: IO[str], err: IO[str] | None, fmt: str = "space", width: int = 0,
                 header: bool = True, said: IO[str] | None = None) -> None:
    """Write each table in format ``fmt``; with several tables each is preceded by a ``# title`` line (jsonl:
    each row carries a ``view`` key instead). Notes go to ``err`` (None: dropped); why a table has no rows
    (Table.empty) goes there too, or to ``said`` when notes are dropped (None: nowhere, as under --quiet)."""
    cls = FORMATS[fmt]
    many = len(tables) > 1
    for i, t in enumerate(tables):
        cols, heads = list(t.columns), list(t.headers)
        if many and cls.raw:
            cols, heads = ["view"] + cols, ["View"] + heads
        elif many:
            if i:
                out.write("\n")
            title = printable(f"# {t.title}{' (worker ' + str(t.worker) + ')' if t.worker else ''}")
            out.write((cut(title, width) if width else title) + "\n")
        w = cls(out, cols, heads, width)
        if header:
            w.header()
        if cls.raw:
            body = [tuple(([t.name] if many else []) + list(r)) for r in t.rows]
        else:
            body = [tuple("na" if v is None else v for v in r) for r in t.rows]
        w.rows(body)
        w.close()
        if err is not None:
            for n in t.notes:
                err.write(printable(f"{PROG}: {t.name}: {n}") + "\n")
        why = err if err is not None else said
        if not t.rows and t.empty and why is not None:
            why.write(printable(f"{PROG}: {t.name}: {t.empty}") + "\n")
