"""Output formats: small classes registered by name, each writing rows to a stream.

``space`` (default: one line per row, fields separated by one space, for awk, as the original), ``csv``
(the csv module), ``columns`` (``-w WIDTH``: aligned, never wider than WIDTH; buffers the table, since column
widths depend on every row) and ``jsonl`` (one JSON object per row, null for na).
Rows stream out as they come except for ``columns``. The per-kernel table writes csv and space rows as lines it
makes itself (LineFields: the same text, each distinct string's worked out once).

The text formats (space, csv, columns) print every field through ``printable``: one line per row whatever a
name holds (no newline, escape sequence or other control character reaches the terminal), and no field longer
than MAX_FIELD_CHARS. JSON Lines needs neither: the encoder escapes every control and non-ASCII character, and
keeps names whole.
"""
from __future__ import annotations

import csv
import re
import io
import json
from typing import IO, Callable, Sequence

from pyprof.common import MAX_FIELD_CHARS, BoundedDict, UsageError, printable

#: How messages and usage name the command: as users type it (``pyprof prof``), also when it was started as
#: ``python -m pyprof.prof``, so that a message reads the same in both and names the command to run again.
PROG = "pyprof prof"


def _plain(lines: list[str]) -> bool:
    """True when no field of these lines (each fields joined by printable separators) needs ``printable``: the
    common case, checked once per batch in C instead of once per field."""
    return " ".join(lines).isprintable() and max(map(len, lines), default=0) <= MAX_FIELD_CHARS


class LineFields:
    """How a format whose rows are lines of fields joined by one ``separator`` (csv, space) writes a field:
    ``text(value)`` is the field's text, the same as the format's ``rows`` writes it; an int's or a float's is
    its ``str`` in every such format (``compile_line`` writes those as they are). The per-kernel table
    makes each row's line itself with it (columns.compile_line): kernel names, ops, shapes and directions
    repeat from row to row, so a string's text is looked up in ``cache`` (``get``) before it is worked out,
    where ``rows`` would pass every field through ``printable`` and the csv module again (the csv module
    looks at each character of each field: about an eighth of a row's instructions on real records)."""

    #: Strings longer than this are not kept, so that the cache stays under about 25 MB whatever the names are
    #: (escapes make a text up to ten times as long as its string); a long one (a call stack) is rare in a
    #: column that repeats, and costs a few scans of it to write.
    CACHED_CHARS = 256

    def __init__(self, separator: str, encode: Callable[[object], str]) -> None:
        self.separator = separator
        self._encode = encode
        self.cache = BoundedDict(1 << 12)  # a string -> its field text
        self.get = self.cache.get

    def text(self, value) -> str:
        """The field text of ``value`` (any value a column gives); kept in ``cache`` when a string."""
        t = self._encode(value)
        if type(value) is str and len(value) <= self.CACHED_CHARS:
            self.cache.add(value, t)
        return t


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

    #: A format whose rows are lines of fields joined by one separator: a factory of its LineFields, with
    #: which the per-kernel table makes rows as lines (``lines``) instead of tuples (``rows``).
    fields: Callable[[], LineFields] | None = None

    def lines(self, lines: list[str]) -> None:
        """Write rows already made as lines of text (columns.compile_line with this format's ``fields``)."""
        if lines:
            self.stream.write("\n".join(lines) + "\n")

    def close(self) -> None:
        self.stream.flush()


#: What a spreadsheet opening a CSV file takes for the start of a formula (OWASP's CSV-injection list: = + - @,
#: tab and carriage return; the last two never survive ``printable``, they are listed for a text made otherwise).
_FORMULA_LEADS = frozenset("=+-@\t\r")
#: A text cell that a spreadsheet reads as a number (12, -1.5, +3.4%, -1,234, 1.2e-05): left as it is.
_NUMBER_TEXT = re.compile(r"[+-]?(?:[0-9][0-9,]*(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?%?")


def formula_safe(text: str) -> str:
    """A CSV cell's text that no spreadsheet runs as a formula: ``text`` with a single quote before it when it
    starts with one of ``= + - @`` (or a tab or carriage return) and is not a number; the quote makes the cell
    text in Excel, LibreOffice and Google Sheets. A number (-1.5, +3.4%) keeps its sign and stays a number;
    ``-``, the tables' "no value", stays too (one character holds no formula)."""
    if text[:1] in _FORMULA_LEADS and text != "-" and not _NUMBER_TEXT.fullmatch(text):
        return "'" + text
    return text


