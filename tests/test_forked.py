"""pyprof.forked: a worker's messages, and its failures raised in the parent with a message naming it."""
from __future__ import annotations

import os

import pytest

from pyprof import forked
from pyprof.common import InputError
from pyprof.forked import WorkerError

pytestmark = pytest.mark.skipif(not forked.available(), reason="needs the fork start method")


def _count(conn, n: int) -> None:
    for i in range(n):
        conn.send_bytes(b"M%d" % i)


def _fails(conn) -> None:
    conn.send_bytes(b"Mfirst")
    raise ValueError("a bug in the worker")


def _refuses(conn) -> None:
    raise InputError("run.sqlite", "database disk image is malformed")


def _dies(conn) -> None:
    os._exit(3)


def _serves(conn) -> None:
    while (task := conn.recv()) is not None:
        try:
            conn.send(10 // task)
        except ZeroDivisionError as e:
            forked.send_failure(conn, e)  # and go on serving


def test_messages_come_in_order_then_the_end_of_the_pipe():
    w = forked.start("the counting worker", _count, (3,))
    try:
        assert [w.recv_bytes() for _ in range(3)] == [b"M0", b"M1", b"M2"]
        with pytest.raises(WorkerError, match="^the counting worker exited without a result$"):
            w.recv_bytes()
    finally:
        forked.stop([w])


def test_a_bug_comes_back_with_its_traceback_after_what_was_sent_before():
    w = forked.start("the test worker", _fails)
    try:
        assert w.recv_bytes() == b"Mfirst"
        with pytest.raises(WorkerError) as e:
            w.recv_bytes()
        assert str(e.value).startswith("the test worker failed:\nTraceback")
        assert "ValueError: a bug in the worker" in str(e.value)
    finally:
        forked.stop([w])


def test_bad_input_comes_back_as_the_input_error_itself():
    w = forked.start("the test worker", _refuses)
    try:
        with pytest.raises(InputError) as e:
            w.recv_bytes()
        assert (e.value.path, e.value.problem) == ("run.sqlite", "database disk image is malformed")
    finally:
        forked.stop([w])


def test_a_worker_that_dies_silently():
    w = forked.start("the test worker", _dies)
    try:
        with pytest.raises(WorkerError, match="exited without a result"):
            w.recv_bytes()
    finally:
        forked.stop([w])
    assert w.proc.exitcode == 3


def test_a_serving_worker_answers_a_failed_task_and_serves_on():
    workers: list = []
    try:
        for _ in range(2):  # the second inherits the first's pipe end and closes it
            workers.append(forked.start("a serving worker", _serves, duplex=True, siblings=workers))
        a, b = workers
        a.send(5)
        a.send(0)
        a.send(2)
        b.send(1)
        assert a.recv() == 2
        with pytest.raises(WorkerError, match="^a serving worker failed:\nTraceback(?s:.*)ZeroDivisionError"):
            a.recv()
        assert a.recv() == 5 and b.recv() == 10
        for w in workers:
            w.send(None)
    finally:
        forked.stop(workers)
    assert [w.proc.exitcode for w in workers] == [0, 0]
