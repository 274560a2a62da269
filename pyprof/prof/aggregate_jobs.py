"""The views' pass (pyprof.prof.aggregate) spread over worker processes, for record files of millions of lines.

The main process cuts the file into chunks of whole lines; each worker reads its chunk with ``pread``,
decodes, models and aggregates it, and sends back its per-process WorkerData (and what an observer, the
report's table of every activity, collected); the main process merges them in file order
(``WorkerData.merge``). So that a chunk's numbers are the one-pass numbers:

- a kernel's share of its op call's FLOPs depends on the call's other kernels, which lie within WINDOW lines of
  the call's start (pyprof.prof.model.share): a worker models the LOOKBACK = 2 x WINDOW lines before its chunk and the
  WINDOW lines after it too, and counts only its own;
- an op call that runs across a seam is counted once: a call is its ``call_id``, the same on both sides, and the
  merge takes off a chunk's count of a call the chunks before it counted.

What a worker cannot judge alone goes to the one-pass path, which says it exactly: any line it refuses, a
file that does not start with parse's header line (records before schema 3, the original PyProf's dict lines),
a second header or an end line before the file's last line (files joined with cat), a last line that is not
parse's end line (a file cut short), or records without ``call_id`` (parsed before parse wrote it), whose calls
only a pass over the lines before a seam can tell. Needs the ``fork`` start method; elsewhere, and for files under
MIN_BYTES, callers run the one pass.
"""
from __future__ import annotations

import json
import os
import stat
from typing import Callable, Iterator

from pyprof import forked
from pyprof.common import InputError, no_cyclic_gc
from pyprof.record import END_PREFIX, HEADER_PREFIX
from pyprof.prof.aggregate import Aggregate, WorkerData, _add_record, attach_side, set_dist
from pyprof.prof.step_marker import StepMarker, unmarked
from pyprof.prof.load.contract import Header
from pyprof.prof.table.coverage import Coverage
from pyprof.prof.model.modeller import Modeller
from pyprof.prof.load.reader import read_lines_of
from pyprof.prof.model.roofline import Peaks
from pyprof.prof.load.side import read_side
from pyprof.prof.table.rows import rows
from pyprof.prof.model.share import WINDOW

#: Bytes per chunk, at most: large, since each chunk also models 3 x WINDOW lines around it (about 8% more at
#: 2.7 kB a record), and a chunk's result (groups, one timeline entry per activity) crosses a pipe.
CHUNK_BYTES = 96 << 20
#: ... and at least, where the file is cut into one chunk per worker (chunk_bytes): on two cores the views of a
#: 32 MB file took 0.45 s in 8 MB chunks and 0.37 s in 16 MB ones (one pass: 0.50-0.55 s).
MIN_CHUNK_BYTES = 16 << 20
#: Below this size one pass is as fast as starting workers (that 32 MB file: 1.4x faster in two workers).
MIN_BYTES = 32 << 20
LOOKBACK = 2 * WINDOW
NAME = "a views worker process"
available = forked.available


class Fallback(Exception):
    """The input needs the one-pass path (see the module's docstring)."""


def parallel_ok(path: str, jobs: int) -> bool:
    """Whether ``path`` is worth and fit for the workers: a regular file of at least MIN_BYTES, with fork."""
    if jobs < 2 or not available():
        return False
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size >= MIN_BYTES


