"""Issue 43: a CUDA graph captured before the profiled range. pyprof.init() keeps the ranges the capture pushed and
writes them into the capture when profiling starts (graph marks, pyprof.nvtx.graphs); parse places them on the
profile's timeline and ties the replayed kernels' nodes to them. Captures on an H100 (tests/data/README.md):
a 3-layer MLP and a Hugging Face Llama's generate() with a static KV cache, each captured before
cudaProfilerStart, and examples/cuda_graph.py's whole training step."""
from __future__ import annotations

import io
import json
import lzma
import sqlite3
import threading

from pathlib import Path

import pytest
from parse_output import records_of

from pyprof.parse import parse_file
from pyprof.parse.readers import graph_marks
from pyprof.prof.aggregate import aggregate
from pyprof.prof.views import build
from pyprof.record import GRAPH_MARK_PREFIX, read_lines

DATA = Path(__file__).resolve().parents[1] / "data" / "graphs"


def _parse(name: str) -> tuple[list[dict], object]:
    out = io.StringIO()
    stats = parse_file(str(DATA / name), out)
    return [r for r in read_lines(records_of(out.getvalue().splitlines()))], stats


def _count(name: str, tmp_path, sql: str) -> int:
    db = tmp_path / "g.sqlite"
    db.write_bytes(lzma.decompress((DATA / name).read_bytes()))
    con = sqlite3.connect(db)
    (n,) = con.execute(sql).fetchone()
    con.close()
    return n


def _flops_by_op(recs: list[dict]) -> dict:
    (ops,) = build(aggregate([("x", recs)]), ["operators"])
    c = ops.columns
    out: dict = {}
    for r in ops.rows:
        op = str(r[c.index("op")]).split(" ")[0]
        out[op] = out.get(op, 0) + (r[c.index("flops")] or 0)
    return out


def test_an_mlp_graph_captured_before_the_range_has_its_ops_and_flops(tmp_path):
    recs, stats = _parse("mlp_prewindow.sqlite.xz")
    replayed = _count("mlp_prewindow.sqlite.xz", tmp_path,
                      "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE graphNodeId IS NOT NULL")
    # the graph's nodes were created before cudaProfilerStart (negative times in the export)
    assert _count("mlp_prewindow.sqlite.xz", tmp_path, "SELECT max(start) FROM CUDA_GRAPH_NODE_EVENTS") < 0
    assert stats.graph_kernels == stats.graph_kernels_tied == replayed == 15
    # the line of the module call inside the capture (prewindow_mlp.py, run as probe43.py)
    assert all(r["op"] and r["callsite"].endswith("probe43.py:22") for r in recs)
    # 3 replays of Linear(256, 512) and Linear(512, 256) on a 64 x 256 batch: 2*64*256*512 FLOPs each, twice
    assert _flops_by_op(recs)["linear"] == 3 * 2 * (2 * 64 * 256 * 512)


def test_generate_with_a_static_cache_replays_decode_graphs_with_their_flops():
    # transformers compiles the decode step (reduce-overhead: CUDA graphs) during the warm-up generate() calls; the
    # profiled call's 47 decode forwards are graph replays, the prefill is eager
    recs, stats = _parse("llama_generate_static.sqlite.xz")
    assert stats.graph_kernels == stats.graph_kernels_tied == 3666
    assert all(r["op"] for r in recs if r["kind"] == "kernel")
    flops = _flops_by_op(recs)
    # Llama: hidden 1024, 4 layers, 16 heads, 4 KV heads of 64, MLP 2816, vocabulary 32000, batch 4. Weights per
    # layer: q, o 1024x1024; k, v 1024x256; gate, up 1024x2816; down 2816x1024: 11,272,192 multiply-adds a token.
    layer = 2 * 1024 * 1024 + 2 * 1024 * 256 + 3 * 1024 * 2816
    head = 1024 * 32000
    decode = 2 * 4 * (4 * layer + head)  # one token of each of 4 sequences
    assert flops["mm"] == 47 * decode  # the replayed graphs' matrix products
    # the eager prefill: 128 tokens through the layers, the head on the last token alone (logits_to_keep=1)
    assert flops["linear"] == 2 * 4 * 128 * 4 * layer + 2 * 4 * head


