"""Reading SQLite exports defensively: what the nsys and nvprof readers share.

An export can hold anything a database can: a value of the wrong type in any column (SQLite does not enforce
column types), text that is not UTF-8, pages that are corrupt. A row whose times or ids are unusable is left out
and counted (an oddity the summary reports); a value that only describes (a device id, a grid size) becomes null
when it is not an integer; text that is not UTF-8 is read with replacement characters; a corrupt page is an
InputError naming the file. Everything here costs nothing per row on a sound export but one generator step.
"""
from __future__ import annotations

import functools
import os
import pathlib
import sqlite3
import struct
import sys
from dataclasses import dataclass
from typing import Iterator

from pyprof.common import InputError
from pyprof.record import INT_MAX
from pyprof.parse.readers.activities import Source

#: Text as SQLite stores it, decoded with replacement characters where it is not UTF-8 (a GPU name in Latin-1).
lossy_text = functools.partial(str, encoding="utf-8", errors="replace")

#: What a query of a damaged export raises: SQLite's errors, and UnicodeDecodeError when the sqlite3 module
#: cannot decode SQLite's own error message (it quotes a corrupt schema's bytes).
SQLITE_ERRORS = (sqlite3.DatabaseError, UnicodeDecodeError)
NOT_UTF8 = "texts that are not UTF-8, read with replacement characters"


def integer(col: str) -> str:
    """SQL for ``col`` when it holds an integer, else NULL (a describing value of the wrong type)."""
    return integer_of(col).sql


def integers(*cols: str) -> str:
    """SQL condition: every one of ``cols`` holds an integer (the values a row cannot do without)."""
    return " AND ".join(f"typeof({c}) = 'integer'" for c in cols)


def timed(start: str, end: str) -> str:
    """SQL condition on two integer columns: the end not before the start, and the duration ``end - start`` a
    record's 64-bit integer (record.INT_MAX; a start near -2**63 would make a longer one). Written so that
    SQLite computes nothing past 64 bits (it would turn the difference into a float): a start of 0 or more
    leaves any end's duration in range, a negative one ``start + INT_MAX`` in range. The compiled core tests
    the same (_ahead.c shaped_row, _scan.c)."""
    return f"{end} >= {start} AND ({start} >= 0 OR {end} <= {start} + {INT_MAX})"


#: How a Query's column is taken of its sources: the one source as it is; the first holding an integer; the first
#: holding text (each else NULL: a value of the wrong type is no value).
AS_IS, FIRST_INTEGER, FIRST_TEXT = 0, 1, 2
_TYPE_OF = {FIRST_INTEGER: "integer", FIRST_TEXT: "text"}


@dataclass(frozen=True)
class Column:
    """One column of a Query: how it is ``taken`` (AS_IS, FIRST_INTEGER, FIRST_TEXT) of its ``sources``, SQL
    expressions."""
    taken: int
    sources: tuple[str, ...]

    @property
    def sql(self) -> str:
        """The column as SQL, its type tests written out (the reference)."""
        if self.taken == AS_IS:
            return self.sources[0]
        kind = _TYPE_OF[self.taken]
        return f"CASE {' '.join(f'WHEN typeof({s}) = {kind!r} THEN {s}' for s in self.sources)} END"


def as_is(expr: str) -> Column:
    """A column read as it is (a value the row's validity already makes an integer, or NULL)."""
    return Column(AS_IS, (expr,))


def integer_of(*exprs: str) -> Column:
    """A describing column: the first of ``exprs`` that holds an integer, else NULL."""
    return Column(FIRST_INTEGER, exprs)


def text_of(*exprs: str) -> Column:
    """The first of ``exprs`` that holds text, else NULL (a number stored by a broken writer is no name)."""
    return Column(FIRST_TEXT, exprs)


@dataclass(frozen=True)
class Valid:
    """What a row needs to be read at all (SQLite does not enforce column types): integer times, the end not before
    the start and no more than record.INT_MAX after it, and integer ids. The readers leave other rows out and count
    them."""
    start: str
    end: str
    ids: tuple[str, ...] = ()

    @property
    def sql(self) -> str:
        """The condition as SQL."""
        return (f"{integers(self.start, self.end)} AND {timed(self.start, self.end)}"
                + "".join(f" AND {integers(c)}" for c in self.ids))


