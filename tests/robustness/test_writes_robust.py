"""Issue 40, where the commands write: every write reaches its file whole or the command says it could not
(``pyprof STAGE: error: <stdout>: could not write the output (REASON)``, exit 1), no output replaces an input,
an error line stays one bounded line, and output files get the mode and the place a plain ``open()`` would give.

A disk that fills is simulated without root or a mount: the command runs as a process whose stdout is a file
under a small RLIMIT_FSIZE (SIGXFSZ ignored, so that the write past the limit fails with EFBIG after a short
write, as a tmpfs gives a short write and then ENOSPC), or is /dev/full (ENOSPC at once). Both with
PYTHONUNBUFFERED=1, under which Python's own stdout ignored a short write (the reproducer: 16384 of 75923 bytes,
exit 0), and without.
"""
from __future__ import annotations

import errno
import fcntl
import hashlib
import io
import json
import lzma
import os
import resource
import select
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shared_files import CORPUS, require_shared

ROOT = Path(__file__).resolve().parents[2]
XF = ROOT / "tests" / "data" / "nsys" / "pyprof" / "transformer.sqlite.xz"
#: parse's end line counts the records it wrote: prof's per-kernel table has one row for each, and a header.
LIMIT = 16384


@pytest.fixture(scope="module")
def xf(tmp_path_factory):
    """The committed transformer export and its records (1.4 MB; prof --csv -c all makes 143 kB of them)."""
    folder = tmp_path_factory.mktemp("xf")
    export = folder / "xf.sqlite"
    with lzma.open(XF) as f:
        export.write_bytes(f.read())
    records = folder / "xf.dict"
    with open(records, "wb") as out:
        assert _run("parse", "-q", str(export), stdout=out).returncode == 0
    return export, records


