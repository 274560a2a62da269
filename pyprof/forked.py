"""Work in forked worker processes, their results read back through pipes: parse's sweep worker and prof's
``--jobs`` workers.

Fork, because a worker inherits what the parent has loaded (the readers, formulas of ``--plugin``) and starts
in milliseconds. A worker runs ``body(conn, *args)`` with its end of a pipe and ends with ``os._exit``: the
finalizers of objects inherited from the parent (an open SQLite connection) must not run twice. What it sends
are byte messages (``send_bytes``) or pickles (``send``); a failure is a message too, and :meth:`Worker.recv`
raises it in the parent: an InputError (the input turned out unreadable part way) as itself, anything else as
WorkerError with the worker's traceback (a bug). A worker that dies without a word raises WorkerError too. A
message of the worker's own starts with any byte but the two this module reserves (FAILED and REFUSED): a
pickle starts with 0x80, parse's batches with a letter.
"""
from __future__ import annotations

import marshal
import multiprocessing
import os
import pickle
import traceback
from collections import deque
from typing import Any, Callable, Iterable, Iterator, NoReturn

from pyprof import cleanup
from pyprof.common import InputError, PyprofError

FAILED, REFUSED = b"\x01", b"\x02"


class WorkerError(RuntimeError):
    """A worker process failed (a bug) or broke the protocol: the message names the worker and, when it
    failed, holds its traceback."""


class WorkerExited(WorkerError, PyprofError):
    """A worker process exited before it answered (stopped, killed by a signal such as the out-of-memory killer's):
    not a bug of pyprof's, so the command says it in one line, with how the worker ended."""


def available() -> bool:
    """True where worker processes can be forked."""
    return "fork" in multiprocessing.get_all_start_methods()


class Worker:
    """The parent's side of a forked worker process: its end of the pipe, and the process."""

    def __init__(self, name: str, conn, proc) -> None:
        self.name, self.conn, self.proc = name, conn, proc

    def send(self, obj) -> None:
        """Send ``obj`` (pickled) to the worker (a two-way pipe only). Raises WorkerError when the worker has exited
        (stopped or killed): a BrokenPipeError here would read as the reader of stdout gone (common.run_command)."""
        try:
            self.conn.send(obj)
        except (BrokenPipeError, ConnectionResetError):
            raise self._exited() from None

    def recv_bytes(self) -> bytes:
        """The worker's next message. Raises InputError or WorkerError for what the worker failed with, and
        WorkerError when it exited without a message."""
        try:
            msg = self.conn.recv_bytes()
        except (EOFError, ConnectionResetError):  # reset: it exited with a task of ours unread
            raise self._exited() from None
        tag = msg[:1]
        if tag == FAILED:
            raise WorkerError(f"{self.name} failed:\n{msg[1:].decode(errors='replace')}")
        if tag == REFUSED:
            raise InputError(*marshal.loads(msg[1:]))
        return msg

    def _exited(self) -> WorkerExited:
        self.proc.join(timeout=1)  # its end of the pipe closes as it exits: its status follows at once
        code = self.proc.exitcode
        how = "" if not code else f" (killed by signal {-code})" if code < 0 else f" (exit status {code})"
        return WorkerExited(f"{self.name} exited without a result{how}")

    def recv(self):
        """The worker's next message, unpickled (see :meth:`recv_bytes` for what it raises)."""
        return pickle.loads(self.recv_bytes())


def start(name: str, body: Callable, args: tuple = (), duplex: bool = False,
          siblings: Iterable[Worker] = ()) -> Worker:
    """Fork a worker running ``body(conn, *args)`` and return the parent's side of it. ``name`` is how messages
    name it ("the sweep worker"). ``duplex``: the parent sends to it too (tasks), else it only sends.
    ``siblings``: the workers forked before it, whose pipe ends it inherits and closes, so that each worker sees
    the end of its own pipe when the parent closes it."""
    ctx = multiprocessing.get_context("fork")
    mine, theirs = ctx.Pipe(duplex=duplex)  # one-way: (the reading end, the writing end)
    inherited = [w.conn for w in siblings] + [mine]
    proc = ctx.Process(target=_run, args=(body, theirs, args, inherited), daemon=True)
    proc.start()
    theirs.close()
    cleanup.pause_point("worker")  # (tests: a worker runs)
    return Worker(name, mine, proc)


