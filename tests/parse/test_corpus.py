"""Every real export of the shared corpus is parsed or refused with one line; expectations are derived
independently with sqlite3 queries in the tests, never with the parser's own code."""
from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path

import pytest
from dataclasses import fields

from pyprof.common import InputError

from pyprof.record import Record, read_lines
from pyprof.parse import parse_file

from parse_synth import CORPUS


NSYS = sorted((CORPUS / "nsys").glob("*.sqlite")) if CORPUS.is_dir() else []
NVPROF = sorted((CORPUS / "nvprof").glob("*")) if CORPUS.is_dir() else []
NOT_PROFILES = sorted((CORPUS / "not-a-profile").glob("*")) if CORPUS.is_dir() else []
NCCL = "nsys/nsys2026.2_h100_2gpu_torch_nccl.sqlite"
WINDOW = "nsys/nsys2026.2_h100_2gpu_torch_window.sqlite"
EMIT_NVPROF = "nvprof/nvprof_v11_torch_emit_nvtx.prof"
PID_MASK = -(1 << 24)  # ~0xFFFFFF as SQLite's signed 64-bit integer: clears the thread bits of globalTid

_cache: dict[str, list[dict]] = {}


def parsed(path: Path) -> list[dict]:
    key = str(path)
    if key not in _cache:
        out = io.StringIO()
        parse_file(key, out, raw_markers=True)  # some tests read seqMarker
        _cache[key] = list(read_lines(out.getvalue().splitlines()))
    return _cache[key]


def q(path: Path, sql: str, *params):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute(sql, params).fetchall()
    finally:
        db.close()


