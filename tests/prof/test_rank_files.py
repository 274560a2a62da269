"""The ranks view of a job's rank files summarised one file a task (pyprof.prof.ranks.rank_files, rank_dask): the
same tables as one aggregate over all of them in this process, in worker processes and on a Dask local cluster;
on eight rank files made from the two-rank DDP run's traces (tests/data/dist: 2 ranks on 2 H200s), so that
their stragglers follow by arithmetic from the sources' own kernel starts.

Rank k is source k mod 2 (rank0, rank1), unshifted (bench/scale_ranks.py with --shift-us 0). A shift would make
the copies no job: the sources' NCCL kernels end within 20 us of each other on the two ranks and rank 0's last
all-reduce lasts 5.3 us, so rank 0's copy would end it before a copy shifted by a microsecond or more started,
and who waited would not be judged (views/collectives.py; the test below of ten-millisecond shifts). In the
sources rank 0 arrives last at every all-reduce, by at most 4.3 ms (docs/views.md); the copies of rank 0 (ranks
0, 2, 4, 6) start each collective at the same nanosecond, last, the first of them in rank order (rank 0) counted
as the one that arrived last, and the copies of rank 1 first: each collective's delay is its start on rank 0 -
its start on rank 1, read from the traces' text here, to the nanosecond.
"""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pytest

from pyprof.common import InputError, UsageError
from pyprof.parse import parse_file
from pyprof.prof.aggregate import aggregate_files
from pyprof.prof.cli import main
from pyprof.prof.ranks.rank_files import job_tables, summarize_files
from pyprof.prof.views import build

ROOT = Path(__file__).resolve().parents[2]
DIST = ROOT / "tests" / "data" / "dist"
SOURCES = [DIST / f"ddp.pt.trace.rank{r}.json.gz" for r in (0, 1)]
RANKS, SHIFT_US = 8, 0
sys.path.insert(0, str(ROOT / "bench"))
from scale_ranks import write_ranks  # noqa: E402


def _nccl(path: Path) -> tuple[dict[str, list[int]], int]:
    """The source's NCCL kernels: starts in ns (exact: the ts text as a decimal) by short name, in start order,
    and their durations summed in ns."""
    trace = json.loads(gzip.decompress(path.read_bytes()), parse_float=Decimal)
    starts: dict = defaultdict(list)
    dur = 0
    for e in trace["traceEvents"]:
        if e.get("cat") == "kernel" and e["name"].startswith("nccl"):
            starts[e["name"].split("(")[0]].append(int(e["ts"] * 1000))
            dur += int(e["dur"] * 1000)
    return {k: sorted(v) for k, v in starts.items()}, dur


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> list[Path]:
    return write_ranks(SOURCES, tmp_path_factory.mktemp("job"), RANKS, SHIFT_US)


def _plain(tables) -> list:
    return [(t.name, t.columns, t.rows, t.notes) for t in tables]


@pytest.fixture(scope="module")
def in_process(job, tmp_path_factory) -> list:
    """The ranks view of one aggregate over the job's records (each file parsed here, under its own name)."""
    folder = tmp_path_factory.mktemp("records")
    records = []
    for p in job:
        dst = folder / p.name
        with open(dst, "w", encoding="utf-8") as out:
            parse_file(str(p), out)
        records.append(str(dst))
    return _plain(build(aggregate_files(records), ["ranks"]))


def test_stragglers_are_the_sources_arithmetic(in_process):
    (_, cols, rows, _), (_, scols, srows, _) = in_process
    ranks = {r[0]: dict(zip(cols, r)) for r in rows}
    assert list(ranks) == [f"rank {k}" for k in range(RANKS)]  # named by the rewritten distributedInfo
    (s0, dur0), (s1, dur1) = _nccl(SOURCES[0]), _nccl(SOURCES[1])
    expected = {(name, n + 1): round((a - b) / 1e6, 4)
                for name in s0 for n, (a, b) in enumerate(zip(s0[name], s1[name]))}
    assert len(expected) == 11 and min(expected.values()) > 0  # the run's all-reduces, rank 0 last at each
    got = {(r[0], r[1]): r for r in srows}
    assert set(got) == set(expected)
    for key, delay_ms in expected.items():
        collective, n, last, delay, first = got[key]
        assert (last, first) == ("rank 0", "rank 1")
        assert delay == pytest.approx(delay_ms, abs=1e-4)
    assert ranks["rank 0"]["last_at"] == 11
    assert ranks["rank 0"]["caused_ms"] == pytest.approx(sum(expected.values()), abs=1e-3)
    assert all(ranks[f"rank {k}"]["last_at"] == 0 for k in range(1, RANKS))
    for k in range(RANKS):  # a copy's communication is its source's
        assert ranks[f"rank {k}"]["comm_ms"] == pytest.approx((dur0, dur1)[k % 2] / 1e6, abs=1e-4)


