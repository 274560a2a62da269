"""Per-kernel output spread over worker processes (``--jobs``), for inputs of millions of records.

The main process only cuts the input into chunks of whole lines and writes the workers' text in input order;
each worker decodes, models and formats its chunk. Which kernel of an op call carries the FLOPs depends on
the kernels before it in the same call, so each chunk is preceded by the last ``LOOKBACK`` lines of the one
before, replayed without output: a call whose kernels span more than that many lines of other threads'
interleaved kernels could be split differently than in a serial run (docs/prof.md). At most ``2 × jobs``
chunks are in flight, so memory stays bounded. Needs the ``fork`` start method (workers inherit formulas
loaded by ``--plugin``); elsewhere the caller runs serially.
"""
from __future__ import annotations

import io
import multiprocessing
import os
import re
import stat
from collections import deque
from typing import IO, Iterator

from pyprof.common import InputError
from pyprof.prof.columns import ROOFLINE_COLUMNS, compile_row
from pyprof.prof.model import Modeller
from pyprof.prof.output import FORMATS, Format
from pyprof.prof.roofline import Peaks

CHUNK_BYTES = 4 << 20
_EMPTY = re.compile(rb"\n\r?\n")  # no alternation: a literal-prefixed pattern scans at memchr speed
LOOKBACK = 64

_state: dict = {}


def available() -> bool:
    """True where worker processes can be forked."""
    return "fork" in multiprocessing.get_all_start_methods()


def _init(columns: list, fmt: str, peaks: Peaks) -> None:
    cls = FORMATS[fmt]
    _state.update(columns=columns, cls=cls, peaks=peaks, modeller=Modeller(),
                  row=compile_row(columns, raw=cls.raw), need_roof=bool(ROOFLINE_COLUMNS.intersection(columns)))


def _work(task: tuple) -> tuple:
    from pyprof.prof.report import Coverage, process_lines

    if task[0] == "file":  # (tag, fd, lookback start, chunk start, chunk end, path, lineno, idx): read it here
        _tag, fd, lb, start, end, path, lineno, idx = task
        data = os.pread(fd, end - lb, lb)
        lookback, chunk = data[: start - lb], data[start - lb:]
    else:
        _tag, lookback, chunk, path, lineno, idx = task
    s = _state
    modeller: Modeller = s["modeller"]
    modeller.reset_calls()
    if lookback:
        try:
            process_lines(lookback.splitlines(keepends=True), path, 0, 0, modeller, s["row"], s["peaks"], False,
                          Coverage())
        except InputError:
            pass  # reported by the chunk that owns the line
    cov = Coverage()
    try:
        rows, _n, _r = process_lines(chunk.splitlines(keepends=True), path, lineno, idx, modeller, s["row"],
                                     s["peaks"], s["need_roof"], cov)
    except InputError as e:
        return None, None, e.problem
    buf = io.StringIO()
    s["cls"](buf, s["columns"], s["columns"]).rows(rows)
    return buf.getvalue(), cov, None


def empty_lines(chunk: bytes) -> int:
    """Lines of ``chunk`` that are empty (they get no idx; a line of only spaces does, see process_lines)."""
    if _EMPTY.search(chunk) is None and not chunk.startswith((b"\n", b"\r\n")):  # the usual case: one fast scan
        return 0
    n = chunk.count(b"\n\n") + chunk.count(b"\n\r\n")
    return n + (1 if chunk.startswith(b"\n") or chunk.startswith(b"\r\n") else 0)


def _chunks(stream: IO[bytes], path: str) -> Iterator[tuple]:
    lineno = idx = 0
    rest = b""
    prev_tail = b""
    while True:
        block = stream.read(CHUNK_BYTES)
        data = rest + block
        if not block:
            if data:
                if not data.endswith(b"\n"):
                    data += b"\n"
                yield "bytes", prev_tail, data, path, lineno, idx
            return
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            rest = data
            continue
        chunk, rest = data[:cut], data[cut:]
        yield "bytes", prev_tail, chunk, path, lineno, idx
        n = chunk.count(b"\n")
        lineno += n
        idx += n - empty_lines(chunk)
        start = _lookback_start(chunk)
        prev_tail = chunk[start + 1:] if start >= 0 else chunk


def _lookback_start(chunk: bytes) -> int:
    """Offset of the newline before the last ``LOOKBACK`` lines of ``chunk`` (-1: the whole chunk)."""
    start = len(chunk)
    for _ in range(LOOKBACK + 1):
        start = chunk.rfind(b"\n", 0, start - 1) if start > 1 else -1
        if start < 0:
            break
    return start


def _file_chunks(fd: int, pos: int, size: int, path: str) -> Iterator[tuple]:
    """Chunks of a regular file as offsets: workers read them with pread, so no input crosses a pipe; the main
    process reads each chunk once only to count its lines (for the line numbers and idx of the rows)."""
    lineno = idx = 0
    lb = pos
    while pos < size:
        data = os.pread(fd, CHUNK_BYTES, pos)
        cut = data.rfind(b"\n") + 1
        while cut == 0 and pos + len(data) < size:  # a line longer than a chunk
            data += os.pread(fd, CHUNK_BYTES, pos + len(data))
            cut = data.rfind(b"\n") + 1
        if cut == 0:
            cut = len(data)
        chunk = data[:cut]
        yield "file", fd, lb, pos, pos + cut, path, lineno, idx
        n = chunk.count(b"\n")
        lineno += n
        idx += n - empty_lines(chunk)
        start = _lookback_start(chunk)
        lb = pos + (start + 1 if start >= 0 else 0)
        pos += cut


def _tasks(stream: IO[bytes], path: str) -> Iterator[tuple]:
    try:
        fd = stream.fileno()
        st = os.fstat(fd)
        pos = stream.tell()
    except (OSError, AttributeError, io.UnsupportedOperation):
        return _chunks(stream, path)
    if not stat.S_ISREG(st.st_mode):
        return _chunks(stream, path)
    return _file_chunks(fd, pos, st.st_size, path)


def run_parallel(stream: IO[bytes], path: str, out: IO[str], writer: Format, columns: list, fmt: str, peaks: Peaks,
                 jobs: int):
    """Write the rows of every record through ``jobs`` workers; return the merged coverage.

    Raises InputError for a malformed line (chunks before it have been written)."""
    from pyprof.prof.report import COMMIT_BATCHES, Coverage

    if not available():
        raise RuntimeError("parallel prof needs the fork start method")
    coverage = Coverage()
    commit = getattr(out, "commit", None)
    ctx = multiprocessing.get_context("fork")
    done = 0
    with ctx.Pool(jobs, initializer=_init, initargs=(columns, fmt, peaks)) as pool:
        pending: deque = deque()

        def take() -> None:
            nonlocal done
            text, cov, err = pending.popleft().get()
            if err is not None:
                raise InputError(path, err)
            out.write(text)
            coverage.merge(cov)
            done += 1
            if commit is not None and done % max(1, COMMIT_BATCHES // 8) == 0:
                commit()

        for task in _tasks(stream, path):
            pending.append(pool.apply_async(_work, (task,)))
            if len(pending) >= 2 * jobs:
                take()
        while pending:
            take()
    return coverage