def exit_done(conn) -> NoReturn:
    """End a worker whose body has sent all it had: close its pipe and exit at once, without freeing what the body
    built one object at a time. The parent waits for the exit (:func:`stop`), and freeing the sweep worker's caches
    (its markers, forward ops and ranges) one by one took 23 ms of a 50k-kernel parse on the 2-core machine."""
    conn.close()
    os._exit(0)


def send_failure(conn, error: BaseException) -> None:
    """Send ``error`` to the parent, whose ``recv`` raises it. For a worker that keeps serving after a failed
    task; ``start`` sends what escapes ``body`` by itself."""
    if isinstance(error, InputError):
        conn.send_bytes(REFUSED + marshal.dumps((error.path, error.problem)))
    else:
        conn.send_bytes(FAILED + "".join(traceback.format_exception(error)).encode())


def _run(body: Callable, conn, args: tuple, inherited: list) -> None:
    for c in inherited:
        c.close()
    try:
        body(conn, *args)
    except (BrokenPipeError, EOFError, KeyboardInterrupt):
        pass  # the parent stopped reading or sending (its own error, or `| head`)
    except BaseException as e:
        try:
            send_failure(conn, e)
        except OSError:
            pass
    finally:
        conn.close()
        os._exit(0)  # skip the finalizers of objects inherited from the parent (its SQLite connection)


def in_order(workers: list[Worker], tasks: Iterable, depth: Callable[[Any], int] = lambda task: 2,
             meanwhile: Callable[[], None] | None = None) -> Iterator:
    """Each task's result (``Worker.recv``), in the order of ``tasks``, from workers that answer each task they are
    sent, in the order sent. A task goes to the worker with the fewest tasks outstanding, as long as that is fewer
    than ``depth(task)``; results are taken as they arrive and handed back in order. By load rather than round robin
    (task k to worker k mod N), a costly task holds up only itself, not the tasks queued behind it on its worker; on
    prof's 300k real records with 16 workers that measured no faster (0.92-1.03 s against 0.90-1.04 s): the workers'
    busy times still differ by 0.2 s, so the spread comes from their cores, not their chunks. ``meanwhile`` is
    called once, when the workers first have all the tasks they take (or the tasks ran out): the caller's own work
    while they start.

    A worker's failure (what ``recv`` or ``send`` raises: a worker that exited, stopped or killed, is one) is raised
    in its task's turn, after the results before it; no task is sent once one has failed."""
    from multiprocessing.connection import wait

    sent: list = [deque() for _ in workers]  # per worker: the numbers of its tasks not answered yet, in order
    index = {w.conn: i for i, w in enumerate(workers)}
    arrived: dict = {}  # task number -> (True, result) or (False, the failure)
    failed = False
    total = handed = 0

    def receive() -> None:  # what has arrived, waiting for at least one result
        nonlocal failed
        for conn in wait([w.conn for i, w in enumerate(workers) if sent[i]]):
            i = index[conn]
            k = sent[i].popleft()
            try:
                arrived[k] = (True, workers[i].recv())
            except (WorkerError, InputError) as e:
                arrived[k] = (False, e)
                failed = True

    def ready() -> Iterator:
        nonlocal handed
        while handed in arrived:
            ok, value = arrived.pop(handed)
            if not ok:
                raise value
            handed += 1
            yield value

    for task in tasks:
        while True:
            i = min(range(len(workers)), key=lambda j: len(sent[j]))
            if len(sent[i]) < depth(task) or failed:
                break
            if meanwhile is not None:
                meanwhile()
                meanwhile = None
            receive()
            yield from ready()
        if failed:
            break
        try:
            workers[i].send(task)
            sent[i].append(total)
        except WorkerError as e:  # it exited: this task's failure, in its turn
            arrived[total] = (False, e)
            failed = True
        total += 1
    if meanwhile is not None:
        meanwhile()
    while handed < total:
        if handed not in arrived:
            receive()
        yield from ready()


def stop(workers: Iterable[Worker]) -> None:
    """Close the parent's ends of the workers' pipes, then wait for each (5 s) and terminate what is still
    running. A worker waiting for its next task sees the end of its pipe and exits; on an error, a worker may
    still be busy or blocked writing a result nobody will read."""
    workers = list(workers)
    for w in workers:
        w.conn.close()
    for w in workers:
        w.proc.join(timeout=5)
        if w.proc.is_alive():
            w.proc.terminate()
            w.proc.join()