def test_ranks_ten_milliseconds_apart_are_not_judged(tmp_path):
    # rank 1 shifted 10 ms later: each all-reduce ends on rank 0 before rank 1 starts it, by the sources' own
    # times (rank 0's kernel ends at most 3.5 ms after rank 1's starts in the sources: 3184 + 269 us the most)
    shifted = write_ranks(SOURCES, tmp_path, 2, 10_000)
    (s0, _), (s1, _) = _nccl(SOURCES[0]), _nccl(SOURCES[1])
    ends0 = {name: [int(e) for e in v] for name, v in _nccl_ends(SOURCES[0]).items()}
    apart = sum(e < b + 10_000_000 for name in s1 for e, b in zip(ends0[name], s1[name]))
    assert apart == 11
    (ranks,), _ = job_tables(summarize_files([str(p) for p in shifted]))
    assert [r[ranks.columns.index("last_at")] for r in ranks.rows] == [None, None]
    (why,) = [n for n in ranks.notes if n.startswith("Cannot judge who waited for whom: ")]
    assert why.startswith(f"Cannot judge who waited for whom: at {apart} of the 11 matched collectives the ranks' "
                          "kernels do not overlap in time")


def _nccl_ends(path: Path) -> dict[str, list[int]]:
    """The source's NCCL kernels' ends in ns (ts + dur, exact), by short name, in start order."""
    trace = json.loads(gzip.decompress(path.read_bytes()), parse_float=Decimal)
    out: dict = defaultdict(list)
    for e in sorted((e for e in trace["traceEvents"] if e.get("cat") == "kernel" and e["name"].startswith("nccl")),
                    key=lambda e: e["ts"]):
        out[e["name"].split("(")[0]].append(int((e["ts"] + e["dur"]) * 1000))
    return out


def test_worker_processes_give_the_in_process_tables(job, in_process):
    paths = [str(p) for p in job]
    assert _plain(job_tables(summarize_files(paths, jobs=1))[0]) == in_process
    assert _plain(job_tables(summarize_files(paths, jobs=2))[0]) == in_process


def test_cli_dask_local_cluster_gives_the_same_output_as_one_process(job, tmp_path, capsys):
    pytest.importorskip("distributed", reason="the cluster extra (pip install pyprof[cluster]); CI installs it")
    paths = [str(p) for p in job]
    outputs = []
    for extra in (["-j", "1"], ["-j", "2"], ["--engine", "dask", "-j", "2", "--spill", str(tmp_path / "spill")]):
        assert main(["--view", "ranks", "--jsonl", *extra, *paths]) == 0
        outputs.append(capsys.readouterr())
    assert outputs[0].out and outputs[1] == outputs[0] and outputs[2] == outputs[0]  # stdout and stderr
    assert sorted(p.name for p in (tmp_path / "spill").iterdir()) == \
        [f"{k:06d}-rank{k:04d}.pt.trace.json.gz.parquet" for k in range(RANKS)]


def test_parquet_summary_reads_back_as_written(job, tmp_path):
    pytest.importorskip("pyarrow")
    from pyprof.prof.ranks.rank_parquet import read_summary, write_summary

    (summary,) = summarize_files([str(job[3])])
    write_summary(summary, str(tmp_path / "s.parquet"))
    back = read_summary(str(tmp_path / "s.parquet"))
    assert (back.input, back.coverage) == (summary.input, summary.coverage)
    for a, b in zip(back.ranks, summary.ranks, strict=True):
        assert a.comm_start_ns.tolist() == b.comm_start_ns.tolist()
        assert a.comm_end_ns.tolist() == b.comm_end_ns.tolist() and len(a.comm_end_ns) == len(a.comm_names) > 0
        arrays = {"comm_start_ns": None, "comm_end_ns": None}
        assert {**vars(a), **arrays} == {**vars(b), **arrays}
    assert summary.ranks[0].dist["rank"] == 3 and summary.ranks[0].comm_start_ns.dtype.name == "int64"
    # a layout-1 summary (no kernel ends: who waited could not be judged) is refused, naming the file
    import pyarrow.parquet as pq

    table = pq.read_table(str(tmp_path / "s.parquet"))
    meta = {**table.schema.metadata, b"pyprof.version": b"1"}
    pq.write_table(table.drop(["comm_end_ns"]).replace_schema_metadata(meta), str(tmp_path / "old.parquet"))
    with pytest.raises(InputError, match="layout 1, not this pyprof's"):
        read_summary(str(tmp_path / "old.parquet"))


def test_a_bad_rank_file_is_named_from_a_worker_process(job, tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("not a profile\n")
    with pytest.raises(InputError) as e:
        summarize_files([str(job[0]), str(bad)], jobs=2)
    assert e.value.path == str(bad)


def test_usage_errors(job, capsys, monkeypatch):
    paths = [str(p) for p in job[:2]]
    assert main(["--view", "overview", "--engine", "dask", *paths]) == 2
    assert main(["--view", "ranks", "--engine", "dask://127.0.0.1:1", *paths]) == 2  # no --spill
    assert main(["--view", "ranks", "--engine", "ray", "--spill", "x", *paths]) == 2
    monkeypatch.setitem(sys.modules, "distributed", None)  # dask not installed
    assert main(["--view", "ranks", "--engine", "dask", *paths]) == 2
    err = capsys.readouterr().err.strip().split("\n")
    assert len(err) == 4 and "pip install pyprof[cluster]" in err[-1]
    from pyprof.prof.ranks.rank_dask import summarize_files_dask

    with pytest.raises(UsageError):
        summarize_files_dask(paths)


def test_importing_pyprof_imports_no_dask():
    code = ("import sys, pyprof, pyprof.prof.cli, pyprof.prof.views, pyprof.prof.ranks.rank_files, pyprof.prof.ranks.rank_dask, "
            "pyprof.report.cli; print(sorted(m for m in ('dask', 'distributed', 'pyarrow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"
