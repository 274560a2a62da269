"""Inputs of one base name (``dirA/recs.dict``, ``dirB/recs.dict``) get names that tell them apart, the same in
prof's views (one pass, or the rank files summarised one a task), the report and the diff (which take report's
input handling): the shortest tail of the path that no other input's path ends with."""
from __future__ import annotations

import os
from contextlib import ExitStack
from pathlib import Path

import pytest

from pyprof.parse import parse_file
from pyprof.prof.aggregate import aggregate_files
from pyprof.prof.load.input_names import input_names
from pyprof.prof.ranks.rank_files import job_tables, summarize_files
from pyprof.prof.views import build
from pyprof.report.cli import records_sources

DIST = Path(__file__).resolve().parents[1] / "data" / "dist"


@pytest.mark.parametrize("paths, names", [
    (["a/recs.dict", "b/recs.dict", "c.dict"], ["a/recs.dict", "b/recs.dict", "c.dict"]),
    # one folder in common: the next one up tells them apart; b/r.d needs only its own folder
    (["/x/a/r.d", "/y/a/r.d", "/y/b/r.d"], ["x/a/r.d", "y/a/r.d", "b/r.d"]),
    # one file twice (one absolute path): numbered; stdin is named as the reader names it
    (["r.d", "./r.d", "-"], ["r.d", "r.d (2)", "<stdin>"]),
    (["/r.d", "/x/r.d"], [os.sep + "r.d", "x/r.d"]),  # nothing above the root: the whole path
])
def test_input_names(paths, names):
    assert input_names(paths) == names


@pytest.fixture(scope="module")
def same_base_name(tmp_path_factory) -> list[str]:
    """The DDP run's two per-rank traces parsed to dirA/recs.dict and dirB/recs.dict."""
    root = tmp_path_factory.mktemp("names")
    out = []
    for rank, folder in ((0, "dirA"), (1, "dirB")):
        (root / folder).mkdir()
        dst = root / folder / "recs.dict"
        with open(dst, "w", encoding="utf-8") as f:
            parse_file(str(DIST / f"ddp.pt.trace.rank{rank}.json.gz"), f)
        out.append(str(dst))
    return out


def _column(table, key: str) -> list:
    return [r[table.columns.index(key)] for r in table.rows]


def test_views_report_and_rank_files_tell_the_inputs_apart(same_base_name):
    want = ["dirA/recs.dict", "dirB/recs.dict"]
    agg = aggregate_files(same_base_name)
    (workers,) = build(agg, ["workers"])
    ranks, _stragglers = build(agg, ["ranks"])
    assert _column(workers, "worker") == want and _column(ranks, "worker") == want
    assert any(n.startswith("Kept the others waiting longest: dirA/recs.dict (rank 0)") for n in workers.notes)
    (summarised, *_), _coverage = job_tables(summarize_files(same_base_name))  # pyprof prof --view ranks -j N
    assert _column(summarised, "worker") == want
    with ExitStack() as stack:  # pyprof report and pyprof diff
        assert [s.name for s in records_sources(same_base_name, stack)] == want
