"""Issue 40, item 1: a profile names the files whose "source lines" the lines view shows; it must not choose
what pyprof reads. Reproducers 06-10 of ../shared/corpus/fuzz-repros-2026-12 (read in place), then the
--source-root option of prof, report and run: source text comes only from .py files under the folders the
user named (default: the current one)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

import tiny_inputs as tiny
from robust_helpers import CORPUS, ROOT, bounded, keeps_promise, run

from bench.fuzz.registry import Command

REPROS = CORPUS / "fuzz-repros-2026-12"
NOTE = "Source text not shown for 1 line"


def _repro(name: str):
    path = REPROS / name
    assert path.is_file(), f"reproducer missing: {path}"
    return path


def prof_lines(path, *extra) -> Command:
    return Command("prof", ["-v", "--view", "lines", *extra, str(path)], (str(path),), stdout_kind="text")


def report(path, *extra) -> Command:
    return Command("report", [str(path), "-o", "out.html", *extra], (str(path),), stdout_kind=None,
                   output="out.html", output_kind="html")


@pytest.fixture
def canary(monkeypatch):
    """A value set in the environment the commands start with (a process's /proc/self/environ is the
    environment it was started with: the commands run as processes)."""
    value = f"canary-{uuid.uuid4().hex}"
    monkeypatch.setenv("SECRET_TOKEN", value)
    seen = subprocess.run([sys.executable, "-c", "import sys; sys.stdout.buffer.write(open('/proc/self/environ',"
                           "'rb').read())"], capture_output=True, check=True).stdout
    assert f"SECRET_TOKEN={value}".encode() in seen  # what the reproducers would have put in the page
    return value


@pytest.mark.parametrize("name", ["06-infoleak-report-callsite-environ.dict", "07-infoleak-report-trace-environ.json"])
def test_06_07_the_environment_is_not_in_the_page(shared, case, canary, name):
    v = bounded(report(_repro(name)), case, 60)
    keeps_promise(v, must_succeed=True)
    page = (case / "work" / "out.html").read_text("utf-8")
    assert canary not in page and canary not in v.stderr
    assert NOTE in page  # the one note says the line's text was not shown, and why


def test_06_the_environment_is_not_in_prof_output(shared, case, canary):
    v = bounded(Command("prof", ["-v", "--view", "all", str(_repro("06-infoleak-report-callsite-environ.dict"))],
                        (), stdout_kind="text", must_succeed=True), case, 60)
    keeps_promise(v, must_succeed=True)
    assert canary.encode() not in v.stdout and canary not in v.stderr
    assert NOTE in v.stderr


def test_08_dev_zero_is_not_read(shared, case):
    # before: read /dev/zero until MemoryError (19 s at 1.9 GB under ulimit -v 2000000); the harness caps the
    # address space at 2 GiB, so a regression fails here rather than taking the machine's memory
    v = bounded(prof_lines(_repro("08-memory-prof-callsite-devzero.dict")), case, 60)
    keeps_promise(v, must_succeed=True)
    assert v.cpu_s < 10, v.why


def _blocks(cmd: list[str], cwd) -> subprocess.CompletedProcess:
    """Run ``cmd`` in ``cwd``; a FIFO opened for reading with no writer would block it: killed after 60 s."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, timeout=60)


