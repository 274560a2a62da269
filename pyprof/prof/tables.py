"""What a view produces and every renderer (terminal table, HTML page) consumes: a named table with
optional chart and tree hints. Plain data, JSON-serialisable, so the HTML page can embed it as it is."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class Table:
    """One view's result.

    name: registry key (``operators``); title: heading shown to people.
    columns: column keys; headers: their display names (same length); units in the header (``Time (ms)``).
    rows: list of row lists, values are str / int / float / None (None renders as ``na``).
    notes: sentences shown under the table (caveats, what a number means, what was capped).
    chart: None, or {"type": "bar" | "pie" | "stacked", "label": column key (or keys, joined by a space),
        "values": [column keys], "top": N (stacked only: the N rows with the largest sum, else the first rows)}:
        how the HTML page draws this table (top rows for bar/pie, one stacked bar per row for "stacked").
    tree_column: None, or the key of an int column giving each row's depth (the layer tree): renderers indent.
    worker: None for all workers together, else the worker (process) this table is about.
    empty: where the table has no rows, the sentence that says why (no rule fired; no memory events in the input):
        said wherever the table is shown, notes asked for or not, so that no one is left with a bare header.
    """

    name: str
    title: str
    columns: list[str]
    headers: list[str]
    rows: list[list] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    chart: dict | None = None
    tree_column: str | None = None
    worker: str | None = None
    empty: str | None = None

    @classmethod
    def of(cls, name: str, title: str, cols: list[tuple[str, str]], **kw) -> "Table":
        """A table whose columns are given as (key, header) pairs, as the views write them."""
        return cls(name, title, [c for c, _ in cols], [h for _, h in cols], **kw)

    def to_dict(self) -> dict:
        """The table as plain JSON-able data."""
        return asdict(self)
