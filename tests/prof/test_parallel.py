"""--jobs N gives exactly the serial output, chunk boundaries inside op calls included."""
from __future__ import annotations

import io
import json

import pytest

from pyprof.prof.table import parallel, per_kernel
from pyprof.prof.table.columns import COLUMNS
from pyprof.prof.table.per_kernel import run_stream

from .helpers import L, S, T, rec

pytestmark = pytest.mark.skipif(not parallel.available(), reason="needs the fork start method")


def _records(n_calls: int) -> list[dict]:
    conv = [T([2, 3, 8, 8], "float16"), T([4, 3, 3, 3], "float16"), S(None), S(1, "stride"), S(1, "padding")]
    out = []
    for c in range(n_calls):
        kw = dict(op="conv2d", mod="torch.nn.functional", args=conv, seq=(c,))
        out += [rec("nchwToNhwcKernel", 10, sub=0, **kw), rec("sm80_xmma_fprop_implicit_gemm_tensor16x8x16", 50, sub=1, **kw),
                rec("nhwcToNchwKernel", 10, sub=2, **kw)]
        if c % 7 == 0:
            out.append({})  # a record with nothing known still gets a row
    return out


@pytest.mark.parametrize("fmt", ["csv", "space", "jsonl"])
def test_parallel_equals_serial(tmp_path, monkeypatch, fmt):
    path = tmp_path / "in.jsonl"
    lines = [json.dumps(r) for r in _records(400)]
    lines.insert(100, "")  # an empty line gets no idx, in both modes
    path.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(parallel, "CHUNK_BYTES", 4096)  # many chunks, boundaries inside calls
    cols = list(COLUMNS)
    outs = []
    # a file (workers pread it), its lines counted in the main thread (3 workers) and in a thread beside it (5
    # workers: parallel.WORKERS_PER_COUNTER), and a pipe (bytes sent)
    for jobs, pipe in ((1, False), (3, False), (5, False), (2, True)):
        buf = io.StringIO()
        with open(path, "rb") as f:
            src = io.BytesIO(f.read()) if pipe else f
            cov = run_stream(src, str(path), buf, cols, fmt, jobs=jobs)
        outs.append((buf.getvalue(), cov.kernels, cov.flops, cov.own_ns, cov.elsewhere_ns))
    assert outs[0] == outs[1] == outs[2] == outs[3]
    assert outs[0][1] == 400 * 3 + 58 and outs[0][2] == 400 * 27648  # each conv counted once: 2·2·4·3·9·64


@pytest.mark.parametrize("counters", [0, 3])
def test_file_chunks_number_their_lines_as_a_recount_does(tmp_path, monkeypatch, counters):
    """Each chunk of a file starts at a line's start, the chunks tile the file, and the line number, record index
    and lookback start each task carries are those of a plain recount of the lines before it: empty lines (CRLF
    ones too) and parse's header and side lines take no index, a line longer than a chunk is a chunk of its own,
    and the last line has no newline. Counted in this thread or in ``counters`` threads ahead of it."""
    from pyprof.record import HEADER_PREFIX, SIDE_PREFIX

    lines = [HEADER_PREFIX + b' 1}', b'{"a": 1}', b'', b'\r', b'{"b": "' + b'x' * 5000 + b'"}', b'{"c": 2}\r',
             SIDE_PREFIX + b' []}', b'', b''] + [b'{"k": %d}' % i for i in range(3000)] + [b'{"last": 1}']
    data = b"\n".join(lines)  # the last line without a newline
    path = tmp_path / "in.jsonl"
    path.write_bytes(data)
    monkeypatch.setattr(parallel, "CHUNK_BYTES", 1000)
    monkeypatch.setattr(parallel, "LOOKBACK", 40)
    monkeypatch.setattr(parallel, "FIRST_LOOKBACK", 7)
    import os

    fd = os.open(path, os.O_RDONLY)
    try:
        tasks = list(parallel._file_chunks(fd, 0, len(data), str(path), counters))
    finally:
        os.close(fd)
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    no_idx = [x in (b"", b"\r") or x.startswith((HEADER_PREFIX, SIDE_PREFIX)) for x in lines]
    assert [t[3] for t in tasks] == [0] + [t[4] for t in tasks[:-1]]  # they tile the file
    assert tasks[-1][4] == len(data) and len(tasks) > 30
    assert any(t[4] - t[3] > 5000 for t in tasks)  # the long line
    for _tag, _fd, lb, start, end, _path, lineno, idx, from_start, lb_first in tasks:
        assert start in starts and (end in starts or end == len(data))
        k = starts.index(start)  # lines before the chunk
        assert lineno == k and idx == k - sum(no_idx[:k])
        assert lb == starts[max(0, k - 40)] and from_start == (k <= 40)
        assert lb_first == starts[max(0, k - 7)]  # where the first replay's 7 lines start
        if end < len(data):  # as many whole lines as fit in a chunk, or the one line that does not
            after = starts.index(end)
            assert end - start <= 1000 < end - start + len(lines[after]) + 1 or after == k + 1 and len(lines[k]) >= 1000