@dataclass(frozen=True)
class Query:
    """A large query of an export, declared once and read two ways: :attr:`sql` tests each value's type in SQL
    (the Python path runs it: the reference); :meth:`plain` leaves the tests to the compiled core, which makes them
    in C on each row as it is stepped (typeof and its string comparisons were a third of SQLite's stepping of the
    ranges' query). ``where``: the conditions other than ``valid``'s; ``order``: an ORDER BY or nothing."""
    columns: tuple[Column, ...]
    tables: str
    valid: Valid
    where: str = ""
    order: str = ""

    @property
    def sql(self) -> str:
        """The query, every type test in SQL."""
        where = f"{self.where} AND {self.valid.sql}" if self.where else self.valid.sql
        return self._select(", ".join(c.sql for c in self.columns), where)

    def plain(self) -> tuple[str, bytes]:
        """(the query without its type tests, the shape that makes them): each value the SQL reads once, in a
        column of its own; the shape's bytes say, in order, the count of columns given, then for each its way of
        taking, its count of sources and their columns, then the count of columns that must hold integers and
        those columns, then the end's and the start's columns (the end not before the start). _ahead.c reads it."""
        raw: list[str] = []

        def at(expr: str) -> int:
            if expr not in raw:
                raw.append(expr)
            return raw.index(expr)

        shape = [len(self.columns)]
        for c in self.columns:
            shape += [c.taken, len(c.sources), *(at(s) for s in c.sources)]
        needed = [at(c) for c in (self.valid.start, self.valid.end, *self.valid.ids)]
        shape += [len(needed), *needed, needed[1], needed[0]]
        if len(raw) > 255:
            raise ValueError("a query of more than 255 values has no shape")
        return self._select(", ".join(raw), self.where), bytes(shape)

    def _select(self, columns: str, where: str) -> str:
        return (f"SELECT {columns} FROM {self.tables}{f' WHERE {where}' if where else ''}"
                f"{f' {self.order}' if self.order else ''}")


def uri(path: str) -> str:
    """The one name every connection to the export ``path`` opens (Python's and the compiled core's): a URI of the
    absolute path, percent-encoded, so that no character of a file name is read as URI syntax (``#`` would end
    the path, ``?`` start the parameters, ``%20`` stand for a space; the bytes of a non-ASCII name go as
    escapes). ``mode=ro``: never a write. ``immutable=1``: SQLite takes no lock and looks for, and creates, no
    -journal, -wal or -shm beside the file; it reads the file as it stands (a WAL-mode export too, without the
    -shm it would otherwise create: a read-only folder is no obstacle). The price: it trusts the file not to
    change while it is read, which ``check_at_rest`` checks once before."""
    return f"{pathlib.Path(os.path.abspath(path)).as_uri()}?mode=ro&immutable=1"  # as_uri: percent-encoded bytes


def connect(path: str, display: str, text_factory=None) -> sqlite3.Connection:
    """A read-only connection to ``path`` by its ``uri`` (nothing written beside the export). Raises InputError."""
    try:
        db = sqlite3.connect(uri(path), uri=True)
        db.execute("PRAGMA query_only = 1")
    except SQLITE_ERRORS as e:
        raise InputError(display, f"not a readable SQLite database ({describe(e)})") from None
    if text_factory is not None:
        db.text_factory = text_factory
    return db


#: SQLite's lock bytes (its os_unix.c): a writer holds a write lock on one of them (RESERVED, PENDING) or on the
#: shared range (EXCLUSIVE) while it changes the file; readers hold read locks, which never conflict with a read.
_PENDING_BYTE, _LOCK_BYTES = 0x40000000, 2 + 510
#: The first bytes of a rollback journal that can still be played back (SQLite's aJournalMagic).
_JOURNAL_MAGIC = bytes.fromhex("d9d505f920a163d7")
_WAL_HEADER_BYTES = 32  # a -wal file this long holds no frame (no change)


def check_at_rest(path: str, display: str) -> None:
    """Raise InputError when the export is not a finished file that ``uri``'s immutable reading would read right:
    a writer holding SQLite's write lock on it (its pages change under the reader), a hot journal beside it (an
    interrupted write whose half-changed pages SQLite would first roll back: immutable ignores the journal and
    would read them), or a -wal file with frames beside a WAL-mode export (changes that are not in the file yet).
    pyprof rolls back and checkpoints nothing: either changes the user's file."""
    name = os.path.basename(display)
    pid = _writer(path)
    if pid is not None:
        raise InputError(display, f"locked by another process (pid {pid}; is nsys still writing it?)")
    try:
        with open(f"{path}-journal", "rb") as f:
            hot = f.read(len(_JOURNAL_MAGIC)) == _JOURNAL_MAGIC
    except OSError:
        hot = False
    if hot:
        raise InputError(display, f"a write to it was interrupted: its rollback journal {name}-journal is beside it, "
                                  "and the file alone may hold half of that write (pyprof never rolls it back: "
                                  f"`sqlite3 {name} 'PRAGMA quick_check'` does, or export it again)")
    with open(path, "rb") as f:
        wal_mode = f.read(20)[18:20] == b"\x02\x02"  # the header's read and write versions: 2 = WAL
    try:
        wal_bytes = os.path.getsize(f"{path}-wal") if wal_mode else 0
    except OSError:
        wal_bytes = 0
    if wal_bytes > _WAL_HEADER_BYTES:
        raise InputError(display, f"its write-ahead log {name}-wal holds changes that are not in the file yet (is a "
                                  "writer still open?); pyprof reads the file alone: checkpoint it first, "
                                  f"`sqlite3 {name} 'PRAGMA wal_checkpoint(TRUNCATE)'`")


