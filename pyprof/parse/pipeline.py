"""The sweep in a worker process: ranges and launch calls there, activities and output here.

The worker reopens the export itself (an SQLite connection must not cross a fork) and sends the
LAUNCH_INFO tuples in batches through a pipe; the parent iterates them as if the sweep ran in-process.
A failure in the worker is a bug (the file was checked before any output): it comes back as its
traceback text and is raised here.
"""
from __future__ import annotations

import multiprocessing
import os
import traceback
from typing import Iterator

from pyprof.parse.correlate import Correlator

BATCH = 2048


class WorkerError(RuntimeError):
    """The sweep worker failed (a bug): the message holds its traceback."""


def _worker(reopen_args: tuple, conn) -> None:
    try:
        cls, path, display = reopen_args
        src = cls(path, display)
        batch: list = []
        for info in Correlator(src).launch_infos():
            batch.append(info)
            if len(batch) >= BATCH:
                conn.send(batch)
                batch = []
        conn.send(batch)
        conn.send(None)
    except BrokenPipeError:
        pass  # the parent stopped reading (its own error, or `| head`)
    except BaseException:
        try:
            conn.send(traceback.format_exc())
        except OSError:
            pass
    finally:
        conn.close()
        os._exit(0)  # skip the finalizers of objects inherited from the parent (its SQLite connection)


def launch_infos_from_worker(source) -> Iterator[tuple]:
    """Yield the LAUNCH_INFO tuples of ``source``, computed in a forked worker process."""
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_worker, args=(source.reopen_args(), send), daemon=True)
    proc.start()
    send.close()
    try:
        while True:
            try:
                msg = recv.recv()
            except EOFError:
                raise WorkerError("the sweep worker exited without a result") from None
            if msg is None:
                return
            if isinstance(msg, str):
                raise WorkerError(f"the sweep worker failed:\n{msg}")
            yield from msg
    finally:
        recv.close()
        proc.join(timeout=5)
        if proc.is_alive():
            proc.terminate()
