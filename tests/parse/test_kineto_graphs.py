"""Issue 43: a CUDA graph captured inside a PyTorch-profiler trace and replayed in it. The trace's replayed kernels
name no graph node (PyTorch 2.11), so parse ties each replay to its capture by launch order
(pyprof.parse.readers.kineto_graphs): the i-th activity of a one-stream replay is the i-th call captured. Synthetic
traces in the event shapes of tests/parse/test_kineto.py; what is not certain stays with the launching op, and parse
says why. Then two real traces of a timm ViT-S/16 captured on an H100 (tests/data/README.md)."""
from __future__ import annotations

import io
import json
import lzma
from pathlib import Path

import pytest
from test_kineto import PID, kernel, launch, op

from pyprof.parse import parse_file
from pyprof.parse.readers import kineto_graphs as kg
from pyprof.prof.aggregate import aggregate
from pyprof.prof.views import build
from pyprof.record import read_lines

MM_ARGS = {"Input Dims": [[64, 32], [32, 16]], "Input type": ["float", "float"], "Concrete Inputs": ["", ""]}


def step(name, ts, dur):
    return {"ph": "X", "cat": "user_annotation", "name": name, "pid": PID, "tid": PID, "ts": ts, "dur": dur,
            "args": {}}


def capture(t0: float, corr0: int) -> list[dict]:
    """A capture at t0 (us): mm then relu, each launching one kernel that does not run."""
    return [launch(t0, corr0, name="cudaStreamBeginCapture"),
            op("aten::mm", t0 + 10, 10, **MM_ARGS), launch(t0 + 12, corr0 + 1),
            op("aten::relu", t0 + 21, 5, **{"Input Dims": [[64, 16]], "Input type": ["float"]}),
            launch(t0 + 22, corr0 + 2),
            launch(t0 + 30, corr0 + 3, name="cudaStreamEndCapture")]


def replay(t0: float, corr: int, streams=(7, 7), nodes=False) -> list[dict]:
    """A graph launch at t0 (us) inside its step range, and the two kernels it ran; with ``nodes``, each kernel
    names its graph and node as Kineto does since 2026 (graph 3, nodes 41 and 42)."""
    gemm, relu = kernel("gemm_kernel", t0 + 5, 2, corr), kernel("relu_kernel", t0 + 8, 1, corr)
    gemm["args"]["stream"], relu["args"]["stream"] = streams
    if nodes:
        gemm["args"].update({"graph id": 3, "graph node id": 41})
        relu["args"].update({"graph id": 3, "graph node id": 42})
    return [step(f"ProfilerStep#{corr}", t0 - 5, 20), launch(t0, corr, name="cudaGraphLaunch"), gemm, relu]


def _parse(tmp_path, events: list[dict]):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [
        {"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150000000000, "computeMajor": 9, "computeMinor": 0,
         "numSms": 132}], "traceEvents": events}))
    out = io.StringIO()
    stats = parse_file(str(path), out)
    return [d for d in read_lines(out.getvalue().splitlines())], stats


def test_each_replayed_kernel_gets_the_op_captured_at_its_place(tmp_path):
    recs, stats = _parse(tmp_path, capture(100.0, 10) + replay(200.0, 20) + replay(300.0, 30))
    assert [(d["kShortName"], d["op"][-1]) for d in recs] == [("gemm_kernel", "mm"), ("relu_kernel", "relu")] * 2
    assert stats.graph_kernels == stats.graph_kernels_tied == 4 and stats.graph_launch_kernels == 0
    gemm = recs[0]
    assert [a["shape"] for a in gemm["args"]] == [[64, 32], [32, 16]]
    # the replay's own step, then the captured op: its times are the capture's, not the replay's, so none is given
    assert gemm["ranges"] == ["ProfilerStep#20", "aten::mm"] and gemm["range_ns"] == [195000, 215000, None, None]
    # each replay is a call of its own: the mm's FLOPs count once per replay, 2 * 64 * 32 * 16 each
    (ops,) = build(aggregate([("t", recs)]), ["operators"])
    c = ops.columns
    flops = {str(r[c.index("op")]): r[c.index("flops")] for r in ops.rows}
    assert flops["mm"] == 2 * (2 * 64 * 32 * 16)


