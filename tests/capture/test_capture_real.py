"""The markers read back from real Nsight Systems captures made on the H200 (tests/data/README.md).

Read with sqlite3 directly, not through pyprof.parse, so that these tests check the capture stage alone:
the ranges in the `pyprof` domain decode, carry the call id, and enclose the launches of the kernels they
name; backward kernels reach their forward op through PyTorch's sequence numbers.
"""
from __future__ import annotations

import json
import lzma
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data" / "nsys" / "pyprof"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SEQ = re.compile(r"^(?P<name>[^,]+), seq = (?P<seq>\d+)")


@pytest.fixture(scope="module")
def lenet(tmp_path_factory):
    return _open(tmp_path_factory, "lenet")


def _open(factory, name: str) -> sqlite3.Connection:
    path = factory.mktemp("nsys") / f"{name}.sqlite"
    with lzma.open(DATA / f"{name}.sqlite.xz") as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return sqlite3.connect(path)


def _ranges(db):
    domains = {row[0]: row[1] for row in db.execute("SELECT domainId, text FROM NVTX_EVENTS WHERE eventType = 75")}
    rows = db.execute("""SELECT e.start, e.end, e.globalTid, COALESCE(e.text, s.value), e.int64Value, e.domainId
                         FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId WHERE e.eventType = 59""")
    return [dict(start=r[0], end=r[1], tid=r[2], text=r[3], call_id=r[4], domain=domains.get(r[5], "")) for r in rows]


def _launches(db):
    rows = db.execute("""SELECT r.start, r.end, r.globalTid, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k
                         JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
                              AND (r.globalTid & 0xFFFFFFFFFF000000) = k.globalPid
                         JOIN StringIds s ON s.id = k.demangledName""")
    return [dict(start=r[0], end=r[1], tid=r[2], kernel=r[3]) for r in rows]


def _enclosing(ranges, launch):
    return sorted((r for r in ranges if r["tid"] == launch["tid"] and r["start"] <= launch["start"]
                   and r["end"] is not None and r["end"] >= launch["end"]), key=lambda r: r["start"])


def test_every_pyprof_range_decodes_with_a_call_id(lenet):
    mine = [r for r in _ranges(lenet) if r["domain"] == "pyprof"]
    assert len(mine) > 50
    for r in mine:
        assert r["call_id"] is not None and r["call_id"] > 0
        if r["text"].startswith("layer:"):
            continue
        payload = json.loads(r["text"])
        assert payload["pyprof"] == 1 and ("op" in payload or "module" in payload)
    ids = [r["call_id"] for r in sorted(mine, key=lambda r: r["start"])]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


def test_forward_kernels_enclosed_by_their_op_marker(lenet):
    ranges, launches = _ranges(lenet), _launches(lenet)
    assert len(launches) == lenet.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    main_tid = next(r["tid"] for r in ranges if r["text"].startswith("ProfilerStep#"))
    forward = [k for k in launches if k["tid"] == main_tid]
    assert forward
    for k in forward:
        ops = [json.loads(r["text"]) for r in _enclosing(ranges, k)
               if r["domain"] == "pyprof" and '"op"' in r["text"]]
        assert ops, f"kernel {k['kernel'][:60]} launched outside any pyprof op range"


def test_conv_kernel_carries_shapes_and_user_line(lenet):
    ranges, launches = _ranges(lenet), _launches(lenet)
    conv_line = next(i for i, t in enumerate(open(EXAMPLES / "lenet.py"), 1) if "self.conv1(x)" in t)
    found = False
    for k in launches:
        for r in _enclosing(ranges, k):
            if r["domain"] == "pyprof" and '"conv2d"' in r["text"]:
                p = json.loads(r["text"])
                if p["args"][0]["shape"] == [64, 1, 28, 28]:
                    assert p["mod"] == "torch.nn.functional" and p["args"][0]["dtype"] == "float32"
                    assert p["args"][1]["shape"] == [6, 1, 5, 5]
                    assert p["site"].endswith(f"examples/lenet.py:{conv_line}")
                    found = True
    assert found


def test_backward_kernels_reach_their_forward_op_through_seq(lenet):
    ranges, launches = _ranges(lenet), _launches(lenet)
    main_tid = next(r["tid"] for r in ranges if r["text"].startswith("ProfilerStep#"))
    # seq -> the pyprof op enclosing the forward aten op with that seq.
    forward_op = {}
    for r in ranges:
        m = SEQ.match(r["text"] or "")
        if m and r["tid"] == main_tid and not m["name"].endswith("Backward0"):
            outer = [o for o in _enclosing(ranges, r) if o["domain"] == "pyprof" and '"op"' in o["text"]]
            if outer:
                forward_op.setdefault(int(m["seq"]), json.loads(outer[0]["text"]))
    backward = [k for k in launches if k["tid"] != main_tid]
    assert backward
    linked = 0
    for k in backward:
        enclosing = _enclosing(ranges, k)
        seqs = [int(m["seq"]) for m in (SEQ.match(r["text"]) for r in enclosing) if m]
        if not seqs:
            # The engine's own work after a node (e.g. reducing a broadcast bias gradient) sits in
            # "evaluate_function: XBackward0" next to the node's "XBackward0, seq = N" range.
            node = next(r for r in reversed(enclosing) if "evaluate_function:" in r["text"])
            inner = [r for r in ranges if r["tid"] == k["tid"] and node["start"] <= r["start"]
                     and r["end"] <= node["end"] and SEQ.match(r["text"] or "")]
            seqs = [int(SEQ.match(inner[0]["text"])["seq"])]
        if seqs[0] in forward_op:
            linked += 1
    # Every backward kernel of LeNet belongs to a forward op that pyprof marked.
    assert linked == len(backward)
