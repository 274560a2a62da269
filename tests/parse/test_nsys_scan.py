"""The compiled pass over an nsys export's tables (pyprof.parse.readers.nsys_scan, _scan.c) and the reader's SQL, its
reference: the same rows left out and counted, the same stored-order and JSON-payload answers, the same host
intervals, and so the same parse output byte for byte or the same refusal, on real captures and on inputs broken on
purpose (values of the wrong type, rows out of order, tables without rowids, empty tables, missing columns). Where
the pass does not take a table (nsys_scan.takes), the SQL answers alone: each such case checks that it did."""
from __future__ import annotations

import lzma
import random
import shutil
import sqlite3
from pathlib import Path

import pytest

from pyprof.common import InputError
from pyprof.parse.write import native
from pyprof.parse.readers import nsys, nsys_scan
from pyprof.parse.cli import main as parse_main
from pyprof.parse.readers.nsys import KERNEL, NVTX, RUNTIME, NsysSource

from parse_synth import CORPUS, gtid, parse_outcome

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = sorted((ROOT / "tests" / "data").rglob("*.sqlite.xz")) + sorted((ROOT / "examples").rglob("*.sqlite.xz"))
SHARED = sorted((CORPUS / "nsys").glob("*.sqlite")) if (CORPUS / "nsys").is_dir() else []
needs_scan = pytest.mark.skipif(nsys_scan._scan is None,
                                reason="the compiled pass is not built (no compiler or sqlite3.h)")


def _facts(path: Path, pure: bool, monkeypatch) -> tuple:
    """(what the reader found before and beside its records, the compiled pass's Facts by table) on one path: the
    rows left out (oddities), each table's ORDER BY, the ranges' query (None when some has a JSON payload), the host
    intervals; or the error."""
    monkeypatch.setenv(native.PURE_PYTHON_ENV, "1" if pure else "0")
    try:
        src = NsysSource(str(path))
    except InputError as e:
        return ("error", str(e)), {}
    try:
        src.check()
        orders = {t: src._order_by(t, where, "e." if t == NVTX else "")
                  for t, (_kind, where) in nsys._SCANNED.items() if t in src.cols}
        ranges = src.range_query() if NVTX in src.cols else None
        query = None if ranges is None else ranges.sql
        host = {k: ([int(x) for x in s], [int(x) for x in e], list(n)) for k, (s, e, n) in src.host_intervals().items()}
        return (dict(src.oddities), orders, query, host), dict(src._scanned)
    except InputError as e:
        return ("error", str(e)), dict(src._scanned)
    finally:
        src.close()


def _parsed(path: Path, pure: bool, monkeypatch) -> tuple:
    """(parse's output, its Stats' counts), or the error's line."""
    monkeypatch.setenv(native.PURE_PYTHON_ENV, "1" if pure else "0")
    return parse_outcome(path)


def _same_both_ways(path: Path, monkeypatch, taken: set[str] | None = None) -> tuple:
    """Assert both paths find and write the same for ``path``; that the pass took exactly the tables ``taken``
    (None: every table the reader scans); return what the compiled path found."""
    compiled, scanned = _facts(path, False, monkeypatch)
    reference, none = _facts(path, True, monkeypatch)
    assert compiled == reference
    assert all(f is None for f in none.values())  # PYPROF_PURE_PYTHON=1 keeps the pass out
    if taken is None:
        taken = set(scanned)
    assert {t for t, f in scanned.items() if f is not None} == taken
    assert _parsed(path, False, monkeypatch) == _parsed(path, True, monkeypatch)
    return compiled


def _unpacked(path: Path, tmp_path: Path) -> Path:
    if path.suffix != ".xz":
        return path
    out = tmp_path / path.stem
    with lzma.open(path) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


@needs_scan
@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: str(p.relative_to(ROOT)))
def test_committed_captures_same_both_ways(path, tmp_path, monkeypatch):
    _same_both_ways(_unpacked(path, tmp_path), monkeypatch)


@needs_scan
@pytest.mark.parametrize("path", SHARED, ids=lambda p: p.name)
def test_shared_exports_same_both_ways(corpus, path, monkeypatch):
    _same_both_ways(path, monkeypatch)


