"""The original PyProf's own output as a golden: an apex.pyprof NvProf capture (PyTorch of early 2020, a word-level
language model, 160 kernels) and ``net.dict``, what apex's ``pyprof.parse`` made of it (../shared/corpus/legacy,
README there). Every kernel is compared, in the order both list them (by GPU start):

- ``kShortName`` and ``kDuration``: equal to the original's, and to the export's end - start.
- ``dir``: equal to the original's on 136 kernels. The other 24 are the autograd engine's own work on its thread
  outside every node (``torch::autograd::AccumulateGrad``'s ``add_``, the ``sum`` reducing a broadcast gradient):
  the original decided direction by node names alone, and called them fprop; pyprof's thread rule
  (docs/parse.md, 5) calls them bprop. Both are recounted from the export with sqlite3.
- ``op``: equal to the original's on every kernel outside a node. Inside a node the two name different things:
  the original names the node (``MmBackward`` becomes ``Mm``, ``NllLossBackward`` becomes ``NllLoss``), pyprof
  the op run inside it (``op``: ``mm``) and the forward op that made the node (``fwd.op``: ``linear``). There the
  texts behind both (``seqMarker``) are the same, the forward link's number is the original's ``seqId``, and the
  forward op is the one the original gives its own forward kernels of that number and the export's NVTX says.
"""
from __future__ import annotations

import ast
import io
import lzma
import re
import sqlite3
import struct

import pytest

from parse_synth import pyprof_op
from shared_files import require_shared

from pyprof.parse.write import native

from pyprof.parse import parse_file
from pyprof.record import read_lines

NODE = re.compile(r"Backward\d*, seq = (\d+)$")  # an autograd node's range in this PyTorch: "MmBackward, seq = 122"
PYPROF_OP = "{'mod': "  # apex.pyprof's op marker: a dict's repr


@pytest.fixture(scope="module")
def legacy(tmp_path_factory):
    folder = require_shared() / "corpus" / "legacy"
    path = tmp_path_factory.mktemp("legacy") / "net.sql"
    path.write_bytes(lzma.decompress((folder / "net.sql.xz").read_bytes()))
    with lzma.open(folder / "net.dict.xz", "rt") as f:
        original = [ast.literal_eval(line) for line in f]
    out = io.StringIO()
    parse_file(str(path), out, raw_markers=True)  # seqMarker is compared
    ours = [r for r in read_lines(out.getvalue().splitlines()) if r["kind"] == "kernel"]
    db = sqlite3.connect(path)
    yield original, ours, _recount(db)
    db.close()


def _recount(db) -> list[dict]:
    """Per kernel (by start): its duration, launch thread, and the NVTX ranges around its launch call, read from
    the export with plain SQL: ranges are start/end rows of the MARKER table (flags 2 and 4) of one id, the thread
    is the second 32-bit word of the start row's objectId."""
    ranges: dict = {}
    for start, end, blob, text in db.execute(
            "SELECT s.timestamp, e.timestamp, s.objectId, n.value FROM CUPTI_ACTIVITY_KIND_MARKER s "
            "JOIN CUPTI_ACTIVITY_KIND_MARKER e ON e.id = s.id AND e.flags = 4 "
            "JOIN StringTable n ON n._id_ = s.name WHERE s.flags = 2"):
        ranges.setdefault(struct.unpack_from("<II", blob)[1], []).append((start, end, text))
    kernels = []
    for start, end, thread, c0, c1 in db.execute(
            "SELECT k.start, k.end, r.threadId & 4294967295, r.start, r.end FROM CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL k "
            "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId ORDER BY k.start"):
        around = [text for s, e, text in sorted(ranges.get(thread, ())) if s <= c0 and e >= c1]
        kernels.append({"duration": end - start, "thread": thread, "ranges": around})
    # The engine's threads: those that run nodes and none of the model's pyprof op markers.
    nodes = {t for t, rs in ranges.items() if any(NODE.search(x) for _, _, x in rs)}
    forward = {t for t, rs in ranges.items() if any(x.startswith(PYPROF_OP) for _, _, x in rs)}
    for k in kernels:
        k["node"] = next((int(NODE.search(x).group(1)) for x in k["ranges"] if NODE.search(x)), None)
        k["engine"] = k["thread"] in nodes - forward
    # The forward op of each number: the outermost pyprof op marker around the forward thread's ranges of it.
    k_fwd: dict = {}
    for t in forward:
        rs = sorted(ranges[t])
        for s, e, text in rs:
            hit = re.search(r", seq = (\d+)$", text)
            if hit and not NODE.search(text):
                outer = next((x for s2, e2, x in rs if s2 <= s and e2 >= e and x.startswith(PYPROF_OP)), None)
                if outer is not None:
                    k_fwd.setdefault(int(hit.group(1)), set()).add(ast.literal_eval(outer)["op"])
    for k in kernels:
        k["forward_ops"] = k_fwd.get(k["node"], set())
    return kernels


