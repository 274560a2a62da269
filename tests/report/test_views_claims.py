"""Issue 39: every sentence the host and memory views print rests on data they checked. Each note is shown firing
on an input that holds its evidence and staying silent (or giving its reason) on one that lacks it, on real
captures (tests/data, ../shared/corpus) with expected values recounted from the files themselves (sqlite3, json)."""
from __future__ import annotations

import gzip
import json
import sqlite3

import pytest
from report_helpers import DATA
from shared_files import require_shared

from pyprof.parse import parse_file
from pyprof.prof.aggregate import aggregate_files
from pyprof.prof.views import build


@pytest.fixture(scope="module")
def parsed(tmp_path_factory):
    """``parsed(path)``: parse's records of a capture, parsed once per module."""
    tmp = tmp_path_factory.mktemp("claims")
    cache: dict = {}

    def get(path) -> str:
        path = str(path)
        if path not in cache:
            out = tmp / f"{len(cache)}.jsonl"
            with open(out, "w") as f:
                parse_file(path, f)
            cache[path] = str(out)
        return cache[path]
    return get


def _corpus(*parts):
    return require_shared().joinpath("corpus", *parts)


def _view(records: str, name: str):
    tables = build(aggregate_files([records]), [name])
    return tables[0] if len(tables) == 1 else tables


def _rows(t):
    return [dict(zip(t.columns, r)) for r in t.rows]


LIGHTNING = DATA / "paths" / "lightning.pt.trace.json.gz"
KINETO_FULL = DATA / "paths" / "kineto_full.pt.trace.json.gz"
NSYS_MEMORY = DATA / "paths" / "nsys_cuda_memory_usage.sqlite.xz"


def _older(records: str, tmp_path, schema: int | None) -> str:
    """The records as an older pyprof wrote them: the header's schema set back (None: no header, no end line),
    the side lines (schema 4) left out. The records themselves are as schema 3 writes them."""
    out = tmp_path / f"schema{schema}.jsonl"
    lines = []
    for line in open(records, "rb"):
        if line.startswith(b'{"pyprof_side"'):
            continue
        if line.startswith(b'{"pyprof_header"'):
            if schema is None:
                continue
            h = json.loads(line)
            h["schema"] = schema
            line = json.dumps(h).encode() + b"\n"
        if line.startswith(b'{"pyprof_end"') and schema is None:
            continue
        lines.append(line)
    out.write_bytes(b"".join(lines))
    return str(out)


# ---- host: why there is no host time


def test_host_old_records_say_their_schema_and_nothing_else(parsed, tmp_path):
    t = _view(_older(parsed(LIGHTNING), tmp_path, 3), "host")
    assert t.rows == [] and not [n for n in t.notes if n.startswith("No host time")]
    assert t.empty == ("No host time in this input: its records are of schema 3, written by a pyprof older than "
                       "record schema 4, which added them; parse the capture again with this pyprof.")


def test_host_nvprof_has_api_calls_pyprof_does_not_read(parsed):
    path = _corpus("nvprof", "nvprof_v12_no_markers.nvvp")
    with sqlite3.connect(path) as con:  # the capture has CUDA API calls: the records' launch times come from them
        assert con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0] == 2278
    t = _view(parsed(path), "host")
    assert t.rows == []
    note = t.empty
    assert note.startswith("No host time") and note.count("No host time") == 1
    assert "launch times of CUDA API calls" in note and "not nvprof's" in note and "schema" not in note


def test_host_nsys_without_cuda_or_nvtx_has_no_cpu_side(parsed):
    path = _corpus("nsys", "nsys2024.6_no_cuda.sqlite")
    with sqlite3.connect(path) as con:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert not {"CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"} & tables  # no API calls, no ranges
    t = _view(parsed(path), "host")
    note = t.empty
    assert t.rows == [] and note.startswith("No host time") and note.count("No host time") == 1
    assert "no CPU-side events" in note and "schema" not in note


def test_host_with_lines_says_no_absence_and_splits_all_four_parts(parsed):
    t = _view(parsed(LIGHTNING), "host")
    assert len(t.rows) == 2 and all(r["dataloader_ms"] > 0 for r in _rows(t))  # DataLoader ranges recorded
    assert not [n for n in t.notes if n.startswith("No host time") or " is na" in n or "No step ranges" in n]


def test_host_parts_never_recorded_are_na_not_zero(parsed):
    path = _corpus("nsys", "nsys2024.5_pipit_cloverleaf.sqlite")
    with sqlite3.connect(path) as con:  # API calls, and no NVTX table: no step, DataLoader or op ranges
        assert con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0] > 0
        assert not con.execute("SELECT count(*) FROM sqlite_master WHERE name = 'NVTX_EVENTS'").fetchone()[0]
    t = _view(parsed(path), "host")
    (r,) = _rows(t)
    assert r["step"] == "all" and r["dataloader_ms"] is None and r["op_ms"] is None and r["runtime_ms"] > 0
    # Other is the rest of the span: the two recorded figures add up to it (each rounded to 0.1 us)
    assert r["runtime_ms"] + r["other_ms"] == pytest.approx(r["cpu_ms"], abs=2e-4)
    notes = " ".join(t.notes)
    assert "Data loading is na" in notes and "Ops is na" in notes and "CUDA API is na" not in notes
    assert "No step ranges (ProfilerStep#N): one row ('all')" in notes


