"""An nsys export's host intervals (Source.host_intervals): its ranges by category and its CUDA API calls, read in
bulk. An export holds a few rows per kernel in each table; handing each to Python would cost half a parse again,
so SQLite returns each block of rows as a few comma-separated texts that numpy reads, and each block is merged
into disjoint intervals (pyprof.parse.side.host.union) before the next is read: memory follows the merged intervals,
not the rows. The compiled pass (nsys_scan) finds the same in C where it is built; this is its reference.
"""
from __future__ import annotations

import numpy as np

from pyprof.parse.side.host import union
from pyprof.parse.readers.sqlrows import Rows

#: Rows per query (each column of a block comes as one text of a few MB at most).
BLOCK_ROWS = 1 << 17
PID_SHIFT, PID_BITS = 24, 0xFFFFFF  # a globalTid's OS process id (nsys.os_pid)
#: Separates step names in one group_concat (no range text holds it).
NAME_SEP = "\x1e"
#: A range's category by the start of its text: the step, the DataLoader's record_function, pyprof's op markers,
#: PyTorch's aten ops (emit_nvtx, --pytorch=autograd-nvtx); and autograd nodes ("AddmmBackward0, seq = 12").
PREFIXES = (("ProfilerStep#", "step"), ("enumerate(DataLoader)", "dataloader"), ('{"pyprof":1,"mod":', "op"),
            ("aten::", "op"))
NODE = ("Backward", ", seq = ")
#: The range categories by the number the query gives them.
CODES = ("step", "dataloader", "op")


def category_of(text: str) -> str | None:
    """The category of a range's text (PREFIXES), or None."""
    for prefix, category in PREFIXES:
        if text.startswith(prefix):
            return category
    return "op" if all(part in text for part in NODE) else None


def category_sql(col: str, code: dict[str, int]) -> str:
    """category_of in SQL, of the text column ``col``: the category's number in ``code``, NULL for none."""
    whens = " ".join(f"WHEN substr({col}, 1, {len(p)}) = '{p}' THEN {code[c]}" for p, c in PREFIXES)
    node = " AND ".join(f"instr({col}, '{part}') > 0" for part in NODE)
    return f"CASE {whens} WHEN {node} THEN {code['op']} END"


def registered_strings(rows: Rows) -> list[tuple[int, str, str]]:
    """(id, category, text) of each registered string (StringIds) of a category (category_of), in the table's order:
    a few thousand strings, each classified once here rather than per range."""
    out = []
    for sid, text in rows.all("SELECT id, value FROM StringIds WHERE typeof(id) = 'integer'"):
        category = category_of(text) if type(text) is str else None
        if category is not None:
            out.append((sid, category, text))
    return out


def registered(rows: Rows) -> dict[str, list[int]]:
    """Category -> the ids of the registered strings (StringIds) of that category."""
    out: dict = {}
    for sid, category, _text in registered_strings(rows):
        out.setdefault(category, []).append(sid)
    return out


