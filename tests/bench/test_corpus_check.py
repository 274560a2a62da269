"""bench/corpus_check.py on committed captures, a file that is not a profile and a counts.json beside them:
records match its own counts, the non-profile is an expected refusal, and an HTA idle % far from the
overview's is reported as a disagreement."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


def test_counts_refusals_and_hta_disagreement(tmp_path):
    shutil.copy(DATA / "nsys" / "pyprof" / "lenet.sqlite.xz", tmp_path)
    shutil.copy(DATA / "kineto" / "lenet.pt.trace.json.gz", tmp_path)
    (tmp_path / "notes.txt").write_text("not a profile\n")
    (tmp_path / "README.md").write_text("skipped\n")
    # idle is a share in 0..100: -50 can never be within 3 points of the overview's
    hta = {"include_last_false": {"0": -50.0}, "include_last_true": {"0": -50.0}}
    (tmp_path / "counts.json").write_text(json.dumps({"lenet.pt.trace.json.gz": {"hta": hta}}))
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "corpus_check.py"), str(tmp_path)],
                       capture_output=True, text=True, cwd=tmp_path)
    lines = {line.split()[0]: line for line in p.stdout.splitlines() if line and not line.startswith(" ")}
    assert "README.md" not in lines and "counts.json" not in lines, p.stdout
    for name in ("lenet.sqlite.xz", "lenet.pt.trace.json.gz"):
        assert "exit 0/0/0  tb no" in lines[name], p.stdout
        counts = re.findall(r"(kernel|memcpy|memset) (\d+)/(\d+)", lines[name])
        assert len(counts) == 3 and all(got == want for _, got, want in counts), lines[name]
        assert int(counts[0][1]) > 0, lines[name]
    assert "vs HTA -50.0" in lines["lenet.pt.trace.json.gz"] and "FAIL" in lines["lenet.pt.trace.json.gz"]
    assert "not a profile (neither SQLite nor JSON): refused:" in lines["notes.txt"], p.stdout
    assert "FAIL" not in lines["notes.txt"] and "FAIL" not in lines["lenet.sqlite.xz"], p.stdout
    assert "3 files; 2 without failure (1 of them non-profiles refused as expected); failures by class: " \
           "HTA disagreement 1" in p.stdout, p.stdout
    assert p.returncode == 1