def _csv_cell(value):
    """A value as a CSV cell before the csv module quotes it: None, an int or a float as it is (the module
    writes them), anything else printable and formula_safe."""
    if value is None or type(value) is int or type(value) is float:
        return value
    return formula_safe(printable(str(value)))


def _space_text(value) -> str:
    """A field of the space-separated format: as SpaceFormat.rows writes it (printable, spaces as '_')."""
    return printable(str(value)).replace(" ", "_")


def _csv_text(value) -> str:
    """A field of the CSV format, as CsvFormat.rows writes it: None empty, an int or a float as the csv module
    writes it, anything else printable and formula_safe, then quoted by the csv module where it needs to be (a
    field that is not alone in its row: a row of one empty field is written ``""``)."""
    if type(value) is float:
        return repr(value)  # what the csv module writes for a float
    if value is not None and type(value) is not int:
        value = formula_safe(printable(str(value)))
        if value.isprintable() and "," not in value and '"' not in value:  # (printable: no line break left)
            return value
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow((value, ""))
    return buf.getvalue()[:-2]  # less the empty second field's separator and the line's end


@register_format("space")
class SpaceFormat(Format):
    """Fields separated by single spaces; spaces inside a field become '_' so that awk sees one field."""

    @staticmethod
    def fields() -> LineFields:
        return LineFields(" ", _space_text)

    def header(self) -> None:
        self.stream.write(" ".join([printable(h).replace(" ", "_") for h in self.headers]) + "\n")

    def rows(self, rows: list[tuple]) -> None:
        lines = [" ".join([str(v).replace(" ", "_") for v in r]) for r in rows]
        if not _plain(lines):
            lines = [" ".join([printable(str(v)).replace(" ", "_") for v in r]) for r in rows]
        if lines:
            self.stream.write("\n".join(lines) + "\n")


@register_format("csv")
class CsvFormat(Format):
    """RFC 4180 CSV through the csv module (a comma or a quote in a field: the field is quoted), one line per
    row: a line break inside a field is escaped by ``printable`` as the other control characters, since
    line-based tools (grep, wc -l, head) would take a quoted one for two rows. A text cell that a spreadsheet
    would run as a formula is written ``formula_safe``."""

    @staticmethod
    def fields() -> LineFields:
        return LineFields(",", _csv_text)

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
        self._w.writerow([_csv_cell(h) for h in self.headers])
        self._flush_buf()

    def rows(self, rows: list[tuple]) -> None:
        self._w.writerows(rows)
        text = self._buf.getvalue()
        lines = text.split("\n")
        lines.pop()  # after the last line terminator
        # A line break in a field, another character to escape, or a cell that a spreadsheet would run: each
        # line starts with a cell, and every other cell follows a comma.
        if len(lines) != len(rows) or not _plain(lines) or _formula_lead(text):
            self._buf.seek(0)
            self._buf.truncate()
            self._w.writerows([[_csv_cell(v) for v in r] for r in rows])
        self._flush_buf()


_LEAD_AFTER = re.compile(r'(?:^|,)"?[=+\-@\t\r]', re.M)