def tables(path: Path) -> set[str]:
    return {t for (t,) in q(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}


def count(path: Path, table: str) -> int:
    return q(path, f"SELECT count(*) FROM {table}")[0][0] if table in tables(path) else 0


@pytest.mark.parametrize("path", NSYS, ids=lambda p: p.name)
def test_nsys_every_activity_is_one_record(corpus, path):
    recs = parsed(path)
    kinds = [r["kind"] for r in recs]
    assert kinds.count("kernel") == count(path, "CUPTI_ACTIVITY_KIND_KERNEL")
    assert kinds.count("memcpy") == count(path, "CUPTI_ACTIVITY_KIND_MEMCPY")
    assert kinds.count("memset") == count(path, "CUPTI_ACTIVITY_KIND_MEMSET")
    starts = [r["start_ns"] for r in recs]
    assert starts == sorted(starts)


@pytest.mark.parametrize("path", NVPROF, ids=lambda p: p.name)
def test_nvprof_every_kernel_is_one_record(corpus, path):
    recs = parsed(path)
    n = count(path, "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL") or count(path, "CUPTI_ACTIVITY_KIND_KERNEL")
    assert [r["kind"] for r in recs].count("kernel") == n > 0
    assert [r["kind"] for r in recs].count("memcpy") == count(path, "CUPTI_ACTIVITY_KIND_MEMCPY")


@pytest.mark.parametrize("path", NOT_PROFILES, ids=lambda p: p.name)
def test_not_a_profile_is_refused_with_one_line(corpus, path):
    with pytest.raises(InputError) as e:
        parse_file(str(path), io.StringIO())
    msg = str(e.value)
    assert str(path) in msg and "\n" not in msg
    assert "sqlite3." not in msg.lower() and "Traceback" not in msg


@pytest.mark.parametrize("path", NSYS + NVPROF, ids=lambda p: p.name)
def test_lines_are_records_with_defaults_left_out(corpus, path):
    out = io.StringIO()
    parse_file(str(path), out)
    header, *lines, end = out.getvalue().splitlines()
    assert json.loads(header)["pyprof_header"] is True and json.loads(header)["schema"] == 4
    # side lines (host time, memory) follow the records: they are no records
    n = next((i for i, x in enumerate(lines) if x.startswith('{"pyprof_side":')), len(lines))
    lines, side = lines[:n], lines[n:]
    assert all(x.startswith('{"pyprof_side":') for x in side)
    order = [f.name for f in fields(Record)]
    for line, full in zip(lines, read_lines([header, *lines])):
        d = json.loads(line)
        assert [k for k in order if k in d] == list(d)  # the record's order, some keys left out
        # docs/record.md: a new key is left out only at its default (null, [] or false), or where the other keys
        # give it (the end is start + duration; shared memory the sum of static and dynamic); the original keys
        # never
        assert full["end_ns"] == full["start_ns"] + full["kDuration"] and "end_ns" not in d
        if "smem_bytes" not in d and full["static_smem_bytes"] is not None:
            assert full["smem_bytes"] == full["static_smem_bytes"] + full["dynamic_smem_bytes"]
        assert all(full[k] in (None, [], False) for k in set(full) - set(d) - {"gpu_props", "end_ns", "smem_bytes"})
        assert not {"kShortName", "kDuration", "layer", "seqMarker", "subSeqId", "dir", "op", "grid"} - set(d)
        assert json.loads(Record.from_dict(d).to_json()) == {**full, "gpu_props": None, "schema": 4}
    assert json.loads(end) == {"pyprof_end": True, "schema": 4, "records": len(lines)}


def test_spot_check_first_kernel(corpus):
    path = corpus / NCCL
    start, end, name, short, dev, gx, static, dynamic = q(path, """
        SELECT k.start, k.end, d.value, s.value, k.deviceId, k.gridX, k.staticSharedMemory, k.dynamicSharedMemory
        FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN StringIds d ON d.id = k.demangledName JOIN StringIds s ON s.id = k.shortName
        ORDER BY k.start LIMIT 1""")[0]
    k = next(r for r in parsed(path) if r["kind"] == "kernel")
    assert (k["start_ns"], k["kDuration"], k["kLongName"], k["kShortName"], k["device"], k["grid"][0]) == \
        (start, end - start, name, short, dev, gx)
    # not on the line (schema 3): the reader's start + duration is the export's end, its sum the shared memory
    assert k["end_ns"] == end and k["smem_bytes"] == static + dynamic


@pytest.mark.parametrize("name", [NCCL, WINDOW])
def test_launch_join_on_process_and_correlation_id(corpus, name):
    path = corpus / name
    assert q(path, "SELECT count(DISTINCT globalPid) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0] == 2
    joined = q(path, f"""SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k WHERE EXISTS (
        SELECT 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME r WHERE r.correlationId = k.correlationId
        AND (r.globalTid & {PID_MASK}) = k.globalPid)""")[0][0]
    kernels = [r for r in parsed(path) if r["kind"] == "kernel"]
    assert sum(r["api"] is not None for r in kernels) == joined
    # Kernels whose launch is outside the time window are still records, with an empty op.
    orphans = [r for r in kernels if r["api"] is None]
    assert len(orphans) == len(kernels) - joined
    assert all(r["op"] == [] and r["ranges"] == [] for r in orphans)
    if name == WINDOW:
        assert len(orphans) > len(kernels) // 3  # about half the kernels of this capture


def test_window_capture_orphans_are_reported_in_stats(corpus):
    from pyprof.parse import parse_records

    recs, stats = parse_records(str(corpus / WINDOW))
    n = sum(1 for _ in recs)
    assert stats.records == n and stats.no_launch > 0


def _enclosing_ranges(path: Path, gtid: int, start: int, end: int) -> list[str]:
    rows = q(path, """SELECT COALESCE(n.text, s.value) FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId
                      WHERE n.eventType = 59 AND n.globalTid = ? AND n.start <= ? AND n.end >= ?
                      ORDER BY n.start, n.end DESC""", gtid, start, end)
    return [t for (t,) in rows]


@pytest.mark.parametrize("name", [NCCL, WINDOW])
def test_emit_nvtx_ranges_and_ops_match_an_independent_query(corpus, name):
    path = corpus / name
    launches = {(gpid, corr): (gtid, s, e) for gtid, s, e, corr, gpid in q(path, f"""
        SELECT globalTid, start, end, correlationId, globalTid & {PID_MASK} FROM CUPTI_ACTIVITY_KIND_RUNTIME""")}
    kernels = q(path, "SELECT start, globalPid, correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start")
    by_start = {}
    for r in parsed(path):
        if r["kind"] == "kernel":
            by_start.setdefault((r["start_ns"], r["correlation_id"]), r)
    checked = 0
    for start, gpid, corr in kernels[::37]:  # a sample across the whole capture
        if (gpid, corr) not in launches:
            continue
        rec = by_start[(start, corr)]
        names = _enclosing_ranges(path, *launches[(gpid, corr)])
        emit = [n for n in names if ", op_id = " in n or ", seq = " in n]
        # ranges: autograd texts by their op name (the full texts are seqMarker's), other texts verbatim.
        assert rec["ranges"] == [n.split(", ")[0] if n in emit else n for n in names]
        assert rec["seqMarker"] == emit
        # The ops are the texts with a namespace (aten::mm) or a sequence number; record_function ranges such as
        # record_param_comms or nccl:all_to_all (neither) hold ops and are not ones, unless nothing else is there.
        ops = [n for n in emit if "::" in n.split(", ")[0] or ", seq = " in n] or emit
        assert rec["op"] == [n.split(", ")[0].split("::")[-1] for n in ops]
        seqs = []
        for n in emit:
            if ", seq = " in n:
                s = int(n.split(", seq = ")[1].split(",")[0])
                if s not in seqs:
                    seqs.append(s)
        assert rec["seqId"] == seqs
        if emit:
            assert rec["dir"] == "fprop"  # these captures hold forward passes only
        checked += 1
    assert checked > 20


def test_nccl_ranges_registered_strings_are_read(corpus):
    path = corpus / NCCL
    # ncclGroupEnd is a registered string: NULL text, name in StringIds through textId.
    assert q(path, """SELECT count(*) FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId
                      WHERE n.text IS NULL AND s.value = 'ncclGroupEnd'""")[0][0] == 60
    assert sum("ncclGroupEnd" in r["ranges"] for r in parsed(path)) > 0


def test_nvprof_names_are_demangled(corpus):
    recs = parsed(corpus / EMIT_NVPROF)
    longs = {r["kLongName"] for r in recs}
    # c++filt _Z38cunn_LookupTableBag_updateOutputKernelIffEvPlS0_PT_S2_S0_llliS0_
    assert ("void cunn_LookupTableBag_updateOutputKernel<float, float>(long*, long*, float*, float*, long*, "
            "long, long, long, int, long*)") in longs
    assert not any(n.startswith("_Z") for n in longs)
    shorts = {r["kShortName"] for r in recs}
    assert "cunn_LookupTableBag_updateOutputKernel" in shorts


def test_nvprof_markers_attribute_backward_kernels(corpus):
    path = corpus / EMIT_NVPROF
    recs = [r for r in parsed(path) if r["kind"] == "kernel"]
    # Independent: kernels launched (cbid 13 runtime rows) inside a marker pair named *Backward*.
    n_bwd = q(path, """
        SELECT count(*) FROM CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL k
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
        WHERE EXISTS (SELECT 1 FROM CUPTI_ACTIVITY_KIND_MARKER s JOIN CUPTI_ACTIVITY_KIND_MARKER e
                      ON e.id = s.id AND e.flags = 4 JOIN StringTable t ON t._id_ = s.name
                      WHERE s.flags = 2 AND t.value LIKE '%Backward%' AND s.timestamp <= r.start
                      AND e.timestamp >= r.end
                      AND substr(s.objectId, 5, 4) = substr(e.objectId, 5, 4))""")[0][0]
    assert n_bwd > 0
    assert sum(r["dir"] == "bprop" for r in recs) == n_bwd
    assert all(r["tid"] is None or r["tid"] >= 0 for r in recs)  # signed thread ids masked


def test_nsys_gpu_name_when_exported(corpus):
    recs = parsed(corpus / "nsys/nsys2023.3_lts_la.sqlite")
    assert {r["gpu"] for r in recs if r["kind"] == "kernel"} == {"Tesla T4"}


@pytest.mark.parametrize("name", [NCCL, EMIT_NVPROF, "nsys/nsys2023.3_lts_la.sqlite"])
def test_record_api_and_json_lines_agree(corpus, name):
    from dataclasses import fields

    from pyprof.parse import parse_records

    recs, _ = parse_records(str(corpus / name))
    as_records = list(recs)
    out = io.StringIO()
    parse_file(str(corpus / name), out)
    assert as_records == [Record.from_dict(d) for d in read_lines(out.getvalue().splitlines())]
    assert list(json.loads(as_records[0].to_json())) == [f.name for f in fields(Record)]


@pytest.mark.parametrize("name", [NCCL, WINDOW, EMIT_NVPROF])
def test_sweep_in_a_worker_process_gives_the_same_lines(corpus, name):
    from pyprof.parse import open_source
    from pyprof.parse.write.writer import lines

    def run(worker: bool) -> tuple[list, tuple]:
        src = open_source(str(corpus / name))
        try:
            out, stats = lines(src, worker=worker)
            result = list(out)
        finally:
            src.close()
        return result, (stats.records, stats.kernels, stats.kernels_with_op, stats.no_launch)

    assert run(True) == run(False)
