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
import io
import json
import re
import textwrap
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
    """Columnated for a person at a terminal, ``width`` characters wide where the numbers allow. Numbers are never
    cut and stand right-aligned; a count of FLOPs or bytes of a million or more is shown with an SI prefix
    (``2.72T``; the ``columns-exact`` format, ``--exact``, shows it whole). Headers wrap at spaces onto up to three
    lines rather than being cut. Text columns give up width first, none below TEXT_MIN characters while its text
    is longer: prose (a finding's evidence, an action) wraps onto further lines, paths lose their start
    (``~/lenet.py:25``: the file and line stay), other text its end. A table whose numbers and narrowest text do not
    fit is printed wider than ``width`` rather than refused. Fields go through ``printable`` first, so that the
    width of a field is its number of characters.

    ``width`` 0 (output to a pipe or a file) fits no width: nothing is cut, wrapped or left out, and rows go out
    in blocks of BLOCK_ROWS, each aligned to the widest field so far, so that a table of a million kernels is never
    held whole. Columns are then two or more spaces apart, a run of spaces inside a field is written as one and an
    empty field as ``-``, so a script splits a line on runs of two spaces (``awk -F '  +'``)."""

    GAP = 2  # columns are separated by two spaces
    si = True  # counts of FLOPs and bytes with SI prefixes
    #: Off a terminal (width 0), rows are written in blocks of this many.
    BLOCK_ROWS = 4096

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self._rows: list[tuple] = []
        self._si = [self.si and _quantity(c) for c in self.columns]
        self._header = False  # header() was called: the header is written (at close, sized with the rows)
        self._widths: list[int] | None = None  # width 0: the widths of the blocks written so far
        self._numbers: set[int] = set()  # width 0: the right-aligned columns (numbers in the first block)

    def header(self) -> None:
        self._header = True

    def rows(self, rows: list[tuple]) -> None:
        if self.si:  # counts of FLOPs and bytes with SI prefixes, other floats to 4 significant digits
            si = self._si
            cells = [tuple([si_text(v) if q and type(v) in (int, float) else short_float(v) if type(v) is float
                            else str(v) for v, q in zip(r, si)]) for r in rows]
        else:
            cells = [tuple([str(v) for v in r]) for r in rows]
        if not _plain([" ".join(c) for c in cells]):
            cells = [tuple([printable(v) for v in c]) for c in cells]
        self._rows.extend(cells)
        if not self.width and len(self._rows) >= self.BLOCK_ROWS:
            self._block()

    def _block(self) -> None:
        """Width 0: the rows held so far, aligned to the widest field of every block so far (the header first); a
        column is right-aligned where the first block's fields are all numbers."""
        headers = [_SPACES.sub(" ", printable(h)) or "-" for h in self.headers]
        # most rows hold no run of spaces and no empty field: those are written as they are
        rows = [r if "" not in r and "  " not in "\t".join(r) else tuple([_SPACES.sub(" ", v) or "-" for v in r])
                for r in self._rows]
        self._rows = []
        first = self._widths is None
        if first:
            self._widths = [len(h) if self._header else 1 for h in headers]
            self._numbers = {j for j in range(len(headers)) if rows and all(_NUMBER.fullmatch(r[j]) for r in rows)}
        if rows:
            self._widths = [max(w, max(map(len, column))) for w, column in zip(self._widths, zip(*rows))]
        widths, numbers, gap = self._widths, self._numbers, " " * self.GAP
        out = [_line(headers, widths, numbers, gap)] if first and self._header else []
        out += [_line(r, widths, numbers, gap) for r in rows]
        self.stream.write("".join(line + "\n" for line in out))

    def close(self) -> None:
        if not self.width:
            if self._rows or self._widths is None:
                self._block()
            self.stream.flush()
            return
        headers = [printable(h) for h in self.headers]
        columns, rows, same, narrow = self.columns, self._rows, [], []
        natural = fit_columns(headers, rows, 1 << 30, self.GAP, set(), set())
        if rows and sum(natural) + self.GAP * (len(columns) - 1) > self.width:
            # a column that says nothing (na, 0 or - in every row) gives its room to the others; a line says so
            blank = {j for j in range(len(columns)) if len({r[j] for r in rows}) == 1 and rows[0][j] in _NOTHING}
            if blank and len(blank) < len(columns):
                same = [f"{headers[j]} {rows[0][j]}" for j in sorted(blank)]
                headers, columns, rows = _without(blank, headers, columns, rows)
        while True:
            widths, gap_n, numbers, prose, rows = self._layout(headers, columns, rows)
            text = [j for j in range(len(columns)) if j not in numbers]
            key = text[0] if text else None
            others = [j for j in text[1:] if j not in prose]
            squeezed = [j for j in [key] + others if key is not None and
                        widths is not None and widths[j] < min(TEXT_MIN, natural_width(headers[j], rows, j))]
            if widths is None or key is None or not others or not squeezed:
                break
            # a text column would go below TEXT_MIN characters: a text column gives way, whole, the least telling
            # first (the module, the direction, ...), then the last of those cut short, then the last
            cut_short = [j for j in squeezed if j != key]
            gone = next((j for j in others if columns[j] in GIVE_WAY_FIRST),
                        cut_short[-1] if cut_short else others[-1])
            narrow.append(headers[gone])
            headers, columns, rows = _without({gone}, headers, columns, rows)
        self._rows = rows
        if widths is None:
            self._blocks(headers)
        else:
            self._render(headers, columns, rows, widths, gap_n, numbers, prose)
        if self._header and (same or narrow):
            said = ([f"the same in every row: {'; '.join(same)}"] if same else []) + \
                ([f"too narrow to show: {', '.join(narrow)} (a wider terminal, or --csv)"] if narrow else [])
            self.stream.write(cut(f"(not shown, {'; '.join(said)})", self.width) + "\n")
        self.stream.flush()

    def _layout(self, headers: list[str], columns: list[str], rows: list[tuple]):
        """(widths or None for blocks, the gap, the number columns, the prose columns, the rows as shown)."""
        n = len(columns)
        numbers = {j for j in range(n) if all(_NUMBER.fullmatch(r[j]) for r in rows)}
        prose = {j for j, c in enumerate(columns) if c in PROSE and j not in numbers}
        gap_n = self.GAP
        widths = fit_columns(headers, rows, self.width, gap_n, numbers, prose)
        if sum(widths) + gap_n * (n - 1) > self.width:
            # tighter: one space between columns, and number headers broken inside a word
            gap_n = 1
            widths = fit_columns(headers, rows, self.width, gap_n, numbers, prose, break_words=True)
        if sum(widths) + gap_n * (n - 1) > self.width and self.si:
            # numbers to 3 significant digits, so that text keeps TEXT_MIN characters where it can
            rows = [tuple(_shorter(v) if j in numbers else v for j, v in enumerate(r)) for r in rows]
            widths = fit_columns(headers, rows, self.width, gap_n, numbers, prose, break_words=True)
        for key_min in (TEXT_MIN, 3):
            if sum(widths) + gap_n * (n - 1) <= self.width or prose:
                break
            # text below TEXT_MIN now that no number can give more room, the row's key (the first text column)
            # last: the file and line of a path stay
            widths = fit_columns(headers, rows, self.width, gap_n, numbers, prose, break_words=True,
                                 text_min=3, key_min=key_min)
        if prose and (min(widths[j] for j in prose) < PROSE_MIN or sum(widths) + gap_n * (n - 1) > self.width):
            return None, gap_n, numbers, prose, rows  # sentences this narrow are a word a line: blocks
        return widths, gap_n, numbers, prose, rows

    def _render(self, headers, columns, rows, widths, gap_n, numbers, prose) -> None:
        # names that share a start (fused:view+_to_copy+..., _foreach_addcdiv_ and _foreach_addcmul_) stay apart
        cuts = [cut_left if c in PATHS or (rows and all(_SITE.fullmatch(r[j]) for r in rows)) else
                cut_middle for j, c in enumerate(columns)]
        gap = " " * gap_n
        head = [_wrap(h, w, 3) for h, w in zip(headers, widths)]
        tall = max((len(h) for h in head), default=1)
        out = []
        for i in range(tall if self._header else 0):  # headers bottom-aligned over their columns
            line = [(h[i - tall + len(h)] if i >= tall - len(h) else "") for h in head]
            out.append(_line(line, widths, numbers, gap))
        for r in rows:
            parts = [_wrap(v, w, 0) if j in prose else [cuts[j](v, w)] for j, (v, w) in enumerate(zip(r, widths))]
            for i in range(max(len(p) for p in parts) if parts else 1):
                out.append(_line([p[i] if i < len(p) else "" for p in parts], widths, numbers, gap))
        self.stream.write("".join(line + "\n" for line in out))

    def _blocks(self, headers: list[str]) -> None:
        """Each row as a block: its first field, then one ``Header: value`` line per other field, wrapped to the
        width and indented; a blank line between blocks."""
        w = max(self.width, PROSE_MIN + 4)
        out = []
        for r in self._rows:
            if out:
                out.append("")  # (a block's field names are its header: --no-header leaves them)
            out += textwrap.wrap(r[0], w, subsequent_indent="  ", break_on_hyphens=False) if r and r[0] else [""]
            for h, v in zip(headers[1:], r[1:]):
                out += textwrap.wrap(f"{h}: {v}", w, initial_indent="  ", subsequent_indent="    ",
                                     break_on_hyphens=False) or ["  " + h + ":"]
        self.stream.write("".join(line + "\n" for line in out))
        self.stream.flush()


