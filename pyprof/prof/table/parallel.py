"""Rows of records spread over worker processes (``--jobs``), for inputs of millions of records: the per-kernel
table (pyprof.prof.table.per_kernel) and the ``--group-by`` summary (pyprof.prof.table.summary).

The main process only cuts the input into chunks of whole lines and takes the workers' results in input order;
each worker decodes and models its chunk, and makes of its rows what the caller's ChunkPlan says (the table's
text, or the chunk's groups). A kernel's share of its op call depends on the call's other
kernels, before and after it, so a worker also reads lines around its chunk, without output:

- before it, enough lines to have seen the start of every call in progress at the chunk's first line: it
  replays the last ``FIRST_LOOKBACK`` lines, and when a record of the chunk may continue a call that started
  before those (its thread's first record there is not numbered 0), the last ``LOOKBACK`` = 2·WINDOW lines,
  which always suffice (a call's kernels share only within WINDOW lines of its start, and a kernel more than
  WINDOW lines after its thread's previous one starts a new call);
- after it, until no call with a kernel in the chunk is open (at most WINDOW lines), decoding only the records
  of those calls' threads.

So each chunk's rows are those of the serial run (the per-kernel output equals it byte for byte:
tests/prof/test_parallel.py). At most ``2 × jobs`` chunks are in flight, so memory stays bounded. Needs the
``fork`` start method (workers inherit formulas loaded by ``--plugin``); elsewhere the caller runs serially.
"""
from __future__ import annotations

import io
import json
import os
import re
import stat
from collections import deque
from typing import IO, Any, Callable, Iterator, NamedTuple

from pyprof import forked
from pyprof.common import BoundedDict, InputError, no_cyclic_gc
from pyprof.record import HEADER_PREFIX, SIDE_PREFIX
from pyprof.prof.load.contract import Ending
from pyprof.prof.model.modeller import Modeller
from pyprof.prof.table.coverage import Coverage
from pyprof.prof.model.roofline import Peaks
from pyprof.prof.table.rows import COMMIT_BATCHES, RowStream
from pyprof.prof.model.share import WINDOW

CHUNK_BYTES = 4 << 20
_EMPTY_AFTER = re.compile(rb"\n(?=\r?\n)")  # a newline followed by an empty line (literal prefix: a fast scan)
# an empty line with or without its newline: a chunk's lines keep theirs (as serially), those read after it do not
_EMPTY_LINES = frozenset({b"", b"\r", b"\n", b"\r\n"})
_HEADER_AFTER = b"\n" + HEADER_PREFIX  # a header line that is not the chunk's first
_SIDE_AFTER = b"\n" + SIDE_PREFIX
LOOKBACK = 2 * WINDOW
FIRST_LOOKBACK = 64
AHEAD_STEP = 16  # lines read at a time after the chunk
AHEAD_BYTES = 256 << 10  # bytes a worker reads at a time after its chunk

_state: dict = {}
NAME = "a prof worker process"
available = forked.available
#: A regular file whose lines are longer than this on average (in its first 4 MB) is read by one process: each
#: worker replays at least FIRST_LOOKBACK lines before its chunk, so with lines of tens of kB and more the replays
#: outweigh the chunks (134 lines of 3.2 MB: 6.4 s with two workers, 0.84 s with one). Records are 1-3 kB.
MAX_MEAN_LINE_BYTES = 32 << 10
_PROBE_BYTES = 4 << 20


def suits(stream: IO[bytes]) -> bool:
    """Whether ``stream`` is worth spreading over workers: False for a regular file whose first lines are longer
    than MAX_MEAN_LINE_BYTES on average. A pipe cannot be looked into before it is read: True."""
    try:
        fd, pos = stream.fileno(), stream.tell()
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return True
    except (OSError, AttributeError, ValueError, io.UnsupportedOperation):
        return True
    head = os.pread(fd, _PROBE_BYTES, pos)
    return head.count(b"\n") >= len(head) // MAX_MEAN_LINE_BYTES


class ChunkPlan(NamedTuple):
    """What a worker makes of its chunks, built once in each worker by the caller's function (workers are forked:
    it may be any function, a closure too)."""

    row: Callable  # (idx, record, model result, Roofline) -> a row (RowStream's ``row``)
    need_roof: bool  # the rows read the roofline
    lean: Callable | None  # reader.lean_loads of the keys ``row`` reads (None: decode every line whole)
    omitted: tuple | None  # rows.omitted_read of those keys (None: the per-kernel columns')
    finish: Callable[[list], Any]  # a chunk's rows, in order -> what the worker sends back for it