def _writer(path: str) -> int | None:
    """The process id of another process holding a write lock on SQLite's lock bytes of ``path``, else None. Asks
    (F_GETLK) without taking a lock; the struct flock of 64-bit Linux only (elsewhere None: no check)."""
    if not sys.platform.startswith("linux") or struct.calcsize("P") != 8:
        return None
    import fcntl

    layout = "hhqqi4x"  # l_type, l_whence, l_start, l_len, l_pid
    want = struct.pack(layout, fcntl.F_RDLCK, os.SEEK_SET, _PENDING_BYTE, _LOCK_BYTES, 0)
    fd = os.open(path, os.O_RDONLY)
    try:
        kind, _, _, _, pid = struct.unpack(layout, fcntl.fcntl(fd, fcntl.F_GETLK, want))
    except OSError:
        return None
    finally:
        os.close(fd)
    return None if kind == fcntl.F_UNLCK else pid


class Rows:
    """Runs the queries of one export: rows as the cursor yields them, text that is not UTF-8 read again with
    replacement characters, and SQLite's errors turned into one InputError naming the file."""

    def __init__(self, db: sqlite3.Connection, file: str, display: str, oddities: dict) -> None:
        self.db = db
        self.file = file
        self.uri = uri(file)  # what the compiled core opens: the same name as every connection here
        self.display = display
        self.oddities = oddities
        self._lossy: sqlite3.Connection | None = None

    def lossy(self) -> sqlite3.Connection:
        """A second connection that decodes text with replacement characters (for small tables, and retries)."""
        if self._lossy is None:
            self._lossy = connect(self.file, self.display, lossy_text)
        return self._lossy

    def without_rowid(self, table: str) -> bool:
        """True for a table declared WITHOUT ROWID (no profiler writes one; a user's rebuilt export may): it has
        no rowid to order or to find its last row by."""
        sql = self.all("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,))
        return bool(sql) and "WITHOUT ROWID" in str(sql[0][0] or "").upper()

    def last_row(self, table: str) -> None:
        """Read the last row of ``table``: it sits on the last pages, so a truncated file fails here, before any
        output. A WITHOUT ROWID table is read whole instead."""
        self.all(f"SELECT * FROM {table} {'' if self.without_rowid(table) else 'ORDER BY rowid DESC'} LIMIT 1")

    def all(self, sql: str, params: tuple = ()) -> list:
        """Every row of a small query (names, metadata), text decoded leniently."""
        try:
            return self.lossy().execute(sql, params).fetchall()
        except SQLITE_ERRORS as e:
            raise self.error(e) from None

    def stream(self, sql: str, params: tuple = ()) -> Iterator[tuple]:
        """The rows of a large query, in its order. Text that is not UTF-8 stops SQLite's fast decoding: the query
        is run again on the lenient connection, past the rows already given (its order is deterministic)."""
        given = 0
        try:
            for row in self.db.execute(sql, params):
                yield row
                given += 1
            return
        except sqlite3.OperationalError as e:
            if "decode" not in str(e):
                raise self.error(e) from None
        except SQLITE_ERRORS as e:
            raise self.error(e) from None
        self.oddities[NOT_UTF8] = self.oddities.get(NOT_UTF8, 0) + 1
        try:
            cursor = self.lossy().execute(sql, params)
            for _ in range(given):
                cursor.fetchone()
            yield from cursor
        except SQLITE_ERRORS as e:
            raise self.error(e) from None

    def count(self, sql: str, params: tuple = ()) -> int:
        """The single integer a COUNT query gives."""
        try:
            return self.db.execute(sql, params).fetchone()[0]
        except SQLITE_ERRORS as e:
            raise self.error(e) from None

    def error(self, e: Exception) -> InputError:
        """The one-line error for an SQLite failure while reading (a corrupt or truncated page, most often)."""
        return InputError(self.display, f"corrupted or unreadable SQLite database ({describe(e)})")

    def close(self) -> None:
        """Close the lenient connection if one was opened."""
        if self._lossy is not None:
            self._lossy.close()
            self._lossy = None

    def skip(self, reason: str, n: int) -> None:
        """Count ``n`` rows left out for ``reason``."""
        if n:
            self.oddities[reason] = self.oddities.get(reason, 0) + n


def describe(e: Exception) -> str:
    """What an SQLite failure says, in one short line."""
    if isinstance(e, UnicodeDecodeError):
        return "SQLite's error message is not text: a corrupt schema"
    return (str(e).splitlines() or [type(e).__name__])[0][:200]


class SqliteSource(Source):
    """What a reader of one SQLite export (Nsight Systems, nvprof) opens: the connection and its Rows, which count
    the oddities they meet (rows left out, texts read leniently) for the summary. Raises InputError for a file
    that is not an SQLite database."""

    def __init__(self, path: str, display: str | None = None):
        self.file = path
        self.path = display or path
        self.oddities: dict = {}
        self.db = connect(path, self.path)
        self.rows = Rows(self.db, path, self.path, self.oddities)

    def reopen_args(self) -> tuple:
        """(class, file, display name): what a worker process needs to open this export again."""
        return type(self), self.file, self.path

    def close(self) -> None:
        """Close the database."""
        self.rows.close()
        self.db.close()