def test_every_kernel_has_the_originals_name_and_duration(legacy):
    original, ours, export = legacy
    assert len(original) == len(ours) == len(export) == 160
    for o, r, k in zip(original, ours, export):
        assert (r["kShortName"], r["kDuration"]) == (o["kShortName"], o["kDuration"])
        assert r["kDuration"] == k["duration"]


def test_direction_agrees_with_the_original_but_on_the_engines_own_work(legacy):
    original, ours, export = legacy
    in_node = [i for i, k in enumerate(export) if k["node"] is not None]
    engine_own = [i for i, k in enumerate(export) if k["node"] is None and k["engine"]]
    assert len(in_node) == 42 and len(engine_own) == 24
    assert [i for i, r in enumerate(ours) if r["dir"] == "bprop"] == sorted(in_node + engine_own)
    differ = [i for i, (o, r) in enumerate(zip(original, ours)) if o["dir"] != r["dir"]]
    assert differ == engine_own and all(original[i]["dir"] == "fprop" for i in differ)
    # Their ranges: AccumulateGrad's add_ and the engine's sums between nodes, all numbered 0 (no node made).
    assert {tuple(export[i]["ranges"]) for i in engine_own} == {
        ("sum, seq = 0",), ("add, seq = 0",), ("torch::autograd::AccumulateGrad", "add_, seq = 0")}
    # The gradient seed of loss.backward(): ones_like on the calling thread, in no node, forward work for both.
    (seed,) = [i for i, k in enumerate(export) if any("'op': 'backward'" in x for x in k["ranges"])]
    assert original[seed]["dir"] == ours[seed]["dir"] == "fprop" and ours[seed]["op"] == ["backward", "ones_like"]


def test_ops_agree_with_the_original_and_backward_kernels_link_to_its_forward_ops(legacy):
    original, ours, export = legacy
    forward_of = {}  # the original's own forward kernels: number -> op
    for o in original:
        if o["dir"] == "fprop":
            for seq in o["seqId"] + o["altSeqId"]:
                forward_of.setdefault(seq, set()).add(o["op"][0])
    by_original = 0
    for o, r, k in zip(original, ours, export):
        if k["node"] is None:
            assert r["op"] == o["op"]
            continue
        assert sorted(r["seqMarker"]) == sorted(o["seqMarker"])  # the same texts; the original's order is its own
        assert r["seqId"] == o["seqId"] == [k["node"]] == [r["fwd"]["seq"]]  # 0, no number, left out by both
        assert k["forward_ops"] == {r["fwd"]["op"]}
        if k["node"] in forward_of:
            assert forward_of[k["node"]] == {r["fwd"]["op"]}
            by_original += 1
    # 3 nodes (SplitBackward, 75) have a forward op that launched no kernel: only the export names it.
    assert by_original == 39


# -- the same rules on small built exports, through both parse paths (the compiled core reads nsys exports) --------

PID, MAIN, ENGINE = 100, 1, 2


