"""--jobs N gives exactly the serial output, chunk boundaries inside op calls included."""
from __future__ import annotations

import io
import json

import pytest

from pyprof.prof import parallel
from pyprof.prof.columns import COLUMNS
from pyprof.prof.report import run_stream

from .helpers import S, T, rec

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
    for jobs, pipe in ((1, False), (3, False), (2, True)):  # a file (workers pread it) and a pipe (bytes sent)
        buf = io.StringIO()
        with open(path, "rb") as f:
            src = io.BytesIO(f.read()) if pipe else f
            cov = run_stream(src, str(path), buf, cols, fmt, jobs=jobs)
        outs.append((buf.getvalue(), cov.kernels, cov.flops, cov.own_ns, cov.elsewhere_ns))
    assert outs[0] == outs[1] == outs[2]
    assert outs[0][1] == 400 * 3 + 58 and outs[0][2] == 400 * 27648  # each conv counted once: 2·2·4·3·9·64


def test_parallel_reports_the_malformed_line(tmp_path, monkeypatch):
    from pyprof.common import InputError

    path = tmp_path / "bad.jsonl"
    lines = [json.dumps(r) for r in _records(200)]
    lines[450] = "{oops"
    path.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(parallel, "CHUNK_BYTES", 4096)
    with open(path, "rb") as f, pytest.raises(InputError, match="line 451:"):
        run_stream(f, str(path), io.StringIO(), ["idx"], "csv", jobs=2)


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
