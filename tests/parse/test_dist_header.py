"""The header line's ``dist`` (record.DIST_KEYS): a PyTorch profiler trace's rank, world size and backend, from its
``distributedInfo``, read by prof into the workers of its input; none for an input that does not name its rank."""
from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pyprof.common import InputError
from pyprof.prof.load.contract import Header
from pyprof.prof.load.reader import read_records
from pyprof.record import header_line

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


def _header(path: Path) -> dict:
    p = subprocess.run([sys.executable, "-m", "pyprof.parse", str(path)], capture_output=True, check=True, cwd=ROOT)
    return json.loads(p.stdout.split(b"\n", 1)[0])


@pytest.mark.parametrize("rank", [0, 1])
def test_a_ranks_trace_names_its_rank(rank):
    path = DATA / "dist" / f"ddp.pt.trace.rank{rank}.json.gz"
    info = json.loads(gzip.decompress(path.read_bytes()))["distributedInfo"]
    assert _header(path)["dist"] == {"rank": info["rank"], "world_size": info["world_size"],
                                     "backend": info["backend"]} == {"rank": rank, "world_size": 2, "backend": "nccl"}


@pytest.mark.parametrize("rel", ["kineto/lenet.pt.trace.json.gz", "dist/ddp.sqlite.xz"])
def test_inputs_that_name_no_rank_have_no_dist(rel):
    # lenet: a single-GPU trace (no distributedInfo); the nsys export of the DDP job: two processes, no rank named
    assert "dist" not in _header(DATA / rel)


def test_prof_reads_the_dist_and_refuses_a_damaged_one():
    good = header_line({}, {"rank": 3, "world_size": 8, "backend": "nccl"}).encode() + b"\n"
    header = Header()
    assert list(read_records(io.BytesIO(good + b'{"pyprof_end":true,"schema":4,"records":0}\n'), "x", None,
                             header)) == []
    assert header.dist == {"rank": 3, "world_size": 8, "backend": "nccl"}
    bad = header_line({}, {"rank": "3"}).encode()
    with pytest.raises(InputError, match=r"x: line 1: the header's dist"):
        Header().read(bad, "x", 1)