def _init(plan: Callable[[], ChunkPlan], peaks: Peaks) -> None:
    _state.update(plan=plan(), peaks=peaks, modeller=Modeller(share=True), peak_times=BoundedDict(1 << 16))


def _lines(data) -> list:
    """The lines of whole-line bytes, each with its newline (a last line without one included), as the serial path
    reads them (rows.line_blocks): BytesIO finds each line's end with memchr, 0.3 ms a 4 MB chunk of a few-kB records
    where ``bytes.split`` took 1.3 ms."""
    return io.BytesIO(data).readlines()


class _FileAhead:
    """The lines after a chunk of a regular file, read as they are needed."""

    def __init__(self, fd: int, pos: int) -> None:
        self.fd, self.pos = fd, pos
        self.lines: list = []  # whole lines read and not taken
        self.partial: list = []  # the blocks of the start of the line after them (joined once it ends: a line of
        self.done = False        # megabytes is copied once, not once per block)

    def take(self, n: int) -> list:
        while len(self.lines) < n and not self.done:
            block = os.pread(self.fd, AHEAD_BYTES, self.pos)
            if not block:
                self.done = True
                if self.partial:  # the last line, without a newline
                    self.lines.append(b"".join(self.partial))
                break
            self.pos += len(block)
            if block.find(b"\n") < 0:
                self.partial.append(block)
                continue
            more = b"".join([*self.partial, block]).split(b"\n")
            last = more.pop()
            self.partial = [last] if last else []
            self.lines += more
        out, self.lines = self.lines[:n], self.lines[n:]
        return out


class _BytesAhead:
    """The lines after a chunk of a pipe: sent with the task."""

    def __init__(self, data: bytes) -> None:
        self.lines, self.at = _lines(data), 0

    def take(self, n: int) -> list:
        out = self.lines[self.at:self.at + n]
        self.at += len(out)
        return out


def _work(task: tuple) -> tuple:
    earlier = None  # reads the lines before ``back`` that the longer replay takes (None: back has them all)
    if task[0] == "file":
        # (tag, fd, lookback start, chunk start, chunk end, path, lineno, idx, at input start, first lookback start)
        _tag, fd, lb, start, end, path, lineno, idx, from_start, lb_first = task
        # The first replay's lines and the chunk, cut from one buffer, not copied. The LOOKBACK lines are read only
        # for a chunk that needs them: with records of 3 kB they are 6 MB, and reading and cutting them for every
        # 4 MB chunk took 0.7 s of CPU on 300k records against 0.2 s for the chunks alone.
        buf = io.BytesIO(os.pread(fd, end - lb_first, lb_first))
        back = buf.readlines(start - lb_first) if start > lb_first else []  # ends at a line's end (readlines(0):
        chunk = buf.readlines()                                              # every line)
        ahead = _FileAhead(fd, end)
        if lb < lb_first:
            earlier = lambda: io.BytesIO(os.pread(fd, lb_first - lb, lb)).readlines()  # noqa: E731
    else:  # (tag, lookback, chunk, lines after it, path, lineno, idx, at input start)
        _tag, back_bytes, chunk_bytes, ahead_bytes, path, lineno, idx, from_start = task
        back, chunk, ahead = _lines(back_bytes), _lines(chunk_bytes), _BytesAhead(ahead_bytes)
    s = _state
    taken: list = []  # lines after the chunk read so far (a retry reads them again from here)
    for n_back in (FIRST_LOOKBACK, LOOKBACK):
        if n_back == LOOKBACK and earlier is not None:
            back = earlier() + back
            earlier = None
        use = back[-n_back:] if n_back < len(back) else back
        all_back = len(use) == len(back) and earlier is None  # every line of the lookback is replayed
        whole = from_start and all_back  # the lines before the chunk are all there is
        cov = Coverage()
        try:
            made, ending = _chunk_result(s, use, chunk, ahead, taken, path, lineno, idx, whole, cov, RowStream)
        except InputError as e:
            return None, None, None, e.problem
        if not s["modeller"].uncertain or all_back:
            return made, cov, ending, None
    return made, cov, ending, None