def _built(nsys_builder, inner: str, monkeypatch, pure: bool) -> list[dict]:
    """A forward ``mm`` numbered 5 on the main thread, then its node on the engine's thread with ``inner`` inside,
    as PyTorch of 2020 wrote them (every op numbered); the loss.backward() seed between them, on the main thread."""
    monkeypatch.setenv(native.PURE_PYTHON_ENV, "1" if pure else "0")
    b = nsys_builder()
    b.range(PID, MAIN, 0, 500, pyprof_op("torch", "mm", [], "train.py:7"))
    b.range(PID, MAIN, 10, 400, "mm, seq = 5")
    b.launch(PID, MAIN, 20, 30, corr=1)
    b.kernel(PID, 100, 150, corr=1)
    b.range(PID, MAIN, 600, 900, pyprof_op("Tensor", "backward", [], "train.py:8"))
    b.range(PID, MAIN, 610, 700, pyprof_op("torch", "ones_like", [], "train.py:8"))
    b.launch(PID, MAIN, 620, 630, corr=2)
    b.kernel(PID, 640, 650, corr=2)
    b.range(PID, ENGINE, 1000, 2000, "MmBackward, seq = 5")
    b.range(PID, ENGINE, 1010, 1900, inner)
    b.launch(PID, ENGINE, 1020, 1030, corr=3)
    b.kernel(PID, 1100, 1200, corr=3)
    b.range(PID, ENGINE, 2100, 2200, "add_, seq = 0")  # between nodes: the engine's own work
    b.launch(PID, ENGINE, 2110, 2120, corr=4)
    b.kernel(PID, 2130, 2140, corr=4)
    out = io.StringIO()
    parse_file(str(b.close()), out)
    return [r for r in read_lines(out.getvalue().splitlines()) if r["kind"] == "kernel"]


@pytest.mark.parametrize("pure", [True, False])
def test_an_op_numbered_0_in_a_node_is_backward_work_of_the_node(nsys_builder, monkeypatch, pure):
    forward, seed, node, engine = _built(nsys_builder, "mm, seq = 0", monkeypatch, pure)
    assert forward["dir"] == "fprop" and forward["seqId"] == [5]
    assert seed["dir"] == "fprop" and seed["op"] == ["backward", "ones_like"]  # in Tensor.backward, in no node
    assert node["dir"] == "bprop" and node["recompute"] is False and node["seqId"] == [5]
    assert node["op"] == ["mm"] and node["fwd"]["op"] == "mm" and node["fwd"]["seq"] == 5
    assert engine["dir"] == "bprop" and engine["seqId"] == [] and engine["fwd"] is None


@pytest.mark.parametrize("pure", [True, False])
def test_an_op_numbered_above_0_in_a_node_is_still_a_recomputed_forward_op(nsys_builder, monkeypatch, pure):
    """Activation checkpointing's recomputed op carries the engine's thread's own count, past 0 once it has
    made a node: that op is forward work of its own, as before."""
    _, _, node, engine = _built(nsys_builder, "mm, seq = 3", monkeypatch, pure)
    assert node["dir"] == "fprop" and node["recompute"] is True and node["seqId"] == [3] and node["fwd"] is None
    assert engine["dir"] == "bprop" and engine["seqId"] == []


def test_call_site_is_the_innermost_user_line_of_the_originals_trace(legacy):
    """The original's ``trace`` kept the user's frames and torch.nn.utils' (clip_grad.py:32 for the 32 kernels of
    clip_grad_norm_); the call site is the innermost frame outside torch, so for those the user's line that called
    clip_grad_norm_. Backward kernels have no trace in either (their line is their forward op's, fwd.callsite)."""
    original, ours, _ = legacy
    outside_torch = 0
    for o, r in zip(original, ours):
        user = [f for f in o["trace"] if "/site-packages/torch/" not in f]
        assert r.get("callsite") == (user[-1] if user else None)
        outside_torch += bool(o["trace"]) and o["trace"][-1] != r.get("callsite")
    assert outside_torch == 32
