"""Issue 40, item 6b: ``parse -`` copies stdin to TMPDIR (SQLite reads files only). What does not start as a profile
is refused before a byte is copied; the copy is bounded (detect.MAX_STDIN_BYTES); a TMPDIR that cannot take it is
one line, and no copy is left."""
from __future__ import annotations

import io
import lzma
import os
import re
import resource
import subprocess
import sys
import time

import pytest

from robust_helpers import DATA, ROOT

from pyprof.common import InputError
from pyprof.parse.readers import detect

EXPORT = DATA / "nsys" / "emit_nvtx" / "lenet.sqlite.xz"


def _parse_stdin(stdin, tmpdir, preexec=None) -> subprocess.CompletedProcess:
    env = dict(os.environ, TMPDIR=str(tmpdir), PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "pyprof.parse", "-"], stdin=stdin, capture_output=True, env=env,
                          timeout=60, preexec_fn=preexec)


def test_a_stream_of_zeros_is_refused_at_once(tmp_path):
    # the issue's `parse - < /dev/zero`: it filled TMPDIR before looking at the input
    start = time.monotonic()
    with open("/dev/zero", "rb") as zeros:
        p = _parse_stdin(zeros, tmp_path)
    assert time.monotonic() - start < 30  # the interpreter's start; copying stops at once (before: until disk full)
    assert (p.returncode, p.stdout) == (1, b"")
    assert p.stderr.decode() == ("pyprof parse: error: <stdin>: not a profile: neither an SQLite database nor a "
                                 "(gzipped) JSON trace\n")
    assert list(tmp_path.iterdir()) == []


def _small_files(limit_bytes: int):
    def preexec():  # a file in this process may not grow past limit_bytes: the write fails with EFBIG, as a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))
    return preexec


def test_an_empty_stdin_is_told_by_its_reader(tmp_path):
    # a refused parse piped into report: report's own words for it, not "not a profile"
    env = dict(os.environ, TMPDIR=str(tmp_path), PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "pyprof.report", "-", "-o", str(tmp_path / "r.html")], input=b"",
                       capture_output=True, env=env, timeout=60)
    assert (p.returncode, p.stdout) == (1, b"")
    assert p.stderr.decode() == "pyprof report: error: <stdin>: empty: no header line (was its parse refused?)\n"
    assert list(tmp_path.iterdir()) == []


def test_a_full_tmpdir_is_one_line_and_leaves_no_spool(tmp_path):
    # The export, decompressed here, is about 1 MB; TMPDIR takes 64 kB (RLIMIT_FSIZE in the child: no root needed)
    export = tmp_path / "lenet.sqlite"
    export.write_bytes(lzma.decompress(EXPORT.read_bytes()))
    assert export.stat().st_size > 1 << 16
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    with open(export, "rb") as stdin:
        p = _parse_stdin(stdin, tmpdir, _small_files(1 << 16))
    assert (p.returncode, p.stdout) == (1, b"")
    assert p.stderr.decode() == f"pyprof parse: error: <stdin>: cannot copy it into {tmpdir}: File too large\n"
    assert list(tmpdir.iterdir()) == []


def test_a_full_tmpdir_while_decompressing_stdin(tmp_path):
    # xz on stdin: the spool (43 kB) fits the 64 kB, its decompressed export (about 1 MB) does not
    with open(EXPORT, "rb") as stdin:
        p = _parse_stdin(stdin, tmp_path, _small_files(1 << 16))
    assert (p.returncode, p.stdout) == (1, b"")
    assert p.stderr.decode() == f"pyprof parse: error: <stdin>: cannot decompress it into {tmp_path}: File too large\n"
    assert list(tmp_path.iterdir()) == []


class _Stdin:
    def __init__(self, data: bytes) -> None:
        self.buffer = io.BufferedReader(io.BytesIO(data))


@pytest.fixture
def private_tmpdir(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    return tmp_path


def test_the_spool_is_bounded(private_tmpdir, monkeypatch):
    # a stream that starts as an SQLite database and goes on: refused at the bound (here 3 MB, in blocks of 1 MiB)
    monkeypatch.setattr(detect, "MAX_STDIN_BYTES", 3 << 20)
    monkeypatch.setattr(sys, "stdin", _Stdin(detect.SQLITE_MAGIC + bytes(5 << 20)))
    with pytest.raises(InputError, match=r"^<stdin>: more than 3 MiB on stdin, the most pyprof copies to TMPDIR: "
                                         r"give the file by its path$"):
        detect.spool_stdin()
    assert list(private_tmpdir.iterdir()) == []


def test_under_the_bound_the_spool_is_the_stream(private_tmpdir, monkeypatch):
    data = detect.SQLITE_MAGIC + bytes(range(256)) * 4096  # 1 MiB and 16 bytes: two blocks
    monkeypatch.setattr(detect, "MAX_STDIN_BYTES", len(data))  # exactly at the bound: kept
    monkeypatch.setattr(sys, "stdin", _Stdin(data))
    path = detect.spool_stdin()
    try:
        with open(path, "rb") as f:
            assert f.read() == data
    finally:
        os.unlink(path)


@pytest.mark.parametrize("head, says", [
    (b"NVIDIA Tegra Profiler Report\x00\x00", "an Nsight Systems report (.nsys-rep): export it first"),
    (b"PK\x03\x04", "not a profile"),
])
def test_what_is_no_profile_is_refused_before_a_copy(private_tmpdir, monkeypatch, head, says):
    monkeypatch.setattr(sys, "stdin", _Stdin(head + bytes(1 << 20)))
    with pytest.raises(InputError, match=f"^<stdin>: {re.escape(says)}"):
        detect.spool_stdin()
    assert list(private_tmpdir.iterdir()) == []