@pytest.fixture(params=["whole", "in parts"])
def parts(request, monkeypatch):
    """Each table scanned whole, or (where parse reads ahead) in parts of 2 rows or more, up to 4 at once, each in a
    thread of its own (nsys_scan.scan_tables): the parts, merged, find what one pass finds."""
    if request.param == "whole":
        monkeypatch.setenv(native.READ_AHEAD_ENV, "0")
    else:
        monkeypatch.setenv(native.READ_AHEAD_ENV, "1")
        monkeypatch.setattr(nsys_scan, "PART_ROWS", 2)
        monkeypatch.setattr(native, "cpus", lambda: 4)
    return request.param


def _base(b) -> None:
    """Two processes' worth of work: pid 1 thread 2 has a step with ops and a DataLoader range inside; pid 3 an op."""
    b.gpu(0, "NVIDIA H100")
    b.range(1, 2, 1000, 9000, "ProfilerStep#1")
    b.range(1, 2, 1100, 1500, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__")
    b.range(1, 2, 2000, 3000, "aten::linear, seq = 1, op_id = 1")
    b.range(1, 2, 2500, 4000, "aten::mm, seq = 2, op_id = 2")  # overlaps the linear: [2000, 4000]
    b.range(1, 2, 4000, 4500, "MmBackward0, seq = 2, op_id = 3")  # touches it: still [2000, 4500]
    b.range(1, 2, 5000, 5100, "layer:conv1")  # no category
    b.range(3, 4, 1500, 1600, "aten::relu, seq = 5, op_id = 4")
    for corr, (pid, tid, start) in enumerate([(1, 2, 2100), (1, 2, 2600), (3, 4, 1550)], start=1):
        b.launch(pid, tid, start, start + 50, corr)
        b.kernel(pid, 10_000 + corr * 1000, 10_500 + corr * 1000, corr)


@needs_scan
def test_host_intervals_as_reasoned(nsys_builder, monkeypatch, parts):
    b = nsys_builder()
    _base(b)
    _oddities, orders, query, host = _same_both_ways(b.close(), monkeypatch)
    assert host == {
        (1, "step"): ([1000], [9000], ["ProfilerStep#1"]),
        (1, "dataloader"): ([1100], [1500], []),
        (1, "op"): ([2000], [4500], []),  # [2000, 3000] [2500, 4000] [4000, 4500]: overlapping, then touching
        (3, "op"): ([1500], [1600], []),
        (1, "runtime"): ([2100, 2600], [2150, 2650], []),
        (3, "runtime"): ([1550], [1600], []),
    }
    # pid 3's range and call come after pid 1's later ones; the kernels come in start order
    assert orders == {NVTX: "ORDER BY e.start, e.rowid", RUNTIME: "ORDER BY start, rowid", KERNEL: "",
                      nsys.MEMCPY: ""}
    assert "jsonText" not in query  # no JSON payload: the ranges as they come


@needs_scan
def test_values_of_the_wrong_type_left_out_and_counted_alike(nsys_builder, monkeypatch, parts):
    b = nsys_builder()
    _base(b)
    ranges = [("'t2000'", 3000, gtid(1, 2), 59),  # a start that is text (no number: affinity keeps it text)
              (2000, 3000.5, gtid(1, 2), 59),  # an end that is real
              (2000, 3000, "NULL", 59),  # no thread
              (3000, 2000, gtid(1, 2), 59),  # ends before it starts
              (2000, "x'00'", gtid(1, 2), 59),  # an end that is a blob
              (2000, "NULL", gtid(1, 2), 59),  # never closed: left out, not counted
              (2000, "'x'", gtid(1, 2), 34),  # a mark (not a push/pop range): neither
              (2000, 6000, gtid(1, 2), "'x59'"),  # an event type that is no number: neither
              (2000, 6000, gtid(1, 2), 59.5),  # nor this
              (6000, 7000, gtid(1, 2), 59)]  # sound, and out of start order
    for start, end, thread, kind in ranges:
        b.db.execute(f"INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) "
                     f"VALUES ({start}, {end}, {kind}, 'aten::add, seq = 9, op_id = 9', {thread})")
    b.db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, correlationId) VALUES ('x5', 6, 99)")
    b.db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, correlationId) VALUES (7, 6, 98)")
    b.db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, globalTid, correlationId) "
                 "VALUES (3000, 3100, ?, NULL)", (gtid(1, 2),))  # no launch (counted), still a host interval
    b.db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, globalTid, correlationId) "
                 "VALUES (3000, 3100, 'x', 7)")  # no thread: neither
    oddities, orders, _payload, host = _same_both_ways(b.close(), monkeypatch)
    # 5 ranges with a usable end but no usable start, end or thread; 2 kernels; 2 runtime calls
    assert sorted(oddities.values()) == [2, 2, 5]
    assert orders[NVTX] == "ORDER BY e.start, e.rowid" and orders[KERNEL] == ""  # the bad kernels are not read
    assert host[(1, "op")] == ([2000, 6000], [4500, 7000], [])
    assert host[(1, "runtime")] == ([2100, 2600, 3000], [2150, 2650, 3100], [])