def test_reduce_overhead_training_replays_with_the_flops_of_flopcountermode(tmp_path):
    # a timm ViT-S/16 (batch 32, bf16 autocast) trained under torch.compile(mode="reduce-overhead"): CUDA-graph trees
    # captured its forward and backward graphs during the 3 warm-up steps; 2 steps profiled
    recs, stats = _parse("vit_reduce_overhead.sqlite.xz")
    replayed = _count("vit_reduce_overhead.sqlite.xz", tmp_path,
                      "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE graphNodeId IS NOT NULL")
    assert stats.graph_kernels == stats.graph_kernels_tied == replayed == 1234
    assert all(r["op"] for r in recs if r["kind"] == "kernel")
    expected = json.loads((DATA / "flops_vit_train.json").read_text())["by_op"]  # one eager step, same machine
    flops = _flops_by_op(recs)
    # the generated graphs' matrix products, attention and convolutions, twice (2 steps): each equals the count
    assert flops["addmm"] == 2 * expected["aten.addmm"]
    assert flops["mm"] == 2 * expected["aten.mm"]
    assert flops["_scaled_dot_product_cudnn_attention"] == 2 * expected["aten._scaled_dot_product_cudnn_attention"]
    assert flops["_scaled_dot_product_cudnn_attention_backward"] == \
        2 * expected["aten._scaled_dot_product_cudnn_attention_backward"]
    assert flops["convolution"] == 2 * (expected["aten.convolution"] + expected["aten.convolution_backward"])


def test_a_training_step_graph_captured_before_the_range_has_its_ops_lines_and_flops(tmp_path):
    # examples/cuda_graph.py, the step captured before cudaProfilerStart: pyprof's own ranges (forward ops, the
    # optimizer's foreach ops) and, through the hooks on the backward pass, each autograd node's range and its
    # forward op's number are kept. Every replayed kernel is tied; 95% of the replayed time has its op and line
    recs, stats = _parse("cuda_graph_prewindow.sqlite.xz")
    replayed = _count("cuda_graph_prewindow.sqlite.xz", tmp_path,
                      "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE graphNodeId IS NOT NULL")
    assert stats.graph_kernels == stats.graph_kernels_tied == replayed
    acts = [r for r in recs if r["kind"] in ("kernel", "memcpy", "memset")]
    total = sum(r["kDuration"] for r in acts)

    def line(r):  # a backward kernel's line is its forward op's
        return r.get("callsite") or (r.get("fwd") or {}).get("callsite")

    # (the rest: the accumulation of gradients into .grad, AccumulateGrad's kernels, which have no number)
    assert sum(r["kDuration"] for r in acts if r["op"] and line(r)) >= 0.95 * total
    tied = [r for r in recs if r["kind"] == "kernel" and r["op"]]
    assert {r["op"][0] for r in tied} >= {"linear", "scaled_dot_product_attention", "layer_norm", "_foreach_div_"}
    linked = [r for r in tied if r["dir"] == "bprop" and r.get("fwd")]
    assert {r["fwd"]["op"] for r in linked} >= {"linear", "scaled_dot_product_attention", "layer_norm"}
    assert all(r["fwd"]["args"] and r["fwd"]["callsite"] for r in linked if r["fwd"]["op"] == "linear")
    # two replays of one step: the GEMM and attention FLOPs, forward and backward, are twice FlopCounterMode's
    # count of the eager step (within 3%: pyprof counts the bias gradients' sums too)
    flops = _flops_by_op(recs)
    expected = json.loads((DATA / "flops_cuda_graph.json").read_text())["flops_per_step"]
    gemm = flops["linear"] + flops["scaled_dot_product_attention"]
    assert abs(gemm - 2 * expected) <= 0.03 * 2 * expected, (gemm, expected)
    # FLOPs and bytes for 95% of the replayed time, on the kernel or another of its call (the rest: AccumulateGrad)
    cov = aggregate([("x", recs)]).coverage
    assert cov.time_ns == total and cov.own_ns + cov.elsewhere_ns >= 0.95 * total