def test_parallel_reports_the_malformed_line(tmp_path, monkeypatch):
    from pyprof.common import InputError

    path = tmp_path / "bad.jsonl"
    lines = [json.dumps(r) for r in _records(200)]
    lines[450] = "{oops"
    path.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(parallel, "CHUNK_BYTES", 4096)
    with open(path, "rb") as f, pytest.raises(InputError, match="line 451:"):
        run_stream(f, str(path), io.StringIO(), ["idx"], "csv", jobs=2)


def test_a_workers_failure_is_raised_after_the_chunks_before_it(tmp_path, monkeypatch):
    """A bug in a worker (not bad input) reaches the parent as WorkerError with the worker's traceback, in its
    chunk's turn: the chunks before it are written whole, and nothing after it."""
    from pyprof.forked import WorkerError

    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in _records(400)) + "\n")
    monkeypatch.setattr(parallel, "CHUNK_BYTES", 4096)
    serial = io.StringIO()
    with open(path, "rb") as f:
        run_stream(f, str(path), serial, ["idx"], "csv", jobs=1)
    real = parallel._work

    def work(task):
        if task[6] > 600:  # the first chunk whose first line is past line 600 (task[6]: its line number)
            raise ZeroDivisionError("a bug")
        return real(task)

    monkeypatch.setattr(parallel, "_work", work)
    out = io.StringIO()
    with open(path, "rb") as f, pytest.raises(WorkerError, match="(?s)^a prof worker process failed:.*ZeroDivision"):
        run_stream(f, str(path), out, ["idx"], "csv", jobs=3)
    written = out.getvalue().splitlines()
    # every chunk whose first line is at or before line 600 was written, in order, and nothing after them
    assert 600 <= len(written) - 1 < 700 and serial.getvalue().splitlines()[:len(written)] == written