@needs_scan
def test_rows_out_of_start_order(nsys_builder, monkeypatch, parts):
    b = nsys_builder()
    b.range(1, 2, 5000, 6000, "ProfilerStep#2")
    b.range(1, 2, 1000, 4000, "ProfilerStep#1")
    b.range(1, 2, 5000, 5500, "ProfilerStep#2b")  # an equal start: kept in table order
    b.launch(1, 2, 5100, 5200, 1)
    b.launch(1, 2, 1100, 1200, 2)
    b.kernel(1, 9000, 9100, 2)
    b.kernel(1, 8000, 8100, 1)
    _oddities, orders, _payload, host = _same_both_ways(b.close(), monkeypatch)
    assert orders == {NVTX: "ORDER BY e.start, e.rowid", RUNTIME: "ORDER BY start, rowid",
                      KERNEL: "ORDER BY start, rowid", nsys.MEMCPY: ""}
    assert host[(1, "step")] == ([5000, 1000, 5000], [6000, 4000, 5500],
                                 ["ProfilerStep#2", "ProfilerStep#1", "ProfilerStep#2b"])


@needs_scan
def test_out_of_order_only_across_parts(nsys_builder, monkeypatch):
    """Ranges and calls in start order within each quarter of the table but not across them (the second half starts
    before the first), a step and an op range in each part: read in 4 parts, the cross-part order check alone
    finds the disorder; the steps stay in table order, the op ranges merge across parts."""
    monkeypatch.setenv(native.READ_AHEAD_ENV, "1")
    monkeypatch.setattr(nsys_scan, "PART_ROWS", 2)
    monkeypatch.setattr(native, "cpus", lambda: 4)
    b = nsys_builder()
    starts = [5000, 6000, 7000, 8000, 1000, 2000, 3000, 4000]  # rowids 1-8: parts [1, 3), [3, 5), [5, 7), [7, 9)
    for k, start in enumerate(starts):
        b.range(1, 2, start, start + 900, f"ProfilerStep#{k}" if k % 2 == 0 else "aten::mm, seq = 1, op_id = 1")
        b.launch(1, 2, start + 100, start + 200, k + 1)
        b.kernel(1, 20_000 + k * 100, 20_050 + k * 100, k + 1)
    cut = nsys_scan._parts
    made = []
    monkeypatch.setattr(nsys_scan, "_parts", lambda rows, table: made.append((table, cut(rows, table))) or made[-1][1])
    _oddities, orders, _payload, host = _same_both_ways(b.close(), monkeypatch)
    assert {table: len(p) for table, p in made} == {NVTX: 4, RUNTIME: 4, KERNEL: 4, nsys.MEMCPY: 1}  # empty
    assert orders[NVTX] == "ORDER BY e.start, e.rowid" and orders[RUNTIME] == "ORDER BY start, rowid"
    assert orders[KERNEL] == ""
    assert host[(1, "step")] == ([5000, 7000, 1000, 3000], [5900, 7900, 1900, 3900],
                                 ["ProfilerStep#0", "ProfilerStep#2", "ProfilerStep#4", "ProfilerStep#6"])
    assert host[(1, "op")] == ([2000, 4000, 6000, 8000], [2900, 4900, 6900, 8900], [])


