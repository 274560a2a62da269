"""The per-kernel table of ``pyprof prof``: one row per record, written in a format, serially or spread over
worker processes (``--jobs``, pyprof.prof.table.parallel); returns the coverage.

``run_stream`` is what the CLI calls; it is importable and takes streams, so tests pass ``io`` objects.
"""
from __future__ import annotations

import io
from typing import IO, Iterable, Sequence

from pyprof.common import no_cyclic_gc
from pyprof.prof.table import parallel
from pyprof.prof.table.columns import COLUMNS, ROOFLINE_COLUMNS, row_function
from pyprof.prof.load.contract import check_file_ending
from pyprof.prof.table.coverage import Coverage
from pyprof.prof.table.formats import FORMATS
from pyprof.prof.model.modeller import Modeller
from pyprof.prof.model.roofline import Peaks
from pyprof.prof.table.rows import BATCH, RowStream, lean_decoder, rows, stream_rows


def run_stream(stream: IO[bytes], path: str, out: IO[str], columns: Sequence[str], fmt: str = "space",
               width: int = 0, peaks: Peaks | None = None, header: bool = True, jobs: int = 1) -> Coverage:
    """Read JSON Lines / PyProf dict lines from a binary stream and write one row per record.

    ``jobs`` > 1 spreads the work over processes (streaming formats only; pyprof.prof.table.parallel).
    Returns the coverage. Raises InputError naming the line of a malformed record.
    """
    check_file_ending(stream, path)  # a file cut short is refused before any row goes out
    cls = FORMATS[fmt]
    writer = cls(out, columns, [COLUMNS[c].header for c in columns], width)
    if header:
        writer.header()
    peaks = peaks or Peaks()
    # columns are aligned across the whole table (or, in a pipe, across blocks in order): one process writes them
    if jobs > 1 and not fmt.startswith("columns") and parallel.available() and parallel.suits(stream):
        coverage = parallel.run_parallel(stream, path, _chunk_plan(list(columns), fmt), out.write, peaks, jobs,
                                         getattr(out, "commit", None))
        writer.close()
        return coverage
    row, as_lines = row_function(list(columns), cls)
    coverage = Coverage()
    need_roof = bool(ROOFLINE_COLUMNS.intersection(columns))
    rows_ = RowStream(Modeller(share=True), row, peaks, need_roof, coverage, lean_decoder(columns))
    with no_cyclic_gc():
        stream_rows(stream, path, rows_, writer.lines if as_lines else writer.rows,
                    # columns to a width are sized at the end; at no width (a pipe) they go out block by block
                    getattr(out, "commit", None) if not (fmt.startswith("columns") and width) else None)
    writer.close()
    return coverage


def _chunk_plan(columns: list, fmt: str):
    """A --jobs worker's plan: its chunk's rows as the format's text (the header written by the parent)."""
    def plan() -> parallel.ChunkPlan:
        cls = FORMATS[fmt]
        row, as_lines = row_function(columns, cls)

        def text(rows_: list) -> str:
            buf = io.StringIO()
            writer = cls(buf, columns, columns)
            (writer.lines if as_lines else writer.rows)(rows_)
            return buf.getvalue()
        return parallel.ChunkPlan(row, bool(ROOFLINE_COLUMNS.intersection(columns)), lean_decoder(columns), None, text)
    return plan


def run(records: Iterable[tuple[int, dict]], out: IO[str], columns: Sequence[str], fmt: str = "space",
        width: int = 0, peaks: Peaks | None = None, header: bool = True) -> Coverage:
    """Write one row per already-decoded record (``(lineno, dict)`` pairs, as read_records yields) in format
    ``fmt``; return the coverage (the caller reports it)."""
    cls = FORMATS[fmt]
    writer = cls(out, columns, [COLUMNS[c].header for c in columns], width)
    row, as_lines = row_function(list(columns), cls)
    write = writer.lines if as_lines else writer.rows
    coverage = Coverage()
    need_roof = bool(ROOFLINE_COLUMNS.intersection(columns))
    if header:
        writer.header()
    batch: list = []
    for i, d, m, r in rows(records, Modeller(share=True), peaks or Peaks(), need_roof, coverage):
        batch.append(row(i, d, m, r))
        if len(batch) >= BATCH:
            write(batch)
            batch.clear()
    write(batch)
    writer.close()
    return coverage