def _env(unbuffered: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTHONUNBUFFERED", None)
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    return env


def _run(stage: str, *argv, stdout=subprocess.PIPE, unbuffered=True, fsize: int | None = None, cwd=None, **kw):
    """``python -m pyprof.STAGE ARGV`` (stage "" : the pyprof command), stderr as text; under RLIMIT_FSIZE when
    ``fsize`` is given."""
    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG, rather than a signal that kills the process
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    module = f"pyprof.{stage}" if stage else "pyprof.cli"
    kw.setdefault("env", _env(unbuffered))
    return subprocess.run([sys.executable, "-m", module, *map(str, argv)], stdout=stdout, stderr=subprocess.PIPE,
                          text=True, cwd=cwd or ROOT, preexec_fn=limit if fsize else None, **kw)


def _to_limited_file(tmp_path, stage, *argv, unbuffered=True, fsize=LIMIT):
    """Run with stdout a file under RLIMIT_FSIZE; (process, the file's size)."""
    out = tmp_path / "stdout"
    with open(out, "wb") as f:
        p = _run(stage, *argv, stdout=f, unbuffered=unbuffered, fsize=fsize)
    return p, out.stat().st_size


def _full_line(prog: str, reason: str) -> str:
    return f"{prog}: error: <stdout>: could not write the output ({reason})\n"


# --- a stdout that fills ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("unbuffered", [True, False], ids=["PYTHONUNBUFFERED", "buffered"])
def test_prof_on_a_filling_disk_says_so(tmp_path, xf, unbuffered):
    # The reproducer: 143 kB of CSV into 16 kB. Exit 1 and the line, never exit 0 with a cut table.
    p, size = _to_limited_file(tmp_path, "prof", "-q", "--csv", "-c", "all", xf[1], unbuffered=unbuffered)
    assert (p.returncode, p.stderr) == (1, _full_line("pyprof prof", "File too large"))
    assert size == LIMIT  # what fitted, no more (a stream cannot take back what it wrote)


@pytest.mark.parametrize("stage,argv", [("diff", ["-q", "{r}", "{r}"]), ("parse", ["-q", "{x}"]),
                                        ("report", ["{r}", "-o", "-"])])
def test_every_stdout_writer_on_a_filling_disk_says_so(tmp_path, xf, stage, argv):
    argv = [a.format(r=xf[1], x=xf[0]) for a in argv]
    p, size = _to_limited_file(tmp_path, stage, *argv, fsize=1000)  # diff's tables: 2 kB
    assert (p.returncode, p.stderr) == (1, _full_line(f"pyprof {stage}", "File too large"))
    assert size == 1000


def test_room_enough_is_success_and_no_line(tmp_path, xf):
    # The silent side: the same command with room for its output (143 kB under 1 MB) says nothing, exit 0, and
    # writes every row: a header and one per record (parse's end line: 538).
    p, size = _to_limited_file(tmp_path, "prof", "-q", "--csv", "-c", "all", xf[1], fsize=1 << 20)
    assert (p.returncode, p.stderr) == (0, "")
    end = json.loads(xf[1].read_text().splitlines()[-1])
    assert end["pyprof_end"] and (tmp_path / "stdout").read_text().count("\n") == 1 + end["records"]


@pytest.mark.parametrize("stage,argv", [("prof", ["-q", "{r}"]), ("diff", ["-q", "{r}", "{r}"]),
                                        ("parse", ["-q", "{x}"]), ("", ["--version"]), ("prof", ["-h"])])
def test_dev_full_as_stdout_says_so(xf, stage, argv):
    # ENOSPC at the first write. -h: argparse swallows the error of its own print; the exit checks stdout.
    with open("/dev/full", "w") as full:
        p = _run(stage, *[a.format(r=xf[1], x=xf[0]) for a in argv], stdout=full)
    assert (p.returncode, p.stderr) == (1, _full_line(f"pyprof {stage}" if stage else "pyprof",
                                                      "No space left on device"))


@pytest.mark.parametrize("stage,argv", [("parse", ["-q", "{x}", "-o", "out"]),
                                        ("report", ["{r}", "-o", "out", "--trace", "trace.json"])])
def test_an_output_file_on_a_filling_disk_is_one_line_and_nothing_left(tmp_path, xf, stage, argv):
    # The file is written to a temporary beside it: past the limit, one line naming the file and no file.
    p = _run(stage, *[a.format(r=xf[1], x=xf[0]) for a in argv], fsize=LIMIT, cwd=tmp_path)
    assert p.returncode == 1 and p.stderr.count("\n") == 1, p.stderr
    assert p.stderr.endswith(": could not write the output (File too large)\n")
    assert os.listdir(tmp_path) == []


def test_a_non_blocking_pipe_is_waited_for(xf):
    # A pipe of 4 kB that the process finds full (O_NONBLOCK, as a parent may leave it): a write fails with
    # EAGAIN, which Python's unbuffered stdout dropped. The reader starts late; every row still comes.
    r, w = os.pipe()
    fcntl.fcntl(w, 1031, 4096)  # F_SETPIPE_SZ
    fcntl.fcntl(w, fcntl.F_SETFL, fcntl.fcntl(w, fcntl.F_GETFL) | os.O_NONBLOCK)
    proc = subprocess.Popen([sys.executable, "-m", "pyprof.prof", "-q", "--csv", "-c", "all", str(xf[1])],
                            stdout=w, stderr=subprocess.PIPE, env=_env(True), cwd=ROOT)
    os.close(w)
    time.sleep(1.0)
    chunks = []
    while True:
        select.select([r], [], [])
        chunk = os.read(r, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(r)
    assert proc.wait(30) == 0 and proc.stderr.read() == b""
    end = json.loads(xf[1].read_text().splitlines()[-1])
    assert b"".join(chunks).count(b"\n") == 1 + end["records"]


def test_whole_writes_follows_a_short_write_with_the_rest(monkeypatch, tmp_path):
    # os.write patched to take at most 5 bytes a call, then to fail as a full disk does: the first write is
    # completed in pieces, the second raises with the reason and is remembered (for a caller that swallows it).
    from pyprof.common import WholeWrites

    taken = []
    real_write = os.write

    def short(fd, data):
        if sum(map(len, taken)) >= 12:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        taken.append(bytes(data[:5]))
        return real_write(fd, data[:5])

    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT)
    monkeypatch.setattr(os, "write", short)
    sink = WholeWrites(fd)
    assert sink.write(b"0123456789ab") == 12 and taken == [b"01234", b"56789", b"ab"]
    with pytest.raises(OSError) as e:
        sink.write(b"more")
    assert e.value.errno == errno.ENOSPC and sink.error is e.value
    os.close(fd)
    assert (tmp_path / "f").read_bytes() == b"0123456789ab"


# --- an output that is an input ----------------------------------------------------------------------------

def _digest(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture
def small(tmp_path):
    """A copy of the README's small.sqlite (nsys2022.4_gpu4_vectoradd_streams), and records parsed from it."""
    require_shared()
    export = tmp_path / "s.sqlite"
    export.write_bytes((CORPUS / "nsys" / "nsys2022.4_gpu4_vectoradd_streams.sqlite").read_bytes())
    with open(tmp_path / "r.dict", "wb") as out:
        assert _run("parse", "-q", export, stdout=out).returncode == 0
    os.symlink("r.dict", tmp_path / "link.dict")
    os.link(tmp_path / "r.dict", tmp_path / "hard.dict")
    return tmp_path


SAME = [  # (stage, argv, the output as the line names it, the input it is, when named otherwise)
    ("parse", ["s.sqlite", "-o", "s.sqlite"], "s.sqlite", None),
    ("parse", ["s.sqlite", "-o", "./s.sqlite"], "./s.sqlite", "s.sqlite"),
    ("report", ["r.dict", "-o", "r.dict"], "r.dict", None),
    ("report", ["r.dict", "-o", "link.dict"], "link.dict", "r.dict"),  # through a symlink
    ("report", ["r.dict", "-o", "hard.dict"], "hard.dict", "r.dict"),  # a hard link
    ("report", ["s.sqlite", "-o", "r.html", "--trace", "s.sqlite"], "s.sqlite", None),
    ("diff", ["r.dict", "s.sqlite", "-o", "r.dict"], "r.dict", None),
    ("diff", ["s.sqlite,r.dict", "s.sqlite", "-o", "link.dict"], "link.dict", "r.dict"),
]


@pytest.mark.parametrize("stage,argv,out,given", SAME, ids=[" ".join([s] + a) for s, a, _, _ in SAME])
def test_an_output_that_is_an_input_is_refused_before_any_work(small, stage, argv, out, given):
    before = {n: _digest(small / n) for n in ("s.sqlite", "r.dict")}
    files = sorted(os.listdir(small))
    p = _run(stage, *argv, cwd=small)
    also = f" ({given})" if given else ""
    assert (p.returncode, p.stdout) == (2, "")
    assert p.stderr == (f"pyprof {stage}: error: {out}: is also an input{also}: writing it would destroy the input; "
                        "write the output to another file\n")
    assert {n: _digest(small / n) for n in before} == before and sorted(os.listdir(small)) == files


@pytest.mark.parametrize("stage,argv,stdin", [("prof", ["-q", "r.dict"], None), ("parse", ["-q", "-"], "s.sqlite"),
                                              ("diff", ["-q", "r.dict", "s.sqlite"], None)])
def test_stdout_appended_to_an_input_is_refused(small, stage, argv, stdin):
    # `>> r.dict`: the shell opens the input for appending before the command starts.
    appended = "s.sqlite" if stage == "parse" else "r.dict"
    before = _digest(small / appended)
    with open(small / appended, "ab") as out, open(small / (stdin or appended), "rb") as inp:
        p = _run(stage, *argv, stdout=out, cwd=small, stdin=inp if stdin else None)
    given = "<stdin>" if stdin else appended
    assert (p.returncode, p.stderr) == (2, f"pyprof {stage}: error: <stdout>: is also an input ({given}): writing "
                                           "it would destroy the input; write the output to another file\n")
    assert _digest(small / appended) == before


@pytest.mark.parametrize("stage,argv", [("parse", ["-q", "s.sqlite", "-o", "out.dict"]),
                                        ("report", ["r.dict", "-o", "r.html", "--trace", "t.json"]),
                                        ("diff", ["-q", "r.dict", "s.sqlite", "-o", "d.html"])])
def test_another_output_beside_the_input_is_written(small, stage, argv):
    # The silent side: an output next to its input, not the same file, is written and nothing is refused.
    p = _run(stage, *argv, cwd=small)
    assert p.returncode == 0 and "error" not in p.stderr
    assert all((small / a).stat().st_size > 0 for a in argv if a.endswith((".html", ".json", "out.dict")))


# --- error lines ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("stage,extra", [("parse", []), ("prof", []), ("report", ["-o", "x.html"]),
                                         ("diff", ["{other}"])])
