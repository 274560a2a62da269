"""The ranks view on real multi-rank captures, against Holistic Trace Analysis and against recounts written here
from the exports themselves (sqlite3 over the nsys export, json over the PyTorch profiler traces).

HTA reference (HolisticTraceAnalysis 0.5.0 from PyPI, 2026-11, on ../shared/corpus/external's
hta_trace_filter_sampled_rank-0/1 put in one folder as rank-0.json.gz and rank-1.json.gz, with
``TraceAnalysis(trace_dir, include_last_profiler_step=True)``, the span pyprof keeps; the issue's figures;
printed by ``/tmp/hta-venv/bin/python bench/hta_reference.py --job RANK0 RANK1``):
- communication time: ``get_gpu_kernel_breakdown()``'s per-kernel table, the COMMUNICATION rows' ``sum (us)``
  (HTA's communication kernels are those named ``^nccl.*Kernel``, summed per rank): 396199 us on rank 0, 379053
  us on rank 1. Its kernel-type table splits the same time into COMMUNICATION alone (336983, 303523 us) and
  COMPUTATION overlapping COMMUNICATION (59216, 75530 us), whose sum is the union of the communication kernels:
  on these traces no two of them overlap, so the union is the sum;
- ``get_comm_comp_overlap()``: 14.95 and 19.93 % (overlap of the merged communication and computation
  intervals over the merged communication time: 59216 / 396199, 75530 / 379053).
"""
from __future__ import annotations

import gzip
import json
import lzma
import sqlite3
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from report_helpers import DATA, ROOT

from pyprof.prof.aggregate import aggregate_files
from pyprof.prof.views import build

HTA_COMM_MS = {"rank 0": 396.199, "rank 1": 379.053}
HTA_OVERLAP_PCT = {"rank 0": 14.95, "rank 1": 19.93}
DIST = DATA / "dist"


def _parsed(tmp: Path, *paths: Path) -> list[str]:
    out = []
    for p in paths:
        dst = tmp / (p.name + ".dict")
        if not dst.exists():
            with open(dst, "wb") as f:
                subprocess.run([sys.executable, "-m", "pyprof.parse", str(p)], stdout=f, check=True, cwd=ROOT)
        out.append(str(dst))
    return out


def _ranks(files: list[str]) -> tuple[dict, list[dict]]:
    ranks, stragglers = build(aggregate_files(files), ["ranks"])
    return ({r[0]: dict(zip(ranks.columns, r)) for r in ranks.rows},
            [dict(zip(stragglers.columns, r)) for r in stragglers.rows])


