"""Issue 13 for ``pyprof.parse``: any input file either parses into strict JSON lines, or is refused with one
line naming it, nothing on stdout and nothing left behind; within time and memory bounds.

One regression test per class of the issue on a small hand-made input, then a seeded sweep of each mutation
class of bench/fuzz over small real captures.
"""
from __future__ import annotations

import sqlite3

import pytest

import tiny_inputs as tiny
from robust_helpers import CORPUS, bounded, keeps_promise, linear_time, run, seeded_sweep

from bench.fuzz.judge import lock
from bench.fuzz.paths_mut import full_device
from bench.fuzz.registry import MUTATIONS, Command, load_all
from bench.fuzz.sqlite_mut import drop_column, loosen


def parse(path, *more, must_succeed=False, **kw) -> Command:
    return Command("parse", [str(path), *more], (str(path),), must_succeed=must_succeed, **kw)


def sql(path, *statements):
    db = sqlite3.connect(path)
    for s in statements:
        db.execute(s)
    db.commit()
    db.close()
    return path


def _records(stdout: bytes) -> list[bytes]:
    """The record lines of parse's output: all but its header, side (host time, memory) and end lines."""
    return [x for x in stdout.splitlines()
            if not x.startswith((b'{"pyprof_header":', b'{"pyprof_side":', b'{"pyprof_end":'))]


@pytest.fixture
def export(case):
    return tiny.nsys(case / "in" / "tiny.sqlite")


def test_the_tiny_export_parses(export, case):
    # The baseline of every regression below: unbroken, the hand-made export parses to one record.
    v = run(parse(export, must_succeed=True), case)
    keeps_promise(v, must_succeed=True)
    assert len(_records(v.stdout)) == 1, v.stdout  # parse's header line, one record, side lines, parse's end line


# -- SQLite: corrupt pages, missing columns, invalid text ------------------------------------------------------

def test_corrupt_page(export, case):
    data = bytearray(export.read_bytes())
    data[4096:8192] = bytes(4096)  # page 2: the first table's root page
    export.write_bytes(bytes(data))
    keeps_promise(run(parse(export), case))


MISSING_COLUMNS = [("CUPTI_ACTIVITY_KIND_KERNEL", "start"), ("CUPTI_ACTIVITY_KIND_KERNEL", "correlationId"),
                   ("StringIds", "value"), ("META_DATA_EXPORT", "name"), ("CUPTI_ACTIVITY_KIND_RUNTIME", "globalTid"),
                   ("NVTX_EVENTS", "text")]
@pytest.mark.parametrize("table,column", MISSING_COLUMNS)
def test_missing_column(export, case, table, column):
    db = sqlite3.connect(export)
    drop_column(db, table, column)
    db.commit()
    db.close()
    keeps_promise(run(parse(export), case))


def test_launch_ending_after_every_range(export, case):
    # A launch call whose end is the largest time SQLite holds is enclosed by no range: its kernel is kept,
    # attributed to nothing (the chain of enclosing ranges was empty: a ValueError in correlate).
    sql(export, f"UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET end = {2 ** 63 - 1}")
    v = run(parse(export, must_succeed=True), case)
    keeps_promise(v, must_succeed=True)
    (record,) = _records(v.stdout)
    assert b'"op":[]' in record


@pytest.mark.parametrize("table,column", [("NVTX_EVENTS", "text"), ("StringIds", "value"),
                                          ("META_DATA_EXPORT", "value")])
def test_invalid_utf8_text(export, case, table, column):
    sql(export, f"UPDATE {table} SET {column} = CAST(x'41ff42c328' AS TEXT)")
    keeps_promise(run(parse(export), case))


def test_latin1_gpu_name(export, case):
    sql(export, "UPDATE TARGET_INFO_GPU SET name = CAST(x'4e564944494120c9' AS TEXT)")
    keeps_promise(run(parse(export), case))


# -- NULL and text where integers belong ------------------------------------------------------------------------

