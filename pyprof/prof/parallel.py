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
_EMPTY_AFTER = re.compile(rb"\n(?=\r?\n)")  # a newline followed by an empty line (literal prefix: a fast scan)
LOOKBACK = 64

_state: dict = {}


def available() -> bool:
    """True where worker processes can be forked."""
    return "fork" in multiprocessing.get_all_start_methods()


def _init(columns: list, fmt: str, peaks: Peaks) -> None:
    cls = FORMATS[fmt]
    from pyprof.prof.report import lean_decoder

    _state.update(columns=columns, cls=cls, peaks=peaks, modeller=Modeller(), lean=lean_decoder(columns),
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
            process_lines(lookback.split(b"\n"), path, 0, 0, modeller, s["row"], s["peaks"], False,
                          Coverage(), s["lean"])
        except InputError:
            pass  # reported by the chunk that owns the line
    cov = Coverage()
    try:
        rows, _n, _r = process_lines(chunk.split(b"\n"), path, lineno, idx, modeller, s["row"],
                                     s["peaks"], s["need_roof"], cov, s["lean"])
    except InputError as e:
        return None, None, e.problem
    buf = io.StringIO()
    s["cls"](buf, s["columns"], s["columns"]).rows(rows)
    return buf.getvalue(), cov, None


def empty_lines(chunk, start: int = 0, end: int | None = None) -> int:
    """Lines of ``chunk[start:end]`` that are empty (they get no idx; a line of only spaces does, see
    process_lines). ``start``/``end`` let the main process count inside its reused read buffer."""
    end = len(chunk) if end is None else end
    at_start = chunk[start:start + 1] == b"\n" or chunk[start:start + 2] == b"\r\n"
    # finditer counts overlapping matches ("\n\n\n" holds two empty lines); str.count would not.
    return sum(1 for _ in _EMPTY_AFTER.finditer(chunk, start, end)) + (1 if at_start else 0)


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


def _lookback_start(chunk, lo: int = 0, hi: int | None = None) -> int:
    """Offset (in ``chunk``) of the newline before the last ``LOOKBACK`` lines of ``chunk[lo:hi]`` (-1: the
    whole of it)."""
    start = len(chunk) if hi is None else hi
    for _ in range(LOOKBACK + 1):
        start = chunk.rfind(b"\n", lo, start - 1) if start > lo + 1 else -1
        if start < 0:
            break
    return start


def _file_chunks(fd: int, pos: int, size: int, path: str) -> Iterator[tuple]:
    """Chunks of a regular file as offsets: workers read them with pread, so no input crosses a pipe. The main
    process counts each chunk's lines (for the line numbers and idx of the rows) with numpy in one reused
    buffer: on two cores its time is taken from the workers'."""
    import numpy as np

    buf = bytearray(CHUNK_BYTES)
    arr = np.frombuffer(buf, np.uint8)
    is_nl, pair = np.empty(CHUNK_BYTES, bool), np.empty(CHUNK_BYTES, bool)  # reused: no 4 MB allocation per chunk
    lineno = idx = 0
    lb = pos
    while pos < size:
        got = os.preadv(fd, [buf], pos)
        if got == 0:
            break  # the file shrank
        cut = buf.rfind(b"\n", 0, got) + 1
        if cut == 0 and pos + got < size:  # a line longer than a chunk: read on to its end
            data = bytearray(buf[:got])
            while cut == 0 and pos + len(data) < size:
                more = os.pread(fd, CHUNK_BYTES, pos + len(data))
                if not more:
                    break
                data += more
                cut = data.rfind(b"\n") + 1
            chunk = data[:cut or len(data)]
            cut = len(chunk)
            n, empty = chunk.count(b"\n"), empty_lines(chunk)
            start = _lookback_start(chunk)
        else:
            cut = cut or got  # the last line, without a newline
            nl = np.equal(arr[:cut], 10, out=is_nl[:cut])
            n = int(np.count_nonzero(nl))
            if buf.find(b"\r", 0, cut) >= 0:  # CRLF lines: "\r" alone is an empty line too
                empty = empty_lines(buf, 0, cut)
            else:
                both = np.logical_and(nl[:-1], nl[1:], out=pair[:cut - 1])
                empty = int(np.count_nonzero(both)) + (1 if buf[0] == 10 else 0)
            start = _lookback_start(buf, 0, cut)
        yield "file", fd, lb, pos, pos + cut, path, lineno, idx
        lineno += n
        idx += n - empty
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


def _serve(conn, columns: list, fmt: str, peaks: Peaks, inherited: list) -> None:
    """A worker process: answer each task sent on ``conn`` with (text, coverage, error) until None comes.
    ``inherited``: the main process's ends of the pipes to this worker and to those forked before it, closed
    here so that when the main process closes them, each worker sees the end of its pipe."""
    import gc
    import traceback

    for c in inherited:
        c.close()

    gc.disable()  # records are trees, no cycles: as in the serial run (report._no_cyclic_gc)
    try:
        _init(columns, fmt, peaks)
        while True:
            task = conn.recv()
            if task is None:
                break
            try:
                conn.send(_work(task))
            except (BrokenPipeError, EOFError):
                raise
            except BaseException:  # a bug, not bad input: the parent raises it with this traceback
                conn.send((None, None, _BUG + traceback.format_exc()))
    except (BrokenPipeError, EOFError, KeyboardInterrupt):
        pass  # the parent stopped (its own error, or `| head`)
    finally:
        conn.close()
        os._exit(0)  # skip the finalizers of objects inherited from the parent


_BUG = "\0bug\0"


def run_parallel(stream: IO[bytes], path: str, out: IO[str], writer: Format, columns: list, fmt: str, peaks: Peaks,
                 jobs: int):
    """Write the rows of every record through ``jobs`` workers; return the merged coverage.

    Chunk k goes to worker k mod jobs, at most two per worker in flight (one for a pipe's chunks, which travel
    with the task), and the results are taken back in chunk order, so the output is the input's order. Plain
    pipes and no pool: a pool's helper threads in this process cost CPU that, on a two-core machine, the
    workers need. Raises InputError for a malformed line (chunks before it have been written)."""
    from pyprof.prof.report import COMMIT_BATCHES, Coverage

    if not available():
        raise RuntimeError("parallel prof needs the fork start method")
    coverage = Coverage()
    commit = getattr(out, "commit", None)
    ctx = multiprocessing.get_context("fork")
    conns, procs = [], []
    try:
        for _ in range(jobs):
            mine, theirs = ctx.Pipe()
            proc = ctx.Process(target=_serve, args=(theirs, columns, fmt, peaks, conns + [mine]), daemon=True)
            proc.start()
            theirs.close()
            conns.append(mine)
            procs.append(proc)
        pending: deque = deque()  # worker index of each chunk in flight, in chunk order
        done = 0

        def take() -> None:
            nonlocal done
            w = pending.popleft()
            try:
                text, cov, err = conns[w].recv()
            except EOFError:
                raise RuntimeError("a prof worker process exited without a result") from None
            if err is not None:
                if err.startswith(_BUG):
                    raise RuntimeError(f"a prof worker process failed:\n{err[len(_BUG):]}")
                raise InputError(path, err)
            out.write(text)
            coverage.merge(cov)
            done += 1
            if commit is not None and done % max(1, COMMIT_BATCHES // 8) == 0:
                commit()

        for k, task in enumerate(_tasks(stream, path)):
            # A file's task is a few offsets: two per worker queue up in its pipe. A pipe's task carries its
            # chunk, larger than a pipe holds: send it only to a worker that has given back its last result,
            # or each side would block writing to the other.
            limit = 2 * jobs if task[0] == "file" else jobs
            while len(pending) >= limit:
                take()
            w = k % jobs
            conns[w].send(task)
            pending.append(w)
        while pending:
            take()
        for c in conns:
            c.send(None)  # every result is in: the workers stop
    finally:
        # On an error, workers may still be busy or blocked writing a result nobody will read: stop them.
        for c in conns:
            c.close()
        for proc in procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
                proc.join()
    return coverage