@needs_scan
def test_registered_strings_and_odd_texts(nsys_builder, monkeypatch, parts):
    """Texts as registered strings (textId), a step name holding nsys_host's separator, texts that are not UTF-8, a
    number where a text goes, and a row with both a text and a textId (the text decides)."""
    b = nsys_builder()
    b.range(1, 2, 1000, 9000, "ProfilerStep#7", registered=True)
    b.range(1, 2, 1100, 1200, "enumerate(DataLoader)#x", registered=True)
    b.range(1, 2, 2000, 2100, "aten::mm, seq = 1, op_id = 1", registered=True)
    b.range(1, 2, 2050, 2300, '{"pyprof":1,"mod":"torch","op":"mm","args":[]}', registered=True)
    b.range(1, 2, 9000, 9500, "ProfilerStep#8\x1ewith a separator")
    step = b.string("ProfilerStep#9")
    b.db.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, textId) "
                 "VALUES (9500, 9900, 59, 'layer:conv1', ?, ?)", (gtid(1, 2), step))  # the text decides: none
    b.db.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) "
                 "VALUES (9900, 9950, 59, CAST(x'50726f66696c657253746570233130ff' AS TEXT), ?)", (gtid(1, 2),))
    b.db.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES (9950, 9960, 59, 12, ?)",
                 (gtid(1, 2),))  # a number, no text: no category
    b.db.execute("INSERT INTO StringIds VALUES (900, CAST(x'50726f66696c6572537465702331317e80' AS TEXT))")
    b.db.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, globalTid, textId) VALUES (9960, 9970, 59, ?, 900)",
                 (gtid(1, 2),))
    _oddities, _orders, _payload, host = _same_both_ways(b.close(), monkeypatch)
    assert host[(1, "step")] == ([1000, 9000, 9900, 9960], [9000, 9500, 9950, 9970],
                                 ["ProfilerStep#7", "ProfilerStep#8 with a separator", "ProfilerStep#10\ufffd",
                                  "ProfilerStep#11~\ufffd"])
    assert host[(1, "dataloader")] == ([1100], [1200], [])
    assert host[(1, "op")] == ([2000], [2300], [])


@needs_scan
def test_ranges_with_json_payloads(nsys_builder, monkeypatch):
    from nsys_schema import Export2026

    e = Export2026(nsys_builder().path.with_name("payload.sqlite"))
    e.range(100, 900, "aten::mm, seq = 3, op_id = 7", json_text='{"sizes": [[2, 3], [3, 4]]}')
    e.launch(200, 300, 1, 400)
    _oddities, _orders, query, _host = _same_both_ways(e.close(), monkeypatch)
    assert query is None  # the ranges' texts are rebuilt in Python


@needs_scan
def test_empty_tables(nsys_builder, monkeypatch, parts):
    b = nsys_builder()
    oddities, orders, query, host = _same_both_ways(b.close(), monkeypatch)
    assert (oddities, host) == ({}, {}) and set(orders.values()) == {""} and "jsonText" not in query


@needs_scan
def test_tables_without_rowids_left_to_the_sql(nsys_builder, monkeypatch):
    b = nsys_builder()
    _base(b)
    for table, key in ((NVTX, "start, globalTid, end"), (RUNTIME, "correlationId")):
        cols = ", ".join(row[1] for row in b.db.execute(f"PRAGMA table_info('{table}')"))
        b.db.executescript(f"ALTER TABLE {table} RENAME TO old; "
                           f"CREATE TABLE {table} ({cols}, PRIMARY KEY ({key})) WITHOUT ROWID; "
                           f"INSERT INTO {table} SELECT * FROM old; DROP TABLE old;")
    _same_both_ways(b.close(), monkeypatch, taken={KERNEL, nsys.MEMCPY})


@needs_scan
def test_missing_optional_columns(tmp_path, monkeypatch):
    """An NVTX table without textId or the payload columns (older exports): those read as nothing."""
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER, eventType INTEGER, text TEXT, globalTid INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, end INTEGER, globalTid INTEGER,
            correlationId INTEGER, nameId INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, correlationId INTEGER, globalPid INTEGER);
    """)
    db.execute("INSERT INTO NVTX_EVENTS VALUES (100, 900, 59, 'ProfilerStep#1', ?)", (gtid(5, 1),))
    db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (200, 300, ?, 1, NULL)", (gtid(5, 1),))
    db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (400, 500, 1, ?)", (5 << 24,))
    db.commit()
    db.close()
    _oddities, _orders, _payload, host = _same_both_ways(path, monkeypatch)
    assert host == {(5, "step"): ([100], [900], ["ProfilerStep#1"]), (5, "runtime"): ([200], [300], [])}


@needs_scan
def test_no_text_column_refused_alike(tmp_path, monkeypatch):
    path = tmp_path / "no_text.sqlite"
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER, eventType INTEGER, globalTid INTEGER);
        INSERT INTO NVTX_EVENTS VALUES (100, 900, 59, 16777217);
    """)
    db.close()
    compiled, scanned = _facts(path, False, monkeypatch)
    assert compiled == _facts(path, True, monkeypatch)[0] and compiled[0] == "error"
    assert scanned[NVTX] is None  # left to the SQL, whose error this is