@pytest.mark.parametrize("events, why", [
    (capture(100.0, 10) + capture(150.0, 40) + replay(200.0, 20), kg.AMBIGUOUS),
    (capture(100.0, 10) + replay(200.0, 20, streams=(7, 8)), kg.STREAMS),
    (capture(100.0, 10)[:3] + capture(100.0, 10)[5:] + replay(200.0, 20), kg.COUNT),
    (replay(200.0, 20) + capture(300.0, 10), kg.NO_CAPTURE),
], ids=["two-captures-of-its-length", "two-streams", "length-differs", "captured-after"])
def test_a_replay_whose_order_is_not_certain_keeps_its_launching_op_and_parse_says_why(tmp_path, events, why):
    from pyprof.parse.cli import _summary as summary

    recs, stats = _parse(tmp_path, events)
    assert stats.graph_kernels_tied == 0 and stats.graph_launch_kernels == 2
    assert stats.graph_untied == {why: 2}
    assert all(d["op"] == [] for d in recs)  # the graph launch was made outside every op
    assert f"2: {why}" in summary("t.json", stats)


def test_work_that_ran_during_a_capture_is_not_a_node(tmp_path):
    # another thread's eager kernel while the capture is open ran (it has its activity): it is not captured, and the
    # replay still matches the capture's two calls
    other = [op("aten::add", 115.0, 5, tid=PID + 1), launch(116.0, 99, tid=PID + 1), kernel("add_kernel", 117, 1, 99)]
    recs, stats = _parse(tmp_path, capture(100.0, 10) + other + replay(200.0, 20))
    assert stats.graph_kernels_tied == 2
    assert [d["op"][-1] for d in recs] == ["add", "mm", "relu"]


def test_node_ids_carry_a_tie_by_order_to_replays_order_cannot_tie(tmp_path):
    # the first replay ties by order; the second ran its two kernels on two streams (their order need not be the
    # capture's); of the third only the ReLU is left, and of the fourth only its kernels (launched before the trace
    # began): each kernel's node says which captured call it is
    cut = replay(400.0, 40, nodes=True)
    del cut[2]
    early = replay(500.0, 50, nodes=True)[2:]
    recs, stats = _parse(tmp_path, capture(100.0, 10) + replay(200.0, 20, nodes=True)
                         + replay(300.0, 30, streams=(7, 8), nodes=True) + cut + early)
    assert [(d["kShortName"], d["op"][-1]) for d in recs] == \
        [("gemm_kernel", "mm"), ("relu_kernel", "relu")] * 2 + [("relu_kernel", "relu")] + \
        [("gemm_kernel", "mm"), ("relu_kernel", "relu")]
    assert stats.graph_untied == {}


def test_node_ids_without_a_replay_tied_by_order_tie_nothing(tmp_path):
    # node ids name no captured call by themselves: with the only replay on two streams, nothing is tied
    recs, stats = _parse(tmp_path, capture(100.0, 10) + replay(300.0, 30, streams=(7, 8), nodes=True))
    assert stats.graph_kernels_tied == 0 and stats.graph_untied == {kg.STREAMS: 2}
    assert all(d["op"] == [] for d in recs)


def test_a_hip_graph_replay_is_counted_as_a_graph_replay():
    # vLLM's decode on an MI300 (TraceLens's test trace): one hipGraphLaunch ran 421 kernels (a recount of the
    # kernel events with its correlation, 505113), captured at start-up, before the trace
    from shared_files import EXTERNAL, require_shared

    require_shared()
    stats = parse_file(str(EXTERNAL / "tracelens_vllm_decode_full_graph_execution.json.gz"), io.StringIO())
    assert stats.graph_launch_kernels == 421 and stats.graph_untied == {kg.NO_CAPTURE: 421}


# -- real traces: a timm ViT-S/16 whose graph was captured and replayed inside the profiler (tests/data/graphs) -----
GRAPHS = Path(__file__).resolve().parents[1] / "data" / "graphs"


def _replayed(name: str) -> tuple[list[dict], int]:
    """The trace's records whose launch is a graph launch, and the kernels a JSON recount finds launched so."""
    events = json.loads(lzma.decompress((GRAPHS / name).read_bytes()))["traceEvents"]
    graph_corr = {e["args"]["correlation"] for e in events
                  if e.get("cat") == "cuda_runtime" and e["name"] == "cudaGraphLaunch"}
    n = sum(1 for e in events if e.get("cat") == "kernel" and e["args"].get("correlation") in graph_corr)
    out = io.StringIO()
    parse_file(str(GRAPHS / name), out)
    recs = list(read_lines(out.getvalue().splitlines()))
    return [r for r in recs if r.get("api") == "cudaGraphLaunch"], n


