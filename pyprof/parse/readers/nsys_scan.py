"""What the nsys reader needs of a table before and beside its records, in one pass in C (``pyprof.parse._scan``).

Of each table it reads, the reader needs: how many rows it leaves out (NsysSource.check counts them before any
output), whether the rows it reads are stored in start order (then its queries need no ORDER BY:
NsysSource._order_by), whether a push/pop range has a JSON payload (NsysSource.range_query), and of NVTX_EVENTS and
the runtime calls, the host intervals (NsysSource.host_intervals). Its SQL answers each with a query of its own (up
to four passes over NVTX_EVENTS, some of them handing every value to Python as text); the pass here answers all in
one, the intervals merged as they come, so that memory follows the merged intervals and never the rows.

The reader's SQL (nsys.py, nsys_host.py) is the reference and the fallback. It answers where the extension is not
built or parse is kept to Python (native.enabled), for a table without rowids (no profiler writes one), and where an
answer would depend on column types the pass does not follow (takes). Where the pass fails (a corrupt page), the SQL
runs and fails as it always has, with its own message. Both give the same answers (tests/parse/test_nsys_scan.py).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import NamedTuple

import numpy as np

from pyprof.parse.write import native

from pyprof.parse.readers import nsys_host
from pyprof.parse.side.host import union
from pyprof.parse.readers.sqlrows import SQLITE_ERRORS, Rows

try:
    from pyprof.parse import _scan
except ImportError:  # not built (no compiler or no sqlite3.h at install): the reader's SQL, same answers
    _scan = None

#: The kinds of table, as the pass lays out their columns (_scan.c).
ACTIVITIES, CALLS, RANGES = 0, 1, 2
_COLUMNS = {ACTIVITIES: ("start", "end"), CALLS: ("start", "end", "globalTid", "correlationId"),
            RANGES: ("eventType", "start", "end", "globalTid", "text", "textId", "jsonText", "jsonTextId")}
#: Columns read as NULL where a table lacks them (as the reader's SQL does without them).
_OPTIONAL = {"textId", "jsonText", "jsonTextId"}
#: Columns the reader's SQL compares with integers (eventType = 59, textId IN (...)): what that finds depends on the
#: column's type affinity, and the pass follows INTEGER affinity only (nsys declares them INTEGER).
_COMPARED = ("eventType", "textId")
#: The host category of the calls' intervals, by the number the pass gives it (the ranges': nsys_host.CODES).
_CALL_CATEGORIES = ("runtime",)


class Facts(NamedTuple):
    """What one pass found of a table."""

    invalid: int  # rows of the kind read, left out: a time or id that is not an integer, an end before the start
    in_order: bool  # the rows read are stored (rowid order) in start order
    payload: bool  # some push/pop range has a JSON payload (NVTX_EVENTS; False elsewhere)
    host: dict | None  # Source.host_intervals' part of this table; None when not asked for


def enabled() -> bool:
    """True when the pass is built and parse is not kept to Python (native.PURE_PYTHON_ENV)."""
    return _scan is not None and native.enabled()


def scan(rows: Rows, table: str, kind: int, columns: set[str], host: bool, event_type: int) -> Facts | None:
    """The Facts of ``table`` (one of ``kind``; ``columns``: its columns), with its host intervals when ``host``
    (``event_type``: the push/pop ranges' eventType); None where the pass does not take the table (see the module's
    docstring): the reader's SQL answers then."""
    return scan_tables(rows, [Table(table, kind, columns, host)], event_type)[table]


class Table(NamedTuple):
    """A table to scan: its name, kind, columns, and whether its host intervals are wanted."""

    name: str
    kind: int
    columns: set
    host: bool


#: A table of more rows than this is read in parts, each by a thread of its own, where parse uses more than one
#: thread to read (native.read_ahead: more than one CPU, or as PYPROF_READ_AHEAD says; the passes themselves do not
#: read ahead): the pass over a large export's ranges was the longest wait before its first record. The
#: passes hold no GIL while they read (_scan.c), so parts scale with the cores: on the GPU machine (16 cores) the
#: checks of a 50k-kernel export took 0.060-0.081 s in 8 parts against 0.084-0.159 s in 4 (16: no faster).
PART_ROWS = 50_000
MAX_PARTS = 8


def scan_tables(rows: Rows, tables: list[Table], event_type: int) -> dict[str, Facts | None]:
    """The Facts of each of ``tables``, as :func:`scan` gives them. Where parse reads in threads, the passes over the
    tables, and over the parts of a large one, run at once, each in a thread of its own (the C lets go of the GIL
    while it reads), and each table's parts are merged as one pass over it would have found them."""
    out: dict = {}
    calls = []  # (table, the pass over one part)
    for t in tables:
        if not enabled() or not takes(rows, t.name, t.kind, t.columns):
            out[t.name] = None
            continue
        strings = nsys_host.registered_strings(rows) if t.host and t.kind == RANGES and "textId" in t.columns else []
        for where in _parts(rows, t.name):
            calls.append((t, _pass(rows, t, where, event_type, strings)))
    if len(calls) > 1 and native.read_ahead():
        with ThreadPoolExecutor(max_workers=len(calls)) as pool:
            done = [(t, pool.submit(call)) for t, call in calls]
            results = [(t, _result_of(f.result)) for t, f in done]
    else:
        results = [(t, _result_of(call)) for t, call in calls]
    for t in tables:
        if t.name not in out:
            parts = [r for u, r in results if u.name == t.name]
            out[t.name] = None if any(r is None for r in parts) else _merged(t, parts)
    if calls:
        _scan.trim_heap()  # what the passes freed, given back before a sweep worker forks (see _scan.c)
    return out


