"""The record's layout (pyprof/record.py) as parse writes it: lean by default, the raw texts on request, the GPU's
properties once, and a newer schema refused by the readers."""
from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from parse_output import records_of

from pyprof.parse import parse_file
from pyprof.record import END_KEY, HEADER_KEY, read_lines

DATA = Path(__file__).resolve().parents[1] / "data"
RESNET = DATA / "nsys" / "emit_nvtx" / "resnet.sqlite.xz"


def _lines(path: Path, raw_markers: bool = False) -> list[str]:
    out = io.StringIO()
    parse_file(str(path), out, raw_markers=raw_markers)
    return out.getvalue().splitlines()


def test_emit_nvtx_records_are_lean_and_lose_nothing_prof_reads():
    lean, raw = _lines(RESNET), _lines(RESNET, raw_markers=True)
    records = records_of(lean)
    # Issue 14's target for an emit_nvtx export: at most 1,200 bytes a record (schema 2 wrote 2,161 here), for the
    # fields it had. Issue 44 added each range's push and pop (range_ns): 2 numbers of 8 digits per range here and
    # 3.6 ranges a record (the step, and the op ranges around each launch), 79 bytes a record with the key.
    times = sum(len(m.group(0)) for x in records for m in re.finditer(r',"range_ns":\[[^\]]*\]', x))
    assert (sum(len(x) + 1 for x in records) - times) / len(records) <= 1200
    assert times / len(records) <= 90
    assert json.loads(lean[0])[HEADER_KEY] is True and json.loads(lean[-1])[END_KEY] is True
    full_lean, full_raw = list(read_lines(lean)), list(read_lines(raw))
    assert len(full_lean) == len(full_raw) == 939  # sqlite3: 635 kernels + memcpy + memset rows of the export
    # the raw autograd texts are the only difference, and only with --raw-markers
    assert all(d["seqMarker"] == [] for d in full_lean)
    assert sum(1 for d in full_raw if any(", seq = " in t or "op_id = " in t for t in d["seqMarker"])) > 600
    assert [{**d, "seqMarker": []} for d in full_raw] == full_lean
    # the GPU's properties are on no record line, and come back from the header
    assert not any('"gpu_props"' in x for x in records)
    assert all(d["gpu_props"]["smCount"] == 132 for d in full_lean)  # an H200 has 132 SMs


def test_prof_refuses_records_of_a_newer_schema(tmp_path):
    lines = _lines(DATA / "nsys" / "pyprof" / "lenet.sqlite.xz")
    header = json.loads(lines[0])
    newer = tmp_path / "newer.dict"
    newer.write_text("\n".join([json.dumps({**header, "schema": 99})] + lines[1:]) + "\n")
    p = subprocess.run([sys.executable, "-m", "pyprof.prof", str(newer)], capture_output=True, text=True)
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and "schema 99" in p.stderr and "upgrade pyprof" in p.stderr


@pytest.mark.parametrize("view", [None, "overview"])
def test_schema_2_and_schema_3_give_the_same_prof_output(tmp_path, view):
    # A schema 2 file (every key on every line, gpu_props on each record, no header) made from the schema 3
    # lines by hand, as pyprof before schema 3 wrote it: prof must read both the same.
    lines = _lines(DATA / "nsys" / "emit_nvtx" / "lenet.sqlite.xz")
    order = list(json.loads(lines[1]))
    v2 = []
    for d in read_lines(lines):
        v2.append(json.dumps({**d, "schema": 2}, separators=(",", ":")))
    v2.append(json.dumps({"pyprof_end": True, "schema": 2, "records": len(v2)}, separators=(",", ":")))
    old, new = tmp_path / "v2.dict", tmp_path / "v3.dict"
    old.write_text("\n".join(v2) + "\n")
    new.write_text("\n".join(lines) + "\n")
    args = ["-q", "-c", "all", "--jsonl"] if view is None else ["-q", "--view", view, "--jsonl"]
    outs = [subprocess.run([sys.executable, "-m", "pyprof.prof", *args, str(f)], capture_output=True, text=True)
            for f in (old, new)]
    assert outs[0].returncode == outs[1].returncode == 0 and outs[0].stdout == outs[1].stdout != ""
    assert order[0] == "kind"
