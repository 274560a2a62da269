"""SQLite mutations at the level of NVTX ranges and marker texts: 10,000 nested ranges around one launch,
sequence numbers and op ids that refer to themselves, deeply nested JSON or Python-dict texts, NaN and Infinity
in a marker, hostile kernel and range names."""
from __future__ import annotations

import re
import sqlite3

from bench.fuzz.registry import Built, mutation, parse_commands
from bench.fuzz.sqlite_mut import _mutate, _tables

#: Names a hostile user (or an odd tool) gives kernels and ranges: terminal escapes, line breaks, markup.
HOSTILE = ("\x1b[31mred\x1b[0m\x1b]0;title\x07", "line\nbreak", "cr\rreturn", "tab\there", "</script><script>"
           "alert(1)</script>", "<!--", "nul\x00byte", "\u202eright-to-left", "sep\u2028line\u2029para", "\x7fdel",
           "back\\slash\"quote", "\x85next-line", "\ufeffbom", "\x08\x08\x08overwrite", "x" * 100_000)


def _text_rows(db: sqlite3.Connection) -> list[tuple[str, str, str, int, str]]:
    """(table, key column, text column, key, text) of every marker-like text: NVTX_EVENTS.text, StringIds.value
    (registered strings), nvprof's StringTable.value."""
    out = []
    tabs = _tables(db)
    for table, key, col in (("NVTX_EVENTS", "rowid", "text"), ("StringIds", "id", "value"),
                            ("StringTable", "_id_", "value")):
        if table in tabs:
            try:
                out += [(table, key, col, k, v) for k, v in
                        db.execute(f'SELECT {key}, "{col}" FROM "{table}" WHERE typeof("{col}") = \'text\'')]
            except sqlite3.OperationalError:
                pass
    return out


def _rewrite(db, rows, fn) -> int:
    n = 0
    for table, key, col, k, text in rows:
        new = fn(text)
        if new != text:
            try:
                db.execute(f'UPDATE "{table}" SET "{col}" = ? WHERE {key} = ?', (new, k))
            except sqlite3.IntegrityError:  # nvprof's StringTable keeps its strings unique
                db.execute(f'UPDATE "{table}" SET "{col}" = ? WHERE {key} = ?', (f"{new} #{k}", k))
            n += 1
    return n


@mutation("sql.deep_nvtx", weight=0.5)
def deep_nvtx(rng, seeds, folder) -> Built:
    """10,000 nested push/pop ranges on the thread of one kernel launch, all around it."""
    depth = rng.choice((10_000, 10_000, 2_000))

    def change(db):
        launch = db.execute("SELECT r.start, r.end, r.globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN "
                            "CUPTI_ACTIVITY_KIND_KERNEL k ON k.correlationId = r.correlationId LIMIT 1").fetchone()
        if "NVTX_EVENTS" not in _tables(db):
            db.execute("CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, "
                       "rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, "
                       "endGlobalTid INTEGER, textId INTEGER, domainId INTEGER)")
        start, end, tid = launch
        style = rng.choice(("plain", "marker", "emit"))
        text = {"plain": "range {i}", "emit": "aten::add, seq = {i}, op_id = {i}",
                "marker": '{{"pyprof":1,"module":"m{i}","type":"Linear"}}'}[style]
        db.executemany("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) "
                       "VALUES (?, ?, 59, ?, ?, 0)",
                       ((start - depth + i, end + depth - i, text.format(i=i), tid) for i in range(depth)))
        return f"{depth} nested {style} ranges around the launch at {start} on thread {tid}"
    return _mutate(rng, seeds, folder, change, kinds=("nsys",), need=("CUPTI_ACTIVITY_KIND_RUNTIME",
                                                                     "CUPTI_ACTIVITY_KIND_KERNEL", "NVTX_EVENTS"))


_OP_ID = re.compile(r"op_id = (\d+)")
_INPUTS = re.compile(r"input_op_ids = \[.*\]\s*\Z", re.S)
_SEQ = re.compile(r"((?:stashed )?seq = )(\d+)")


