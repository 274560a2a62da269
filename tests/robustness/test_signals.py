"""Issue 40, item 5: SIGINT, SIGTERM and SIGHUP leave nothing behind. Each command is run in a process that waits at
a known point (``PYPROF_PAUSE_AT``, pyprof.cleanup.pause_point) where its temporaries exist, checked before the
signal is sent; after it: exit 128 + the signal's number, one line on stderr, and nothing left beside the output nor
in a private TMPDIR. The signal handling's rules (ignored stays ignored, a worker never removes its parent's files)
are tested in-process."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from robust_helpers import DATA, ROOT

from pyprof import cleanup

EXPORT = DATA / "nsys" / "emit_nvtx" / "lenet.sqlite.xz"  # 43 kB, decompresses to an export of about 1 MB


def _start(argv: list[str], folder, tmpdir, pause: str | None = None, stdin=None) -> subprocess.Popen:
    env = dict(os.environ, TMPDIR=str(tmpdir), PYTHONPATH=str(ROOT))
    if pause:
        env[cleanup.PAUSE_ENV] = pause
    return subprocess.Popen([sys.executable, "-m", *argv], cwd=folder, env=env, stdin=stdin or subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)


def _paused(p: subprocess.Popen, point: str) -> None:
    line = p.stderr.readline().decode()
    assert line == f"pyprof: paused at {point}\n", line + p.stderr.read().decode()


def _folders(tmp_path):
    out, tmpdir = tmp_path / "out", tmp_path / "tmp"
    out.mkdir()
    tmpdir.mkdir()
    return out, tmpdir


def _ended(p: subprocess.Popen, signum: int, prog: str) -> None:
    _, err = p.communicate(timeout=60)
    assert p.returncode == 128 + signum  # 130, 143, 129: as a shell shows a process the signal ended
    assert err.decode() == f"{prog}: interrupted ({signal.Signals(signum).name})\n"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_parse_interrupted_writing_leaves_no_temporary(tmp_path, signum):
    out, tmpdir = _folders(tmp_path)
    p = _start(["pyprof.parse", str(EXPORT), "-o", "r.dict"], out, tmpdir, "parse-output")
    _paused(p, "parse-output")
    # what is there to remove: the output's temporary beside it, the decompressed export in TMPDIR
    assert [f.name[:8] for f in out.iterdir()] == [".pyprof-"]
    assert [f.name[:14] for f in tmpdir.iterdir()] == ["pyprof-export-"]
    p.send_signal(signum)
    _ended(p, signum, "pyprof parse")
    assert list(out.iterdir()) == [] and list(tmpdir.iterdir()) == []


def test_ctrl_c_while_decompressing_leaves_no_export(tmp_path):
    # the case: decompress removed its file for OSError, LZMAError and InputError only
    out, tmpdir = _folders(tmp_path)
    p = _start(["pyprof.parse", str(EXPORT)], out, tmpdir, "decompress")
    _paused(p, "decompress")
    assert [f.name[:14] for f in tmpdir.iterdir()] == ["pyprof-export-"]
    p.send_signal(signal.SIGINT)
    _ended(p, signal.SIGINT, "pyprof parse")
    assert list(tmpdir.iterdir()) == []


def test_report_terminated_leaves_no_page_nor_working_folder(tmp_path):
    out, tmpdir = _folders(tmp_path)
    p = _start(["pyprof.report", str(EXPORT), "-o", "r.html", "--trace", "t.json"], out, tmpdir, "report-sources")
    _paused(p, "report-sources")
    assert sorted(f.name[:8] for f in out.iterdir()) == [".pyprof-", ".pyprof-"]  # the page's, the trace's
    assert [(f.name[:14], [g.name for g in f.iterdir()]) for f in tmpdir.iterdir()] == [("pyprof-report-", ["0.dict"])]
    p.send_signal(signal.SIGTERM)
    _ended(p, signal.SIGTERM, "pyprof report")
    assert list(out.iterdir()) == [] and list(tmpdir.iterdir()) == []


def test_hangup_while_spooling_stdin_leaves_no_spool(tmp_path):
    out, tmpdir = _folders(tmp_path)
    with open(EXPORT, "rb") as stdin:
        p = _start(["pyprof.parse", "-"], out, tmpdir, "spool", stdin=stdin)
        _paused(p, "spool")
        assert [f.name[:13] for f in tmpdir.iterdir()] == ["pyprof-stdin-"]
        p.send_signal(signal.SIGHUP)
        _ended(p, signal.SIGHUP, "pyprof parse")
    assert list(tmpdir.iterdir()) == []


def _children(pid: int) -> list[int]:
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):  # each thread's children (Linux 3.5+)
        with open(f"/proc/{pid}/task/{task}/children") as f:
            found += [int(c) for c in f.read().split()]
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("signum, to_group", [(signal.SIGTERM, False), (signal.SIGHUP, True), (signal.SIGINT, True)])
def test_the_sweep_worker_ends_with_its_parent(tmp_path, signum, to_group):
    # SIGTERM to parse alone (kill PID), SIGHUP and SIGINT to the whole group (a terminal closing, Ctrl-C): the
    # sweep process ends too, and the parent removes what it made
    out, tmpdir = _folders(tmp_path)
    p = _start(["pyprof.parse", str(EXPORT), "-o", "r.dict", "--sweep-process", "on"], out, tmpdir, "worker")
    _paused(p, "worker")
    workers = _children(p.pid)
    assert len(workers) == 1 and _alive(workers[0])
    os.killpg(p.pid, signum) if to_group else p.send_signal(signum)
    _ended(p, signum, "pyprof parse")
    assert not _alive(workers[0])  # (a daemon worker: joined before the parent exits)
    assert list(out.iterdir()) == [] and list(tmpdir.iterdir()) == []


def test_an_ignored_signal_stays_ignored():
    # nohup sets SIGHUP to be ignored: a command must not make it end one
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with cleanup.handling_signals():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) is cleanup._on_signal
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # and undone after
    finally:
        signal.signal(signal.SIGHUP, previous)


def test_a_worker_stopped_by_sigterm_removes_its_own_temporaries_only(tmp_path, monkeypatch):
    # prof --view ranks' pool workers decompress and parse a rank each into TMPDIR: stopped by their parent
    # (SIGTERM), a worker removes what it made, and ends by the signal
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    with cleanup.handling_signals():
        fd, parents = cleanup.temp_file("pyprof-parent-")
        os.close(fd)
        ready_r, ready_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            fd, _ = cleanup.temp_file("pyprof-worker-")
            os.write(ready_w, b"x")
            time.sleep(30)
            os._exit(0)
        os.read(ready_r, 1)  # the worker's file exists
        assert sorted(f.name[:14] for f in tmp_path.iterdir()) == ["pyprof-parent-", "pyprof-worker-"]
        os.kill(pid, signal.SIGTERM)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM
        assert [f.name for f in tmp_path.iterdir()] == [os.path.basename(parents)]


def test_a_worker_never_removes_its_parents_temporaries(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    with cleanup.handling_signals():
        fd, path = cleanup.temp_file("pyprof-test-")
        os.close(fd)
        pid = os.fork()
        if pid == 0:  # the worker: what a command's way out would do, here
            cleanup.remove_all()
            os._exit(0)
        os.waitpid(pid, 0)
        assert os.path.exists(path)
    assert not os.path.exists(path)  # the parent's way out removes it


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_modules_load_is_one_line(signum):
    # what `python -m pyprof.prof` does first (common.one_blas_thread_if_run); a signal during the imports that
    # follow was a KeyboardInterrupt traceback (SIGINT) or a death by the signal (exit -15 in Python's terms)
    code = ("import os, signal; from pyprof import cleanup; cleanup.while_loading('pyprof prof'); "
            f"os.kill(os.getpid(), {int(signum)}); import time; time.sleep(30)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                       timeout=60)
    assert p.returncode == 128 + signum
    assert p.stderr.decode() == f"pyprof prof: interrupted ({signal.Signals(signum).name})\n"


def test_in_a_command_a_signal_after_the_work_is_noted_not_raised():
    # bench/signals.py saw parse exit -2 (a KeyboardInterrupt as the interpreter ended) with its output complete:
    # in a command's process (while_loading ran) the handlers stay after the command, noting a late signal
    cleanup.while_loading("pyprof parse")
    try:
        with cleanup.handling_signals():
            assert signal.getsignal(signal.SIGTERM) is signal.getsignal(signal.SIGINT) is cleanup._on_signal
        os.kill(os.getpid(), signal.SIGTERM)  # (delivered to this thread before kill returns; its handler runs here)
        assert cleanup.interrupted() == signal.SIGTERM
        assert signal.getsignal(signal.SIGTERM) is cleanup._on_signal
    finally:
        for signum in cleanup.SIGNALS:
            signal.signal(signum, cleanup._default(signum))
        cleanup._state.owner_pid, cleanup._state.received = 0, None


class _SignalledWhileFreed:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        sum(range(100))  # the handler runs here, in the finalizer, where Python can only print what it raises


def test_an_interruption_swallowed_by_a_finalizer_is_raised_again(capfd):
    # bench/signals.py saw prof run on to exit 0 after SIGTERM, with "Exception ignored ... Interrupted: 15" on
    # stderr: the handler had raised inside a finalizer
    with pytest.raises(cleanup.Interrupted) as raised:
        with cleanup.handling_signals():
            _SignalledWhileFreed()  # freed at once
            for _ in range(1000):
                time.sleep(0.001)  # the signal, sent again, raises here
    assert raised.value.signum == signal.SIGTERM
    assert "Exception ignored" not in capfd.readouterr().err
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # (not a command's process: given back)


def test_parse_jobs_pool_stops_at_once(tmp_path):
    # parse -j 2 on two exports: a pool of two workers, each parsing one into the parent's working folder; SIGTERM
    # to the parent alone stops them at once (a pool waits for its tasks by itself), and nothing is left
    out, tmpdir = _folders(tmp_path)
    other = DATA / "nsys" / "emit_nvtx" / "resnet.sqlite.xz"
    p = _start(["pyprof.parse", "-j", "2", str(EXPORT), str(other), "-o", "r.dict"], out, tmpdir, "parse-job")
    _paused(p, "parse-job")
    workers = _children(p.pid)
    assert workers
    assert sorted(f.name[:13] for f in tmpdir.iterdir()) == ["pyprof-export", "pyprof-export", "pyprof-parse-"]
    p.send_signal(signal.SIGTERM)
    out_, err = p.communicate(timeout=60)
    assert p.returncode == 143
    said = [line for line in err.decode().splitlines() if line != "pyprof: paused at parse-job"]  # (the other's)
    assert said == ["pyprof parse: interrupted (SIGTERM)"]
    assert not any(map(_alive, workers))
    assert list(out.iterdir()) == [] and list(tmpdir.iterdir()) == []


def test_a_signal_during_a_rename_waits_for_its_end(tmp_path, monkeypatch):
    # the rename and forgetting the temporary are one step: cut between them, the way out would remove the
    # output (or miss the temporary); the signal raises once both are done
    real_replace = os.replace

    def replace_signalled(src, dst):
        os.kill(os.getpid(), signal.SIGTERM)
        sum(range(100))  # (the handler runs here: noted, not raised)
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace_signalled)
    with pytest.raises(cleanup.Interrupted):
        with cleanup.handling_signals():
            fd, path = cleanup.temp_file(".pyprof-", folder=str(tmp_path))
            os.close(fd)
            cleanup.rename_into_place(path, str(tmp_path / "out.dict"))
    assert [f.name for f in tmp_path.iterdir()] == ["out.dict"]
    assert path not in cleanup._state.owned
