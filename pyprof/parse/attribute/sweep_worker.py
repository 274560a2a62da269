"""The sweep in a worker process: ranges and launch calls there, activities and output here.

The worker (pyprof.forked) reopens the export itself (an SQLite connection must not cross a fork), sweeps with
only the thread and times of each launch (``launch_times`` where the reader has it) and sends the end of each
LAUNCH_INFO, ``(attribution, call, flags)``, in batches through a pipe. The parent reads the launch calls
itself, in the same order, and joins the two: the worker is the critical path of a parse, so the rest of
a launch's fields cost it nothing. A failure in the worker is a bug (the file was checked before any
output): pyprof.forked raises it here with its traceback.

The compiled core's sweep runs in such a worker too (native_lines.record_lines): its infos travel the same way,
each attribution's JSON once while the writer holds it (CoreInfos).
"""
from __future__ import annotations

import marshal
import pickle
import queue
import threading
from typing import Iterator

from pyprof import forked
from pyprof.forked import WorkerError
from pyprof.parse.attribute.correlate import Correlator
from pyprof.parse.readers.activities import attribution_window

BATCH = 2048
AHEAD = 16  # batches the worker may send ahead of the writer (about 0.8 MB each on a pyprof capture)
NAME = "the sweep worker"


class _Sender:
    """Sends messages from a thread, up to AHEAD of them queued: the worker sweeps on while a message
    the writer has not read yet waits in the pipe (a batch is larger than a pipe holds, so sending it
    from the sweep's thread would stop the sweep until the writer had taken it whole)."""

    def __init__(self, conn):
        self.conn = conn
        self.queue: queue.Queue = queue.Queue(maxsize=AHEAD)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            data = self.queue.get()
            if data is None:
                return
            if self.error is None:
                try:
                    self.conn.send_bytes(data)
                except BaseException as e:  # noqa: BLE001 - raised in the sweep's thread by send()
                    self.error = e  # keep taking messages, so that send() never blocks on a full queue

    def send(self, data: bytes) -> None:
        if self.error is not None:
            raise self.error
        self.queue.put(data)

    def stop(self) -> None:
        """Wait until every message queued is sent (or dropped, after an error in sending)."""
        self.queue.put(None)
        self.thread.join()

    def close(self) -> None:
        """Wait until every message is sent; raise what sending raised."""
        self.stop()
        if self.error is not None:
            raise self.error


def _sweep(conn, reopen_args: tuple) -> None:
    """The worker's body (pyprof.forked runs it and sends what it raises)."""
    cls, path, display = reopen_args
    src = cls(path, display)
    correlator = Correlator(src, src.oddities)
    send_infos(conn, lambda: correlator.sweep(src.launch_times()), correlator.oddities)
    forked.exit_done(conn)  # the end message is sent: the parent waits only for the exit


def send_infos(conn, sweep, oddities: dict) -> None:
    """Send the infos ``sweep()`` yields, ``(attribution, call, flags)`` with an attribution numbered first, in
    batches; then the end message: how many, and ``oddities`` (what the sweep left out). A worker's body."""
    sender = _Sender(conn)
    try:
        batch: list = []
        sent = attribution_window()  # what the writer holds (the writer adds the same numbers in order)
        n = 0
        for info in sweep():
            att = info[0]
            if att is not None:
                if att[0] in sent:  # the writer has it: send the number only
                    info = (att[0], info[1], info[2])
                else:
                    sent.add(att[0], None)
            batch.append(info)
            if len(batch) >= BATCH:
                sender.send(_pack(batch))
                n += len(batch)
                batch = []
        sender.send(_pack(batch))
        sender.send(_END + marshal.dumps((n + len(batch), oddities)))
    except BaseException:
        sender.stop()  # the batches queued go first: the failure is sent after them
        raise
    sender.close()


# LAUNCH_INFO tuples hold only ints, strings, None and lists, tuples and dicts of those: marshal writes and
# reads them about twice as fast as pickle, which matters on the worker's side (the critical path of a parse).
# pickle stays as the fallback for anything marshal refuses.
_MARSHAL, _PICKLE, _END = b"M", b"P", b"E"


def _pack(batch: list) -> bytes:
    try:
        return _MARSHAL + marshal.dumps(batch)
    except ValueError:
        return _PICKLE + pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)


def _messages(worker) -> Iterator:
    """``worker``'s batches (lists of the end of LAUNCH_INFO), then its end message, (launch calls swept, oddities),
    as a tuple. Stops the worker when closed."""
    try:
        while True:
            msg = worker.recv_bytes()
            tag = msg[:1]
            if tag == _MARSHAL:
                yield marshal.loads(msg[1:])
            elif tag == _PICKLE:
                yield pickle.loads(msg[1:])
            elif tag == _END:
                yield tuple(marshal.loads(msg[1:]))
                return
            else:
                raise WorkerError(f"{NAME} sent a message of unknown kind {tag!r}")
    finally:
        forked.stop([worker])


def _ended(end: tuple, n: int, more: bool, oddities: dict) -> None:
    """Check the worker's end message against the ``n`` launch calls the writer read (``more``: and it has more), and
    add what the sweep left out to ``oddities``."""
    swept, odd = end
    if swept != n or more:
        raise WorkerError(f"{NAME} swept {swept} launch calls, the writer read {n} and {'more' if swept == n else 'no more'}")
    for reason, count in odd.items():
        oddities[reason] = oddities.get(reason, 0) + count


def launch_infos_from_worker(source, oddities: dict) -> Iterator[tuple]:
    """Yield the LAUNCH_INFO tuples of ``source``: the launch calls read here, their attributions swept in
    a forked worker process. What the sweep left out is added to ``oddities`` at the end. Raises InputError
    when the worker finds the export unreadable part way, WorkerError for a bug in it."""
    launches = iter(source.launches())
    n = 0
    for batch in _messages(forked.start(NAME, _sweep, (source.reopen_args(),))):
        if type(batch) is tuple:
            _ended(batch, n, next(launches, None) is not None, oddities)
            return
        # batch first: zip stops at its end without taking a launch from the next batch's share
        for (att, call, flags), (_thread, start, end, api, key, pid, tid, *_) in zip(batch, launches):
            n += 1
            yield key, api, start, end, pid, tid, att, call, flags


class CoreInfos:
    """The compiled sweep's infos, ``((number, (head, tail)) or None, call, flags)``, swept in a worker forked at
    once (before the caller starts threads of its own) running ``body(conn, *args)``, which sends them with
    send_infos: each numbered attribution comes whole once, then by its number while this side holds it. What the
    sweep left out is added to ``oddities`` when the caller asks past the last info (the line writer takes one per
    launch call: one more ask checks the count). ``close`` stops the worker."""

    def __init__(self, body, args: tuple, oddities: dict) -> None:
        self._worker = forked.start(NAME, body, args)
        self._infos = _core_infos(_messages(self._worker), oddities)

    def __iter__(self):
        return self

    def __next__(self) -> tuple:
        return next(self._infos)

    def close(self) -> None:
        self._infos.close()
        forked.stop([self._worker])


def _core_infos(received: Iterator, oddities: dict) -> Iterator[tuple]:
    window = attribution_window()  # the same numbers, added in the same order, as send_infos' ``sent``
    n = 0
    try:
        for batch in received:
            if type(batch) is tuple:
                _ended(batch, n, False, oddities)
                return
            for att, call, flags in batch:
                if type(att) is int:
                    att = window[att]
                elif att is not None:
                    window.add(att[0], att)
                n += 1
                yield att, call, flags
    finally:
        received.close()