def test_a_worker_killed_part_way_is_a_worker_error_in_its_turn(tmp_path, monkeypatch, capsys):
    """A worker that exits (killed, as by the OOM killer) is WorkerError, raised after the chunks before its own are
    written. The parent used to meet it as a BrokenPipeError or ConnectionResetError when it sent the worker its next
    task: the first reads, in run_command, as the reader of stdout gone, so the command exited 0 after part of its
    rows."""
    import os

    from pyprof.forked import WorkerError

    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in _records(400)) + "\n")
    monkeypatch.setattr(parallel, "CHUNK_BYTES", 4096)
    real = parallel._work

    def work(task):
        if task[6] > 300:  # task[6]: the chunk's first line number
            os._exit(9)
        return real(task)

    monkeypatch.setattr(parallel, "_work", work)
    for _ in range(5):  # which of the parent's calls meets the dead worker first varies from run to run
        out = io.StringIO()
        with open(path, "rb") as f, \
                pytest.raises(WorkerError, match=r"^a prof worker process exited without a result \(exit status 9\)$"):
            run_stream(f, str(path), out, ["idx"], "csv", jobs=3)
        assert 300 <= len(out.getvalue().splitlines()) - 1 < 400
    # the command: one line naming what happened, exit status 1, no rows on stdout
    from pyprof.prof.cli import main

    assert main(["--csv", "-c", "idx", "--jobs", "3", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err == "pyprof prof: error: a prof worker process exited without a result (exit status 9)\n"


@pytest.mark.parametrize("trailing_newline", [True, False])
def test_parallel_file_edges(tmp_path, monkeypatch, trailing_newline):
    """Chunks of a file are counted in a memory map: a line longer than a chunk, runs of empty lines (some at
    a chunk's start) and a last line without a newline number their rows as the serial run does."""
    recs = _records(60)
    recs[30] = dict(recs[30], trace=["x" * 50 for _ in range(200)])  # ~10 kB: longer than a 4 kB chunk
    lines = [json.dumps(r) for r in recs]
    for at in (5, 5, 77, 120, 121):
        lines.insert(at, "")
    path = tmp_path / "edges.jsonl"
    path.write_text("\n".join(lines) + ("\n" if trailing_newline else ""))
    monkeypatch.setattr(parallel, "CHUNK_BYTES", 4096)
    outs = []
    for jobs in (1, 2):
        buf = io.StringIO()
        with open(path, "rb") as f:
            run_stream(f, str(path), buf, ["idx", "op", "kernel", "flops"], "csv", jobs=jobs)
        outs.append(buf.getvalue())
    assert outs[0] == outs[1]
    assert outs[0].count("\n") == 1 + len(recs)  # header + one row per record, empty lines skipped


def test_parallel_from_a_pipe_with_chunks_larger_than_a_pipe_holds(monkeypatch, tmp_path):
    """From a pipe, each task carries its chunk. With chunks and results larger than a pipe's buffer (a
    socket pair's: a few hundred kB),
    sending a worker its next chunk while it is still sending back its last result would block both
    processes; the output must come, and equal the serial run's."""
    import signal
    import subprocess

    monkeypatch.setattr(parallel, "CHUNK_BYTES", 2 << 20)
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in _records(5000)) + "\n")
    assert path.stat().st_size > 4 * parallel.CHUNK_BYTES
    cols = list(COLUMNS)
    serial = io.StringIO()
    with open(path, "rb") as f:
        run_stream(f, str(path), serial, cols, "csv", jobs=1)

    def hung(*_):
        raise TimeoutError("prof --jobs 2 on a pipe did not finish (deadlock)")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(120)
    try:
        with subprocess.Popen(["cat", str(path)], stdout=subprocess.PIPE) as cat:
            out = io.StringIO()
            run_stream(cat.stdout, "-", out, cols, "csv", jobs=2)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert len(serial.getvalue()) > 2 << 20 and out.getvalue() == serial.getvalue()


@pytest.mark.parametrize("rel", ["nsys/pyprof/transformer.sqlite.xz", "kineto/transformer.pt.trace.json.gz",
                                 "nsys/pyprof/resnet.sqlite.xz"])
def test_parallel_equals_serial_on_real_captures(rel, tmp_path, monkeypatch):
    """Chunks of 20 kB (a dozen records) cut through multi-kernel op calls (an embedding backward of 17
    kernels, foreach optimizer calls, cuDNN convolutions): every row, shares included, is the serial one."""
    from .helpers import parsed

    path = tmp_path / "in.jsonl"
    path.write_bytes(parsed(rel))
    monkeypatch.setattr(parallel, "CHUNK_BYTES", 20_000)
    cols = list(COLUMNS)
    outs = []
    for jobs, pipe in ((1, False), (2, False), (2, True)):
        buf = io.StringIO()
        with open(path, "rb") as f:
            cov = run_stream(io.BytesIO(f.read()) if pipe else f, str(path), buf, cols, "csv", jobs=jobs)
        outs.append((buf.getvalue(), cov.text()))
    assert outs[0] == outs[1] == outs[2]