def chunk_bytes(size: int, jobs: int) -> int:
    """The size of the chunks of a file of ``size`` bytes for ``jobs`` workers: one chunk per worker, within
    [MIN_CHUNK_BYTES, CHUNK_BYTES] (a smaller file gets fewer chunks than workers)."""
    return min(CHUNK_BYTES, max(MIN_CHUNK_BYTES, -(-size // max(1, jobs))))


def _line_starts(fd: int, size: int, step: int) -> Iterator[tuple[int, int]]:
    """(start, end) byte offsets of chunks of about ``step`` bytes of whole lines: each ends just after a newline,
    or at the file's end."""
    pos = 0
    while pos < size:
        end = min(pos + step, size)
        while end < size:  # on to the end of the line
            block = os.pread(fd, 1 << 16, end)
            if not block:
                end = size
                break
            nl = block.find(b"\n")
            if nl >= 0:
                end += nl + 1
                break
            end += len(block)
        yield pos, min(end, size)
        pos = end


def _lines_before(fd: int, pos: int, n: int) -> list:
    """The ``n`` whole lines before offset ``pos`` (all of them when the file has fewer), without newlines."""
    # The blocks are joined once, and each block's newlines counted once: prepending each block to what was read
    # copied and recounted it all every time, quadratic where the lines are megabytes long (the views' pass over
    # 134 lines of 3.2 MB took 16.5 s with two workers, against 0.95 s with one; 1.75 s now).
    blocks: list = []
    newlines, at = 0, pos
    while at > 0 and newlines <= n:
        take = min(1 << 20, at)
        at -= take
        blocks.append(os.pread(fd, take, at))
        newlines += blocks[-1].count(b"\n")
    lines = b"".join(reversed(blocks)).split(b"\n")
    lines.pop()  # what follows the newline before ``pos``: nothing
    if at > 0:
        lines = lines[1:]  # the first may be the end of a longer line
    return lines[-n:] if n else []


def _lines_after(fd: int, pos: int, n: int, size: int) -> list:
    """The ``n`` whole lines from offset ``pos`` on (fewer at the file's end), without newlines."""
    blocks: list = []
    newlines = 0
    while pos < size and newlines < n:  # joined once, counted once (see _lines_before)
        block = os.pread(fd, 1 << 20, pos)
        if not block:
            break
        blocks.append(block)
        newlines += block.count(b"\n")
        pos += len(block)
    lines = b"".join(blocks).split(b"\n")
    if pos < size or (lines and lines[-1] == b""):
        lines.pop()  # a partial line, or nothing after the last newline
    return lines[:n]


def _serve(conn, path: str, header: Header, peaks: Peaks, make_observer, marker: StepMarker | None) -> None:
    """A worker's body (pyprof.forked): answer each task (chunk) with its partial aggregate, until its pipe ends
    (or None comes)."""
    fd = os.open(path, os.O_RDONLY)
    with no_cyclic_gc():
        while True:
            task = conn.recv()
            if task is None:
                break
            try:
                conn.send(_chunk(fd, task, path, header, peaks, make_observer, marker))
            except (BrokenPipeError, EOFError):
                raise
            except Fallback:
                conn.send(None)
            except InputError:
                conn.send(None)  # the one pass names the file and line
            except BaseException as e:
                forked.send_failure(conn, e)
    os.close(fd)


def _chunk(fd: int, task: tuple, path: str, header: Header, peaks: Peaks, make_observer,
           marker: StepMarker | None = None) -> tuple:
    """The partial aggregate of one chunk: (WorkerData by pid, coverage, observer). ``own_first``: the number
    given to the chunk's first line."""
    start, end, size, own_first, is_last = task
    back = _lines_before(fd, start, LOOKBACK) if start else []
    own = os.pread(fd, end - start, start).split(b"\n")
    if own and own[-1] == b"":
        own.pop()
    for k, line in enumerate(own):
        if line.startswith(HEADER_PREFIX) and not (start == 0 and k == 0):
            raise Fallback  # a second input in the file
        if line.startswith(END_PREFIX) and not (is_last and k == len(own) - 1):
            raise Fallback
    ahead = _lines_after(fd, end, WINDOW, size) if end < size else []
    # (line number, line) of every line modelled; the reader skips the header and end lines
    lines = [(own_first - len(back) + k, x) for k, x in enumerate(back)]
    lines += [(own_first + k, x) for k, x in enumerate(own)]
    lines += [(own_first + len(own) + k, x) for k, x in enumerate(ahead)]
    linenos: list = []  # the line number of each record, by its index: which are the chunk's own
    side: list = []  # (line number, what it holds) of the side lines read
    records = read_lines_of(lines, path, header, linenos, side)
    cov = Coverage()
    workers: dict = {}
    observer = make_observer() if make_observer is not None else None
    lo, hi = own_first, own_first + len(own)
    for idx, d, m, r in rows(records, Modeller(share=True), peaks, True, cov, path,
                             counted=_Counted(linenos, lo, hi)):
        if not lo <= linenos[idx] < hi:
            continue
        pid = d.get("pid")
        w = workers.get(pid)
        if w is None:
            w = workers[pid] = WorkerData(str(pid), chunk=True)
        _add_record(w, d, m, r, peaks, marker)
        if w.old_calls:
            raise Fallback
        if observer is not None:
            observer(w, d, m, r)
    for lineno, run in side:
        if lo <= lineno < hi and not getattr(run, "PER_INPUT", False):  # the input's: read from the tail
            attach_side(workers, run.pid, run, lambda: WorkerData(str(run.pid)))
    return workers, cov, observer


class _Counted:
    """The record indices whose line lies in [lo, hi): ``idx in counted`` (rows' coverage test), read off the
    line numbers the reader appends as it yields."""

    __slots__ = ("linenos", "lo", "hi")

    def __init__(self, linenos: list, lo: int, hi: int) -> None:
        self.linenos, self.lo, self.hi = linenos, lo, hi

    def __contains__(self, idx: int) -> bool:
        return self.lo <= self.linenos[idx] < self.hi


def aggregate_file_jobs(path: str, name: str, jobs: int, peaks: Peaks | None = None,
                        make_observer: Callable | None = None, merge_observer: Callable | None = None,
                        meanwhile: Callable | None = None,
                        marker: StepMarker | None = None):
    """``aggregate([(name, records of path)])`` through ``jobs`` workers: the Aggregate and the merged
    observer (``make_observer()`` makes one per chunk; ``merge_observer(into, part, workers)`` appends a
    chunk's, ``workers`` mapping that chunk's WorkerData to the merged ones). ``meanwhile()``, when given, runs
    in this process once the workers have their first chunks; ``marker`` as aggregate's. Raises Fallback where
    the one pass must run instead (its caller runs it)."""
    peaks = peaks or Peaks()
    header = Header()
    with open(path, "rb") as f:
        first = f.readline()
        if not first.startswith(HEADER_PREFIX):
            raise Fallback
        header.read(first, path, 1)
        size = os.fstat(f.fileno()).st_size
        f.seek(max(0, size - (1 << 16)))
        tail = f.read().rstrip(b"\r\n")
    if not tail[tail.rfind(b"\n") + 1:].startswith(END_PREFIX):
        raise Fallback  # cut short: the one pass says so
    fd = os.open(path, os.O_RDONLY)
    try:
        # Line numbers count from each chunk's first line: they only tell a chunk's lines from the ones around
        # it (a line a worker refuses sends the input to the one pass, which names it).
        tasks = [(start, end, size, 1, end >= size) for start, end in _line_starts(fd, size, chunk_bytes(size, jobs))]
    finally:
        os.close(fd)
    jobs = min(jobs, len(tasks))  # no worker forked for nothing
    agg = Aggregate()
    agg.peaks = peaks
    agg.inputs.append(name)
    agg.schemas[name] = header.schema
    _per_input(tail, path, agg, name)
    merged: dict = {}  # pid -> WorkerData
    observer = make_observer() if make_observer is not None else None
    workers: list = []
    try:
        for _ in range(jobs):
            workers.append(forked.start(NAME, _serve, (path, header, peaks, make_observer, marker), duplex=True,
                                        siblings=workers))
        for result in forked.in_order(workers, tasks, meanwhile=meanwhile):
            _take(result, agg, merged, observer, merge_observer)
    finally:  # every result is in, or a failure: the workers see their pipes end and stop
        forked.stop(workers)
    set_dist(merged, None, header.dist)
    for pid, w in merged.items():
        w.pid = pid
        w.name = "unknown" if pid is None else str(pid)
        agg.workers[w.name] = w
    if marker is not None:
        unmarked(agg, marker)
    return agg, observer


def _per_input(tail: bytes, path: str, agg: Aggregate, name: str) -> None:
    """Keep the input's own side lines (the join line, parse writes it just before the end line) from the
    file's tail: no chunk's worker takes them. Raises Fallback where one may begin before the tail, or is
    damaged (the one pass names its line)."""
    lines = tail.split(b"\n")
    if b'"pyprof_side":"join"' in lines[0]:
        raise Fallback
    for line in lines[1:]:
        if line.startswith(b'{"pyprof_side":"join"'):
            try:
                run = read_side(json.loads(line), path, 0)
            except (InputError, ValueError):
                raise Fallback from None
            if getattr(run, "PER_INPUT", False):
                agg.joins[name] = run


def _take(result, agg: Aggregate, merged: dict, observer, merge_observer) -> None:
    if result is None:
        raise Fallback
    parts, cov, part_observer = result
    agg.coverage.merge(cov)
    mapping = {}
    for pid, w in parts.items():
        cur = merged.get(pid)
        if cur is None:
            merged[pid] = cur = WorkerData(str(pid))
        cur.merge(w)
        mapping[id(w)] = cur
    if observer is not None and merge_observer is not None:
        merge_observer(observer, part_observer, mapping)