def _chunk_result(s: dict, back: list, chunk: list, ahead, taken: list, path: str, lineno: int, idx: int,
                whole: bool, cov, stream_cls) -> tuple[Any, tuple]:
    """What the plan makes of the chunk's rows (``finish``), after replaying ``back`` and reading on after the
    chunk until its calls are closed, and the chunk's ChunkEnding. Raises InputError for a malformed line of the
    chunk."""
    modeller: Modeller = s["modeller"]
    plan: ChunkPlan = s["plan"]
    line0 = lineno - len(back)  # lines before the first one replayed
    modeller.reset_calls(-1 if whole else line0 + 1 + WINDOW, lineno + 1)
    stream = stream_cls(modeller, plan.row, s["peaks"], plan.need_roof, cov, plan.lean, keep=(idx, None),
                        omitted=plan.omitted, peak_times=s["peak_times"])
    if back:
        try:
            stream.feed(back, path, line0, idx - _indexed(back), count=False)
        except InputError:
            pass  # reported by the chunk that owns the line
    stream.ending = Ending(path)  # the chunk's own lines: what the lines replayed before it saw does not count
    n_lines, n_records = stream.feed(chunk, path, lineno, idx)
    ending = ChunkEnding(stream.ending.required, stream.ending.ended, n_records > 0)
    stream.hi = idx + n_records
    at = lineno + n_lines
    rows = stream.ready(at)
    k = n_after = 0  # lines read after the chunk and fed (or skipped), records among them
    while True:
        oldest = modeller.oldest_open()
        if oldest is None or oldest >= stream.hi:
            break
        if k >= len(taken):
            more = ahead.take(AHEAD_STEP)
            if not more:
                break
            taken += more
        # Only the records of threads whose open call holds a row of the chunk can change it: the others are
        # skipped undecoded (a record whose thread a byte search cannot tell is decoded).
        wanted = {json.dumps(t).encode() for t in modeller.open_threads(stream.hi)}
        step = taken[k:k + AHEAD_STEP]
        # Another thread's record becomes a line of spaces: it keeps its index and gets no row.
        lines = [b" " if x not in _EMPTY_LINES and _other_thread(x, wanted) else x for x in step]
        try:
            stream.feed(lines, path, at, stream.hi + n_after, count=False)
        except InputError:
            break  # the chunk that owns the line reports it; here it ends the input
        k += len(step)
        at += len(step)
        n_after += _indexed(step)
        rows += stream.ready(at)
    rows += stream.ready(None)
    return plan.finish(rows), ending


def _indexed(lines: list) -> int:
    """How many of ``lines`` take a record index, as RowStream.feed counts them: every line but an empty one,
    parse's header line and a side line."""
    return sum(1 for x in lines if x not in _EMPTY_LINES and not x.startswith((HEADER_PREFIX, SIDE_PREFIX)))


class ChunkEnding(NamedTuple):
    """What a chunk's lines tell of how the input ends (contract.Ending, per chunk): whether a record asks for
    parse's end line, whether the chunk's last non-empty line is one, and whether it has non-empty lines."""

    required: bool
    ended: bool
    any_lines: bool


def _other_thread(line: bytes, wanted: set) -> bool:
    """True when a JSON line names one thread id (``"tid": N``) that is not among ``wanted`` (their JSON
    bytes); False when it names one of them, or when a byte search cannot tell."""
    at = line.find(b'"tid":')
    if at < 1 or line[at - 1:at] == b"\\" or line.find(b'"tid":', at + 6) >= 0:  # none, inside a string, or two
        return False
    end = len(line)
    for stop in (b",", b"}"):
        e = line.find(stop, at + 6)
        if 0 <= e < end:
            end = e
    value = line[at + 6:end].strip()
    return bool(value) and value not in wanted


def empty_lines(chunk, start: int = 0, end: int | None = None) -> int:
    """Lines of ``chunk[start:end]`` that get no idx: empty lines, parse's header lines and side lines (a line of only
    spaces gets one, see RowStream.feed). ``start``/``end`` let the main process count inside its reused read
    buffer. ``chunk`` starts at the start of a line."""
    end = len(chunk) if end is None else end
    at_start = chunk[start:start + 1] == b"\n" or chunk[start:start + 2] == b"\r\n"
    # finditer counts overlapping matches ("\n\n\n" holds two empty lines); str.count would not.
    return sum(1 for _ in _EMPTY_AFTER.finditer(chunk, start, end)) + (1 if at_start else 0) + \
        unindexed_lines(chunk, start, end)


