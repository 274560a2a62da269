"""Parse's output lines by kind (docs/record.md): its header line, the records, side lines (host time, memory)
after them, and its end line. Tests that count records count these, not lines."""
from __future__ import annotations

_NOT_RECORDS = ('{"pyprof_header":', '{"pyprof_side":', '{"pyprof_end":')


def records_of(lines) -> list:
    """The record lines among ``lines`` (text or bytes)."""
    return [x for x in lines if x.strip() and not _starts(x, _NOT_RECORDS)]


def side_of(lines) -> list:
    """The side lines among ``lines``."""
    return [x for x in lines if _starts(x, ('{"pyprof_side":',))]


def _starts(x, prefixes) -> bool:
    return x.startswith(tuple(p.encode() for p in prefixes) if isinstance(x, bytes) else prefixes)