def test_a_zero_fill_writes_its_list_once_and_reads_nothing(tmp_path):
    # the step's zero_grad(set_to_none=False) is one _foreach_zero_ over the Encoder's parameters, in bf16:
    # embedding and head 32000*1024 each, four blocks of 12,596,224 (qkv, proj, fc1, fc2 with biases, two
    # LayerNorms), a final LayerNorm of 2*1024: 115,922,944 elements, 2 B each, written once a replay (two)
    import pyprof

    path = tmp_path / "g.dict"
    with open(path, "w") as f:
        parse_file(str(DATA / "cuda_graph_prewindow.sqlite.xz"), f)
    df = pyprof.load(str(path))
    zero = df[df.op == "_foreach_zero_"]
    params = 2 * 32000 * 1024 + 4 * 12_596_224 + 2 * 1024
    assert params == 115_922_944
    assert len(zero) == 12 and zero.bytes.sum() == pytest.approx(2 * 2 * params, rel=1e-6)
    assert (zero.roofline_pct < 100).all()  # it read 164% when the list was counted read as well


def test_without_marks_a_graph_from_before_the_range_stays_untied():
    # captured before graph marks existed: the nodes' ranges are not in the export, and parse says so
    recs, stats = _parse("cuda_graph_range.sqlite.xz")
    assert stats.graph_kernels > 0 and stats.graph_kernels_tied == 0


class FakeGraph:
    """What a graph capture does to pyprof: begin, the body's ops, end (no CUDA on this machine)."""

    def capture_begin(self):
        pass

    def capture_end(self):
        pass


@pytest.fixture
def watched():
    """pyprof.init() recording into a sink, with FakeGraph's captures watched: (the sink, graphs, nvtx's state)."""
    import pyprof
    from pyprof.nvtx import graphs, state

    sink = pyprof.RecordingSink()
    pyprof.init(sink=sink, modules=False, backward=False)
    try:
        graphs.recorder.__init__()
        graphs.install(state, FakeGraph)
        yield sink, graphs, state
    finally:
        pyprof.uninit()
        graphs.recorder.__init__()


# -- the marks, unit by unit ------------------------------------------------------------------------------------
PID = 77 << 24


def _mark(tid: int, ranges: list, graph: int = 1) -> str:
    return GRAPH_MARK_PREFIX + json.dumps(graph) + "," + json.dumps({"tid": tid, "ranges": ranges})[1:]


def test_marks_are_placed_by_the_least_offset_of_the_process():
    # two marks of one process read the clock at 1,000 and 2,000 and were pushed at 5,100 and 6,000 on the
    # profile's timeline: offsets 4,100 and 4,000 (the first push waited 100 ns); 4,000 places both
    rows = [(PID | 5, 5_100, _mark(9, [[10, 20, "a", 1]]), 1_000),
            (PID | 5, 6_000, _mark(9, [[30, 40, "b", 2]]), 2_000)]
    odd: dict = {}
    placed = graph_marks.ranges(rows, ~0xFFFFFF, 0xFFFFFF, odd)
    assert placed == [(PID | 9, 4_010, 4_020, "a", 1), (PID | 9, 4_030, 4_040, "b", 2)] and not odd