def _interleaved() -> list[dict]:
    """Thread 1 runs op calls of six kernels each; between two of them thread 2 launches 20 kernels, so a
    call spans about 120 lines, more than a worker's first replay before its chunk."""
    out = []
    for c in range(12):
        kw = dict(op="_foreach_add_", mod="torch", seq=(c,), args=[L(*[T([1000])] * 4), L(*[T([1000])] * 4)])
        for k in range(6):
            out.append(rec("multi_tensor_apply_kernel", 100 + 10 * k, sub=k, **kw))
            out += [rec("vectorized_elementwise_kernel", 50, op="relu", mod="torch", args=[T([64])], tid=2,
                        seq=(1000 + 100 * c + 20 * k + i,)) for i in range(20)]
    return out


def test_parallel_replays_more_when_a_call_started_before_its_first_replay(tmp_path, monkeypatch):
    """A worker first replays FIRST_LOOKBACK lines; a chunk that continues a call begun before those (its
    thread's first record there is not numbered 0) makes it replay LOOKBACK lines, and the rows are the serial
    run's: each call's 8000 FLOPs (foreach add: 1 per element of the first list, 4·1000) shared by duration."""
    from pyprof.prof.model.roofline import Peaks

    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in _interleaved()) + "\n")
    monkeypatch.setattr(parallel, "CHUNK_BYTES", 8192)
    cols = ["idx", "op", "sil", "flops", "bytes", "note"]
    outs = []
    for jobs in (1, 2):
        buf = io.StringIO()
        with open(path, "rb") as f:
            run_stream(f, str(path), buf, cols, "csv", jobs=jobs)
        outs.append(buf.getvalue())
    assert outs[0] == outs[1]
    flops = [int(x.split(",")[3]) for x in outs[0].splitlines()[1:] if ",_foreach_add_," in x]
    assert len(flops) == 72 and sum(flops) == 12 * 4000
    # in this process: the replays a worker makes
    calls = []
    real = parallel._chunk_result
    monkeypatch.setattr(parallel, "_chunk_result", lambda *a, **k: calls.append(len(a[1])) or real(*a, **k))
    parallel._init(per_kernel._chunk_plan(cols, "csv"), Peaks())
    import os

    fd = os.open(path, os.O_RDONLY)
    try:
        tasks = list(parallel._file_chunks(fd, 0, os.fstat(fd).st_size, str(path)))
        texts = [parallel._work(t)[0] for t in tasks]
    finally:
        os.close(fd)
    assert "".join(texts) == outs[0].split("\n", 1)[1]
    assert len(calls) > len(tasks) and max(calls) > parallel.FIRST_LOOKBACK  # some chunks replayed again, longer


def test_a_file_of_long_lines_is_read_by_one_process(tmp_path, monkeypatch):
    """Workers replay at least FIRST_LOOKBACK lines before each chunk: a file whose lines average more than
    MAX_MEAN_LINE_BYTES (here 40 kB each: a record with a long kernel name) runs serially, a file of ordinary
    records and a pipe in workers; the rows are the same."""
    cols = ["idx", "op", "kernel"]
    long_path, short_path = tmp_path / "long.jsonl", tmp_path / "short.jsonl"
    long_path.write_text("\n".join(json.dumps(rec("k" * 40_000, 10, op="relu", mod="torch", args=[T([64])],
                                                  seq=(i,))) for i in range(20)) + "\n")
    short_path.write_text("\n".join(json.dumps(r) for r in _records(50)) + "\n")
    spread = []
    real = parallel.run_parallel
    monkeypatch.setattr(parallel, "run_parallel", lambda *a, **k: spread.append(a[1]) or real(*a, **k))
    for path, pipe in ((long_path, False), (short_path, False), (long_path, True)):
        outs = []
        for jobs in (1, 2):
            buf = io.StringIO()
            with open(path, "rb") as f:
                run_stream(io.BytesIO(f.read()) if pipe else f, str(path), buf, cols, "csv", jobs=jobs)
            outs.append(buf.getvalue())
        assert outs[0] == outs[1]
    assert spread == [str(short_path), str(long_path)]  # the long file alone ran in one process
