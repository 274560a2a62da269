"""Rows read ahead (pyprof/parse/_ahead.c): with its queries stepped by threads of their own, the compiled core writes
the same bytes, counts the same and refuses with the same line as when it steps them itself, and both as the
pure-Python path does; SQLite's error in the middle of a query reaches the reader the same way."""
from __future__ import annotations

import lzma
import shutil
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from pyprof.parse.write import native

from pyprof.parse.readers import nsys_host, nsys_scan, sqlrows

from parse_synth import CORPUS, parse_outcome

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = sorted((ROOT / "tests" / "data").rglob("*.sqlite.xz")) + sorted((ROOT / "examples").rglob("*.sqlite.xz"))
SHARED = sorted((CORPUS / "nsys").glob("*.sqlite")) if (CORPUS / "nsys").is_dir() else []
needs_core = pytest.mark.skipif(native._core is None or nsys_scan._scan is None,
                                reason="the compiled core is not built (no compiler or sqlite3.h)")


def _parsed(path: Path, monkeypatch, ahead: str | None, pure: bool = False) -> tuple:
    """(parse's output, its Stats' counts), or the error's line; ``ahead``: PYPROF_READ_AHEAD."""
    monkeypatch.setenv(native.PURE_PYTHON_ENV, "1" if pure else "0")
    monkeypatch.setenv(native.READ_AHEAD_ENV, ahead or "")
    return parse_outcome(path)


def _same_three_ways(path: Path, monkeypatch) -> tuple:
    ahead = _parsed(path, monkeypatch, "1")
    assert ahead == _parsed(path, monkeypatch, "0")
    assert ahead == _parsed(path, monkeypatch, None, pure=True)
    return ahead


def test_the_switch(monkeypatch):
    monkeypatch.setenv(native.READ_AHEAD_ENV, "0")
    assert native.read_ahead() is False
    monkeypatch.setenv(native.READ_AHEAD_ENV, "1")
    assert native.read_ahead() is True


@needs_core
@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: str(p.relative_to(ROOT)))
def test_committed_captures(path, tmp_path, monkeypatch):
    plain = tmp_path / path.stem
    with lzma.open(path) as src, open(plain, "wb") as dst:
        shutil.copyfileobj(src, dst)
    _same_three_ways(plain, monkeypatch)


@needs_core
@pytest.mark.parametrize("path", SHARED, ids=lambda p: p.name)
def test_shared_exports(corpus, path, monkeypatch):
    _same_three_ways(path, monkeypatch)


def _many_ranges(b, n: int, text_bytes: int) -> None:
    """``n`` op ranges of one thread, one launch and kernel in each: more rows than a block holds (512), and texts
    long enough to fill a block's bytes (256 kB) early."""
    b.gpu(0, "NVIDIA H100")
    pad = "x" * text_bytes
    for k in range(n):
        start = 1000 + k * 1000
        b.range(1, 2, start, start + 800, f"aten::mm, seq = {k}, op_id = {k}, pad = {pad}")
        b.launch(1, 2, start + 100, start + 150, k + 1)
        b.kernel(1, start + 200, start + 400, k + 1)


@needs_core
def test_blocks_of_rows_and_of_bytes(nsys_builder, monkeypatch):
    """2,000 ranges (4 blocks of 512 rows), one text of 600 kB (past a block's 256 kB on its own), then texts of
    1 kB (a block's bytes full after 256 rows): 2,001 records, each attributed to its own op."""
    b = nsys_builder()
    _many_ranges(b, 2000, 1000)
    b.range(1, 3, 10_000_000, 10_000_900, "aten::big, seq = 9999, op_id = 9999, pad = " + "y" * 600_000)
    b.launch(1, 3, 10_000_100, 10_000_150, 9999)
    b.kernel(1, 10_000_200, 10_000_300, 9999)
    out, stats = _same_three_ways(b.close(), monkeypatch)
    assert stats["records"] == 2001 and stats["kernels_with_op"] == 2001
    assert out.count('"op":["mm"]') == 2000 and out.count('"op":["big"]') == 1