@register_format("columns-exact")
class ExactColumnsFormat(ColumnsFormat):
    """``columns`` with every number whole (``--exact``)."""

    si = False


#: What a column that says nothing holds in every row (left out where the table would not fit otherwise).
_NOTHING = frozenset({"na", "0", "0.0", "-", ""})
#: Text columns of the per-kernel table that give way first where text would be cut below TEXT_MIN (what the other
#: columns say of a kernel more tellingly: the op names its module, the op's direction is in its name).
GIVE_WAY_FIRST = ("mod", "dir", "tid", "device", "stream", "seq", "altseq", "layer", "trace", "grid", "block")
#: The narrowest a text column is made while its text is longer (and a number column could give up room instead).
TEXT_MIN = 12
#: Below this width a sentence column reads a word a line: the table is printed a block per row instead.
PROSE_MIN = 24
#: Text columns that wrap onto further lines rather than being cut: sentences (the findings' and notes' columns).
PROSE = frozenset({"about", "evidence", "action", "note"})
_SI = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"))


def _quantity(column: str) -> bool:
    """A column whose values are counts of FLOPs or bytes (shown with SI prefixes): not a rate (``tflops``)."""
    return ("flops" in column or "bytes" in column) and not column.startswith("tflops")


def si_text(v) -> str:
    """A count as a person reads it: three significant digits and an SI prefix from a million up (``2.72T``),
    whole below."""
    for scale, prefix in _SI:
        if abs(v) >= scale:
            return f"{v / scale:.3g}{prefix}"
    return str(v)


