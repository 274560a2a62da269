"""``call_id``: the op call of each record, as parse numbers it, checked against what the captures themselves say
of their calls (pyprof markers' own call numbers, written by pyprof.init() at capture time; CUDA graph launches'
correlation ids), on every reader."""
from __future__ import annotations

import io
import json
from collections import defaultdict
from pathlib import Path

import pytest
from parse_output import records_of

from pyprof.parse import parse_file

DATA = Path(__file__).resolve().parents[1] / "data"


def _records(path: Path) -> list[dict]:
    out = io.StringIO()
    parse_file(str(path), out)
    return [json.loads(x) for x in records_of(out.getvalue().splitlines())]


def _numbered_in_order(records: list[dict]) -> None:
    """Every record has the key; calls are numbered 0, 1, ... in the order of their first record, and the kernels
    of one call are its subSeqId 0, 1, ... in record order (the count parse already wrote)."""
    assert all("call_id" in d for d in records)
    first: list = []
    seen: set = set()
    subs: dict = defaultdict(list)
    for d in records:
        c = d["call_id"]
        if c is not None and c not in seen:
            seen.add(c)
            first.append(c)
        if c is not None and d["kind"] == "kernel":
            subs[c].append(d["subSeqId"])
    assert first == list(range(len(first)))
    assert {c for c in subs} <= set(first)
    assert all(s == list(range(len(s))) for s in subs.values())


def _one_to_one(pairs) -> int:
    """The number of distinct keys, asserting (key, call_id) pairs map one to one."""
    by_key, by_id = defaultdict(set), defaultdict(set)
    for key, cid in pairs:
        by_key[key].add(cid)
        by_id[cid].add(key)
    assert all(len(v) == 1 for v in by_key.values()) and all(len(v) == 1 for v in by_id.values())
    return len(by_key)


def _marker_call(d: dict):
    m = d["marker"]
    return m[0].get("call") if m and type(m[0]) is dict else None


@pytest.mark.parametrize("path, marked", [
    (DATA / "nsys" / "pyprof" / "transformer.sqlite.xz", True),  # pyprof markers: the compiled core
    (DATA / "nsys" / "emit_nvtx" / "resnet.sqlite.xz", False),  # emit_nvtx
    (DATA / "kineto" / "resnet.pt.trace.json.gz", False),  # the PyTorch profiler: the Python path
])
def test_calls_are_the_captures_own(path, marked):
    records = _records(path)
    _numbered_in_order(records)
    # a forward kernel under a pyprof op marker: its call is the marker's call (the number pyprof.init() wrote in
    # the NVTX payload), one to one within a process
    assert (_one_to_one(((d["pid"], _marker_call(d)), d["call_id"]) for d in records
                        if d["dir"] == "fprop" and _marker_call(d) is not None) > 0) is marked
    # no op range, no call: and every record with an op has one
    assert all((d["call_id"] is None) == (not d["op"]) for d in records)


def test_each_cuda_graph_replay_is_a_call_of_its_own():
    records = _records(DATA / "graphs" / "cuda_graph_all.sqlite.xz")
    _numbered_in_order(records)
    replayed = [d for d in records if d.get("api") == "cudaGraphLaunch" and d["dir"] == "fprop"
                and _marker_call(d) is not None]
    # a call is (the graph launch, by its CUPTI correlation id; the op captured into the graph, by its marker's
    # call): the same op replayed by another launch is another call
    assert _one_to_one(((d["pid"], d["correlation_id"], _marker_call(d)), d["call_id"]) for d in replayed) > 1
    assert len({d["correlation_id"] for d in replayed}) > 1


def test_nvprof_records_are_numbered(corpus):
    records = _records(corpus / "nvprof" / "nvprof_v11_torch_emit_nvtx.prof")
    _numbered_in_order(records)
    assert any(d["call_id"] is not None for d in records)


def _sql_count(path: Path, tmp_path: Path, like: str) -> int:
    """NVTX ranges whose text matches ``like``, counted with sqlite3 from the export itself."""
    import lzma
    import sqlite3
    db = tmp_path / "export.sqlite"
    db.write_bytes(lzma.decompress(path.read_bytes()))
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT count(*) FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
                           "WHERE coalesce(e.text, s.value) LIKE ?", (like,)).fetchone()[0]
    finally:
        con.close()


def test_a_backward_node_is_one_call_with_the_engines_work_after_it(tmp_path):
    """The engine's evaluate_function range around a node is the node's call: the bias gradient's sum it runs after
    AddmmBackward0's own range closes is not a call of its own."""
    path = DATA / "nsys" / "pyprof" / "transformer.sqlite.xz"
    records = _records(path)
    _numbered_in_order(records)
    backward = {d["call_id"] for d in records if d["kind"] == "kernel" and d["dir"] == "bprop"
                and (d.get("fwd") or {}).get("op") == "linear"}
    forward = {d["call_id"] for d in records if d["kind"] == "kernel" and d["dir"] == "fprop"
               and d["op"] and d["op"][0] == "linear"}
    # sqlite3: 32 AddmmBackward0 nodes (linear with a bias) + 2 MmBackward0 (the head, no bias) = 34 engine
    # ranges, and 34 pyprof op markers of F.linear: one backward call per forward call
    nodes = sum(_sql_count(path, tmp_path, f"autograd::engine::evaluate_function: {n}%")
                for n in ("AddmmBackward0", "MmBackward0"))
    assert nodes == 34 == _sql_count(path, tmp_path, '%"op":"linear"%')
    assert len(backward) == len(forward) == 34
    # the sums ran in the engine's range alone (ranges: the node's name, then aten::sum), in the node's call
    sums = [d for d in records if d["kind"] == "kernel" and d["dir"] == "bprop"
            and d["ranges"][-2:] == ["AddmmBackward0", "aten::sum"]]
    assert len(sums) == 32 and all(d["call_id"] in backward and d["subSeqId"] >= 1 for d in sums)
