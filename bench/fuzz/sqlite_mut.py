"""SQLite mutations of Nsight Systems and nvprof exports, made through sqlite3 on a copy of a real seed.

Tables and columns dropped, values of every kind where integers or text belong, invalid UTF-8 and Latin-1 text,
tables rebuilt ``WITHOUT ROWID`` (still a valid export). The marker-level mutations (deep nesting, self-referring
sequence numbers, NaN markers, hostile names) are in ``sqlite_markers``.
"""
from __future__ import annotations

import random
import shutil
import sqlite3
from pathlib import Path

from bench.fuzz.registry import Built, mutation, parse_commands
from bench.fuzz.seeds import Seeds, choose

#: Tables a reader depends on (both formats); a mutation picks among those present in the seed.
KEY_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME",
              "CUPTI_ACTIVITY_KIND_DRIVER", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
              "NVTX_EVENTS", "StringIds", "StringTable", "TARGET_INFO_GPU", "TARGET_INFO_CUDA_DEVICE",
              "META_DATA_EXPORT", "EXPORT_META_DATA", "CUPTI_ACTIVITY_KIND_MARKER", "CUPTI_ACTIVITY_KIND_DEVICE",
              "CUPTI_ACTIVITY_KIND_NAME", "Version", "ThreadNames", "TARGET_INFO_SESSION_START_TIME")
#: Columns named in issue 13 and their like: a mutation picks one of these most of the time.
HOT_COLUMNS = ("start", "end", "globalTid", "globalPid", "correlationId", "deviceId", "threadId", "processId",
               "gridX", "gridZ", "blockX", "value", "name", "text", "textId", "demangledName", "shortName",
               "mangledName", "nameId", "streamId", "id", "timestamp", "flags", "objectId", "eventType",
               "registersPerThread", "staticSharedMemory", "dynamicSharedMemory", "bytes", "copyKind",
               "domainId", "smCount", "totalMemory", "cbid")
TEXT_COLUMNS = ("value", "name", "text")

NULL = "NULL"
WRONG_TYPES = ("'abc'", "''", "x'00ff10'", "1.5", "'12abc'", "' 7 '", "-0.0", "'NaN'", "'[1,2]'")
EXTREMES = ("9223372036854775807", "-9223372036854775808", "-1", "1e999", "-1e999", "1e300", "0",
            "4294967296", "18446744073709551615.0")
INVALID_UTF8 = ("x'ff'", "x'c328'", "x'80'", "x'e28228'", "x'ed a0 80'", "x'f0288cbc'", "x'41ff42c3'", "x'00'")


def copy_seed(rng: random.Random, seeds: Seeds, folder: Path, kinds=("nsys", "nvprof"), need=None) -> Path:
    """Copy a random seed export of ``kinds`` (one having every table in ``need``) into ``folder``."""
    pool = [p for k in kinds for p in getattr(seeds, k)]
    if need:
        pool = [p for p in pool if all(t in tables_of(p) for t in need)] or pool
    src = choose(rng, pool)
    dest = folder / src.name
    shutil.copyfile(src, dest)
    return dest


_TABLES_CACHE: dict[Path, dict] = {}


def tables_of(path: Path) -> dict[str, list[str]]:
    """{table: [columns]} of a seed (cached: seeds never change)."""
    if path not in _TABLES_CACHE:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            _TABLES_CACHE[path] = {t: [c[1] for c in con.execute(f'PRAGMA table_info("{t}")')] for t in names}
        finally:
            con.close()
    return _TABLES_CACHE[path]


def pick_column(rng: random.Random, db: sqlite3.Connection, prefer=HOT_COLUMNS) -> tuple[str, str]:
    """A (table, column) of a key table that has rows, a hot column most of the time."""
    tabs = [t for t in _tables(db) if t in KEY_TABLES and db.execute(f'SELECT 1 FROM "{t}" LIMIT 1').fetchone()]
    if not tabs:
        tabs = [t for t in _tables(db) if not t.startswith("sqlite_")]
    pairs = [(t, c) for t in tabs for c in _columns(db, t)]
    hot = [(t, c) for t, c in pairs if c in prefer]
    return rng.choice(hot if hot and rng.random() < 0.8 else pairs)


def _tables(db: sqlite3.Connection) -> list[str]:
    return [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]


def _columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [c[1] for c in db.execute(f'PRAGMA table_info("{table}")')]


def loosen(db: sqlite3.Connection, table: str) -> None:
    """Rebuild ``table`` without its constraints (nvprof declares NOT NULL everywhere), rows kept in order."""
    db.execute(f'CREATE TABLE "_loose" AS SELECT * FROM "{table}" ORDER BY rowid')
    db.execute(f'DROP TABLE "{table}"')
    db.execute(f'ALTER TABLE "_loose" RENAME TO "{table}"')


def set_column(rng: random.Random, db: sqlite3.Connection, table: str, column: str, value_sql: str) -> str:
    """UPDATE one row, every third row or every row of ``table.column`` to ``value_sql``; returns which."""
    where, what = rng.choice((("rowid = (SELECT min(rowid) FROM \"{t}\")", "first row"),
                              ("rowid % 3 = 0", "every third row"), ("1", "every row")))
    sql = f'UPDATE "{table}" SET "{column}" = {value_sql} WHERE {where.format(t=table)}'
    try:
        db.execute(sql)
    except sqlite3.IntegrityError:
        loosen(db, table)
        db.execute(sql)
    return what