def short_float(v: float, digits: int = 4) -> str:
    """A float as a person reads it in a table: ``digits`` significant digits, never fewer than its integer part
    has, never in exponent form from 1 up (15.31, 0.4157, 319.1; with 3: 15.3, 0.416, 319)."""
    a = abs(v)
    if v != v or a == float("inf") or a >= 1e15:
        return str(v)
    if a < 1:
        return f"{v:.{digits}g}"
    return f"{v:.{max(digits - len(str(int(a))), 0)}f}"


_DECIMAL = re.compile(r"-?[0-9]+\.[0-9]+")


def _shorter(cell: str) -> str:
    """A decimal number's text to 3 significant digits where that is shorter; anything else as it is."""
    if not _DECIMAL.fullmatch(cell):
        return cell
    text = short_float(float(cell), 3)
    return text if len(text) < len(cell) else cell


def _without(drop: set, headers: list[str], columns: list[str], rows: list[tuple]):
    """The table without the columns ``drop``."""
    keep = [j for j in range(len(columns)) if j not in drop]
    return [headers[j] for j in keep], [columns[j] for j in keep], [tuple(r[j] for j in keep) for r in rows]


def natural_width(header: str, rows: list[tuple], j: int) -> int:
    """Column ``j``'s width with nothing cut: its longest value or its header."""
    return max(max((len(r[j]) for r in rows), default=0), len(header), 1)


def _line(cells: list[str], widths: list[int], numbers: set, gap: str) -> str:
    return gap.join([c.rjust(w) if j in numbers else c.ljust(w)
                     for j, (c, w) in enumerate(zip(cells, widths))]).rstrip()