def test_an_error_line_naming_a_long_path_is_one_bounded_line(tmp_path, xf, stage, extra):
    # The reproducer: a missing file at a 6000-character path gave a parse line of 6111 characters.
    path = "/nonexistent/" + "a" * 5980 + "/net.dict"
    p = _run(stage, path, *[e.format(other=xf[1]) for e in extra], cwd=tmp_path)
    line = p.stderr
    assert p.returncode == 1 and line.count("\n") == 1 and len(line) - 1 <= 1000, (len(line), line[:200])
    # the path cut in its middle: its start and its file's name stay, and what was wrong
    assert line.startswith(f"pyprof {stage}: error: /nonexistent/aaa") and "..." in line
    assert line.endswith("/net.dict: cannot open: File name too long\n") or \
        line.endswith("/net.dict: cannot open: No such file or directory\n"), line[-120:]


def test_a_short_error_line_is_left_as_it_is(tmp_path):
    # The silent side: nothing to cut, nothing cut.
    p = _run("parse", "missing.sqlite", cwd=tmp_path)
    assert (p.returncode, p.stderr) == (1, "pyprof parse: error: missing.sqlite: cannot open: No such file or "
                                           "directory\n")


def test_error_line_cuts_the_path_and_keeps_the_problem():
    from pyprof.common import InputError, UsageError, error_line

    line = error_line("pyprof x", InputError("/d/" + "b" * 3000 + "\n.dict", "line 4: bad"))
    # 400 characters of path at most (MESSAGE_PATH_CHARS), its line break escaped
    assert line.startswith("pyprof x: error: /d/bbb") and line.endswith("bbb\\n.dict: line 4: bad")
    assert len(line) == len("pyprof x: error: ") + 400 + len(": line 4: bad")
    long = error_line("pyprof x", UsageError("y" * 5000))  # no path: the line itself is cut, still one line
    assert len(long) == 1000 and "..." in long
    short = UsageError("-w WIDTH must be positive")
    assert error_line("pyprof x", short) == "pyprof x: error: -w WIDTH must be positive"