@pytest.fixture(scope="module")
def tmp(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("ranks")


def test_hta_pair_communication_and_overlap_are_htas(corpus, tmp):
    files = _parsed(tmp, *(corpus / f"external/hta_trace_filter_sampled_rank-{r}.json.gz" for r in (0, 1)))
    rows, stragglers = _ranks(files)
    assert {k: r["comm_ms"] for k, r in rows.items()} == HTA_COMM_MS
    assert {k: r["hidden_pct"] for k, r in rows.items()} == HTA_OVERLAP_PCT
    assert {k: r["exposed_pct"] for k, r in rows.items()} == {"rank 0": 85.05, "rank 1": 80.07}
    # each rank runs 10 ncclKernel_SendRecv kernels (the corpus README's count of NCCL kernels): 10 matched
    assert len(stragglers) == 10
    assert sum(r["last_at"] for r in rows.values()) == sum(1 for s in stragglers if s["delay_ms"])


def _db(tmp: Path, name: str) -> Path:
    db = tmp / f"{name}.sqlite"
    if not db.exists():
        db.write_bytes(lzma.decompress((DIST / f"{name}.sqlite.xz").read_bytes()))
    return db


def _nccl_by_pid(db: Path) -> dict[int, list[tuple[int, int, str]]]:
    """pid -> ((start, end, name) of its NCCL kernels, of its other kernels), in start order."""
    con = sqlite3.connect(db)
    out: dict = defaultdict(lambda: ([], []))
    for gpid, start, end, name in con.execute(
            "SELECT k.globalPid, k.start, k.end, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
            "JOIN StringIds s ON s.id = k.shortName ORDER BY k.start"):
        pid = (gpid >> 24) & 0xFFFFFF
        out[pid][0 if name.lower().startswith("nccl") else 1].append((start, end, name))
    con.close()
    return dict(out)


def _merge(intervals) -> list[list[int]]:
    merged: list[list[int]] = []
    for a, b in sorted((a, b) for a, b, *_ in intervals):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return merged


def _overlap_ns(xs: list[list[int]], ys: list[list[int]]) -> int:
    total = 0
    for a, b in xs:
        for c, d in ys:
            total += max(0, min(b, d) - max(a, c))
    return total


@pytest.mark.parametrize("name", ["ddp", "fsdp"])
def test_nsys_job_against_an_sqlite_recount(tmp, name):
    kernels = _nccl_by_pid(_db(tmp, name))
    rows, stragglers = _ranks(_parsed(tmp, DIST / f"{name}.sqlite.xz"))
    assert len(kernels) == 2 and len(rows) == 2
    by_pid = {int(r["worker"]): r for r in rows.values()}
    for pid, (comm, compute) in kernels.items():
        r = by_pid[pid]
        assert r["rank"].startswith(f"pid {pid} (GPU ")  # the export names no rank
        comm_u, compute_u = _merge(comm), _merge(compute)
        comm_ns = sum(b - a for a, b in comm_u)
        assert comm_ns == sum(b - a for a, b, _ in comm)  # NCCL kernels of one communicator never overlap
        assert r["comm_ms"] == round(comm_ns / 1e6, 4)
        assert r["compute_ms"] == round(sum(b - a for a, b in compute_u) / 1e6, 4)
        assert r["hidden_pct"] == round(100 * _overlap_ns(comm_u, compute_u) / comm_ns, 2)
    # matched: the n-th kernel of a name on one process with the n-th on the other; the two run as many
    names = [defaultdict(list), defaultdict(list)]
    for side, (comm, _compute) in zip(names, kernels.values()):
        for start, _end, kname in comm:
            side[kname].append(start)
    assert {k: len(v) for k, v in names[0].items()} == {k: len(v) for k, v in names[1].items()}
    assert len(stragglers) == sum(len(v) for v in names[0].values())
    pids = list(kernels)
    last = defaultdict(int)
    for kname, starts in names[0].items():
        for a, b in zip(starts, names[1][kname]):
            if a != b:
                last[pids[0] if a > b else pids[1]] += 1
    assert {pid: by_pid[pid]["last_at"] for pid in pids} == {pid: last[pid] for pid in pids}


def _json_nccl(path: Path) -> tuple[int, list]:
    trace = json.loads(gzip.decompress(path.read_bytes()))
    nccl = [e for e in trace["traceEvents"] if e.get("cat") == "kernel" and e["name"].startswith("nccl")]
    return trace["distributedInfo"]["rank"], nccl


def test_per_rank_traces_of_the_ddp_run(tmp):
    paths = [DIST / f"ddp.pt.trace.rank{r}.json.gz" for r in (0, 1)]
    rows, stragglers = _ranks(_parsed(tmp, *paths))
    assert sorted(rows) == ["rank 0", "rank 1"]  # named by the traces' distributedInfo
    for p in paths:
        rank, nccl = _json_nccl(p)
        # Kineto's microseconds with 3 decimals: whole ns
        assert rows[f"rank {rank}"]["comm_ms"] == pytest.approx(sum(e["dur"] for e in nccl) / 1e3, abs=1e-4)
    # the same run's collectives as the nsys export of it holds (its NCCL kernels of one process, recounted)
    nsys = _nccl_by_pid(_db(tmp, "ddp"))
    assert len(stragglers) == len(_json_nccl(paths[0])[1]) == len(next(iter(nsys.values()))[0])


def test_one_input_without_collectives_has_no_stragglers(tmp):
    files = _parsed(tmp, DATA / "kineto" / "lenet.pt.trace.json.gz")
    tables = build(aggregate_files(files), ["ranks"])
    assert [t.name for t in tables] == ["ranks"]
    (row,) = tables[0].rows
    assert row[tables[0].columns.index("comm_ms")] == 0
    assert row[tables[0].columns.index("last_at")] is None