def test_a_mark_written_again_at_a_later_profiler_start_counts_once():
    # --capture-range-end=repeat: every cudaProfilerStart writes the kept captures again; their ranges are one set
    mark = _mark(9, [[10, 20, "a", 1]])
    rows = [(PID | 5, 5_000, mark, 1_000), (PID | 5, 9_000, mark, 5_000)]
    assert graph_marks.ranges(rows, ~0xFFFFFF, 0xFFFFFF, {}) == [(PID | 9, 4_010, 4_020, "a", 1)]


@pytest.mark.parametrize("text,clock", [
    ("{not json", 1), (GRAPH_MARK_PREFIX + '1,"tid":-1,"ranges":[]}', 1),
    (GRAPH_MARK_PREFIX + '1,"tid":3,"ranges":[[20,10,"a",1]]}', 1),  # pops before it pushes
    (GRAPH_MARK_PREFIX + '1,"tid":3,"ranges":[[1,2,3,1]]}', 1),  # a text that is not one
    (GRAPH_MARK_PREFIX + '1,"tid":3,"ranges":[[1,2,"a",1]]}', None),  # no clock reading
    (GRAPH_MARK_PREFIX + '1,"tid":3,"ranges":[[9223372036854775800,9223372036854775807,"a",1]]}', -100),
])
def test_a_damaged_mark_is_left_out_and_counted(text, clock):
    odd: dict = {}
    assert graph_marks.ranges([(PID | 5, 1_000, text, clock)], ~0xFFFFFF, 0xFFFFFF, odd) == []
    assert odd == {graph_marks.DAMAGED: 1}


def test_the_capture_records_its_own_threads_ranges_and_writes_them_as_marks():
    import torch

    import pyprof
    from pyprof.nvtx import graphs, state

    sink = pyprof.RecordingSink()
    pyprof.init(sink=sink, modules=False, backward=False)
    try:
        graphs.recorder.__init__()
        torch.ones(2)  # before the capture: not kept
        graphs.recorder.begin(state.emitter)
        other = threading.Thread(target=lambda: torch.zeros(2))  # another thread's op during it: not kept
        other.start()
        other.join()
        torch.ones(3).add(1)
        graphs.recorder.end()
        torch.ones(4)  # after: not kept
        (capture,) = graphs.recorder.captures
        assert [json.loads(r[2])["op"] for r in capture.ranges] == ["ones", "add"]
        assert all(r[0] <= r[1] for r in capture.ranges) and capture.ranges[0][1] <= capture.ranges[1][0]
        before = len(sink.events)
        assert graphs.write_marks(state.emitter) == 1
        (push, pop) = sink.events[before:]
        assert push[1].startswith(GRAPH_MARK_PREFIX) and pop == ("pop",)
        # parse's reading of the mark, pushed at 1,000,000 on the profile's timeline, gives the ranges back moved
        # by that time less the clock's reading (the push's payload)
        (a, b) = graph_marks.ranges([(PID, 1_000_000, push[1], push[2])], ~0xFFFFFF, 0xFFFFFF, {})
        shift = 1_000_000 - push[2]
        assert (a[1] - shift, a[2] - shift, b[1] - shift) == (capture.ranges[0][0], capture.ranges[0][1],
                                                             capture.ranges[1][0])
        assert a[0] == PID | (capture.tid & 0xFFFFFF)
    finally:
        pyprof.uninit()
        graphs.recorder.__init__()


def test_a_capture_while_the_markers_are_off_turns_them_on_for_itself(watched):
    # pyprof run before its window keeps the wrappers installed but off; a graph captured then (reduce-overhead's
    # warm-up, a server's start-up) is captured once, so its ranges are kept
    import torch

    sink, graphs, state = watched
    state.emitter = None  # installed and off, as install_off() leaves pyprof run's boot before its window
    torch.ones(2)  # off: no range
    g = FakeGraph()
    g.capture_begin()
    torch.zeros(3)
    g.capture_end()
    torch.ones(4)  # off again
    assert state.emitter is None
    (capture,) = graphs.recorder.captures
    assert [json.loads(r[2])["op"] for r in capture.ranges] == ["zeros"]
    assert [json.loads(e[1])["op"] for e in sink.events if e[0] == "push"] == ["zeros"]


