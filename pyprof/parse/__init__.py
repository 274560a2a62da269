"""The parse stage: a profiler export in, one record (pyprof.record.Record) per GPU activity out.

    pyprof parse net.sqlite > net.dict      (or: python -m pyprof.parse ...)

Readers (nsys SQLite, nvprof SQLite, PyTorch profiler JSON) translate rows into a common intermediate
form (``model``); ``correlate`` joins activities to launch calls, enclosing ranges and forward ops once
for all of them. Importing this package never imports torch.
"""
from __future__ import annotations

from pyprof.common import one_blas_thread_if_run

one_blas_thread_if_run(__name__)  # before this package imports numpy (python -m pyprof.parse)

import warnings
from typing import IO, Iterable, Iterator

from pyprof import cleanup
from pyprof.common import no_cyclic_gc
from pyprof.record import Record, end_line
from pyprof.parse.readers.activities import Source
from pyprof.parse.attribute.correlate import Stats
from pyprof.parse.readers.detect import open_source
from pyprof.parse.write.writer import records, text

__all__ = ["parse_file", "parse_records", "open_source", "close_source", "Stats"]


def parse_records(path: str) -> tuple[Iterator[Record], Stats]:
    """Open and check ``path`` ('-' = stdin), then return (records in start order, their Stats).

    The file is checked before this returns (raises InputError), so a consumer that has not started
    iterating has written nothing. The Stats fill in as the records are consumed.
    """
    src = open_source(path)
    recs, stats = records(src)

    def gen() -> Iterator[Record]:
        try:
            yield from recs
        finally:
            close_source(src)

    return gen(), stats


def iter_records(path: str) -> tuple[Iterator[Record], Stats]:
    """Deprecated name of ``parse_records`` (renamed: prof's reader had a function of the same name that
    returns something else). Kept for one release; warns."""
    warnings.warn("pyprof.parse.iter_records is now pyprof.parse.parse_records; the old name goes in the next "
                  "release", DeprecationWarning, stacklevel=2)
    return parse_records(path)


def close_source(src: Source) -> None:
    """Close a source from open_source and delete the temporary file it was read from (a decompressed export, or
    stdin spooled to disk), if any."""
    src.close()
    if src.temp_path:
        cleanup.remove(src.temp_path)


def parse_file(path: str, out: IO[str], raw_markers: bool = False, side_lines: Iterable[str] = ()) -> Stats:
    """Parse ``path`` and write parse's header line, one JSON line per record and its end line to ``out``
    (``raw_markers``: keep the autograd range texts, ``seqMarker``; ``side_lines``: further side lines, each without
    its newline, written after parse's own and before the end line, where side lines belong). Returns the Stats;
    raises InputError."""
    with no_cyclic_gc():  # as cli._run, for the same reason
        src = open_source(path)
        try:
            pieces, stats = text(src, raw_markers=raw_markers)
            write = out.write
            for piece in pieces:
                write(piece)
            for line in side_lines:
                write(line + "\n")
            write(end_line(stats.records))
            write("\n")
        finally:
            close_source(src)
    return stats
