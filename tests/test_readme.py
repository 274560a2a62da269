"""The README's two commands stay true: the main job runs and prints its table; CI runs the test command."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _command(section: str) -> str:
    body = README.split(f"## {section}", 1)[1].split("\n## ", 1)[0]
    (line,) = [l.strip() for l in body.splitlines() if l.startswith("    pip install")]
    return line


def test_main_job_runs_on_the_shipped_profile(tmp_path):
    command = _command("Try it")
    assert command.startswith("pip install . && ")
    job = command.removeprefix("pip install . && ")  # the package is installed already where tests run
    assert shutil.which("pyprof"), "the pyprof console command is not installed"
    # Run from a copy of the paths the job names, so that its output file lands in tmp_path.
    shutil.copytree(ROOT / "examples" / "profiles", tmp_path / "examples" / "profiles")
    run = subprocess.run(job, shell=True, cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].split() == ["Op", "Count", "Time(ms)", "Time%", "Comm%", "FLOPs", "TFLOP/s", "Roofline%",
                                 "TC%"]
    assert len(lines) == 16 and max(map(len, lines)) <= 150
    keys = [re.split(r"\s{2,}", l)[0] for l in lines[1:]]
    assert "linear" in keys and "linear (bprop)" in keys and "scaled_dot_product_attention (bprop)" in keys
    assert (tmp_path / "transformer.dict").stat().st_size > 0


def test_ci_runs_the_readme_test_command():
    command = _command("Run the tests")
    ci = (ROOT / ".ci" / "run").read_text()
    install_torch, rest = command.split(" && ", 1)
    assert install_torch == "pip install torch==2.13.0" and "pip install -q torch==2.13.0" in ci
    assert rest.replace("pip install -e", "pip install -q -e") in ci