@pytest.mark.parametrize("stage", ["prof", "report"])
def test_09_a_fifo_named_by_the_profile_does_not_block(shared, tmp_path, stage):
    os.mkfifo(tmp_path / "fifo")  # 09's call site: fifo:1, relative, under the current folder
    path = str(_repro("09-hang-prof-callsite-fifo.dict"))
    argv = ["--view", "lines", path] if stage == "prof" else [path, "-o", "r.html"]
    done = _blocks([sys.executable, "-m", f"pyprof.{stage}", *argv], tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == (["fifo"] if stage == "prof" else ["fifo", "r.html"])


def test_a_fifo_with_a_python_name_under_a_root_does_not_block(tmp_path):
    # past the .py check: opened without blocking (O_NONBLOCK), then refused as no regular file
    os.mkfifo(tmp_path / "train.py")
    records = tiny.records(tmp_path / "r.dict", tiny.record(callsite="train.py:1"))
    done = _blocks([sys.executable, "-m", "pyprof.prof", "-v", "--view", "lines", str(records)], tmp_path)
    assert done.returncode == 0, done.stderr
    assert b"1 in a file that is not a regular file" in done.stderr


@pytest.mark.parametrize("stage", ["prof", "report"])
def test_10_a_nul_in_the_path_is_no_traceback(shared, case, stage):
    path = _repro("10-traceback-report-callsite-nul.dict")
    v = run(prof_lines(path) if stage == "prof" else report(path), case)
    keeps_promise(v, must_succeed=True)
    assert "Traceback" not in v.stderr


# -- --source-root ------------------------------------------------------------------------------------------


@pytest.fixture
def project(case):
    """``case/src/train.py``, whose line 7 is ``y = net(x)``, and records naming it by a capture machine's path."""
    (case / "src").mkdir()
    (case / "src" / "train.py").write_text("\n" * 6 + "    y = net(x)\n")
    records = tiny.records(case / "in" / "r.dict", tiny.record(callsite="/home/u/proj/train.py:7"))
    return case / "src", records


def test_prof_shows_source_under_a_root_it_was_given(project, case):
    src, records = project
    v = run(prof_lines(records, "--jsonl", "--source-root", str(src)), case)
    keeps_promise(v, must_succeed=True)
    (row,) = [json.loads(line) for line in v.stdout.decode().splitlines()]
    assert row["source"] == "y = net(x)" and "Source text not shown" not in v.stderr


def test_prof_shows_no_source_outside_the_default_root(project, case):
    # the command runs in case/work: src/ is not under it, and train.py is not there
    _, records = project
    v = run(prof_lines(records, "--jsonl"), case)
    keeps_promise(v, must_succeed=True)
    (row,) = [json.loads(line) for line in v.stdout.decode().splitlines()]
    assert row["source"] is None
    assert "lines: Source text not shown for 1 line: 1 outside the source roots" in v.stderr
    assert v.stderr.count("Source text not shown") == 1


def test_report_shows_source_under_a_root_it_was_given(project, case):
    src, records = project
    keeps_promise(run(report(records, "--source-root", str(src)), case), must_succeed=True)
    page = (case / "work" / "out.html").read_text("utf-8")
    assert "y = net(x)" in page and "Source text not shown" not in page
    keeps_promise(run(report(records), case), must_succeed=True)
    page = (case / "work" / "out.html").read_text("utf-8")
    assert "y = net(x)" not in page and NOTE in page


@pytest.mark.parametrize("stage", ["prof", "report"])
def test_a_root_that_is_no_folder_is_refused(project, case, stage):
    _, records = project
    cmd = prof_lines(records, "--source-root", "missing") if stage == "prof" else \
        report(records, "--source-root", "missing")
    v = run(Command(cmd.stage, cmd.argv, ("--source-root",), stdout_kind=None), case)
    assert v.rc == 2 and v.outcome == "refused", str(v)
    assert v.stderr.strip() == f"pyprof {stage}: error: --source-root 'missing': not a folder"


def test_prof_source_root_needs_a_view(project, case):
    _, records = project
    v = run(Command("prof", ["--source-root", ".", str(records)], ("--source-root",), stdout_kind=None), case)
    assert v.rc == 2 and "--source-root is where --view reads source text" in v.stderr


def test_run_passes_the_scripts_folder(tmp_path, monkeypatch):
    from pyprof.run.cli import _source_roots

    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "train.py").write_text("")
    monkeypatch.chdir(tmp_path)
    assert _source_roots(["python", "sub/train.py", "--epochs", "1"]) == [str(tmp_path), str(tmp_path / "sub")]
    assert _source_roots(["torchrun", "--nproc", "2", "sub/train.py"]) == [str(tmp_path), str(tmp_path / "sub")]
    assert _source_roots(["python", "-m", "sub.train"]) == [str(tmp_path)]  # no script file: the folder only
    assert _source_roots(["python", "missing.py"]) == [str(tmp_path)]