@mutation("sql.self_seq")
def self_seq(rng, seeds, folder) -> Built:
    """emit_nvtx texts whose inputs come from the op itself (or the next one: a cycle), or whose sequence
    numbers are all one number (forward ops and backward nodes then refer to each other)."""
    def change(db):
        rows = _text_rows(db)
        how = rng.choice(("self input", "cyclic input", "one seq", "stashed self")
                         if any("op_id = " in r[4] for r in rows[:5000]) else ("one seq",))
        def fn(text):
            m = _OP_ID.search(text)
            if not m:  # the 2017 format: "name, seq = N" alone
                return _SEQ.sub(lambda s: s.group(1) + "7", text) if how in ("one seq", "stashed self") else text
            op = int(m.group(1))
            if how == "self input":
                return _INPUTS.sub(f"input_op_ids = [({op},0), ({op},0)]", text) if "input_op_ids" in text \
                    else f"{text}, input_op_ids = [({op},0)]"
            if how == "cyclic input":
                nxt = op + 1 if op % 2 else op - 1
                return _INPUTS.sub(f"input_op_ids = [({nxt},0)]", text) if "input_op_ids" in text \
                    else f"{text}, input_op_ids = [({nxt},0)]"
            if how == "one seq":
                return _SEQ.sub(lambda s: s.group(1) + "7", text)
            return _SEQ.sub(lambda s: s.group(1) + str(op), text)
        n = _rewrite(db, rows, fn)
        return f"{how} in {n} emit_nvtx texts"
    pool = [p for p in seeds.nsys + seeds.nvprof if "emit" in p.name or "torch" in p.name] or seeds.nsys
    return _mutate(rng, _only(seeds, pool), folder, change)


def _only(seeds, pool):
    """A Seeds view whose sqlite kinds hold only ``pool``."""
    from dataclasses import replace

    return replace(seeds, nsys=[p for p in pool if p in seeds.nsys], nvprof=[p for p in pool if p in seeds.nvprof])


def _deep(depth: int, style: str) -> str:
    if style == "pyprof":
        return '{"pyprof":1,"mod":"torch","op":"add","args":' + "[" * depth + "]" * depth + ',"site":"a.py:1"}'
    if style == "emit":
        return "aten::add, seq = 3, op_id = 4, sizes = " + "[" * depth + "]" * depth + ", input_op_ids = []"
    if style == "legacy":
        return "{'mod': 'torch', 'op': 'add', 'args': " + "[" * depth + "]" * depth + "}"
    return '{"pyprof":1,"module":"m","type":' + '{"a":' * depth + "1" + "}" * depth + "}"


@mutation("sql.deep_json")
def deep_json(rng, seeds, folder) -> Built:
    """A marker text nested 1,000 to 200,000 deep (JSON, emit_nvtx sizes, a legacy Python dict)."""
    depth = rng.choice((1_000, 20_000, 200_000))
    style = rng.choice(("pyprof", "emit", "legacy", "object"))

    def change(db):
        rows = _text_rows(db)
        if not rows:
            db.execute("CREATE TABLE IF NOT EXISTS StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
            db.execute("INSERT INTO StringIds (value) VALUES ('x')")
            rows = _text_rows(db)
        targets = rng.sample(rows, min(len(rows), rng.choice((1, 3))))
        _rewrite(db, targets, lambda _t: _deep(depth, style))
        return f"{len(targets)} texts nested {depth} deep ({style})"
    return _mutate(rng, seeds, folder, change)


@mutation("sql.nonfinite")
def nonfinite(rng, seeds, folder) -> Built:
    """NaN, Infinity or 1e999 in a marker's arguments (the JSON text allows it; the records must not)."""
    token = rng.choice(("NaN", "Infinity", "-Infinity", "1e999", "-1e999"))

    def change(db):
        marker = ('{"pyprof":1,"mod":"torch","op":"mul","args":[{"type":"float","value":%s},'
                  '{"type":"tensor","shape":[2,%s],"dtype":"float32"}],"site":"a.py:1"}') % (token, token)
        rows = [r for r in _text_rows(db) if r[4].startswith('{"pyprof"') and '"op"' in r[4]]
        if rows:
            n = _rewrite(db, rows[: rng.choice((1, 5, len(rows)))],
                         lambda t: re.sub(r'("value":)(-?\d+(?:\.\d+)?)', r"\g<1>" + token, t, count=1)
                         if '"value":' in t and rng.random() < 0.5 else marker)
            return f"{token} in {n} pyprof markers"
        rows = _text_rows(db)
        n = _rewrite(db, rows[:20], lambda _t: marker)
        return f"{token} in {n} texts replaced by a pyprof marker"
    return _mutate(rng, seeds, folder, change)


@mutation("sql.hostile_name")
def hostile_name(rng, seeds, folder) -> Built:
    """Kernel names and range texts with terminal escapes, line breaks, markup, NULs; parse is chained into
    prof's text formats, where a raw name would break the table."""
    name = rng.choice(HOSTILE)

    def change(db):
        rows = _text_rows(db)
        picked = rng.sample(rows, min(len(rows), rng.choice((1, 10, 100))))
        n = _rewrite(db, picked, lambda t: (t + name) if rng.random() < 0.5 else name)
        return f"{n} names/texts with {name[:40]!r}"
    built = _mutate(rng, seeds, folder, change)
    built.commands[0].chain = True
    return built
