"""Kernels replayed from a CUDA graph (Nsight Systems' --cuda-graph-trace=node) tied to the ops that were running
when their graph nodes were captured: examples/cuda_graph.py (a whole transformer training step in one graph) on
an H100, captured whole and with --capture-range=cudaProfilerApi (tests/data/graphs, README there)."""
from __future__ import annotations

import io
import json
import lzma
import sqlite3
from pathlib import Path

import pytest
from parse_output import records_of

from pyprof.parse import parse_file
from pyprof.prof.aggregate import aggregate
from pyprof.prof.views import build
from pyprof.record import read_lines

DATA = Path(__file__).resolve().parents[1] / "data" / "graphs"


def _parse(name: str) -> tuple[list[dict], object]:
    out = io.StringIO()
    stats = parse_file(str(DATA / name), out)
    return list(read_lines(records_of(out.getvalue().splitlines()))), stats


def _graph_kernels(name: str, tmp_path) -> int:
    db = tmp_path / "g.sqlite"
    db.write_bytes(lzma.decompress((DATA / name).read_bytes()))
    con = sqlite3.connect(db)
    (n,) = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE graphNodeId IS NOT NULL").fetchone()
    con.close()
    return n


def test_replayed_kernels_carry_the_ops_of_their_capture(tmp_path):
    recs, stats = _parse("cuda_graph_all.sqlite.xz")
    replayed = _graph_kernels("cuda_graph_all.sqlite.xz", tmp_path)
    assert stats.graph_kernels == stats.graph_kernels_tied == replayed > 0
    graph = [d for d in recs if d["api"] == "cudaGraphLaunch" and d["kind"] == "kernel"]
    assert len(graph) == replayed
    # every replayed kernel has its op, and a line of the step's source (the model's or the training step's)
    assert all(d["op"] for d in graph)
    lines = {d["callsite"].rsplit("/", 1)[-1].split(":")[0] for d in graph if d["callsite"]}
    assert lines <= {"transformer.py", "cuda_graph.py"} and len(lines) == 2
    # 3 warm-up replays and 2 measured ones (the harness's defaults) of one graph of 386 kernels: 5 x 386 = 1930;
    # a measured replay runs inside its step's range, the outermost, above the ranges of the capture
    assert len(graph) == 5 * 386
    stepped = [d for d in graph if any(r.startswith("ProfilerStep#") for r in d["ranges"])]
    assert len(stepped) == 2 * 386 and all(d["ranges"][0].startswith("ProfilerStep#") for d in stepped)
    # and spends no host time per op
    assert all(d["host_ns"] is None for d in graph)
    # backward kernels captured in the graph keep their forward op
    bprop = [d for d in graph if d["dir"] == "bprop" and d["seqId"] and d["seqId"][0] is not None]
    assert bprop and all(d["fwd"] for d in bprop)


def test_a_replayed_step_has_the_flops_of_the_eager_step():
    # ProfilerStep#1 is one replay of the whole graph: its GEMM/attention FLOPs equal FlopCounterMode's count of
    # the eager step, measured on the same machine in the --flops run (flops_cuda_graph.json)
    recs, _ = _parse("cuda_graph_all.sqlite.xz")
    step = [d for d in recs if "ProfilerStep#1" in d["ranges"]]
    expected = json.loads((DATA / "flops_cuda_graph.json").read_text())["flops_per_step"]
    agg = aggregate([("x", step)])
    (ops,) = build(agg, ["operators"])
    c = ops.columns
    gemm = sum(r[c.index("flops")] or 0 for r in ops.rows
               if str(r[c.index("op")]).split(" ")[0] in ("linear", "scaled_dot_product_attention"))
    assert abs(gemm - expected) <= 0.03 * expected, (gemm, expected)


def test_a_graph_captured_before_the_range_is_counted_and_said(tmp_path):
    # With --capture-range the graph was captured before cudaProfilerStart: nsys keeps its nodes' creation (at
    # negative times) but not the ranges around them, so its replayed kernels stay without an op, counted
    recs, stats = _parse("cuda_graph_range.sqlite.xz")
    assert stats.graph_kernels == _graph_kernels("cuda_graph_range.sqlite.xz", tmp_path) > 0
    assert stats.graph_kernels_tied == 0
    assert not any(d["op"] for d in recs if d["api"] == "cudaGraphLaunch")


def test_replayed_memsets_take_their_node_too():
    # the graph's memsets (SDPA's and the loss's buffers zeroed inside ops) carry the lines of the ops that
    # zeroed them at capture, as the kernels do; before, they had only the graph launch's ranges (the step)
    recs, _ = _parse("cuda_graph_all.sqlite.xz")
    sets = [d for d in recs if d["kind"] == "memset" and d["api"] == "cudaGraphLaunch"]
    assert sets and any(d["callsite"] and d["callsite"].endswith(("transformer.py:29", "transformer.py:31"))
                        for d in sets)
    assert all(len(d["ranges"]) > 1 for d in sets if d["ranges"] and d["ranges"][0].startswith("ProfilerStep#"))
