"""The sweep in a worker process: ranges and launch calls there, activities and output here.

The worker reopens the export itself (an SQLite connection must not cross a fork), sweeps with only the
thread and times of each launch (``launch_times`` where the reader has it) and sends the end of each
LAUNCH_INFO, ``(attribution, call, flags)``, in batches through a pipe. The parent reads the launch calls
itself, in the same order, and joins the two: the worker is the critical path of a parse, so the rest of
a launch's fields cost it nothing. A failure in the worker is a bug (the file was checked before any
output): it comes back as its traceback text and is raised here.
"""
from __future__ import annotations

import marshal
import multiprocessing
import os
import pickle
import traceback
from typing import Iterator

from pyprof.parse.correlate import Correlator
from pyprof.parse.model import Window

BATCH = 2048
class WorkerError(RuntimeError):
    """The sweep worker failed (a bug): the message holds its traceback."""


def _worker(reopen_args: tuple, conn) -> None:
    try:
        cls, path, display = reopen_args
        src = cls(path, display)
        batch: list = []
        sent = Window()  # what the writer holds (output._merge_lines adds the same numbers in the same order)
        times = getattr(src, "launch_times", None)
        n = 0
        for info in Correlator(src).sweep(times() if times is not None else src.launches()):
            att = info[0]
            if att is not None:
                if att[0] in sent:  # the writer has it: send the number only
                    info = (att[0], info[1], info[2])
                else:
                    sent.add(att[0], None)
            batch.append(info)
            if len(batch) >= BATCH:
                conn.send_bytes(_pack(batch))
                n += len(batch)
                batch = []
        conn.send_bytes(_pack(batch))
        conn.send_bytes(_END + str(n + len(batch)).encode())
    except BrokenPipeError:
        pass  # the parent stopped reading (its own error, or `| head`)
    except BaseException:
        try:
            conn.send_bytes(_FAILED + traceback.format_exc().encode())
        except OSError:
            pass
    finally:
        conn.close()
        os._exit(0)  # skip the finalizers of objects inherited from the parent (its SQLite connection)


# LAUNCH_INFO tuples hold only ints, strings, None and lists, tuples and dicts of those: marshal writes and
# reads them about twice as fast as pickle, which matters on the worker's side (the critical path of a parse).
# pickle stays as the fallback for anything marshal refuses.
_MARSHAL, _PICKLE, _END, _FAILED = b"M", b"P", b"E", b"X"


def _pack(batch: list) -> bytes:
    try:
        return _MARSHAL + marshal.dumps(batch)
    except ValueError:
        return _PICKLE + pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)


def launch_infos_from_worker(source) -> Iterator[tuple]:
    """Yield the LAUNCH_INFO tuples of ``source``: the launch calls read here, their attributions swept in
    a forked worker process."""
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_worker, args=(source.reopen_args(), send), daemon=True)
    proc.start()
    send.close()
    launches = iter(source.launches())
    n = 0
    try:
        while True:
            try:
                msg = recv.recv_bytes()
            except EOFError:
                raise WorkerError("the sweep worker exited without a result") from None
            tag = msg[:1]
            if tag == _MARSHAL:
                batch = marshal.loads(msg[1:])
            elif tag == _PICKLE:
                batch = pickle.loads(msg[1:])
            elif tag == _END:
                if int(msg[1:]) != n or next(launches, None) is not None:
                    raise WorkerError(f"the sweep worker swept {int(msg[1:])} launch calls, the writer read "
                                      f"{n} and {'more' if int(msg[1:]) == n else 'no more'}")
                return
            else:
                raise WorkerError(f"the sweep worker failed:\n{msg[1:].decode(errors='replace')}")
            # batch first: zip stops at its end without taking a launch from the next batch's share
            for (att, call, flags), (_thread, start, end, api, key, pid, tid) in zip(batch, launches):
                n += 1
                yield key, api, start, end, pid, tid, att, call, flags
    finally:
        recv.close()
        proc.join(timeout=5)
        if proc.is_alive():
            proc.terminate()