def unindexed_lines(chunk, start: int, end: int) -> int:
    """Parse's header lines and side lines in ``chunk[start:end]``, which starts at the start of a line."""
    return chunk.count(_HEADER_AFTER, start, end) + (chunk[start:start + len(HEADER_PREFIX)] == HEADER_PREFIX) + \
        chunk.count(_SIDE_AFTER, start, end) + (chunk[start:start + len(SIDE_PREFIX)] == SIDE_PREFIX)


_PYPROF_KEY = b'{"pyprof_'  # what parse's header and side lines start with (and its end line)
assert HEADER_PREFIX.startswith(_PYPROF_KEY) and SIDE_PREFIX.startswith(_PYPROF_KEY)


def _unindexed_at(buf, arr, ends, cut: int) -> int:
    """unindexed_lines(buf, 0, cut), given the offsets of its newlines (``ends``, numpy) and ``arr``, a numpy view of
    ``buf``. Only the lines that start as parse's own lines do are looked at: a search for the prefixes stopped at
    every line (each starts '\\n{"'), half of the main process's time, which then could not keep 16 workers busy."""
    import numpy as np

    starts = np.concatenate(([0], ends + 1))
    starts = starts[starts + len(_PYPROF_KEY) <= cut]
    tail = len(_PYPROF_KEY) - 1
    maybe = starts[(arr[starts + tail] == _PYPROF_KEY[tail]) & (arr[starts + 2] == _PYPROF_KEY[2])]
    return sum(1 for at in maybe.tolist()
               if buf.startswith(HEADER_PREFIX, at, cut) or buf.startswith(SIDE_PREFIX, at, cut))


def _chunks(stream: IO[bytes], path: str) -> Iterator[tuple]:
    """Tasks for a pipe: each carries its chunk, the LOOKBACK lines before it and up to WINDOW lines after it
    (read ahead before the chunk is sent)."""
    lineno = idx = 0
    rest = b""
    tail = b""  # the last LOOKBACK lines before the next chunk to send
    queue: deque = deque()  # (chunk, its newlines) read and not yet sent
    after = 0  # newlines in the queued chunks after the first: each chunk counted once, not at every read (records
    eof = False  # of megabytes fill the queue with many chunks)
    while True:
        while not eof and (not queue or after < WINDOW):
            block = stream.read(CHUNK_BYTES)
            data = rest + block
            if not block:
                eof = True
                rest = b""
                if not data:
                    break
                data = data if data.endswith(b"\n") else data + b"\n"
            else:
                cut = data.rfind(b"\n") + 1
                if cut == 0:
                    rest = data
                    continue
                data, rest = data[:cut], data[cut:]
            k = data.count(b"\n")
            if queue:
                after += k
            queue.append((data, k))
        if not queue:
            return
        chunk, n = queue.popleft()
        if queue:
            after -= queue[0][1]
        # The lines before it are all the input's when there are no more than the tail keeps.
        yield "bytes", tail, chunk, _first_lines(queue, WINDOW), path, lineno, idx, lineno <= LOOKBACK
        lineno += n
        idx += n - empty_lines(chunk)
        joined = tail + chunk if n < LOOKBACK else chunk
        start = _lookback_start(joined)
        tail = joined[start + 1:] if start >= 0 else joined


def _first_lines(chunks, n: int) -> bytes:
    """The first ``n`` lines of the concatenation of ``chunks`` ((whole-line bytes, their newlines) pairs)."""
    out = []
    for c, k in chunks:
        if k >= n:
            at = -1
            for _ in range(n):
                at = c.index(b"\n", at + 1)
            out.append(c[:at + 1])
            break
        out.append(c)
        n -= k
    return b"".join(out)


def _lookback_start(chunk, lo: int = 0, hi: int | None = None) -> int:
    """Offset (in ``chunk``) of the newline before the last ``LOOKBACK`` lines of ``chunk[lo:hi]`` (-1: the
    whole of it)."""
    start = len(chunk) if hi is None else hi
    for _ in range(LOOKBACK + 1):
        start = chunk.rfind(b"\n", lo, start - 1) if start > lo + 1 else -1
        if start < 0:
            break
    return start


#: Threads of the main process that count the lines of the chunks ahead of the workers: one per this many workers.
#: With 16 workers, one main thread counting 4 MB chunks took 0.67-0.83 s of a 0.88-1.02 s run on two 16-core
#: machines, the workers waiting for their tasks. The counting releases the GIL (pread, numpy), so threads count
#: chunks side by side: 0.29-0.33 s with three. Below this many workers (two cores) the main thread counts, as the
#: workers need every core.
WORKERS_PER_COUNTER = 5
_TAIL_BYTES = 64 << 10  # read at a time from a chunk's end back to its last newline