# --- the mode and the place of an output file ------------------------------------------------------------------

@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_output_files_get_the_mode_of_a_new_file(tmp_path, xf, umask, mode):
    # 0666 less the umask, as the shell's > would give; parse -o was 0600 whatever the umask.
    def with_umask():
        os.umask(umask)

    for stage, argv in [("parse", ["-q", xf[0], "-o", "p.dict"]),
                        ("report", [xf[1], "-o", "r.html", "--trace", "t.json"])]:
        p = subprocess.run([sys.executable, "-m", f"pyprof.{stage}", *map(str, argv)], cwd=tmp_path,
                           env=_env(False), capture_output=True, text=True, preexec_fn=with_umask)
        assert p.returncode == 0, p.stderr
    assert {n: stat.S_IMODE(os.stat(tmp_path / n).st_mode) for n in ("p.dict", "r.html", "t.json")} == \
        {n: mode for n in ("p.dict", "r.html", "t.json")}


def test_an_existing_output_keeps_its_mode(tmp_path, xf):
    out = tmp_path / "p.dict"
    out.write_text("old")
    out.chmod(0o640)
    assert _run("parse", "-q", xf[0], "-o", out).returncode == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o640 and out.read_text() != "old"


def test_output_through_a_symlink_writes_its_target(tmp_path, xf):
    # -o LINK: the link stays, its target gets the records (as `> LINK` would), nothing else is left.
    (tmp_path / "runs").mkdir()
    os.symlink("runs/net.dict", tmp_path / "latest.dict")
    p = _run("parse", "-q", xf[0], "-o", "latest.dict", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert os.readlink(tmp_path / "latest.dict") == "runs/net.dict"
    assert (tmp_path / "runs" / "net.dict").read_bytes() == xf[1].read_bytes()
    assert sorted(os.listdir(tmp_path)) == ["latest.dict", "runs"] and os.listdir(tmp_path / "runs") == ["net.dict"]


def test_output_through_a_dangling_symlink_into_no_folder_is_one_line(tmp_path, xf):
    os.symlink("missing/net.dict", tmp_path / "latest.dict")
    p = _run("parse", "-q", xf[0], "-o", "latest.dict", cwd=tmp_path)
    assert (p.returncode, p.stderr) == (1, "pyprof parse: error: latest.dict: cannot write here (No such file or "
                                           "directory)\n")
    assert os.listdir(tmp_path) == ["latest.dict"]


def test_in_process_main_leaves_stdout_alone(xf, monkeypatch):
    # main(argv), as tests and notebooks call it: writes go to the sys.stdout they set, whole.
    from pyprof.prof.cli import main

    buf = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(buf, encoding="utf-8"))
    assert main(["-q", "--csv", "-c", "idx", str(xf[1])]) == 0
    sys.stdout.flush()
    end = json.loads(xf[1].read_text().splitlines()[-1])
    assert buf.getvalue().decode().splitlines() == ["Idx"] + [str(i) for i in range(end["records"])]