def drop_column(db: sqlite3.Connection, table: str, column: str) -> None:
    """ALTER TABLE DROP COLUMN, or a rebuild without it where SQLite refuses (a key, an indexed column)."""
    try:
        db.execute(f'ALTER TABLE "{table}" DROP COLUMN "{column}"')
    except sqlite3.OperationalError:
        keep = ", ".join(f'"{c}"' for c in _columns(db, table) if c != column) or "NULL AS _nothing"
        db.execute(f'CREATE TABLE "_rebuilt" AS SELECT {keep} FROM "{table}"')
        db.execute(f'DROP TABLE "{table}"')
        db.execute(f'ALTER TABLE "_rebuilt" RENAME TO "{table}"')


def _mutate(rng, seeds, folder, change, kinds=("nsys", "nvprof"), must_succeed=False, need=None) -> Built:
    path = copy_seed(rng, seeds, folder, kinds, need)
    db = sqlite3.connect(path)
    try:
        detail = change(db)
        db.commit()
    finally:
        db.close()
    return Built(f"{path.name}: {detail}", parse_commands(rng, str(path), must_succeed))


@mutation("sql.drop_table")
def drop_table(rng, seeds, folder) -> Built:
    def change(db):
        t = rng.choice([t for t in _tables(db) if t in KEY_TABLES] or _tables(db))
        db.execute(f'DROP TABLE "{t}"')
        return f"DROP TABLE {t}"
    return _mutate(rng, seeds, folder, change)


@mutation("sql.drop_column")
def drop_col(rng, seeds, folder) -> Built:
    def change(db):
        t, c = pick_column(rng, db)
        drop_column(db, t, c)
        return f"drop column {t}.{c}"
    return _mutate(rng, seeds, folder, change)


def _value_class(values):
    def mutate(rng, seeds, folder) -> Built:
        def change(db):
            t, c = pick_column(rng, db)
            v = rng.choice(values)
            rows = set_column(rng, db, t, c, v)
            return f"{t}.{c} = {v} ({rows})"
        return _mutate(rng, seeds, folder, change)
    return mutate


mutation("sql.null")(_value_class((NULL,)))
mutation("sql.wrong_type")(_value_class(WRONG_TYPES))
mutation("sql.extreme")(_value_class(EXTREMES))


@mutation("sql.invalid_utf8")
def invalid_utf8(rng, seeds, folder) -> Built:
    def change(db):
        t, c = pick_column(rng, db, prefer=TEXT_COLUMNS)
        v = rng.choice(INVALID_UTF8).replace(" ", "")
        rows = set_column(rng, db, t, c, f"CAST({v} AS TEXT)")
        return f"{t}.{c} = CAST({v} AS TEXT) ({rows})"
    return _mutate(rng, seeds, folder, change)


@mutation("sql.latin1_gpu")
def latin1_gpu(rng, seeds, folder) -> Built:
    # "NVIDIA GeForce RTX Ée" written in Latin-1: a name from a driver or a tool that is not UTF-8.
    latin1 = "CAST(x'4e5649444941204765466f7263652052545820c965' AS TEXT)"

    def change(db):
        tabs = _tables(db)
        if "TARGET_INFO_GPU" in tabs:
            db.execute(f"UPDATE TARGET_INFO_GPU SET name = {latin1}")
            return "TARGET_INFO_GPU.name in Latin-1"
        if "CUPTI_ACTIVITY_KIND_DEVICE" in tabs and "StringTable" in tabs:
            db.execute(f"UPDATE StringTable SET value = {latin1} WHERE _id_ IN "
                       "(SELECT name FROM CUPTI_ACTIVITY_KIND_DEVICE)")
            return "nvprof device name (StringTable) in Latin-1"
        db.execute("CREATE TABLE TARGET_INFO_GPU (id INTEGER, name TEXT)")
        db.execute(f"INSERT INTO TARGET_INFO_GPU VALUES (0, {latin1})")
        return "TARGET_INFO_GPU added with a Latin-1 name"
    return _mutate(rng, seeds, folder, change)


@mutation("sql.without_rowid")
def without_rowid(rng, seeds, folder) -> Built:
    """A valid export whose table has no rowid (SQLite allows it; the data is unchanged): must parse."""
    def change(db):
        tabs = [t for t in _tables(db) if t in KEY_TABLES]
        t = rng.choice(tabs)
        info = list(db.execute(f'PRAGMA table_info("{t}")'))
        pk = [c[1] for c in info if c[5]]
        cols = ", ".join(f'"{c[1]}" {c[2]}' for c in info)
        if pk:
            body, select = f"{cols}, PRIMARY KEY ({', '.join(pk)})", "*"
        else:  # a key is needed: a row number column, as another tool could add
            body, select = f'"_row" INTEGER PRIMARY KEY, {cols}', "rowid, *"
        db.execute(f'CREATE TABLE "_norowid" ({body}) WITHOUT ROWID')
        db.execute(f'INSERT INTO "_norowid" SELECT {select} FROM "{t}"')
        db.execute(f'DROP TABLE "{t}"')
        db.execute(f'ALTER TABLE "_norowid" RENAME TO "{t}"')
        return f"{t} rebuilt WITHOUT ROWID" + ("" if pk else " (with a _row key)")
    return _mutate(rng, seeds, folder, change, must_succeed=True)