def test_a_backward_pass_during_a_capture_keeps_each_nodes_range_and_its_forward_ops_number(watched):
    # autograd's own ranges come from C++ and are lost with a graph captured before the window: the capture keeps
    # them itself, in emit_nvtx's words, so that parse links the backward kernels to their forward op
    import torch

    _sink, graphs, _state = watched
    w = torch.randn(4, 3, requires_grad=True)
    x = torch.randn(2, 3)
    torch.nn.functional.linear(x, w).sum().backward()  # outside a capture: nothing kept
    assert graphs.recorder.captures == []
    g = FakeGraph()
    g.capture_begin()
    y = torch.nn.functional.linear(x, w)
    loss = y.relu().sum()
    loss.backward()
    g.capture_end()
    (capture,) = graphs.recorder.captures  # CPU tensors: the engine ran on this thread
    texts = [r[2] for r in capture.ranges]
    # linear made two nodes (t's and addmm's: seq n, n+1), relu one, sum one, each numbered inside its op
    n = y.grad_fn._sequence_nr()
    assert [t for t in texts if ", seq = " in t and "Backward" not in t] == \
        [f"linear, seq = {n - 1}", f"linear, seq = {n}", f"relu, seq = {n + 1}", f"sum, seq = {n + 2}"]
    # the backward nodes, in the order the engine ran them, each inside the engine's range of the same name
    nodes = [t for t in texts if "Backward" in t and not t.startswith(graphs.ENGINE_PREFIX)]
    assert nodes == [f"SumBackward0, seq = {n + 2}", f"ReluBackward0, seq = {n + 1}",
                     f"{y.grad_fn.name()}, seq = {n}", f"TBackward0, seq = {n - 1}"]
    assert texts.count(graphs.ENGINE_PREFIX + "SumBackward0") == 1
    # ranges nest: every numbered range lies inside the range pushed just before it; a forward op's numbers end
    # before the op's range does (parse pops a range that ends where another begins before pushing that one)
    for i, r in enumerate(capture.ranges):
        if ", seq = " in r[2]:
            parent = capture.ranges[i - 1] if "Backward" in r[2] else next(
                p for p in reversed(capture.ranges[:i]) if ", seq = " not in p[2])
            assert parent[0] <= r[0] <= r[1] <= parent[1]
            assert "Backward" in r[2] or r[1] < parent[1]
    assert w.grad is not None


def test_every_node_of_a_deep_backward_pass_keeps_its_range(watched):
    # the nodes are found by walking the graph from the loss; torch makes a new Python object for a node each time
    # one is asked for, and frees it when dropped, so the walk keeps the nodes it saw (an id could be reused)
    import torch

    _sink, graphs, _state = watched
    layers = [m for _ in range(24) for m in (torch.nn.Linear(8, 8), torch.nn.GELU())]
    net = torch.nn.Sequential(*layers)
    g = FakeGraph()
    g.capture_begin()
    loss = torch.nn.functional.cross_entropy(net(torch.randn(4, 8)), torch.zeros(4, dtype=torch.long))
    numbered = [n for n in graphs.graph_nodes([loss.grad_fn]) if 0 <= n._sequence_nr() < graphs._NO_SEQ]
    loss.backward()
    g.capture_end()
    (capture,) = graphs.recorder.captures
    ran = [r[2] for r in capture.ranges if r[2].startswith(graphs.ENGINE_PREFIX)]
    # cross_entropy's two nodes, then per layer GELU's, and Linear's addmm and transpose: 2 + 24 * 3
    assert len(numbered) == len(ran) == 2 + 24 * 3


def test_uninit_puts_autograd_back():
    import torch

    import pyprof

    original = torch.autograd.backward
    pyprof.init(sink=pyprof.RecordingSink(), modules=False, backward=False)
    try:
        assert getattr(torch.autograd.backward, "_pyprof_graphs", False)
    finally:
        pyprof.uninit()
    assert torch.autograd.backward is original