def _formula_lead(text: str) -> bool:
    """Whether some cell of these CSV lines may start as a formula does (a number with a sign also matches:
    the rows are then written cell by cell, and formula_safe tells the two apart)."""
    return _LEAD_AFTER.search(text) is not None


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
    """Columnated, never wider than ``width`` characters. Text columns give up width first, paths losing their
    start (``~/lenet.py:25``: the file and line stay), other text its end; a number is never cut (a -w too
    narrow for the numbers is a usage error naming the width they need). Fields go through
    ``printable`` first, so that the width of a field is its number of characters (padded here, not by
    tabulate, whose optional wcwidth mode would count a combining character as no column and pad past
    ``width``)."""

    GAP = 2  # columns are separated by two spaces

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self._rows: list[tuple] = []
        n = len(self.columns)
        if self.width < n + self.GAP * (n - 1):
            raise UsageError(f"-w {self.width} is too narrow for {n} columns "
                             f"(at least {n + self.GAP * (n - 1)} needed)")

    def rows(self, rows: list[tuple]) -> None:
        cells = [tuple([str(v) for v in r]) for r in rows]
        if not _plain([" ".join(c) for c in cells]):
            cells = [tuple([printable(v) for v in c]) for c in cells]
        self._rows.extend(cells)

    def close(self) -> None:
        headers = [printable(h) for h in self.headers]
        flexible = [j for j, c in enumerate(self.columns) if c in FLEXIBLE]
        numbers = [j for j in range(len(self.columns)) if all(_NUMBER.fullmatch(r[j]) for r in self._rows)]
        widths = fit_widths([len(h) for h in headers], self._rows, self.width, self.GAP, flexible, numbers)
        cuts = [cut_left if c in PATHS or (self._rows and all(_SITE.fullmatch(r[j]) for r in self._rows)) else cut
                for j, c in enumerate(self.columns)]
        gap = " " * self.GAP
        self.stream.write("".join(gap.join([f(v, w).ljust(w) for v, w, f in zip(r, widths, cuts)]).rstrip() + "\n"
                                  for r in [headers, *self._rows]))
        self.stream.flush()


#: A cell that is a number (or says there is none): never cut.
_NUMBER = re.compile(r"\(?-?[0-9][0-9.,e+-]*\)?%?|na|-|")  # 12, 0.45, 1.2e+09, 491,493, (16,1,1), na
#: Columns of paths and ``file:line`` sites: cut from the left, so that the file and line stay (as is any column
#: whose every cell is a site: ``--group-by callsite``'s key).
PATHS = frozenset({"trace", "callsite", "line", "path"})
_SITE = re.compile(r"[^ ]*[/\\][^ ]*:[0-9]+|-")


def cut_left(s: str, w: int) -> str:
    """``s`` in at most ``w`` characters: its end, with ``~`` as its first one, when longer."""
    return s if len(s) <= w else "~" + s[len(s) - max(w - 1, 0):] if w > 1 else s[-w:] if w else ""


def cut(s: str, w: int) -> str:
    """``s`` in at most ``w`` characters: cut, with ``~`` as its last one, when longer."""
    return s if len(s) <= w else s[: max(w - 1, 0)] + "~"


#: Text columns that give up width first (as the original gave kernel and params the remainder).
FLEXIBLE = frozenset({"kernel", "params", "trace", "layer", "callsite", "op", "mod", "note", "key",
                      # the views' text columns (pyprof.report)
                      "source", "line", "shapes", "path", "about", "evidence", "action"})


def fit_widths(header_widths: list[int], rows: list[tuple], width: int, gap: int,
               flexible: Sequence[int] = (), numbers: Sequence[int] = ()) -> list[int]:
    """Column widths that fit ``width`` in total: each column its natural width; then the widest flexible
    (text) columns are shrunk, and only if that is not enough every other column but the ``numbers``
    (water-filling), which keep their width. Raises UsageError when the numbers alone do not fit."""
    nat = list(header_widths)
    for r in rows:
        for j, v in enumerate(r):
            if len(v) > nat[j]:
                nat[j] = len(v)
    budget = width - gap * (len(nat) - 1)
    if sum(nat) <= budget:
        return nat
    if numbers:
        # A number column keeps its values whole; its header gives way first when the others need the room.
        values = {j: max((len(r[j]) for r in rows), default=1) or 1 for j in numbers}
        others = [j for j in range(len(nat)) if j not in numbers]
        if budget - sum(nat[j] for j in numbers) < 3 * len(others):
            nat = [values[j] if j in values else n for j, n in enumerate(nat)]
        kept = sum(nat[j] for j in numbers)
        if budget - kept < len(others):  # every other column needs a character at least
            raise UsageError(f"-w {width} is too narrow for these numbers: at least "
                             f"{kept + len(others) + gap * (len(nat) - 1)} needed (numbers are never cut)")
        sub = fit_widths([nat[j] for j in others], [], budget - kept + gap * (len(others) - 1), gap,
                         [i for i, j in enumerate(others) if j in flexible])
        out = list(nat)
        for j, w in zip(others, sub):
            out[j] = w
        return out
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