def _file_chunks(fd: int, pos: int, size: int, path: str, counters: int = 0) -> Iterator[tuple]:
    """Chunks of a regular file as offsets: workers read them with pread, so no input crosses a pipe. The main
    process cuts the file where a newline ends a chunk (reading only the bytes before each cut), counts each
    chunk's lines (for the line numbers and idx of the rows) with numpy, ``counters`` threads ahead of the
    workers (0: in this thread), and keeps the offsets where the last LOOKBACK lines start."""
    begin = pos
    spans = _spans(fd, pos, size)
    local = _CountBuffers()
    if counters:
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(counters, thread_name_prefix="pyprof-count")
        futures = _ahead((pool.submit(_count_chunk, fd, a, b, local) for a, b in spans), 2 * counters)
        counts: Iterator = (f.result() for f in futures)
    else:
        pool = None
        counts = (_count_chunk(fd, a, b, local) for a, b in spans)
    lineno = idx = 0
    starts: deque = deque([pos], maxlen=LOOKBACK + 1)  # where the last lines before the next chunk start
    try:
        for start, end, n, empty, last_starts in counts:
            if end == start:  # nothing read: the file shrank
                break
            lb = starts[0] if len(starts) == LOOKBACK + 1 else begin
            lb_first = starts[-1 - min(FIRST_LOOKBACK, len(starts) - 1)]  # starts[-1] is the chunk's start
            yield "file", fd, lb, start, end, path, lineno, idx, lb == begin, lb_first
            starts.extend(last_starts)
            lineno += n
            idx += n - empty
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def _ahead(futures: Iterator, n: int) -> Iterator:
    """``futures`` in order, up to ``n`` submitted before the one handed out is taken: the counting stays a few
    chunks ahead, its memory bounded."""
    queue: deque = deque()
    for f in futures:
        queue.append(f)
        if len(queue) > n:
            yield queue.popleft()
    yield from queue