# ---- memory


def test_memory_old_records_say_their_schema(parsed, tmp_path):
    summary, _ = _view(_older(parsed(KINETO_FULL), tmp_path, 3), "memory")
    assert summary.rows == [] and summary.notes == []
    assert "schema 3" in summary.empty and "profile_memory" not in summary.empty


def test_memory_of_fresh_records_without_events_says_how_to_record_them(parsed):
    summary, sites = _view(parsed(_corpus("nvprof", "nvprof_v12_no_markers.nvvp")), "memory")
    assert summary.rows == [] and summary.notes == sites.notes == []
    assert "profile_memory=True" in summary.empty and "schema" not in summary.empty


def test_memory_events_without_totals_or_addresses_leave_those_columns_na(parsed):
    path = _corpus("external", "kineto_tbplugin_resnet50_nw0_2021-06.pt.trace.json.gz")
    with gzip.open(path) as f:
        events = [e["args"] for e in json.load(f)["traceEvents"] if e.get("name") == "[memory]"]
    # a 2021 trace: every event has only Bytes and the device, no totals and no address
    assert len(events) == 12838 and all(set(a) == {"Bytes", "Device Type", "Device Id"} for a in events)
    frees = sum(a["Bytes"] < 0 for a in events)
    assert frees == 6418
    summary, sites = _view(parsed(path), "memory")
    rows = _rows(summary)
    assert {r["device"] for r in rows} == {"cuda:0", "cpu"}
    assert all(r["reserved_mib"] is None and r["before_mib"] is None for r in rows)
    assert all(r["held_mib"] is None and r["held_pct"] is None for r in _rows(sites))
    assert not any(r["op"] == "(before the window)" for r in _rows(sites))
    notes = " ".join(summary.notes + sites.notes)
    assert "Counts 'allocator' without totals" in notes and "Held at peak is na on cpu, cuda:0" in notes
    assert "max_memory_allocated" not in notes and "before the window)' row" not in notes


def test_memory_with_totals_and_addresses_says_none_of_that(parsed):
    summary, sites = _view(parsed(KINETO_FULL), "memory")
    gpu = [r for r in _rows(summary) if r["device"] == "cuda:0"]
    assert gpu and gpu[0]["reserved_mib"] > 0 and gpu[0]["before_mib"] is not None
    assert any(r["held_mib"] for r in _rows(sites))
    notes = " ".join(summary.notes + sites.notes)
    assert "max_memory_allocated" in notes and "without totals" not in notes and "Held at peak is na" not in notes
    assert "Counts 'driver'" not in notes


def test_memory_cpu_reserve_that_is_zero_throughout_is_na(parsed):
    path = _corpus("external", "tracelens_h100_Qwen1.5-0.5B-Chat.json.gz")
    with gzip.open(path) as f:
        events = [e["args"] for e in json.load(f)["traceEvents"] if e.get("name") == "[memory]"]
    cpu = [a for a in events if a["Device Type"] == 0]
    gpu = [a for a in events if a["Device Type"] != 0]
    assert max(a["Total Reserved"] for a in cpu) == 0 and max(a["Total Allocated"] for a in cpu) > 0
    summary, sites = _view(parsed(path), "memory")
    rows = {r["device"]: r for r in _rows(summary)}
    assert rows["cpu"]["reserved_mib"] is None
    # the GPU's reserve is the trace's largest Total Reserved, in MiB
    assert rows["cuda:0"]["reserved_mib"] == round(max(a["Total Reserved"] for a in gpu) / 2 ** 20, 1)
    assert [n for n in summary.notes if n.startswith("Peak reserved is na")] == [
        "Peak reserved is na on cpu: its allocator's events give a reserve of 0 throughout while it allocated (it "
        "reports none)."]
    # an inference run: no backward work, so no note on how backward work is named
    assert not any("Backward work" in n for n in sites.notes)


def test_memory_backward_note_only_with_backward_sites(parsed):
    _, sites = _view(parsed(KINETO_FULL), "memory")
    assert any(r["op"].endswith(" (bprop)") for r in _rows(sites))
    assert any(n.startswith("Backward work is named by its forward op") for n in sites.notes)


def test_memory_driver_level_has_no_before_or_reserve(parsed):
    summary, sites = _view(parsed(NSYS_MEMORY), "memory")
    rows = _rows(summary)
    assert rows and all(r["level"] == "driver" for r in rows)
    assert all(r["before_mib"] is None and r["reserved_mib"] is None for r in rows)
    notes = " ".join(summary.notes + sites.notes)
    assert "Counts 'driver'" in notes and "Counts 'allocator'" not in notes
    assert "before the window)' row" not in notes


def test_host_records_without_a_header_are_schema_1_or_2(parsed, tmp_path):
    t = _view(_older(parsed(LIGHTNING), tmp_path, None), "host")
    assert t.rows == [] and t.empty.startswith("No host time") and t.empty.count("No host time") == 1
    assert "schema 1 or 2 (no header line)" in t.empty
