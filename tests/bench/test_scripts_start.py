"""Every bench script starts (``-h``): they import pyprof's modules by name, and a module moved or renamed must
not leave a benchmark that fails only when someone runs it."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(p.name for p in (ROOT / "bench").glob("*.py"))


def test_there_are_scripts_to_check():
    assert {"output_manifest.py", "parse_speed.py", "prof_speed.py", "record_size.py"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_script_starts(script):
    p = subprocess.run([sys.executable, str(ROOT / "bench" / script), "-h"], capture_output=True, text=True,
                       cwd=ROOT, timeout=120)
    assert p.returncode == 0 and "usage" in p.stdout.lower(), p.stderr[-800:]