INTEGER_COLUMNS = [("CUPTI_ACTIVITY_KIND_KERNEL", "start"), ("CUPTI_ACTIVITY_KIND_KERNEL", "end"),
                   ("CUPTI_ACTIVITY_KIND_KERNEL", "globalPid"), ("CUPTI_ACTIVITY_KIND_KERNEL", "correlationId"),
                   ("CUPTI_ACTIVITY_KIND_KERNEL", "deviceId"), ("CUPTI_ACTIVITY_KIND_KERNEL", "gridZ"),
                   ("CUPTI_ACTIVITY_KIND_RUNTIME", "globalTid"), ("CUPTI_ACTIVITY_KIND_RUNTIME", "start"),
                   ("NVTX_EVENTS", "start"), ("NVTX_EVENTS", "globalTid")]
VALUES = ("NULL", "'abc'", "1.5", "1e999")


@pytest.mark.parametrize("table,column,value", [pytest.param(t, c, v, id=f"{t[-7:]}.{c}={v}")
                                                for v in VALUES for t, c in INTEGER_COLUMNS])
def test_wrong_value_in_integer_column(export, case, table, column, value):
    sql(export, f"UPDATE {table} SET {column} = {value}")
    keeps_promise(run(parse(export), case))


NVPROF_VALUES = [("CUPTI_ACTIVITY_KIND_RUNTIME", "threadId", "NULL"), ("CUPTI_ACTIVITY_KIND_RUNTIME", "threadId",
                                                                        "'abc'"),
                 ("CUPTI_ACTIVITY_KIND_RUNTIME", "threadId", "1e300"), ("CUPTI_ACTIVITY_KIND_KERNEL", "gridZ", "'z'"),
                 ("CUPTI_ACTIVITY_KIND_KERNEL", "start", "NULL"), ("CUPTI_ACTIVITY_KIND_KERNEL", "correlationId",
                                                                   "'abc'")]
@pytest.mark.parametrize("table,column,value", NVPROF_VALUES)
def test_nvprof_wrong_value(case, table, column, value, shared):
    path = case / "in" / "vectoradd.nvvp"
    path.write_bytes((CORPUS / "nvprof" / "nvprof_v18_vectoradd.nvvp").read_bytes())
    db = sqlite3.connect(path)
    loosen(db, table)  # nvprof declares every column NOT NULL
    db.execute(f"UPDATE {table} SET {column} = {value}")
    db.commit()
    db.close()
    keeps_promise(run(parse(path), case))


# -- Markers: deep nesting, self-reference, NaN ----------------------------------------------------------------

@pytest.mark.parametrize("text", [
    pytest.param('{"pyprof":1,"mod":"torch","op":"mm","args":' + "[" * 100_000 + "]" * 100_000 + "}", id="json"),
    pytest.param("aten::mm, seq = 3, op_id = 4, sizes = " + "[" * 100_000 + "]" * 100_000, id="emit_nvtx"),
    pytest.param("{'mod': 'torch', 'op': 'mm', 'args': " + "[" * 100_000 + "]" * 100_000 + "}", id="legacy")])
def test_deeply_nested_marker(case, text):
    keeps_promise(bounded(parse(tiny.nsys(case / "in" / "deep.sqlite", marker=text)), case, limit=10))


def test_self_referring_op_ids(case):
    path = tiny.nsys(case / "in" / "selfref.sqlite",
                     marker="aten::mm, seq = 3, op_id = 4, sizes = [[4, 8], [8, 2]], input_op_ids = [(4,0), (4,0)]")
    keeps_promise(run(parse(path), case))


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_nonfinite_marker_value(case, token):
    marker = tiny.MARKER.replace('"shape":[4,8]', '"shape":[4,8]},{"type":"float","value":%s' % token)
    keeps_promise(run(parse(tiny.nsys(case / "in" / "nan.sqlite", marker=marker)), case))


def test_without_rowid_table_is_valid(export, case):
    sql(export, "CREATE TABLE s2 (id INTEGER PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
        "INSERT INTO s2 SELECT id, value FROM StringIds", "DROP TABLE StringIds", "ALTER TABLE s2 RENAME TO StringIds")
    keeps_promise(run(parse(export, must_succeed=True), case), must_succeed=True)


@pytest.mark.parametrize("table", ["CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMSET",
                                   "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL"])
