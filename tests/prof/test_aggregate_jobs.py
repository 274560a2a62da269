"""The views' pass spread over worker processes (pyprof.prof.aggregate_jobs) gives what one pass gives: every
view's table and the report's table of every activity, on real captures cut into chunks of a few records (so
that op calls run across many seams), and the one pass takes over for what a worker cannot judge alone."""
from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from pyprof.common import InputError
from pyprof.parse import parse_file
from pyprof.prof import aggregate_jobs
from pyprof.prof.aggregate import aggregate, numbered_file
from pyprof.prof.aggregate_jobs import Fallback, aggregate_file_jobs
from pyprof.prof.views import build
from pyprof.report.activity_table import ActivityTable
from pyprof.report.cli import run

DATA = pathlib.Path(__file__).parents[1] / "data"
CAPTURES = ["nsys/pyprof/transformer.sqlite.xz", "nsys/emit_nvtx/resnet.sqlite.xz",
            "kineto/resnet.pt.trace.json.gz", "nsys/pyprof/checkpoint.sqlite.xz"]


@pytest.fixture(scope="module")
def records_file(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("jobs")

    def get(rel: str) -> pathlib.Path:
        out = tmp / (rel.replace("/", "_") + ".dict")
        if not out.exists():
            with open(out, "w") as f:
                parse_file(str(DATA / rel), f)
        return out
    return get


def _one_pass(path):
    acts = ActivityTable()
    # as report and prof read a file: its records and its side lines (host time, memory)
    agg = aggregate([("x", numbered_file(str(path), str(path)))], observe=acts)
    return agg, acts


def _same_activities(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        va = np.asarray(a[k], dtype=object) if isinstance(a[k], list) else a[k]
        vb = np.asarray(b[k], dtype=object) if isinstance(b[k], list) else b[k]
        assert np.array_equal(va, vb) if isinstance(va, np.ndarray) else va == vb, k


@pytest.mark.parametrize("rel", CAPTURES)
def test_every_view_as_one_pass_gives_it(records_file, rel, monkeypatch):
    path = records_file(rel)
    size = path.stat().st_size
    monkeypatch.setattr(aggregate_jobs, "CHUNK_BYTES", 20_000)  # a few records a chunk: seams everywhere
    assert size // 20_000 >= 10
    one, one_acts = _one_pass(path)
    agg, acts = aggregate_file_jobs(str(path), "x", 3, make_observer=ActivityTable,
                                    merge_observer=ActivityTable.merge)
    assert list(agg.workers) == list(one.workers)
    assert agg.coverage == one.coverage
    for a, b in zip(build(one), build(agg), strict=True):
        assert a.to_dict() == b.to_dict(), a.name
    _same_activities(one_acts.to_dict(), acts.to_dict())
    calls = {r[0]: r[1] for r in build(agg, ["operators"])[0].rows}
    assert sum(calls.values()) > 0


def _write(path: pathlib.Path, lines: list[bytes]) -> None:
    path.write_bytes(b"".join(x + b"\n" for x in lines))


def test_what_a_worker_cannot_judge_goes_to_the_one_pass(records_file, tmp_path, monkeypatch):
    monkeypatch.setattr(aggregate_jobs, "CHUNK_BYTES", 20_000)
    lines = records_file(CAPTURES[0]).read_bytes().splitlines()
    assert lines[0].startswith(b'{"pyprof_header"') and lines[-1].startswith(b'{"pyprof_end"')
    cases = {
        "no header": lines[1:],
        "cut short": lines[:-1],
        "two inputs joined": lines + lines,
        "a bad line": lines[:100] + [b'{"kind": "kernel", "kDuration": "long"}'] + lines[100:],
    }
    for name, body in cases.items():
        p = tmp_path / f"{name}.dict"
        _write(p, body)
        with pytest.raises(Fallback):
            aggregate_file_jobs(str(p), "x", 2, make_observer=ActivityTable, merge_observer=ActivityTable.merge)


def test_report_with_workers_equals_the_one_process_report(records_file, tmp_path, monkeypatch):
    path = records_file(CAPTURES[0])
    monkeypatch.setattr(aggregate_jobs, "CHUNK_BYTES", 50_000)
    monkeypatch.setattr(aggregate_jobs, "MIN_BYTES", 0)
    pages = []
    for jobs in (1, 2):
        out = tmp_path / f"r{jobs}.html"
        run([str(path)], str(out), jobs=jobs)
        text = out.read_text()
        data = json.loads(text.split('id="pyprof-data">', 1)[1].split("</script>", 1)[0])
        data["meta"].pop("generated")
        pages.append(data)
    assert pages[0] == pages[1]


def test_a_bad_line_is_named_by_the_one_pass(tmp_path, records_file, monkeypatch):
    monkeypatch.setattr(aggregate_jobs, "CHUNK_BYTES", 20_000)
    monkeypatch.setattr(aggregate_jobs, "MIN_BYTES", 0)
    lines = records_file(CAPTURES[0]).read_bytes().splitlines()
    p = tmp_path / "bad.dict"
    _write(p, lines[:300] + [b'{"kind": "kernel", "kDuration": "long"}'] + lines[300:])
    with pytest.raises(InputError) as e:
        run([str(p)], str(tmp_path / "r.html"), jobs=2)
    assert "line 301" in str(e.value)  # after 300 lines: the header and 299 records


def test_prof_views_with_workers_print_what_one_process_prints(records_file, monkeypatch, capfd):
    from pyprof.prof.cli import main

    path = str(records_file(CAPTURES[1]))
    monkeypatch.setattr(aggregate_jobs, "CHUNK_BYTES", 20_000)
    monkeypatch.setattr(aggregate_jobs, "MIN_BYTES", 0)
    seen = []
    real = aggregate_jobs.aggregate_file_jobs
    monkeypatch.setattr(aggregate_jobs, "aggregate_file_jobs", lambda *a, **k: seen.append(a[2]) or real(*a, **k))
    outs = []
    for jobs in ("1", "3"):
        assert main(["--view", "all", "--jsonl", "-q", "-j", jobs, path]) == 0
        outs.append(capfd.readouterr().out)
    assert seen == [3]  # -j 1 is one process; -j 3 went through the workers
    assert outs[0] == outs[1] and outs[0].count("\n") > 50


def test_a_file_is_cut_into_a_chunk_per_worker_and_no_worker_waits_for_none(records_file, monkeypatch):
    """Chunks of size / jobs, within [MIN_CHUNK_BYTES, CHUNK_BYTES]; no more workers forked than there are chunks."""
    mb = 1 << 20
    assert aggregate_jobs.MIN_CHUNK_BYTES == 16 * mb and aggregate_jobs.CHUNK_BYTES == 96 * mb
    assert aggregate_jobs.chunk_bytes(171 * mb, 2) == 171 * mb // 2  # 85.5 MB a worker
    assert aggregate_jobs.chunk_bytes(171 * mb + 1, 2) == 171 * mb // 2 + 1  # rounded up: no third chunk of a byte
    assert aggregate_jobs.chunk_bytes(171 * mb, 16) == 16 * mb  # 10.7 MB a worker: at least 16 MB
    assert aggregate_jobs.chunk_bytes(2900 * mb, 16) == 96 * mb  # 181 MB a worker: at most 96 MB
    path = records_file(CAPTURES[0])
    size = path.stat().st_size
    monkeypatch.setattr(aggregate_jobs, "MIN_CHUNK_BYTES", size // 2 + 1)  # two chunks: the first ends past half
    monkeypatch.setattr(aggregate_jobs, "MIN_BYTES", 0)
    started = []
    real = aggregate_jobs.forked.start
    monkeypatch.setattr(aggregate_jobs.forked, "start", lambda *a, **k: started.append(1) or real(*a, **k))
    agg, _ = aggregate_file_jobs(str(path), "x", 5)
    one, _ = _one_pass(path)
    assert len(started) == 2
    assert agg.coverage == one.coverage


def test_lines_around_an_offset_are_those_of_a_plain_split(tmp_path):
    """A worker reads the lines before and after its chunk in 1 MB blocks: on lines longer than a block (1.5 MB),
    shorter ones and empty ones, at every line's start, the lines are those of splitting the whole file."""
    import os

    lines = [b"a" * 1_500_000, b"", b'{"k": 1}', b"b" * 3_000_000, b'{"k": 2}', b"", b"c" * 1_200_000, b'{"k": 3}']
    data = b"\n".join(lines) + b"\n"
    path = tmp_path / "long.jsonl"
    path.write_bytes(data)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    fd = os.open(path, os.O_RDONLY)
    try:
        for k, pos in enumerate(starts[:-1]):
            for n in (1, 2, 5):
                assert aggregate_jobs._lines_before(fd, pos, n) == lines[max(0, k - n):k]
                assert aggregate_jobs._lines_after(fd, pos, n, len(data)) == lines[k:k + n]
    finally:
        os.close(fd)