def ranges_by_category(rows: Rows, table: str, has_text_id: bool, where: str) -> dict[tuple, tuple]:
    """(pid, category) -> (starts, ends, names) of the push/pop ranges of ``table`` (NVTX_EVENTS, rows matching
    ``where``) of a category (category_of): merged, but for steps (kept each as it is, with its text). A range's
    text is inline (``text``) or a registered string (``textId``); registered ones are classified once."""
    out: dict = {}
    by_id = registered(rows) if has_text_id else {}
    # the category as a number (CODES; len(CODES) for none), referred to once: SQLite would evaluate an
    # expression named in a subquery again at each use, and a GROUP BY would sort every row
    codes = {c: k for k, c in enumerate(CODES)}
    whens = " ".join(f"WHEN e.textId IN ({','.join(map(str, ids))}) THEN {codes[c]}" for c, ids in by_id.items())
    inline = category_sql("e.text", codes)
    code = f"ifnull(CASE WHEN typeof(e.text) = 'text' THEN {inline} {whens} END, {len(CODES)})"
    # a step's name (steps are few: a registered one looked up one by one). Which rows are steps follows the
    # category's rule: an inline text decides alone, a registered string only where the text is none (a row with
    # both, a step by its textId only, would give a name to a row that is no step, and put the names out of step)
    inline_step = " OR ".join(f"substr(e.text, 1, {len(p)}) = '{p}'" for p, c in PREFIXES if c == "step")
    registered_step = f"e.textId IN ({','.join(map(str, by_id['step']))})" if by_id.get("step") else "0"
    is_step = f"CASE WHEN typeof(e.text) = 'text' THEN {inline_step} ELSE {registered_step} END"
    name = ("CASE WHEN typeof(e.text) = 'text' THEN e.text ELSE (SELECT value FROM StringIds WHERE id = e.textId) "
            "END" if has_text_id else "e.text")
    sql = (f"SELECT group_concat({code}), group_concat(e.globalTid), group_concat(e.start), group_concat(e.end), "
           f"group_concat(CASE WHEN {is_step} THEN replace({name}, '{NAME_SEP}', ' ') END, '{NAME_SEP}') "
           f"FROM {table} e WHERE {{block}} AND {where}")
    for block, params in _blocks(rows, table, "e."):
        for c, g, s, x, names in rows.all(sql.replace("{block}", block), params):
            code_of, gtid, start, end = _ints(c), _ints(g), _ints(s), _ints(x)
            if not (len(code_of) == len(gtid) == len(start) == len(end)):
                continue  # a value that is no integer broke a text apart: the block is left out
            for k in np.unique(code_of).tolist():
                if k < len(CODES):
                    mine = code_of == k
                    _add(out, CODES[k], gtid[mine], start[mine], end[mine],
                         names.split(NAME_SEP) if CODES[k] == "step" and names else None)
    return _merged(out)


def calls(rows: Rows, table: str, where: str) -> dict[tuple, tuple]:
    """(pid, "runtime") -> (starts, ends, []) of every call of ``table`` (CUDA runtime and driver API), merged."""
    out: dict = {}
    sql = (f"SELECT group_concat(globalTid), group_concat(start), group_concat(end) FROM {table} "
           f"WHERE {{block}} AND {where}")
    for block, params in _blocks(rows, table, ""):
        for g, s, x in rows.all(sql.replace("{block}", block), params):
            gtid, start, end = _ints(g), _ints(s), _ints(x)
            if len(gtid) == len(start) == len(end):  # else a value that is no integer broke a text: left out
                _add(out, "runtime", gtid, start, end, None)
    return _merged(out)


def _blocks(rows: Rows, table: str, alias: str):
    """(SQL condition, its parameters) of each block of ``table``'s rows: BLOCK_ROWS rowids at a time, or the whole
    table at once when it has no rowid (WITHOUT ROWID: no profiler writes one, a rebuilt export may)."""
    if rows.without_rowid(table):
        yield "1", ()
        return
    (lo, hi), = rows.all(f"SELECT min(rowid), max(rowid) FROM {table}")
    if lo is None:
        return
    for first in range(lo, hi + 1, BLOCK_ROWS):
        yield f"{alias}rowid BETWEEN ? AND ?", (first, first + BLOCK_ROWS - 1)


def _ints(text: str | None) -> np.ndarray:
    return np.fromstring(text, dtype=np.int64, sep=",") if text else np.zeros(0, np.int64)


def _add(out: dict, category: str, gtid: np.ndarray, start: np.ndarray, end: np.ndarray,
         names: list | None) -> None:
    pids = (gtid >> PID_SHIFT) & PID_BITS
    for pid in np.unique(pids).tolist():
        mine = pids == pid
        parts = out.setdefault((pid, category), ([], [], []))
        if category == "step":  # steps stay as they are, named
            parts[0].append(start[mine])
            parts[1].append(end[mine])
            if names is not None and len(names) == len(start):
                parts[2].extend(n for n, m in zip(names, mine.tolist()) if m)
        else:  # merged block by block: what is held is the merged intervals, not the rows
            lo, hi = union(start[mine], end[mine])
            parts[0].append(lo)
            parts[1].append(hi)


def _merged(out: dict) -> dict:
    done = {}
    for key in list(out):  # each key's blocks let go once merged: at most one key's blocks and its merge held
        s, e, names = out.pop(key)
        lo, hi = np.concatenate(s), np.concatenate(e)
        del s, e
        if key[1] != "step":
            lo, hi = union(lo, hi)
        elif len(names) != len(lo):
            names = [""] * len(lo)
        done[key] = (lo, hi, names)
    return done