def _wrap(text: str, w: int, most: int) -> list[str]:
    """``text`` in lines of at most ``w`` characters, broken at spaces (a word longer than ``w`` is cut across
    lines); at most ``most`` lines (0: as many as it takes), the last cut with ``~``."""
    if len(text) <= w or w <= 0:
        return [text[:w] if w > 0 else text]
    lines = textwrap.wrap(text, w, break_long_words=True, break_on_hyphens=False) or [""]
    if most and len(lines) > most:
        lines = lines[:most - 1] + [cut(" ".join(lines[most - 1:]), w)]
    return lines


def fit_columns(headers: list[str], rows: list[tuple], width: int, gap: int, numbers: set, prose: set,
                break_words: bool = False, text_min: int = TEXT_MIN, key_min: int | None = None) -> list[int]:
    """Column widths that fit ``width`` in total where they can: each column its natural width (its longest
    value, and its header's when that fits on one line); if that is too wide, number columns keep their values'
    width (their headers wrap, down to their longest word), and the text columns share what is left, shrunk from
    the widest down, none below TEXT_MIN characters while its text is longer (nor below its header's longest
    word). Too little room for that: the table is wider than ``width``."""
    n = len(headers)
    value = [max((len(r[j]) for r in rows), default=0) for j in range(n)]
    word = [max((len(x) for x in h.split()), default=0) for h in headers]
    nat = [max(value[j], len(headers[j]), 1) for j in range(n)]
    budget = width - gap * (n - 1)
    if sum(nat) <= budget:
        return nat
    out = list(nat)
    for j in numbers:  # a number header wraps at spaces, or (break_words) inside a word: never below 3 characters
        out[j] = max(value[j], 3 if break_words else word[j], 1)
    text = [j for j in range(n) if j not in numbers]
    floor = {j: max(min(nat[j], text_min), min(word[j], text_min), 1) for j in text}
    if key_min is not None and text:  # the first text column, the row's key, keeps key_min characters
        floor[text[0]] = max(floor[text[0]], min(nat[text[0]], key_min))
    room = budget - sum(out[j] for j in numbers)
    if room <= sum(floor.values()):
        for j in text:
            out[j] = floor[j]
        return out
    # the cap c such that the text columns, each min(nat, c) and at least its floor, fit the room
    lo, hi = 1, max((nat[j] for j in text), default=1)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(max(floor[j], min(nat[j], mid)) for j in text) <= room:
            lo = mid
        else:
            hi = mid - 1
    for j in text:
        out[j] = max(floor[j], min(nat[j], lo))
    spare = room - sum(out[j] for j in text)
    for j in sorted(text, key=lambda j: -nat[j]):
        if spare <= 0:
            break
        if out[j] < nat[j]:
            out[j] += 1
            spare -= 1
    return out


#: A run of spaces inside a field (written as one off a terminal).
_SPACES = re.compile(r"  +")
#: A cell that is a number (or says there is none): never cut.
_NUMBER = re.compile(r"\(?-?[0-9][0-9.,e+-]*[MGTP]?\)?%?|na|-|")  # 12, 0.45, 1.2e+09, 2.72T, 491,493, (16,1,1), na
#: Columns of paths and ``file:line`` sites: cut from the left, so that the file and line stay (as is any column
#: whose every cell is a site: ``--group-by callsite``'s key).
PATHS = frozenset({"trace", "callsite", "line", "path"})
_SITE = re.compile(r"[^ ]*[/\\][^ ]*:[0-9]+|-")


def cut_left(s: str, w: int) -> str:
    """``s`` in at most ``w`` characters: its end, with ``~`` as its first one, when longer."""
    return s if len(s) <= w else "~" + s[len(s) - max(w - 1, 0):] if w > 1 else s[-w:] if w else ""


def cut_middle(s: str, w: int) -> str:
    """``s`` in at most ``w`` characters: its start and its end with ``~`` between them, when longer."""
    if len(s) <= w:
        return s
    if w < 5:
        return cut(s, w)
    head = (w - 1) // 2
    return s[:head] + "~" + s[len(s) - (w - 1 - head):]


def cut(s: str, w: int) -> str:
    """``s`` in at most ``w`` characters: cut, with ``~`` as its last one, when longer."""
    return s if len(s) <= w else s[: max(w - 1, 0)] + "~"
