"""Activation checkpointing captured on the GPU machine (examples/checkpoint.py, tests/data/README.md): the forward
ops recomputed during the backward pass are forward ops of their own, marked ``recompute``, and each backward kernel
links to the forward op that made its node. Expected counts are recounted from the capture itself (sqlite3 / json,
brute force)."""
from __future__ import annotations

import gzip
import io
import json
import lzma
import re
import sqlite3
from decimal import Decimal
from pathlib import Path

import pytest

from pyprof.parse import parse_file
from pyprof.record import read_lines


DATA = Path(__file__).resolve().parents[1] / "data"
# Autograd nodes and the engine's range around them (the patterns), and numbered texts.
NODE = re.compile(r"^autograd::engine::evaluate_function: |Backward\d*(?:,|$)|^torch::autograd::|CppNode<")
CAPTURES = ["nsys/pyprof/checkpoint.sqlite.xz", "nsys/pyprof/checkpoint_reentrant.sqlite.xz",
            "nsys/emit_nvtx/checkpoint.sqlite.xz", "kineto/checkpoint.pt.trace.json.gz"]


def _records(rel: str) -> list[dict]:
    out = io.StringIO()
    parse_file(str(DATA / rel), out, raw_markers=True)  # the tests read seqMarker
    return list(read_lines(out.getvalue().splitlines()))


def _recomputed(ranges_of_launch) -> tuple[int, int]:
    """(kernels in a node, kernels in a numbered non-node range inside a node), given each kernel's enclosing
    ranges (outermost first) as (name, numbered) pairs."""
    in_node = recomputed = 0
    for chain in ranges_of_launch:
        first = next((i for i, (name, _) in enumerate(chain) if NODE.search(name)), None)
        if first is None:
            continue
        in_node += 1
        recomputed += any(numbered and not NODE.search(name) for name, numbered in chain[first + 1:])
    return in_node, recomputed


def _nsys_chains(rel: str) -> list:
    db = sqlite3.connect(":memory:")
    db.deserialize(lzma.decompress((DATA / rel).read_bytes()))
    ranges: dict = {}
    for tid, start, end, text in db.execute(
            "SELECT e.globalTid, e.start, e.end, COALESCE(e.text, s.value) FROM NVTX_EVENTS e "
            "LEFT JOIN StringIds s ON s.id = e.textId WHERE e.eventType = 59 AND e.end IS NOT NULL"):
        ranges.setdefault(tid, []).append((start, -end, text or ""))
    for v in ranges.values():
        v.sort()
    chains = []
    for tid, start, end in db.execute(
            "SELECT r.globalTid, r.start, r.end FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
            "ON r.correlationId = k.correlationId AND (r.globalTid >> 24) = (k.globalPid >> 24)"):
        chains.append([(t.split(", ")[0], ", seq = " in t) for s, e, t in ranges.get(tid, ()) if s <= start and -e >= end])
    return chains


def _kineto_chains(rel: str) -> list:
    with gzip.open(DATA / rel) as f:
        events = [e for e in json.load(f, parse_float=Decimal)["traceEvents"] if e.get("ph") == "X"]
    ops: dict = {}
    for e in events:
        if e.get("cat") in ("cpu_op", "user_annotation"):
            ops.setdefault((e["pid"], e["tid"]), []).append((e["ts"], -e["dur"], e["name"],
                                                             "Sequence number" in e.get("args", {})))
    for v in ops.values():
        v.sort()
    launches = {e["args"]["correlation"]: e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")}
    chains = []
    for k in events:
        la = launches.get(k.get("args", {}).get("correlation")) if k.get("cat") == "kernel" else None
        if la is not None:
            t0, t1 = la["ts"], la["ts"] + la["dur"]
            chains.append([(n, num) for s, d, n, num in ops.get((la["pid"], la["tid"]), ()) if s <= t0 and s - d >= t1])
    return chains


@pytest.mark.parametrize("rel", CAPTURES)
def test_recomputed_forward_ops_are_forward_kernels_of_their_own(rel):
    recs = [r for r in _records(rel) if r["kind"] == "kernel"]
    chains = _kineto_chains(rel) if rel.startswith("kineto") else _nsys_chains(rel)
    in_node, recomputed = _recomputed(chains)
    mine = [r for r in recs if r["recompute"]]
    assert len(mine) == recomputed > 0
    assert all(r["dir"] == "fprop" and r["fwd"] is None for r in mine)
    # The recomputed ops are the residual stages' convolutions, batch norms, ReLUs and additions.
    assert {r["op"][0] for r in mine} <= {"conv2d", "batch_norm", "relu_", "relu", "add_", "__iadd__"}
    assert {"conv2d", "batch_norm"} <= {r["op"][0] for r in mine}
    assert sum(1 for r in recs if r["dir"] == "bprop") == in_node - recomputed


@pytest.mark.parametrize("rel", CAPTURES)
def test_backward_kernels_link_to_the_forward_op_that_made_their_node(rel):
    """Sequence numbers count per thread, so recomputed ops (on the engine's thread) reuse numbers of the main
    thread's ops. Non-reentrant checkpointing computes gradients with the nodes of the original forward pass:
    their links go to original forward ops. Reentrant checkpointing (CheckpointFunctionBackward) runs a backward
    pass of its own over the recomputed ops, from inside its node: those links go to recomputed ops."""
    recs = [r for r in _records(rel) if r["kind"] == "kernel"]
    forward: dict = {}
    for r in recs:
        if r["dir"] == "fprop":
            for seq in r["seqId"]:
                forward.setdefault((seq, r["recompute"]), set()).add((r["op"][0], json.dumps(r["args"])))
    numbered = [r for r in recs if r["dir"] == "bprop" and any(s is not None for s in r["seqId"])]
    assert numbered and all(r["fwd"] for r in numbered)
    reentrant = "reentrant" in rel
    wrong = 0
    for r in numbered:
        link = (r["fwd"]["op"], json.dumps(r["fwd"]["args"]))
        inner = reentrant and any(m.startswith("CheckpointFunctionBackward") for m in r["seqMarker"])
        same_side = forward.get((r["fwd"]["seq"], inner), set())
        other_side = forward.get((r["fwd"]["seq"], not inner), set())
        wrong += link not in same_side and link in other_side
    assert wrong == 0
