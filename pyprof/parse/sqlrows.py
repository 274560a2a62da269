"""Reading SQLite exports defensively: what the nsys and nvprof readers share.

An export can hold anything a database can: a value of the wrong type in any column (SQLite does not enforce
column types), text that is not UTF-8, pages that are corrupt. A row whose times or ids are unusable is left out
and counted (an oddity the summary reports); a value that only describes (a device id, a grid size) becomes null
when it is not an integer; text that is not UTF-8 is read with replacement characters; a corrupt page is an
InputError naming the file. Everything here costs nothing per row on a sound export but one generator step.
"""
from __future__ import annotations

import functools
import sqlite3
from typing import Iterator

from pyprof.common import InputError

#: Text as SQLite stores it, decoded with replacement characters where it is not UTF-8 (a GPU name in Latin-1).
lossy_text = functools.partial(str, encoding="utf-8", errors="replace")

#: What a query of a damaged export raises: SQLite's errors, and UnicodeDecodeError when the sqlite3 module
#: cannot decode SQLite's own error message (it quotes a corrupt schema's bytes).
SQLITE_ERRORS = (sqlite3.DatabaseError, UnicodeDecodeError)
NOT_UTF8 = "texts that are not UTF-8, read with replacement characters"


def integer(col: str) -> str:
    """SQL for ``col`` when it holds an integer, else NULL (a describing value of the wrong type)."""
    return f"CASE WHEN typeof({col}) = 'integer' THEN {col} END"


def integers(*cols: str) -> str:
    """SQL condition: every one of ``cols`` holds an integer (the values a row cannot do without)."""
    return " AND ".join(f"typeof({c}) = 'integer'" for c in cols)


def connect(path: str, display: str, text_factory=None) -> sqlite3.Connection:
    """A read-only connection (never a journal beside the user's export). Raises InputError."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        db.execute("PRAGMA query_only = 1")
    except SQLITE_ERRORS as e:
        raise InputError(display, f"not a readable SQLite database ({describe(e)})") from None
    if text_factory is not None:
        db.text_factory = text_factory
    return db


class Rows:
    """Runs the queries of one export: rows as the cursor yields them, text that is not UTF-8 read again with
    replacement characters, and SQLite's errors turned into one InputError naming the file."""

    def __init__(self, db: sqlite3.Connection, file: str, display: str, oddities: dict) -> None:
        self.db = db
        self.file = file
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