def test_nvprof_table_without_rowid_gives_the_same_records(case, table, shared):
    # nvprof exports declare _id_ the primary key of each table; rebuilt WITHOUT ROWID (same rows), the file
    # must give the records the original gives.
    original = CORPUS / "nvprof" / "nvprof_v18_vectoradd.nvvp"
    rebuilt = case / "in" / "rebuilt.nvvp"
    rebuilt.write_bytes(original.read_bytes())
    db = sqlite3.connect(rebuilt)
    info = list(db.execute(f'PRAGMA table_info("{table}")'))
    assert [c[1] for c in info if c[5]] == ["_id_"]
    cols = ", ".join(f'"{c[1]}" {c[2]}' for c in info)
    db.execute(f'CREATE TABLE "_n" ({cols}, PRIMARY KEY (_id_)) WITHOUT ROWID')
    db.execute(f'INSERT INTO "_n" SELECT * FROM "{table}"')
    db.execute(f'DROP TABLE "{table}"')
    db.execute(f'ALTER TABLE "_n" RENAME TO "{table}"')
    db.commit()
    db.close()
    before = run(parse(original, must_succeed=True), case)
    after = run(parse(rebuilt, must_succeed=True), case)
    keeps_promise(after, must_succeed=True)
    assert sorted(after.stdout.splitlines()) == sorted(before.stdout.splitlines())
    assert before.stdout.endswith(b'"records":4}\n')  # 1 kernel, 3 copies, 0 memsets (sqlite3 counts them)


# -- Kineto traces ----------------------------------------------------------------------------------------------

def _trace(case, data=None, **kw):
    return tiny.kineto(case / "in" / "t.pt.trace.json", data, **kw)


def test_the_tiny_trace_parses(case):
    v = run(parse(_trace(case), must_succeed=True), case)
    keeps_promise(v, must_succeed=True)
    assert len(_records(v.stdout)) == 1, v.stdout  # parse's header line, one record, side lines, parse's end line


def test_trace_with_bom_is_valid(case):
    keeps_promise(run(parse(_trace(case, prefix=b"\xef\xbb\xbf"), must_succeed=True), case), must_succeed=True)