@needs_core
def test_no_rows(nsys_builder, monkeypatch):
    """Ranges but no GPU work; GPU work but no ranges: queries with no rows end as they do stepped in place."""
    b = nsys_builder()
    b.gpu(0, "NVIDIA H100")
    b.range(1, 2, 1000, 2000, "aten::mm, seq = 1, op_id = 1")
    _same_three_ways(b.close(), monkeypatch)
    b = nsys_builder("gpu_only.sqlite")
    b.gpu(0, "NVIDIA H100")
    b.launch(1, 2, 100, 150, 1)
    b.kernel(1, 200, 400, 1)
    assert _same_three_ways(b.close(), monkeypatch)[1]["records"] == 1


@needs_core
def test_an_error_in_the_middle_of_a_query(nsys_builder, monkeypatch):
    """A page of the ranges' table overwritten in the middle of the file: the pass over the table, in the calling
    thread or another, fails after the rows before it with SQLite's own message, and parse refuses the file with the
    same line either way."""
    b = nsys_builder()
    _many_ranges(b, 3000, 300)
    path = b.close()
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big") or 65536
    middle = (len(data) // page // 2) * page
    data[middle:middle + page] = b"\xa5" * page
    path.write_bytes(bytes(data))
    db = sqlite3.connect(path)
    before = 0
    with pytest.raises(sqlite3.DatabaseError):
        for _ in db.execute("SELECT * FROM NVTX_EVENTS ORDER BY rowid"):
            before += 1
    db.close()
    assert 512 < before < 3000  # the failing page is past the first block of rows, before the last row
    def scan():
        return nsys_scan._scan.scan(
            uri=sqlrows.uri(str(path)), sql="SELECT eventType, start, end, globalTid, text, NULL, NULL, NULL "
            "FROM NVTX_EVENTS ORDER BY rowid", layout=nsys_scan.RANGES, host=True, event_type=59,
            prefixes=tuple((p.encode(), 0) for p, _ in nsys_host.PREFIXES), node_parts=(), node_code=0,
            registered={}, names={}, keep_code=-1, pid_shift=nsys_host.PID_SHIFT, pid_mask=nsys_host.PID_BITS)

    errors = []
    # in this thread, and in another (as parse runs the passes): the failure is met without the GIL either way
    for run in (lambda: scan(), lambda: ThreadPoolExecutor(1).submit(scan).result()):
        with pytest.raises(nsys_scan._scan.Error) as e:
            run()
        errors.append(str(e.value))
    assert errors[0] == errors[1] and "malformed" in errors[0]
    refused = _same_three_ways(path, monkeypatch)
    assert refused[0] == "error"


@needs_core
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
@pytest.mark.parametrize("taken", [1, 5, None])
def test_reading_threads_end_with_the_parse(nsys_builder, monkeypatch, taken):
    """Records taken whole, or a few and the rest left (``| head``; 3,000 kernels, more than the 4 blocks of 512
    rows a reading thread fills ahead): once the lines are closed, every reading thread has ended (closing
    interrupts a step under way and joins it)."""
    from pyprof.parse import close_source, open_source
    from pyprof.parse.write.writer import lines

    b = nsys_builder()
    _many_ranges(b, 3000, 10)
    path = b.close()
    monkeypatch.setenv(native.PURE_PYTHON_ENV, "0")
    monkeypatch.setenv(native.READ_AHEAD_ENV, "1")
    before = len(list(Path("/proc/self/task").iterdir()))
    src = open_source(str(path))
    records, _ = lines(src, False)
    got = [line for _, line in zip(range(taken), records)] if taken else list(records)
    assert len(got) == taken or len(got) > 100
    if taken == 5:  # past the header: the line writer's threads read its activities and launch calls
        assert len(list(Path("/proc/self/task").iterdir())) > before
    records.close()
    close_source(src)
    # at most as many as before: a thread an earlier test started may end meanwhile (an equality failed once in a
    # run of the parse tests, not again in five); a reading thread this parse left running makes more. A thread
    # joined is not yet gone from /proc: Python's join returns when the thread's Python state is released, before
    # the system thread exits (CI once counted the checks' pool thread, 7 for 6), so the count may take a moment;
    # a thread left reading never ends, and the 5 s run out
    deadline = time.monotonic() + 5
    while len(list(Path("/proc/self/task").iterdir())) > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(list(Path("/proc/self/task").iterdir())) <= before
