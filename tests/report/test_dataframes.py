"""pyprof.load: a profile as pandas DataFrames (notebooks), on every committed capture, with counts and times
recounted from the exports themselves and FLOPs from the model's arithmetic."""
from __future__ import annotations

import io
import lzma
import pathlib
import sqlite3
import sys

import pytest

import pyprof
from pyprof.common import UsageError
from pyprof.parse import parse_file

DATA = pathlib.Path(__file__).parents[1] / "data"
# speed/: the parse-speed exports (50k kernels each), for bench/parse_speed.py and the parse paths' byte comparison
CAPTURES = sorted(str(p.relative_to(DATA)) for p in DATA.rglob("*") if p.name.endswith((".sqlite.xz", ".json.gz"))
                  and p.parent.name != "speed")
# examples/transformer.py, two steps: 17 linear calls a step on 8 x 511 tokens (tests/parse/test_capture_paths.py)
TOKENS = 8 * 511
LINEAR_FLOPS = 2 * (4 * 2 * TOKENS * 1024 * (3072 + 1024 + 4096 + 4096) + 2 * TOKENS * 1024 * 32000)


def _recount(rel: str, tmp_path) -> tuple[int, int]:
    """(activities, summed duration in ns) of an Nsight Systems export, with sqlite3."""
    db = tmp_path / "x.sqlite"
    db.write_bytes(lzma.decompress((DATA / rel).read_bytes()))
    con = sqlite3.connect(db)
    n = ns = 0
    for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        if con.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (t,)).fetchone():
            a, b = con.execute(f"SELECT count(*), coalesce(sum(end - start), 0) FROM {t}").fetchone()
            n, ns = n + a, ns + b
    con.close()
    return n, ns


def test_an_export_loads_with_one_row_per_activity(tmp_path):
    rel = "nsys/pyprof/transformer.sqlite.xz"
    df = pyprof.load(str(DATA / rel))
    n, ns = _recount(rel, tmp_path)
    assert len(df) == n and df["dur_us"].sum() == pytest.approx(ns / 1e3, abs=0.01)
    assert int(df.loc[df["op"] == "linear", "flops"].sum()) == LINEAR_FLOPS
    assert {"fprop", "bprop"} <= set(df["dir"].unique()) <= {"fprop", "bprop", "na"}
    assert df["tc"].dtype == "boolean" and df.loc[df["op"] == "linear", "tc"].all()
    assert list(df.columns) == ["start_ms", "dur_us", "kernel", "op", "dir", "line", "layer", "flops", "bytes",
                                "tflops", "roofline_pct", "tc", "worker"]


def test_views_come_as_data_frames(tmp_path):
    rel = "nsys/pyprof/transformer.sqlite.xz"
    loaded = pyprof.load(str(DATA / rel), views=True)
    _n, ns = _recount(rel, tmp_path)
    assert {"overview", "operators", "lines", "layers", "recommendations"} <= set(loaded.views)
    assert loaded.views["lines"]["gpu_ms"].sum() == pytest.approx(ns / 1e6, abs=1e-3)
    ops = loaded.views["operators"].set_index("op")
    assert ops.loc["linear", "flops"] == LINEAR_FLOPS


@pytest.mark.parametrize("rel", CAPTURES)
def test_every_committed_capture_loads(rel):
    out = io.StringIO()
    parse_file(str(DATA / rel), out)
    records = sum(1 for x in out.getvalue().splitlines() if '"kind"' in x)
    df = pyprof.load(str(DATA / rel))
    assert len(df) == records > 0
    assert df["dur_us"].notna().all() and (df["dur_us"] >= 0).all()


def test_without_pandas_it_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(UsageError, match="pip install 'pyprof\\[notebook\\]'"):
        pyprof.load(str(DATA / "nsys/pyprof/lenet.sqlite.xz"))