@needs_scan
@pytest.mark.parametrize("declared", ["TEXT", "", "REAL"])
def test_event_type_of_another_affinity_left_to_the_sql(tmp_path, monkeypatch, declared):
    """eventType = 59 finds '59' in a TEXT column and 59.0 in an untyped one: the SQL decides those."""
    path = tmp_path / "affinity.sqlite"
    db = sqlite3.connect(path)
    db.executescript(f"""
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER, eventType {declared}, text TEXT, globalTid INTEGER);
    """)
    for kind in (59, "59", 59.0, "x"):
        db.execute("INSERT INTO NVTX_EVENTS VALUES (100, 900, ?, 'aten::mm, seq = 1', 16777217)", (kind,))
    db.commit()
    db.close()
    _same_both_ways(path, monkeypatch, taken=set())


@needs_scan
def test_string_ids_not_unique_left_to_the_sql(tmp_path, monkeypatch):
    path = tmp_path / "dup.sqlite"
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE StringIds (id INTEGER, value TEXT);
        INSERT INTO StringIds VALUES (1, 'ProfilerStep#1'), (1, 'aten::mm, seq = 1');
        CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER, eventType INTEGER, text TEXT, globalTid INTEGER,
            textId INTEGER);
        INSERT INTO NVTX_EVENTS VALUES (100, 900, 59, NULL, 16777217, 1);
    """)
    db.close()
    _same_both_ways(path, monkeypatch, taken=set())


@needs_scan
def test_many_intervals_merged_as_they_come(nsys_builder, monkeypatch, parts):
    """More op ranges than the pass holds before merging (_scan.c MERGE_MIN, 65536), shuffled: cluster k is
    [k*1000, k*1000+200], [k*1000+100, k*1000+500] and [k*1000+150, k*1000+160], so the union is exactly
    [k*1000, k*1000+500] for each k, and the API calls, one per cluster at k*1000+600, stay apart."""
    b = nsys_builder()
    clusters = 30_000
    rows = [(k * 1000 + s, k * 1000 + e) for k in range(clusters) for s, e in ((0, 200), (100, 500), (150, 160))]
    random.Random(19).shuffle(rows)
    b.db.executemany("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) "
                     "VALUES (?, ?, 59, 'aten::add, seq = 1, op_id = 1', 16777218)", rows)
    b.db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 0, 16777218, ?, 1, 0, NULL)",
                     [(k * 1000 + 600, k * 1000 + 700, k) for k in range(clusters)])
    _oddities, _orders, _payload, host = _same_both_ways(b.close(), monkeypatch)
    assert host[(1, "op")] == ([k * 1000 for k in range(clusters)], [k * 1000 + 500 for k in range(clusters)], [])
    assert host[(1, "runtime")][0] == [k * 1000 + 600 for k in range(clusters)]


@needs_scan
def test_truncated_export_refused_alike(tmp_path, monkeypatch):
    whole = _unpacked(ROOT / "tests" / "data" / "nsys" / "emit_nvtx" / "transformer.sqlite.xz", tmp_path)
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size * 2 // 3])
    compiled = _parsed(cut, False, monkeypatch)
    assert compiled == _parsed(cut, True, monkeypatch) and compiled[0] == "error"


@needs_scan
def test_strict_refuses_alike(nsys_builder, tmp_path, monkeypatch, capsys):
    """--strict refuses the rows the pass counts, before any output, with the SQL's line."""
    b = nsys_builder()
    _base(b)
    b.db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, correlationId) VALUES ('x5', 6, 99)")
    path = b.close()
    said = []
    for pure in ("0", "1"):
        monkeypatch.setenv(native.PURE_PYTHON_ENV, pure)
        out = tmp_path / f"out{pure}.jsonl"
        said.append((parse_main([str(path), "--strict", "-o", str(out)]), capsys.readouterr().err, out.exists()))
    assert said[0] == said[1] and said[0][0] == 1 and not said[0][2] and "--strict: 1 kernel rows" in said[0][1]
