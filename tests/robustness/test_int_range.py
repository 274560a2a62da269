"""Issue 40 item 6d: parse never writes an integer that prof refuses (record.INT_MIN to INT_MAX, 64-bit). An
export row whose duration would pass 64 bits is left out and counted, as a row whose end is before its start; a
trace's id or count past 64 bits is dropped as one of the wrong type; an emit_nvtx sequence number past 64 bits
is no sequence number. Each case: parse | prof succeeds, on both of parse's paths where an export has two. The
two reproducers are read in place (../shared/corpus/fuzz-repros-2026-12, README there)."""
from __future__ import annotations

import io
import json
import sqlite3

import pytest

import tiny_inputs as tiny

from pyprof.parse import parse_file
from pyprof.parse.write.native import PURE_PYTHON_ENV, enabled
from pyprof.prof.cli import main as prof_main

REPROS = "fuzz-repros-2026-12"
LEFT_OUT = ("kernel rows with a start, end or id that is not an integer (or ends before it starts, or 2^63 ns or "
            "more after it), left out")
PATHS = ["core", "python"] if enabled() else ["python"]


def _parse(path, monkeypatch, way: str = "python") -> tuple[list[dict], dict]:
    monkeypatch.setenv(PURE_PYTHON_ENV, "1" if way == "python" else "0")
    out = io.StringIO()
    stats = parse_file(str(path), out)
    return [json.loads(line) for line in out.getvalue().splitlines()], stats.oddities


def _prof_takes(lines: list[dict], tmp_path, capsys) -> None:
    """prof reads parse's output with every column (the reproducers' command) and accepts it."""
    path = tmp_path / "out.dict"
    path.write_text("".join(json.dumps(d) + "\n" for d in lines), encoding="utf-8")
    rc = prof_main(["-q", "--csv", "-c", "all", str(path)])
    err = capsys.readouterr().err
    assert rc == 0, err


def _records(lines: list[dict]) -> list[dict]:
    return [d for d in lines if "kind" in d]


def test_repro_01_kineto_bytes_below_64_bits(shared, monkeypatch, tmp_path, capsys):
    lines, _ = _parse(shared / "corpus" / REPROS / "01-chain-parse-wrong-type.json", monkeypatch)
    records = _records(lines)
    # the trace has 7 GPU events (6 kernels, 1 memset: a recount with json of its traceEvents); the memset's
    # args.bytes is -2**63 - 1, dropped as a value of the wrong type is: the record stays, without bytes
    assert len(records) == 7
    memsets = [d for d in records if d["kind"] == "memset"]
    assert len(memsets) == 1 and memsets[0].get("bytes") is None
    _prof_takes(lines, tmp_path, capsys)


@pytest.mark.parametrize("way", PATHS)
def test_repro_02_nsys_start_at_minus_2_63(shared, monkeypatch, tmp_path, capsys, way):
    path = shared / "corpus" / REPROS / "02-chain-parse-ts-extreme.sqlite"
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    # the export's one kernel starts at -2**63 and ends at a positive time: end - start passes 2**63 - 1
    (rows,) = db.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE start = -9223372036854775808 "
                         "AND end > 0").fetchone()
    db.close()
    assert rows == 1
    lines, oddities = _parse(path, monkeypatch, way)
    assert _records(lines) == [] and oddities == {LEFT_OUT: 1}
    _prof_takes(lines, tmp_path, capsys)


@pytest.mark.parametrize("way", PATHS)
def test_nsys_rows_whose_duration_passes_64_bits_are_left_out(case, monkeypatch, tmp_path, capsys, way):
    path = tiny.nsys(case / "in" / "t.sqlite")
    db = sqlite3.connect(path)
    # a second kernel of the same launch, lasting 2**63 ns (one more than a record holds); and the NVTX range
    # around the launch with a start that makes its duration pass 64 bits too
    db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT start, end, deviceId, contextId, streamId, "
               "correlationId, globalPid, demangledName, shortName, mangledName, gridX, gridY, gridZ, blockX, "
               "blockY, blockZ, registersPerThread, staticSharedMemory, dynamicSharedMemory, graphNodeId "
               "FROM CUPTI_ACTIVITY_KIND_KERNEL")
    db.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = -1, end = 9223372036854775807 WHERE rowid = 2")
    db.commit()
    db.close()
    lines, oddities = _parse(path, monkeypatch, way)
    records = _records(lines)
    assert [d["kDuration"] for d in records] == [500]  # the tiny export's own kernel, 2000 to 2500 ns
    assert oddities == {LEFT_OUT: 1}
    _prof_takes(lines, tmp_path, capsys)