@pytest.mark.parametrize("stage,argv,folder", [("report", ["{x}", "-o", "r.html"], "pyprof-report-"),
                                               ("diff", ["-q", "{x}", "{x}"], "pyprof-report-"),
                                               ("prof", ["-q", "--view", "ranks", "{x}", "{x}"], "pyprof-rank-")])
def test_a_full_tmpdir_under_an_export_parsed_on_the_way_is_one_line(tmp_path, xf, stage, argv, folder):
    # The export's records (1.4 MB) go to a temporary file in TMPDIR first: past the limit, one line naming that
    # folder (it was a traceback, or report blamed its page), and nothing left in TMPDIR or beside the page.
    (tmp_path / "tmp").mkdir()
    env = {**_env(True), "TMPDIR": str(tmp_path / "tmp")}
    p = _run(stage, *[a.format(x=xf[0]) for a in argv], fsize=LIMIT, cwd=tmp_path, env=env)
    assert p.returncode == 1 and p.stdout == "" and p.stderr.count("\n") == 1, p.stderr[-400:]
    assert p.stderr.startswith(f"pyprof {stage}: error: {tmp_path / 'tmp'}/{folder}")
    assert p.stderr.endswith(": could not hold the parsed export in this folder (File too large); set TMPDIR to "
                             "one with room\n")
    assert os.listdir(tmp_path / "tmp") == [] and os.listdir(tmp_path) == ["tmp"]


@pytest.mark.parametrize("stage,argv,reason", [("prof", ["-q", "{r}"], "could not write the output"),
                                               ("diff", ["-q", "{r}", "{r}"], "could not write the output"),
                                               ("parse", ["-q", "{x}"], "cannot write here")])
def test_a_closed_stdout_is_one_line(xf, stage, argv, reason):
    # `>&-`: Python starts with sys.stdout None (the commands asked it for a terminal, or wrote to it: tracebacks).
    p = subprocess.run([sys.executable, "-m", f"pyprof.{stage}", *[a.format(r=xf[1], x=xf[0]) for a in argv]],
                       stderr=subprocess.PIPE, text=True, env=_env(True), cwd=ROOT, preexec_fn=lambda: os.close(1))
    assert (p.returncode, p.stderr) == (1, f"pyprof {stage}: error: <stdout>: {reason} (stdout is closed)\n")