def test_truncated_trace(case):
    text = tiny.json.dumps(tiny.kineto_events())
    keeps_promise(run(parse(_trace(case, text=text[: len(text) // 2])), case))


@pytest.mark.parametrize("field,value", [("ts", "1e999"), ("dur", "NaN"), ("ts", "-Infinity")])
def test_nonfinite_time(case, field, value):
    data = tiny.kineto_events()
    data["traceEvents"][2][field] = "@T@"
    text = tiny.json.dumps(data).replace('"@T@"', value)
    keeps_promise(run(parse(_trace(case, text=text)), case))


@pytest.mark.parametrize("where", ["Input Dims", "args"])
def test_deeply_nested_args(case, where):
    data = tiny.kineto_events()
    data["traceEvents"][0 if where == "Input Dims" else 2]["args"][where if where != "args" else "deep"] = "@D@"
    text = tiny.json.dumps(data).replace('"@D@"', "[" * 100_000 + "]" * 100_000)
    # In-process, this once took all 24 GB of the machine: only ever run it as a bounded process.
    keeps_promise(bounded(parse(_trace(case, text=text)), case, limit=10))


@pytest.mark.parametrize("event,field,value", [(2, "ts", "soon"), (2, "dur", None), (2, "args", [1]),
                                               (1, "args", {"correlation": "seven"}), (0, "tid", {"a": 1}),
                                               (2, "name", 5), (None, "traceEvents", {"a": 1})])
def test_wrong_type_in_trace(case, event, field, value):
    data = tiny.kineto_events()
    (data if event is None else data["traceEvents"][event])[field] = value
    keeps_promise(run(parse(_trace(case, data)), case))


@pytest.mark.parametrize("how", ["flip", "cut", "not utf8"])
def test_corrupt_gzip(case, how):
    raw = tiny.json.dumps(tiny.kineto_events()).encode()
    if how == "not utf8":
        raw = raw.replace(b'"aten::mm"', b'"aten::\xff\xfe"')
    comp = bytearray(tiny.gzip.compress(raw, mtime=0))
    if how == "flip":
        for i in range(12, len(comp) - 8, 7):
            comp[i] ^= 0x5A
    elif how == "cut":
        comp = comp[: len(comp) // 2]
    path = case / "in" / "t.pt.trace.json.gz"
    path.write_bytes(bytes(comp))
    keeps_promise(run(parse(path), case))


@pytest.mark.parametrize("how", ["flip", "cut"])
def test_corrupt_xz(export, case, how):
    import lzma

    comp = bytearray(lzma.compress(export.read_bytes(), preset=0))
    if how == "flip":
        for i in range(40, len(comp) - 20, 97):
            comp[i] ^= 0x5A
    else:
        comp = comp[: len(comp) // 2]
    path = case / "in" / "tiny.sqlite.xz"
    path.write_bytes(bytes(comp))
    keeps_promise(run(parse(path), case))


# -- Output paths -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("where", ["missing folder", "a folder", "read-only folder"])
def test_output_path(export, case, where):
    if where == "missing folder":
        out = case / "in" / "no" / "out.dict"
    elif where == "a folder":
        out = case / "in" / "adir"
        out.mkdir()
    else:
        d = case / "in" / "readonly"
        d.mkdir()
        if not lock(d):
            pytest.skip("root without chattr: a read-only folder cannot be made here")
        out = d / "out.dict"
    keeps_promise(run(Command("parse", [str(export), "-o", str(out)], (str(out), str(out.parent)),
                              stdout_kind=None), case))


@pytest.mark.parametrize("how", ["-o", "stdout"])
def test_full_disk(export, case, how):
    full = full_device(case / "in")
    names = (str(export), full, "stdout")
    cmd = Command("parse", [str(export), "-o", full], names, stdout_kind=None, device=full) if how == "-o" else \
        Command("parse", [str(export)], names, stdout_to=full, device=full)
    keeps_promise(run(cmd, case))


# -- Bounds: a process around the command ----------------------------------------------------------------------

def test_nested_ranges_in_linear_time(case):
    def make(n, folder):
        path = tiny.nsys(folder / "nested.sqlite")
        db = sqlite3.connect(path)
        db.executemany("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) "
                       "VALUES (?, ?, 59, ?, ?, 0)", ((900 - i, 1200 + i, f"range {i}", tiny.GTID)
                                                      for i in range(1, n + 1)))
        db.commit()
        db.close()
        return parse(path)
    assert linear_time(make, (2_000, 10_000), case, per_unit_s=0.001) is None  # a millisecond a range


def test_huge_trace_name_in_linear_time(case):
    def make(mb, folder):
        data = tiny.kineto_events()
        if mb:
            data["traceEvents"][2]["name"] = "void k<" + "x" * (mb << 20) + ">()"
        return parse(tiny.kineto(folder / "t.pt.trace.json", data))
    assert linear_time(make, (4, 20), case, per_unit_s=1.0) is None  # a second per MB


def test_deep_trace_in_bounded_memory(case):
    data = tiny.kineto_events()
    for i in range(20):
        data["traceEvents"].append({"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": i,
                                    "dur": 1, "args": {"deep": "@D@"}})
    text = tiny.json.dumps(data).replace('"@D@"', "[" * 50_000 + "]" * 50_000)
    keeps_promise(bounded(parse(_trace(case, text=text)), case, limit=15))


# -- Seeded mutations of real captures -------------------------------------------------------------------------

load_all()
#: Classes whose cases take seconds (a 20 MB name): the scaling tests above cover them, the bench runs them.
SLOW = {"json.huge_name", "rec.huge_name"}
#: Classes whose inputs can take the time or memory a hang or a leak needs: run as processes, with bounds.
BOUNDED = {"sql.deep_nvtx", "sql.deep_json", "json.deep", "json.huge_name"}
PARSE_CLASSES = sorted(n for n, m in MUTATIONS.items() if m.stage == "parse" and n.split(".")[0] in
                       ("sql", "json", "bytes", "comp") and n not in SLOW)
CASES_PER_CLASS = 4


@pytest.mark.parametrize("cls", PARSE_CLASSES)
def test_seeded_mutations(small_seeds, tmp_path, cls):
    broken = seeded_sweep(cls, small_seeds, tmp_path, 13, CASES_PER_CLASS, BOUNDED,
                          lambda cmd: cmd if cmd.stage == "parse" else None)
    assert not broken, "\n".join(broken)