def _spans(fd: int, pos: int, size: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each chunk of the file's bytes [pos, size): up to CHUNK_BYTES ending at a newline; a line
    longer than that is a chunk of its own; the last chunk ends where the file does (its last line may have
    no newline)."""
    while pos < size:
        end = pos + CHUNK_BYTES
        if end >= size:
            yield pos, size
            return
        cut = _last_newline(fd, pos, end)
        if cut < 0:  # a line longer than a chunk: read on to its end
            cut = _next_newline(fd, end, size)
        yield pos, cut
        pos = cut


def _last_newline(fd: int, lo: int, hi: int) -> int:
    """The offset just after the last newline of the file's bytes [lo, hi), read back from ``hi``; -1 if none."""
    while hi > lo:
        at = max(lo, hi - _TAIL_BYTES)
        block = os.pread(fd, hi - at, at)
        k = block.rfind(b"\n")
        if k >= 0:
            return at + k + 1
        hi = at
    return -1


def _next_newline(fd: int, pos: int, size: int) -> int:
    """The offset just after the first newline at or after ``pos``; ``size`` if none (or the file shrank)."""
    while pos < size:
        block = os.pread(fd, CHUNK_BYTES, pos)
        if not block:
            return size
        k = block.find(b"\n")
        if k >= 0:
            return pos + k + 1
        pos += len(block)
    return size


class _CountBuffers:
    """Each counting thread's read buffer and newline mask, reused: no 4 MB allocations per chunk."""

    def __init__(self) -> None:
        import threading

        self._local = threading.local()

    def get(self, nbytes: int) -> tuple:
        """(buffer, its numpy view, a mask of its size) of at least ``nbytes``."""
        import numpy as np

        if nbytes > CHUNK_BYTES:  # a line longer than a chunk: buffers of its own, not kept
            buf = bytearray(nbytes)
            return buf, np.frombuffer(buf, np.uint8), np.empty(nbytes, bool)
        mine = getattr(self._local, "bufs", None)
        if mine is None:
            buf = bytearray(CHUNK_BYTES)
            mine = self._local.bufs = (buf, np.frombuffer(buf, np.uint8), np.empty(CHUNK_BYTES, bool))
        return mine


def _count_chunk(fd: int, start: int, end: int, bufs: _CountBuffers) -> tuple:
    """(start, end, newlines, lines that take no idx, where the lines after its last LOOKBACK + 1 newlines start)
    of the file's bytes [start, end), which start at a line's start. ``end`` comes back smaller when the file
    shrank."""
    import numpy as np

    buf, arr, is_nl = bufs.get(end - start)
    got = os.preadv(fd, [memoryview(buf)[:end - start]], start)
    ends = np.flatnonzero(np.equal(arr[:got], 10, out=is_nl[:got]))
    n = len(ends)
    if n == 0:  # the file's last line alone, without a newline: no line after it needs the count
        empty = 0
    elif buf.find(b"\r", 0, got) >= 0:  # CRLF lines: "\r" alone is an empty line too
        empty = empty_lines(buf, 0, got)
    else:  # an empty line is a newline right after one; and parse's own lines
        empty = int(np.count_nonzero(np.diff(ends) == 1)) + (1 if buf[0] == 10 else 0) + \
            _unindexed_at(buf, arr, ends, got)
    return start, start + got, n, empty, (ends[-(LOOKBACK + 1):] + (start + 1)).tolist()


def _tasks(stream: IO[bytes], path: str, counters: int = 0) -> Iterator[tuple]:
    try:
        fd = stream.fileno()
        st = os.fstat(fd)
        pos = stream.tell()
    except (OSError, AttributeError, io.UnsupportedOperation):
        return _chunks(stream, path)
    if not stat.S_ISREG(st.st_mode):
        return _chunks(stream, path)
    return _file_chunks(fd, pos, st.st_size, path, counters)


def _serve(conn, plan: Callable[[], ChunkPlan], peaks: Peaks) -> None:
    """A worker process's body (pyprof.forked): answer each task sent on ``conn`` with (what the plan makes of
    its rows, coverage, chunk ending, error) until its pipe ends (or None comes). A task that fails (a bug, not bad
    input) is answered with its failure, which the parent raises when it takes that task's result."""
    with no_cyclic_gc():  # records are trees, no cycles: as in the serial run
        _init(plan, peaks)
        while True:
            task = conn.recv()
            if task is None:
                break
            try:
                conn.send(_work(task))
            except (BrokenPipeError, EOFError):
                raise
            except BaseException as e:
                forked.send_failure(conn, e)


def run_parallel(stream: IO[bytes], path: str, plan: Callable[[], ChunkPlan], take: Callable[[Any], None],
                 peaks: Peaks, jobs: int, commit: Callable[[], None] | None = None) -> Coverage:
    """Make the rows of every record in ``jobs`` workers, each as ``plan()`` says, and hand what each chunk's
    rows made to ``take``, in input order; return the merged coverage. ``commit``: called every few chunks (a
    spooling output written out).

    Each chunk goes to the worker with the fewest in flight, at most two per worker (one for a pipe's chunks,
    which travel with the task), and the results are taken in chunk order (forked.in_order). Plain pipes and no
    pool: a pool's helper threads in this process cost CPU that, on a two-core machine, the workers need. Raises
    InputError for a malformed line (the chunks before it have been taken)."""
    if not available():
        raise RuntimeError("parallel prof needs the fork start method")
    coverage = Coverage()
    ending = Ending(path)  # the chunks' endings, in order: the input's
    workers: list = []
    try:
        for _ in range(jobs):
            workers.append(forked.start(NAME, _serve, (plan, peaks), duplex=True, siblings=workers))
        # A file's task is a few offsets: two per worker queue up in its pipe. A pipe's task carries its chunk,
        # larger than a pipe holds: it goes only to a worker that has given back its last result, or each side
        # would block writing to the other.
        for k, (made, cov, chunk_end, err) in enumerate(
                forked.in_order(workers, _tasks(stream, path, jobs // WORKERS_PER_COUNTER),
                                depth=lambda task: 2 if task[0] == "file" else 1)):
            if err is not None:
                raise InputError(path, err)
            take(made)
            coverage.merge(cov)
            ending.required |= chunk_end.required
            ending.seen |= chunk_end.required or chunk_end.ended or chunk_end.any_lines
            if chunk_end.any_lines:
                ending.ended = chunk_end.ended
            if commit is not None and (k + 1) % max(1, COMMIT_BATCHES // 8) == 0:
                commit()
        ending.done()
    finally:  # every result is in, or a failure: the workers see their pipes end and stop
        forked.stop(workers)
    return coverage
