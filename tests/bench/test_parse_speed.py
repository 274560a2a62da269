"""bench/parse_speed.py on a real capture: the measurements read the same export, so their counts agree with each
other and with sqlite3 (timings are the bench's business, never asserted here)."""
from __future__ import annotations

import lzma
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

from pyprof.parse.write import native

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = ROOT / "tests" / "data" / "nsys" / "pyprof" / "lenet.sqlite.xz"


def test_raw_parse_and_floor_count_the_same_activities(tmp_path):
    db = tmp_path / "lenet.sqlite"
    with lzma.open(CAPTURE) as src, open(db, "wb") as dst:
        dst.write(src.read())
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "parse_speed.py"), str(db), "--floor", "--runs", "1"],
                         capture_output=True, text=True, check=True, cwd=tmp_path).stdout
    con = sqlite3.connect(db)
    tables = {t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    activities = sum(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in
                     ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
                     if t in tables)
    con.close()
    assert activities > 0
    python = re.search(rf"run 1: raw sqlite3 scan .*Python \d+\.\d+ s = \d+\.\d+x \(CPU \d+\.\d+ s\), peak (\d+) MB "
                       rf"\((\d+)\) \({activities} records\)", out)
    assert python, out
    # the processes' summed PSS, sampled, is at most their summed peak RSS (the kernel's own counts, PSS <= RSS)
    assert 0 < int(python.group(1)) <= int(python.group(2)), out
    assert re.search(rf"design floor: .* {activities} activities \(.*\); ratio floor/raw \d+\.\d+x", out), out
    if native._core is not None:  # the compiled core takes a pyprof capture: both paths, side by side
        assert re.search(r"; C core \d+\.\d+ s = \d+\.\d+x \(CPU \d+\.\d+ s\), peak \d+ MB \(\d+\); Python ", out), out
