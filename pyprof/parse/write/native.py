"""The compiled core (``pyprof.parse._core``, built by ``pip install .`` where a C compiler and SQLite's headers
are present) and the one switch that keeps parse on its pure-Python path: ``PYPROF_PURE_PYTHON=1``.

The core does the per-row work of the nsys reader in C: here, the push/pop ranges read through SQLite's C API and
pushed on the Correlator's stacks (correlate.Correlator._push is the reference it follows); in native_lines, the
record lines. It is used for a whole file or not at all: a reader or an export feature it does not handle takes the
Python path from the start (docs/parse.md says which). Both paths give the same output byte for byte
(tests/parse/test_native.py).
"""
from __future__ import annotations

import os
import sqlite3

from pyprof.parse.attribute import markers as mk
from pyprof.parse.readers.sqlrows import NOT_UTF8, Query

try:
    from pyprof.parse import _core
except ImportError:  # not built (no compiler or no sqlite3.h at install): the Python path, same output
    _core = None

#: Set to 1 to parse without the compiled core.
PURE_PYTHON_ENV = "PYPROF_PURE_PYTHON"
#: 0: the core steps its queries in the parsing thread; 1: threads read them ahead; unset: as read_ahead decides.
READ_AHEAD_ENV = "PYPROF_READ_AHEAD"


def enabled() -> bool:
    """True when the compiled core is built and not switched off."""
    return _core is not None and os.environ.get(PURE_PYTHON_ENV, "") in ("", "0")


def not_built() -> bool:
    """True when the compiled core was never built (an install without a C compiler or SQLite's headers); False
    when it is built, switched off or not (PYPROF_PURE_PYTHON)."""
    return _core is None


def read_ahead() -> bool:
    """Whether the core's queries are stepped by threads of their own (_ahead.c): where this process may run on
    more than one CPU (on one, the threads would only take turns with the parsing thread), or as
    ``PYPROF_READ_AHEAD`` (0 or 1) says. The output is the same either way."""
    forced = os.environ.get(READ_AHEAD_ENV, "")
    if forced in ("0", "1"):
        return forced == "1"
    return cpus() > 1


def deeper_than(value, limit: int) -> bool:
    """markers._deeper_than (the reference) in C where parse uses the core: a JSON marker's containers walked at a
    tenth of the cost (an optimizer's foreach marker lists every parameter, and its scalars make it a new text every
    step). Installed as markers.nests_deeper where the core is built."""
    return _core.deeper_than(value, limit) if enabled() else mk._deeper_than(value, limit)


def split_args(text: str) -> tuple[str, tuple[str, ...]] | None:
    """_core.split_args where parse uses the core, else None (the whole text decoded, the reference): a long JSON
    marker's "args" list in its element texts, which markers._decode_dict decodes once each. Installed as
    markers.split_args where the core is built."""
    return _core.split_args(text) if enabled() else None


def int64_json():
    """_core.int64_json (the JSON of an int64 array, as json.dumps writes its tolist()) where parse uses the core,
    else None: the host lines' lists are written by json (record.host_line, the reference)."""
    return _core.int64_json if enabled() else None


if _core is not None:
    mk.nests_deeper = deeper_than
    mk.split_args = split_args


def cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this platform
        return os.cpu_count() or 1


class RangeFeed:
    """A source's ranges read in C and pushed on a Correlator's stacks (correlate.RowFeed's interface); an SQLite
    error becomes the reader's InputError, as its own queries' do (sqlrows.Rows.error)."""

    def __init__(self, source, correlator, query: Query, deep_ranges: str, max_depth: int,
                 reader_oddities: dict | None = None) -> None:
        """``query``: the ranges' (RANGE_ROW); ``reader_oddities``: where a text read leniently is counted (the
        reader's own oddities by default)."""
        self._rows = source.rows
        c = correlator
        try:
            self._feed = _core.RangeFeed(
                source.rows.uri, query.plain(), c._stacks, c._state, c._fwd, c._backward_thread, c._wanted, c.oddities,
                c._process_of, c._take_output_shapes, c._name_engine_range, mk.quick_seq, mk.is_backward_text,
                deep_ranges, max_depth, source.rows.oddities if reader_oddities is None else reader_oddities,
                NOT_UTF8)
            self._feed.engine_types(*c.ENGINE_TYPES)
        except _core.Error as e:
            raise self._rows.error(sqlite3.DatabaseError(str(e))) from None

    def push_until(self, start_ns: int) -> None:
        """Push every range that starts at or before ``start_ns``."""
        try:
            self._feed.push_until(start_ns)
        except _core.Error as e:
            raise self._rows.error(sqlite3.DatabaseError(str(e))) from None

    def push_one(self) -> None:
        """Push the next range."""
        try:
            self._feed.push_one()
        except _core.Error as e:
            raise self._rows.error(sqlite3.DatabaseError(str(e))) from None

    def next_start(self) -> int | None:
        """The start of the next range not pushed yet; None after the last."""
        return self._feed.next_start()

    def ready(self, thread, start_ns: int) -> None:
        """Before a launch of ``thread`` at ``start_ns`` is attributed: the thread's ranges that ended before it are
        popped, and the Correlator's list of the thread's open ranges is up to date (the feed keeps the stacks in C and
        makes a range's row only when something reads it)."""
        self._feed.ready(thread, start_ns)

    def close(self) -> None:
        """Close the feed's own connection."""
        self._feed.close()


def range_feed(source, correlator, deep_ranges: str, max_depth: int) -> RangeFeed | None:
    """The compiled feed of ``source``'s ranges for ``correlator`` (which leaves out ranges nested deeper than
    ``max_depth``, counted as the oddity ``deep_ranges``), or None where the core does not take them (not built or
    switched off, a reader other than nsys, ranges with JSON payloads)."""
    if not enabled():
        return None
    range_query = getattr(source, "range_query", None)
    query = range_query() if range_query is not None else None
    if query is None:
        return None
    return RangeFeed(source, correlator, query, deep_ranges, max_depth)


def sweep(source, launches: Query, attributor, feed: RangeFeed | None, output_wait_ns: int):
    """correlate.Correlator.sweep in C (the reference), for the compiled line writer: each launch's info in launch
    order, read by its own query ``launches`` (start, end, globalTid first, in the writer's order); ``feed``
    None where the export has no ranges."""
    try:
        return _core.Sweep(source.rows.uri, launches.plain(), attributor, None if feed is None else feed._feed,
                           output_wait_ns)
    except _core.Error as e:
        raise source.rows.error(sqlite3.DatabaseError(str(e))) from None