def test_backward_nodes_with_their_autograd_ranges_alone_keep_their_flops(tmp_path):
    # what a graph captured before the window keeps of its backward pass: each node's range, not the aten ops
    # inside it. examples/cuda_graph.py's export with the backward thread's aten ranges deleted gives every op the
    # FLOPs it has with them; cross_entropy's two nodes (NllLossBackward0, LogSoftmaxBackward0) count its backward
    # once, not twice
    db = tmp_path / "g.sqlite"
    db.write_bytes(lzma.decompress((DATA / "cuda_graph_all.sqlite.xz").read_bytes()))
    con = sqlite3.connect(db)
    text = "coalesce(e.text, s.value)"
    deleted = con.execute(
        f"DELETE FROM NVTX_EVENTS WHERE rowid IN (SELECT e.rowid FROM NVTX_EVENTS e LEFT JOIN StringIds s "
        f"ON s.id = e.textId WHERE {text} LIKE 'aten::%' AND e.globalTid IN (SELECT e.globalTid FROM NVTX_EVENTS e "
        f"LEFT JOIN StringIds s ON s.id = e.textId WHERE {text} LIKE 'autograd::engine::evaluate_function:%'))"
    ).rowcount
    con.commit()
    con.close()
    assert deleted > 1000
    out = io.StringIO()
    parse_file(str(db), out)
    bare = list(read_lines(records_of(out.getvalue().splitlines())))
    full, _ = _parse("cuda_graph_all.sqlite.xz")
    assert not any(r.startswith("aten::") for d in bare if d["dir"] == "bprop" for r in d["ranges"])
    # (AccumulateGrad's kernel, an aten add_ with its range, is named by its node without it: no FLOPs either way)
    assert {k: v for k, v in _flops_by_op(bare).items() if v} == {k: v for k, v in _flops_by_op(full).items() if v}
    step = [d for d in bare if "ProfilerStep#1" in d["ranges"]]
    flops = _flops_by_op(step)
    expected = json.loads((DATA / "flops_cuda_graph.json").read_text())["flops_per_step"]
    gemm = flops["linear"] + flops["scaled_dot_product_attention"]
    assert abs(gemm - expected) <= 0.03 * expected, (gemm, expected)


def test_under_the_pytorch_profiler_a_replayed_kernel_has_the_graph_launchs_op_and_parse_says_so():
    # a Kineto trace from another project (HTA's test data: torch.compile's CUDA graphs replayed): its kernels name
    # no graph node, so nothing ties them to the ops captured into the graph; parse counts them and says why
    import gzip

    from shared_files import EXTERNAL, require_shared

    from pyprof.parse.cli import _summary as summary

    require_shared()
    path = EXTERNAL / "hta_negative_queue_length_rank0.json.gz"
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    launches = {e["args"]["correlation"] for e in events if e.get("name") == "cudaGraphLaunch"}
    expected = sum(1 for e in events if e.get("cat") == "kernel" and e["args"].get("correlation") in launches)
    out = io.StringIO()
    stats = parse_file(str(path), out)
    assert stats.graph_launch_kernels == expected == 135 and stats.graph_kernels == 0
    said = summary(str(path), stats)
    assert f"{expected} kernels replayed from CUDA graphs without their graph node" in said
    # why: the graphs were captured before the trace began (no stream capture in it), and what to do instead
    assert f"{expected}: their capture is not in the trace (made before it began" in said
    assert "pyprof.init() under Nsight Systems keeps a capture made at any time" in said
    # an nsys export with node-level graph tracing names every node: nothing of the kind is said
    _, nsys_stats = _parse("cuda_graph_all.sqlite.xz")
    assert nsys_stats.graph_launch_kernels == 0 and "without their graph node" not in summary("x", nsys_stats)
