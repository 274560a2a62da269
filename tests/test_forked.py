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


def _timed(conn) -> None:
    """Answer (task, this worker's pid) for each task (seconds to sleep), a failure for a negative one; at the end
    (None), how many tasks it was sent."""
    import time

    served = 0
    while (task := conn.recv()) is not None:
        served += 1
        if task < 0:
            forked.send_failure(conn, ValueError(f"task {task}"))
            continue
        time.sleep(task)
        conn.send((task, os.getpid()))
    conn.send(("served", served))


def _pool(n: int) -> list:
    workers: list = []
    for _ in range(n):
        workers.append(forked.start("a pool worker", _timed, duplex=True, siblings=workers))
    return workers


def test_in_order_gives_results_in_order_and_tasks_to_the_least_busy_worker():
    # Task 0 keeps its worker busy for 1 s while the other clears the quick ones. Round robin would give each
    # worker 10 of the 20 tasks, the quick ones behind task 0 waiting for it; by load, the first worker takes
    # task 0 and one more before the others are all done.
    tasks = [1.0] + [0.001 * (k % 3) for k in range(1, 20)]
    workers = _pool(2)
    met = []
    try:
        results = list(forked.in_order(workers, tasks, meanwhile=lambda: met.append("meanwhile")))
        for w in workers:
            w.send(None)
    finally:
        forked.stop(workers)
    assert [task for task, _ in results] == tasks
    first = results[0][1]
    assert sum(1 for _, pid in results if pid == first) <= 3 and met == ["meanwhile"]


def test_in_order_raises_a_failure_in_its_turn_and_sends_nothing_after_it():
    tasks = [0.3, 0.0, -1, 0.0, 0.0, 0.0, 0.0, 0.0]  # task 2 fails while task 0 is still running
    workers = _pool(2)
    got = []
    try:
        with pytest.raises(WorkerError, match="^a pool worker failed:\n(?s:.*)ValueError: task -1"):
            for result in forked.in_order(workers, tasks, depth=lambda task: 1):
                got.append(result[0])
        for w in workers:
            w.send(None)
        served = [w.recv() for w in workers]
    finally:
        forked.stop(workers)
    assert got == [0.3, 0.0] and sum(n for _, n in served) == 3  # tasks 0 to 2
