"""The `pyprof` console command fronts the stages: same behaviour as `python -m pyprof.STAGE`."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pyprof

LENET = Path(__file__).resolve().parent / "data" / "nsys" / "pyprof" / "lenet.sqlite.xz"


@pytest.fixture(scope="module")
def pyprof_cmd():
    exe = shutil.which("pyprof")
    assert exe, "the pyprof console command is not installed (pip install -e .)"
    return exe


def test_version_and_usage(pyprof_cmd):
    out = subprocess.run([pyprof_cmd, "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == f"pyprof {pyprof.__version__}"
    out = subprocess.run([pyprof_cmd], capture_output=True, text=True)
    assert out.returncode == 2 and "usage: pyprof" in out.stdout
    out = subprocess.run([pyprof_cmd, "frobnicate"], capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.startswith("pyprof: unknown command 'frobnicate'") and not out.stdout


def test_console_command_equals_python_m(pyprof_cmd, tmp_path):
    via_cmd = subprocess.run([pyprof_cmd, "parse", str(LENET)], capture_output=True)
    via_m = subprocess.run([sys.executable, "-m", "pyprof.parse", str(LENET)], capture_output=True)
    assert via_cmd.returncode == via_m.returncode == 0
    assert via_cmd.stdout == via_m.stdout
    lines = via_cmd.stdout.splitlines()
    records = [x for x in lines[1:-1] if not x.startswith(b'{"pyprof_side":')]
    assert len(records) == 124 and lines[-1] == b'{"pyprof_end":true,"schema":4,"records":124}'  # 124 kernels
    table = subprocess.run([pyprof_cmd, "prof", "--csv", "-"], input=via_cmd.stdout, capture_output=True)
    assert table.returncode == 0 and table.stdout.count(b"\n") == 125  # header + one row per record


def test_bad_input_one_line_nothing_on_stdout(pyprof_cmd, tmp_path):
    bad = tmp_path / "notes.sqlite"
    bad.write_text("not a profile\n")
    out = subprocess.run([pyprof_cmd, "parse", str(bad)], capture_output=True, text=True)
    assert out.returncode == 1 and not out.stdout
    assert out.stderr.count("\n") == 1 and str(bad) in out.stderr


@pytest.mark.parametrize("stage,extra", [("parse", []), ("prof", []), ("report", ["-o", "out.html"])])
def test_usage_and_messages_name_the_console_command_however_started(pyprof_cmd, tmp_path, stage, extra):
    # Users type `pyprof STAGE`: the help and the one-line messages name that, also under `python -m`, so that a
    # message shows the command to run again.
    missing = str(tmp_path / "missing.dict")
    for argv in ([pyprof_cmd, stage], [sys.executable, "-m", f"pyprof.{stage}"]):
        h = subprocess.run(argv + ["-h"], capture_output=True, text=True, cwd=tmp_path)
        assert h.returncode == 0 and h.stdout.startswith(f"usage: pyprof {stage} [-h]"), argv
        assert "python -m pyprof" not in h.stdout and "pyprof." + stage + " " not in h.stdout
        e = subprocess.run(argv + extra + [missing], capture_output=True, text=True, cwd=tmp_path)
        assert e.returncode == 1 and not e.stdout, (argv, e.stderr)
        assert e.stderr == f"pyprof {stage}: error: {missing}: cannot open: No such file or directory\n", argv