@pytest.mark.parametrize("way", PATHS)
def test_a_range_whose_duration_passes_64_bits_is_left_out(case, monkeypatch, tmp_path, capsys, way):
    path = tiny.nsys(case / "in" / "t.sqlite")
    db = sqlite3.connect(path)
    db.execute("UPDATE NVTX_EVENTS SET start = -9223372036854775807")  # ends at 1200: 2**63 + 1199 ns long
    db.commit()
    db.close()
    lines, oddities = _parse(path, monkeypatch, way)
    records = _records(lines)
    assert len(records) == 1 and records[0]["op"] == []  # the range is gone, its op with it
    assert oddities == {LEFT_OUT.replace("kernel", "NVTX range"): 1}
    _prof_takes(lines, tmp_path, capsys)


@pytest.mark.parametrize("way", PATHS)
@pytest.mark.parametrize("seq", ["100000000000000000000", "-100000000000000000000", "9223372036854775808"])
def test_an_emit_nvtx_sequence_number_past_64_bits_is_none(case, monkeypatch, tmp_path, capsys, way, seq):
    path = tiny.nsys(case / "in" / "t.sqlite", marker=f"aten::mm, seq = {seq}, sizes = [[4, 8], [8, 2]]")
    lines, _ = _parse(path, monkeypatch, way)
    (record,) = _records(lines)
    assert record["op"] == ["mm"] and record.get("seqId", []) == []
    _prof_takes(lines, tmp_path, capsys)


def test_an_emit_nvtx_sequence_number_of_64_bits_is_kept(case, monkeypatch):
    """The silent side: 2**63 - 1 is a record's integer, kept."""
    path = tiny.nsys(case / "in" / "t.sqlite", marker="aten::mm, seq = 9223372036854775807, sizes = [[4, 8]]")
    lines, _ = _parse(path, monkeypatch)
    assert _records(lines)[0]["seqId"] == [2 ** 63 - 1]


def test_kineto_ids_and_counts_past_64_bits_are_dropped(case, monkeypatch, tmp_path, capsys):
    events = tiny.kineto_events()
    op, launch, kernel = events["traceEvents"][:3]
    op["args"]["Sequence number"] = 2 ** 64
    op["pid"] = launch["pid"] = 2 ** 63  # the host thread's process: a pid no record holds
    kernel["args"].update({"grid": [2 ** 63, 1, 1], "registers per thread": -(2 ** 63) - 1, "stream": 2 ** 70})
    lines, _ = _parse(tiny.kineto(case / "in" / "t.json", events), monkeypatch)
    (record,) = _records(lines)
    assert record["grid"] == [] and record.get("registers") is None and record["stream"] is None
    assert record.get("pid") is None and record.get("seqId", []) == []
    assert record["op"] == ["mm"]  # the op is still found: its thread is told apart by the pid's text
    _prof_takes(lines, tmp_path, capsys)


def test_kineto_values_at_64_bits_are_kept(case, monkeypatch):
    """The silent side: the largest and smallest 64-bit integers are written as they are."""
    events = tiny.kineto_events()
    kernel = events["traceEvents"][2]
    kernel["args"].update({"registers per thread": 2 ** 63 - 1, "stream": -(2 ** 63)})
    lines, _ = _parse(tiny.kineto(case / "in" / "t.json", events), monkeypatch)
    (record,) = _records(lines)
    assert record["registers"] == 2 ** 63 - 1 and record["stream"] == -(2 ** 63)


def test_parse_says_the_rows_it_left_out_when_no_kernel_remains(shared, tmp_path, capsys):
    """The summary of a parse left without kernels names the left-out row (it is why there are none)."""
    from pyprof.parse.cli import main as parse_main

    path = shared / "corpus" / REPROS / "02-chain-parse-ts-extreme.sqlite"
    assert parse_main([str(path), "-o", str(tmp_path / "o.dict")]) == 0
    assert capsys.readouterr().err == (f"pyprof parse: {path}: no GPU kernels in this profile; 1 {LEFT_OUT}\n")


def test_a_parse_without_kernels_and_nothing_left_out_says_only_that(case, tmp_path, capsys):
    """The silent side: no oddity, no clause."""
    from pyprof.parse.cli import main as parse_main

    path = tiny.nsys(case / "in" / "t.sqlite")
    db = sqlite3.connect(path)
    db.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")
    db.commit()
    db.close()
    assert parse_main([str(path), "-o", str(tmp_path / "o.dict")]) == 0
    # the tiny export's one launch call is still there: its GPU side is what is missing (issue 39)
    assert capsys.readouterr().err == (f"pyprof parse: {path}: 1 kernel launch recorded but no GPU activity: the "
                                       "profiler's GPU (CUPTI) activity was off or lost\n")
