"""Output formats: small classes registered by name, each writing rows to a stream.

``space`` (default: one line per row, fields separated by one space, for awk, as the original), ``csv``
(the csv module), ``columns`` (``-w WIDTH``: aligned with tabulate, never wider than WIDTH; buffers the table,
since column widths depend on every row) and ``jsonl`` (one JSON object per row, null for na).
Rows stream out as they come except for ``columns``.
"""
from __future__ import annotations

import csv
import io
import json
from typing import IO, Sequence

from pyprof.common import UsageError

FORMATS: dict[str, type["Format"]] = {}


def register_format(name: str):
    """Class decorator registering an output format under ``name`` (refuses duplicates)."""
    def deco(cls):
        if name in FORMATS:
            raise UsageError(f"output format {name!r} is already registered to {FORMATS[name].__qualname__}")
        FORMATS[name] = cls
        cls.name = name
        return cls
    return deco


class Format:
    """Base: ``header`` once, ``rows`` for batches of value tuples, ``close`` at the end."""

    name = ""
    raw = False  # True: values are JSON values (None for na), not text

    def __init__(self, stream: IO[str], columns: Sequence[str], headers: Sequence[str], width: int = 0):
        self.stream = stream
        self.columns = list(columns)
        self.headers = list(headers)
        self.width = width

    def header(self) -> None:
        pass

    def rows(self, rows: list[tuple]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.stream.flush()


@register_format("space")
class SpaceFormat(Format):
    """Fields separated by single spaces; spaces inside a field become '_' so that awk sees one field."""

    def header(self) -> None:
        self.stream.write(" ".join(self.headers) + "\n")

    def rows(self, rows: list[tuple]) -> None:
        self.stream.write("".join(" ".join([str(v).replace(" ", "_") for v in r]) + "\n" for r in rows))


@register_format("csv")
class CsvFormat(Format):
    """RFC 4180 CSV through the csv module."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        # The writer fills a StringIO and each batch goes out in one write: one Python-level write per row
        # would cost as much as the formatting.
        self._buf = io.StringIO()
        self._w = csv.writer(self._buf, lineterminator="\n")

    def _flush_buf(self) -> None:
        self.stream.write(self._buf.getvalue())
        self._buf.seek(0)
        self._buf.truncate()

    def header(self) -> None:
        self._w.writerow(self.headers)
        self._flush_buf()

    def rows(self, rows: list[tuple]) -> None:
        self._w.writerows(rows)
        self._flush_buf()


@register_format("jsonl")
class JsonLinesFormat(Format):
    """One JSON object per row, keyed by column name; na is null."""

    raw = True

    def rows(self, rows: list[tuple]) -> None:
        cols = self.columns
        dumps = json.dumps
        self.stream.write("".join(dumps(dict(zip(cols, r)), separators=(",", ":")) + "\n" for r in rows))


@register_format("columns")
class ColumnsFormat(Format):
    """Columnated with tabulate, never wider than ``width``: the widest columns are cut to fit."""

    GAP = 2  # tabulate's "plain" format separates columns with two spaces

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self._rows: list[tuple] = []
        n = len(self.columns)
        if self.width < n + self.GAP * (n - 1):
            raise UsageError(f"-w {self.width} is too narrow for {n} columns "
                             f"(at least {n + self.GAP * (n - 1)} needed)")

    def rows(self, rows: list[tuple]) -> None:
        self._rows.extend(tuple(str(v) for v in r) for r in rows)

    def close(self) -> None:
        from tabulate import tabulate

        flexible = [j for j, c in enumerate(self.columns) if c in FLEXIBLE]
        widths = fit_widths([len(h) for h in self.headers], self._rows, self.width, self.GAP, flexible)
        cut = [[_cut(v, w) for v, w in zip(r, widths)] for r in self._rows]
        heads = [_cut(h, w) for h, w in zip(self.headers, widths)]
        # The header goes in as the first row: with headers=..., tabulate pads every column by MIN_PADDING.
        text = tabulate([heads] + cut, tablefmt="plain", disable_numparse=True, stralign="left")
        self.stream.write("".join(line.rstrip() + "\n" for line in text.splitlines()))
        self.stream.flush()


def _cut(s: str, w: int) -> str:
    return s if len(s) <= w else s[: max(w - 1, 0)] + "~"


#: Text columns that give up width first (as the original gave kernel and params the remainder).
FLEXIBLE = frozenset({"kernel", "params", "trace", "layer", "callsite", "op", "mod", "note", "key",
                      # the views' text columns (pyprof.report)
                      "source", "line", "shapes", "path", "about", "evidence", "advice"})


def fit_widths(header_widths: list[int], rows: list[tuple], width: int, gap: int,
               flexible: Sequence[int] = ()) -> list[int]:
    """Column widths that fit ``width`` in total: each column its natural width; then the widest flexible
    (text) columns are shrunk, and only if that is not enough every column (water-filling)."""
    nat = list(header_widths)
    for r in rows:
        for j, v in enumerate(r):
            if len(v) > nat[j]:
                nat[j] = len(v)
    budget = width - gap * (len(nat) - 1)
    if sum(nat) <= budget:
        return nat
    if flexible:
        fixed = sum(n for j, n in enumerate(nat) if j not in flexible)
        flex_budget = budget - fixed
        if flex_budget >= 3 * len(flexible):
            sub = fit_widths([nat[j] for j in flexible], [], flex_budget + 0, 0)
            out = list(nat)
            for j, w in zip(flexible, sub):
                out[j] = w
            return out
    # Find the cap c such that sum(min(n, c)) <= budget, then hand out the rest one by one.
    lo, hi = 1, max(nat)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(min(n, mid) for n in nat) <= budget:
            lo = mid
        else:
            hi = mid - 1
    out = [min(n, lo) for n in nat]
    spare = budget - sum(out)
    for j in sorted(range(len(nat)), key=lambda j: -nat[j]):
        if spare <= 0:
            break
        if out[j] < nat[j]:
            out[j] += 1
            spare -= 1
    return out