def _result_of(call):
    """What one pass gave, or None where it failed (the reader's SQL meets the same failure, and reports it as it
    always has)."""
    try:
        return call()
    except _scan.Error:
        return None


def _parts(rows: Rows, table: str) -> list[str]:
    """The WHERE clauses of ``table``'s parts, by rowid: one (all of it) unless the table is large and parse reads
    in threads (native.read_ahead)."""
    if not native.read_ahead():
        return [""]
    try:
        # one query each: SQLite reads the ends of the table's b-tree for a lone min() or max(), not for both
        (low,), (high,) = (rows.db.execute(f"SELECT {end}(rowid) FROM {table}").fetchone() for end in ("min", "max"))
    except SQLITE_ERRORS:
        return [""]  # the pass meets the same failure, and gives way to the SQL
    if low is None or high - low < PART_ROWS:
        return [""]
    n = min(MAX_PARTS, native.cpus(), (high - low) // PART_ROWS + 1)
    if n < 2:
        return [""]
    cuts = [low + (high - low + 1) * k // n for k in range(1, n)]
    return ([f"WHERE rowid < {cuts[0]}"] + [f"WHERE rowid >= {a} AND rowid < {b}" for a, b in zip(cuts, cuts[1:])]
            + [f"WHERE rowid >= {cuts[-1]}"])


def _pass(rows: Rows, t: Table, where: str, event_type: int, strings: list):
    """The pass over the rows of ``t`` that ``where`` takes, to call (``strings``: the ranges' registered strings,
    nsys_host.registered_strings, where its host intervals are wanted)."""
    codes = {c: k for k, c in enumerate(nsys_host.CODES)}  # a range's category by its number
    keep = codes["step"] if t.kind == RANGES else -1
    select = ", ".join(c if c in t.columns or c not in _OPTIONAL else "NULL" for c in _COLUMNS[t.kind])
    return partial(
        _scan.scan, uri=rows.uri, sql=f"SELECT {select} FROM {t.name} {where} ORDER BY rowid", layout=t.kind,
        host=t.host, event_type=event_type, prefixes=tuple((p.encode(), codes[c]) for p, c in nsys_host.PREFIXES),
        node_parts=tuple(p.encode() for p in nsys_host.NODE), node_code=codes["op"],
        registered={sid: codes[c] for sid, c, _ in strings},
        names={sid: text for sid, c, text in strings if codes[c] == keep}, keep_code=keep,
        pid_shift=nsys_host.PID_SHIFT, pid_mask=nsys_host.PID_BITS)


def _merged(t: Table, parts: list[tuple]) -> Facts:
    """One table's Facts from its parts' results, in rowid order: what one pass over the whole would find."""
    in_order = all(p[1] for p in parts)
    last = None
    for p in parts:  # each part in order, and each one's first row not before the last row of the one before
        first_start, last_start = p[4], p[5]
        if first_start is None:
            continue
        if last is not None and first_start < last:
            in_order = False
        last = last_start
    groups = None
    if t.host:
        groups = {}  # (pid, code) -> [starts, ends, names], in the order the groups first came
        for p in parts:
            for pid, code, starts, ends, names in p[3]:
                g = groups.setdefault((pid, code), [[], [], None if names is None else []])
                g[0].append(np.frombuffer(starts, dtype=np.int64))
                g[1].append(np.frombuffer(ends, dtype=np.int64))
                if names is not None:
                    g[2].extend(names)
    categories, keep = (nsys_host.CODES, nsys_host.CODES.index("step")) if t.kind == RANGES else (_CALL_CATEGORIES, -1)
    return Facts(sum(p[0] for p in parts), in_order, any(p[2] for p in parts),
                 None if groups is None else _intervals(groups, categories, keep))


def takes(rows: Rows, table: str, kind: int, columns: set[str]) -> bool:
    """True when the pass gives the reader's SQL's answers for ``table``: a table with rowids, whose compared columns
    have INTEGER affinity; for ranges, a text column, and StringIds' integer ids unique with INTEGER affinity (a
    range's registered string is then the one row of its id)."""
    if rows.without_rowid(table):
        return False
    if kind != RANGES:
        return True
    if "text" not in columns or not _integer_affinity(rows, table, [c for c in _COMPARED if c in columns]):
        return False
    if "textId" not in columns:
        return True
    if not _integer_affinity(rows, "StringIds", ["id"]):
        return False
    try:
        (unique,) = rows.db.execute("SELECT count(id) = count(DISTINCT id) FROM StringIds "
                                    "WHERE typeof(id) = 'integer'").fetchone()
    except SQLITE_ERRORS:
        return False
    return bool(unique)


def _integer_affinity(rows: Rows, table: str, names: list[str]) -> bool:
    # SQLite's first rule of column affinity: a declared type containing "INT"
    declared = {name: str(kind or "") for _cid, name, kind, *_ in rows.all(f"PRAGMA table_info('{table}')")}
    return all("INT" in declared.get(n, "").upper() for n in names)


def _intervals(groups: dict, categories: tuple, keep: int) -> dict:
    """(pid, category) -> (starts, ends, names), as nsys_host gives them: numpy arrays of int64, step names with
    the separator nsys_host's SQL takes out of them taken out too; a group met in several parts is merged again
    (steps: kept as their rows came)."""
    out = {}
    for (pid, code), (starts, ends, names) in groups.items():
        if len(starts) == 1:
            s, e = starts[0], ends[0]
        elif code == keep:
            s, e = np.concatenate(starts), np.concatenate(ends)
        else:
            s, e = union(np.concatenate(starts), np.concatenate(ends))
        out[(pid, categories[code])] = (
            s, e, [n.replace(nsys_host.NAME_SEP, " ") for n in names] if code == keep else [])
    return out
