"""The several-GPU captures of issue 20 (tests/data/dist: DDP and FSDP2 on 2 H200s, both ranks' processes in one
nsys export under pyprof.init()): every rank's kernels are in the records and attributed to an op, and its NCCL
kernels are there as communication, against a sqlite3 recount per process."""
from __future__ import annotations

import io
import lzma
import sqlite3
from pathlib import Path

import pytest
from parse_output import records_of

from pyprof.parse import parse_file
from pyprof.parse.readers.nsys import os_pid
from pyprof.record import read_lines

DATA = Path(__file__).resolve().parents[1] / "data" / "dist"


@pytest.mark.parametrize("name", ["ddp.sqlite.xz", "fsdp.sqlite.xz"])
def test_every_ranks_kernels_are_attributed(name, tmp_path):
    db = tmp_path / "x.sqlite"
    db.write_bytes(lzma.decompress((DATA / name).read_bytes()))
    con = sqlite3.connect(db)
    per_pid: dict = {}
    nccl: dict = {}
    for gpid, short in con.execute("SELECT k.globalPid, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                                   "JOIN StringIds s ON s.id = k.shortName"):
        pid = os_pid(gpid)
        per_pid[pid] = per_pid.get(pid, 0) + 1
        nccl[pid] = nccl.get(pid, 0) + short.startswith("nccl")
    con.close()
    assert len(per_pid) == 2  # two ranks, one process each
    out = io.StringIO()
    parse_file(str(DATA / name), out)
    recs = [d for d in read_lines(records_of(out.getvalue().splitlines())) if d["kind"] == "kernel"]
    for pid, n in per_pid.items():
        mine = [d for d in recs if d["pid"] == pid]
        assert len(mine) == n  # every kernel of the rank, in its own process
        assert all(d["op"] for d in mine)  # each under an op of pyprof's markers or PyTorch's NVTX ranges
        comm = [d for d in mine if d["kShortName"].startswith("nccl")]
        assert len(comm) == nccl[pid] > 0
        # a collective's kernel belongs to the torch.distributed call that issued it: DDP's gradient all-reduce
        # (in backward), FSDP2's all-gathers and reduce-scatters, and the harness's barrier before the stop
        ops = {d["op"][0] for d in comm}
        expected = {"ddp.sqlite.xz": {"allreduce_", "barrier"},
                    "fsdp.sqlite.xz": {"all_gather_into_tensor", "reduce_scatter_tensor", "barrier"}}[name]
        assert ops == expected