def _gemm_flops(recs: list[dict]) -> dict:
    (ops,) = build(aggregate([("x", recs)]), ["operators"])
    c = ops.columns
    return {r[c.index("op")]: r[c.index("flops")] for r in ops.rows}


def test_a_real_inference_graph_has_every_replayed_kernels_op_line_and_flops():
    # the forward (bf16, batch 32) captured and replayed 3 times on an H100 (PyTorch 2.11: no graph node ids):
    # every replayed kernel tied by order, with the line of its op; FLOPs per replay equal FlopCounterMode's count
    # of the same forward (flops_vit_train.json's forward ops: the same model, batch and shapes)
    recs, n = _replayed("kineto_vit_infer.pt.trace.json.xz")
    kernels = [r for r in recs if r["kind"] == "kernel"]
    assert len(kernels) == n == 378
    assert all(r["op"] and r.get("callsite") for r in kernels)
    flops = _gemm_flops(recs)
    ref = json.loads((GRAPHS / "flops_vit_train.json").read_text())["by_op"]
    assert flops["linear"] == 3 * ref["aten.addmm"]
    assert flops["scaled_dot_product_attention"] == 3 * ref["aten._scaled_dot_product_cudnn_attention"]
    assert flops["conv2d"] == 3 * ref["aten.convolution"]


def test_a_real_training_step_graph_ties_its_backward_too():
    # a whole step (forward, backward, AdamW capturable) captured and replayed 3 times: every replayed kernel tied,
    # backward kernels linked to their forward op. GEMM, attention and convolution FLOPs per replay equal
    # FlopCounterMode's; pyprof's linear backward adds the bias gradients' sums, M*N adds a layer: 12 blocks of
    # qkv, proj, fc1 and fc2 (out 1152 + 384 + 1536 + 384) over 32 x 197 tokens, and the head's 1000 over 32
    recs, n = _replayed("kineto_vit_train.pt.trace.json.xz")
    kernels = [r for r in recs if r["kind"] == "kernel"]
    assert len(kernels) == n
    assert all(r["op"] for r in kernels)
    assert sum(r["dir"] == "bprop" for r in kernels) > n // 3
    flops = _gemm_flops(recs)
    ref = json.loads((GRAPHS / "flops_vit_train.json").read_text())["by_op"]
    bias_adds = 32 * 197 * 12 * (1152 + 384 + 1536 + 384) + 32 * 1000
    assert flops["linear"] == 3 * ref["aten.addmm"]
    assert flops["linear (bprop)"] == 3 * (ref["aten.mm"] + bias_adds)
    assert flops["scaled_dot_product_attention (bprop)"] == 3 * ref["aten._scaled_dot_product_cudnn_attention_backward"]
    assert flops["conv2d (bprop)"] == 3 * ref["aten.convolution_backward"]


def test_calls_made_during_a_capture_are_counted_and_said():
    # the inference trace's capture, recounted with json: the work calls between cudaStreamBeginCapture and
    # cudaStreamEndCapture (kernel launches, async copies and memsets), none of which ran
    events = json.loads(lzma.decompress((GRAPHS / "kineto_vit_infer.pt.trace.json.xz").read_bytes()))["traceEvents"]
    runtime = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    (begin,) = [e["ts"] for e in runtime if e["name"] == "cudaStreamBeginCapture"]
    (end,) = [e["ts"] for e in runtime if e["name"] == "cudaStreamEndCapture"]
    work = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx", "cudaMemcpyAsync",
            "cudaMemsetAsync")
    n = sum(1 for e in runtime if begin < e["ts"] < end and e["name"] in work)
    stats = parse_file(str(GRAPHS / "kineto_vit_infer.pt.trace.json.xz"), io.StringIO())
    assert stats.graph_captured == n == 138
    from pyprof.parse.cli import _summary

    assert f"{n} kernel launches, copies and memsets made while a CUDA graph was captured ran nothing" in \
        _summary("t", stats)
