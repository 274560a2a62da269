"""The compiled core (``pyprof.parse._core``, built by ``pip install .`` where a C compiler and SQLite's headers
are present) and the one switch that keeps parse on its pure-Python path: ``PYPROF_PURE_PYTHON=1``.

The core does per-row work of the nsys reader in C: it reads the push/pop ranges through SQLite's C API and pushes
them on the Correlator's stacks (correlate.Correlator._push is the reference it follows). It is used for a whole
file or not at all: a reader or an export feature it does not handle takes the Python path from the start
(docs/parse.md says which). Both paths give the same output byte for byte (tests/parse/test_native.py).
"""
from __future__ import annotations

import os
import sqlite3

from pyprof.parse import markers as mk

try:
    from pyprof.parse import _core
except ImportError:  # not built (no compiler or no sqlite3.h at install): the Python path, same output
    _core = None

#: Set to 1 to parse without the compiled core.
PURE_PYTHON_ENV = "PYPROF_PURE_PYTHON"


def enabled() -> bool:
    """True when the compiled core is built and not switched off."""
    return _core is not None and os.environ.get(PURE_PYTHON_ENV, "") in ("", "0")


class RangeFeed:
    """A source's ranges read in C and pushed on a Correlator's stacks (correlate.RowFeed's interface); an SQLite
    error becomes the reader's InputError, as its own queries' do (sqlrows.Rows.error)."""

    def __init__(self, source, correlator, sql: str) -> None:
        from pyprof.parse import correlate

        self._rows = source.rows
        c = correlator
        try:
            self._feed = _core.RangeFeed(
                source.file, sql, c._stacks, c._state, c._fwd, c._backward_thread, c._wanted, c.oddities,
                c._process_of, c._take_output_shapes, c._name_engine_range, mk.quick_seq, mk.is_backward_text,
                correlate.DEEP_RANGES, correlate.MAX_RANGE_DEPTH, source.rows.oddities, _not_utf8())
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

    def close(self) -> None:
        """Close the feed's own connection."""
        self._feed.close()


def _not_utf8() -> str:
    from pyprof.parse.sqlrows import NOT_UTF8

    return NOT_UTF8


def takes(source) -> bool:
    """True when the compiled core parses ``source``, the whole file: built and not switched off, an nsys export
    without the features it leaves to Python (NsysSource.native_queries)."""
    from pyprof.parse.nsys import NsysSource

    return enabled() and type(source) is NsysSource and source.native_queries() is not None


class Parts:
    """The JSON of each distinct part of a line, made by the Python code that makes it on the Python path; the core
    asks once per distinct key (a kernel's name ids, a device and stream, a launch configuration, an API name id,
    an attribution) and keeps the answer."""

    def __init__(self, source, gpu_names: dict, raw_markers: bool) -> None:
        from pyprof.parse import encode, nsys, writer

        self._source = source
        self._strings = source.strings
        self._gpu_names = gpu_names
        self._no_gpu = writer.no_gpu_name(gpu_names)
        self._raw_markers = raw_markers
        self._encode = encode
        self._writer = writer
        self._tables = (nsys.KERNEL, nsys.MEMCPY, nsys.MEMSET)
        self._api_name = nsys._api_name

    def name(self, table: int, *ids) -> str:
        """The name part of a kernel (table 0: its short and long name ids), memcpy (1: its copyKind) or memset."""
        w = self._writer
        if table == 0:
            long_name = self._strings.get(ids[1], "")
            return self._encode.part(w._NAME, ("kernel", self._strings.get(ids[0], long_name), long_name), first=True)
        name, _ = self._source.copy_name(self._tables[table], ids[0] if ids else None)
        return self._encode.part(w._NAME, ("memcpy" if table == 1 else "memset", name, name), first=True)

    def place(self, device: int | None, stream: int | None) -> str:
        """The place part."""
        return self._encode.part(self._writer._PLACE, (device, stream))

    def shape(self, table: int, gx, gy, gz, bx, by, bz, registers, static_smem, dynamic_smem, device, nbytes,
              copy_kind_id) -> tuple[str, str]:
        """The config and copy parts of a kernel (table 0) or a copy."""
        gpu = self._gpu_names.get(device, self._no_gpu)
        if table == 0:
            return self._writer.shape_parts((gx, gy, gz), (bx, by, bz), registers, static_smem, dynamic_smem, None,
                                            None, gpu, None, None)
        _, ck = self._source.copy_name(self._tables[table], copy_kind_id)
        return self._writer.shape_parts((), (), None, None, None, None, None, gpu, nbytes, ck)

    def api(self, name_id: int | None) -> str:
        """The launch part up to the call's start time."""
        return self._writer.API_JSON % self._encode.string(self._api_name(self._strings.get(name_id, "")))

    def attribution(self, fields: tuple) -> tuple[str, str]:
        """The attribution parts (head, tail) of a launch's attribution fields."""
        return self._encode.attribution(fields, self._raw_markers)


def record_lines(source, stats, raw_markers: bool, worker: bool):
    """parse's header line, then the records' lines of ``source`` made by the compiled core (writer._merge_lines is
    the reference): the launch calls swept in a worker process (``worker``) or in this one, the activities read,
    joined and written in C."""
    from pyprof.parse import encode, writer
    from pyprof.parse.activities import WINDOW
    from pyprof.parse.correlate import Correlator

    head_line, gpu_names = writer.header(source)
    yield head_line
    activity_sql, launch_sql = source.native_queries()
    if worker:
        from pyprof.parse.sweep_worker import swept_in_worker

        infos = swept_in_worker(source, stats.oddities)
    else:
        infos = Correlator(source, stats.oddities).sweep(source.launch_times())
    segments = tuple(writer.LINE.split("%s"))
    try:
        lines = _core.LineWriter(source.file, activity_sql, launch_sql, infos, segments,
                                 Parts(source, gpu_names, raw_markers), writer.NO_CALL, encode.attribution(None),
                                 writer.API_END_KEY, stats, writer.CLOCK_SKEW_NS, 2 * writer.RECENT, 2 * WINDOW)
        try:
            yield from lines
        finally:
            lines.close()
    except _core.Error as e:
        raise source.rows.error(sqlite3.DatabaseError(str(e))) from None


def range_feed(source, correlator) -> RangeFeed | None:
    """The compiled feed of ``source``'s ranges for ``correlator``, or None where the core does not take them (not
    built or switched off, a reader other than nsys, ranges with JSON payloads)."""
    if not enabled():
        return None
    query = getattr(source, "range_query", None)
    sql = query() if query is not None else None
    if sql is None:
        return None
    return RangeFeed(source, correlator, sql)
