"""pyprof.parse on real traces from other projects (../shared/corpus/external, its README gives sources and counts).

Every expectation is recounted here from the trace itself with gzip + json (never with pyprof's readers), or is a
figure of the corpus README, which was counted independently of pyprof.
"""
from __future__ import annotations

import gzip
import io
import json
import re
from decimal import Decimal
from functools import lru_cache
from pathlib import Path

import pytest

from parse_synth import CORPUS

from pyprof.common import InputError
from pyprof.parse import parse_file
from pyprof.record import read_lines


EXTERNAL = CORPUS / "external"
# kernels / memcpy / memset, from the corpus README (counted there from the traces, without pyprof)
README_COUNTS = {
    "hta_trace_filter_sampled_rank-0.json.gz": (1154, 40, 10),
    "hta_trace_filter_sampled_rank-1.json.gz": (1104, 40, 10),
    "hta_ns_resolution_rank-0.pt.trace.json.gz": (4350, 1600, 145),
    "tracelens_mi300_Qwen1.5-0.5B-Chat.json.gz": (1516, 1, 0),
    "tracelens_b200_eager_trace.json.gz": (768, 161, 0),
    "kineto_tbplugin_resnet50_nw0_2021-06.pt.trace.json.gz": (8772, 12, 312),
}
# How an autograd node is named (the list): "...Backward", "torch::autograd::CppNode<...>", the engine's
# range "autograd::engine::evaluate_function: ...", and the engine's own nodes in torch::autograd.
NODE = re.compile(r"^autograd::engine::evaluate_function: |Backward\d*$|^torch::autograd::|CppNode<")


@pytest.fixture
def external(shared) -> Path:
    return EXTERNAL


@lru_cache(maxsize=None)
def _records(name: str) -> tuple:
    out = io.StringIO()
    parse_file(str(EXTERNAL / name), out, raw_markers=True)  # some tests read seqMarker
    return tuple(read_lines(out.getvalue().splitlines()))


@lru_cache(maxsize=None)
def _events(name: str) -> tuple:
    with gzip.open(EXTERNAL / name) as f:
        doc = json.load(f, parse_float=Decimal)  # exact: float64 cannot hold microseconds since 1970 to the ns
    return tuple(e for e in doc["traceEvents"] if e.get("ph") == "X"), doc


def _cat(e: dict) -> str:
    return str(e.get("cat", "")).lower()


@pytest.mark.parametrize("name", sorted(README_COUNTS))
def test_every_activity_has_one_record(external, name):
    recs = _records(name)
    kinds = [r["kind"] for r in recs]
    assert (kinds.count("kernel"), kinds.count("memcpy"), kinds.count("memset")) == README_COUNTS[name]
    assert all(type(r["tid"]) is int or r["tid"] is None for r in recs)


def test_rocprofv3_json_is_refused_in_one_line(external):
    with pytest.raises(InputError) as e:
        parse_file(str(external / "tracelens_rocprof_908_results.json.gz"), io.StringIO())
    assert "\n" not in str(e.value) and "traceEvents" in str(e.value)


def _linkable(name: str) -> tuple[int, int]:
    """(kernels launched inside a numbered autograd node, those whose forward op is in the trace), recounted
    by brute force: the launch event of each kernel (same correlation), the cpu_op events of the launching
    thread that enclose it, the innermost numbered node among them, and a numbered op of that number that is
    not a node."""
    events, _ = _events(name)
    ops = [e for e in events if _cat(e) == "cpu_op"]
    forward = {e["args"]["Sequence number"] for e in ops
               if "Sequence number" in e.get("args", {}) and not NODE.search(e["name"])}
    by_thread: dict = {}
    for e in ops:
        by_thread.setdefault((e["pid"], e["tid"]), []).append(e)
    launches = {e["args"]["correlation"]: e for e in events if _cat(e) == "cuda_runtime" and "correlation" in e.get("args", {})}
    inside = linkable = 0
    for k in events:
        if _cat(k) != "kernel" or k["args"].get("correlation") not in launches:
            continue
        la = launches[k["args"]["correlation"]]
        t0, t1 = la["ts"], la["ts"] + la.get("dur", 0)
        around = [o for o in by_thread.get((la["pid"], la["tid"]), ()) if o["ts"] <= t0 and o["ts"] + o["dur"] >= t1]
        nodes = [o for o in sorted(around, key=lambda o: (o["ts"], -o["dur"]))
                 if NODE.search(o["name"]) and "Sequence number" in o.get("args", {})]
        if nodes:
            inside += 1
            linkable += nodes[-1]["args"]["Sequence number"] in forward
    return inside, linkable


@pytest.mark.parametrize("rank", [0, 1])
def test_cpp_custom_nodes_parse_and_link_every_linkable_kernel(external, rank):
    """TorchRec's C++ custom Functions (CppNode<...>, no Backward suffix) crashed parse with RecursionError.
    These traces are sampled (HTA's trace_filter data: most forward ops were dropped), so only the kernels whose
    forward op survived can be linked: all of those must be."""
    name = f"hta_trace_filter_sampled_rank-{rank}.json.gz"
    recs = _records(name)
    inside, linkable = _linkable(name)
    kernels = [r for r in recs if r["kind"] == "kernel"]
    numbered = [r for r in kernels if r["dir"] == "bprop" and any(s is not None for s in r["seqId"])]
    assert len(numbered) == inside
    assert sum(1 for r in numbered if r["fwd"]) == linkable > 0
    # A forward link never names backward work.
    assert not any(r["fwd"] and NODE.search(r["fwd"]["op"]) for r in recs)
    cpp = [r for r in kernels if any("CppNode<" in m for m in r["seqMarker"])]
    assert cpp and all(r["dir"] == "bprop" for r in cpp)


TBPLUGIN = "kineto_tbplugin_resnet50_nw0_2021-06.pt.trace.json.gz"


def test_pytorch_1_9_layout(external):
    """PyTorch 1.9 wrote thread ids as strings and record_function ranges (ProfilerStep#5, Optimizer.step#SGD.step)
    with cat "Operator", like ops: they must be neither the op of a kernel nor lose the backward thread."""
    events, _ = _events(TBPLUGIN)
    recs = _records(TBPLUGIN)
    annotations = {e["name"] for e in events if _cat(e) == "operator" and "#" in e["name"]}
    assert {"ProfilerStep#5", "Optimizer.step#SGD.step"} <= annotations
    assert not any(r["op"] and r["op"][0] in annotations for r in recs)
    # The autograd engine's thread: the one that runs the *Backward nodes. Every kernel it launched is backward work.
    bthreads = {e["tid"] for e in events if _cat(e) == "operator" and NODE.search(e["name"])}
    assert len(bthreads) == 1
    launched = {e["args"]["correlation"] for e in events if _cat(e) == "runtime" and e["tid"] in bthreads}
    backward = sum(1 for e in events if _cat(e) == "kernel" and e["args"].get("correlation") in launched)
    assert backward == 3228  # the count of the backward thread's kernels
    assert sum(1 for r in recs if r["kind"] == "kernel" and r["dir"] == "bprop") == backward
    assert {r["tid"] for r in recs if r["dir"] == "bprop"} == {int(t) for t in bthreads}


def test_pytorch_profiler_occupancy_and_shared_memory_are_kept(external):
    events, _ = _events(TBPLUGIN)
    kernels = sorted((e for e in events if _cat(e) == "kernel"), key=lambda e: e["ts"])
    recs = [r for r in _records(TBPLUGIN) if r["kind"] == "kernel"]
    given = [e["args"].get("est. achieved occupancy %") for e in kernels]
    assert sum(v is not None for v in given) == sum(r["est_occupancy_pct"] is not None for r in recs) > 8000
    # Records are in start order, as the sorted events: same values one by one (ties of start aside).
    same = sum(1 for e, r in zip(kernels, recs) if e["ts"] * 1000 == r["start_ns"]
               and e["args"].get("est. achieved occupancy %") == r["est_occupancy_pct"]
               and e["args"].get("shared memory") == r["smem_bytes"])
    assert same >= 0.99 * len(recs)


MI300 = "tracelens_mi300_Qwen1.5-0.5B-Chat.json.gz"


def test_gpu_of_a_device_the_trace_does_not_describe(external):
    """The MI300 trace describes only device 0 while its kernels ran on device 2: the GPU is the one model it
    describes, and activities without a launch event belong to the trace's process, not to 'unknown'."""
    events, doc = _events(MI300)
    (model,) = {d["name"] for d in doc["deviceProperties"]}
    devices = {e["args"]["device"] for e in events if _cat(e) == "kernel"}
    assert devices == {2} and [d["id"] for d in doc["deviceProperties"]] == [0]
    recs = _records(MI300)
    assert {r["gpu"] for r in recs} == {model} == {"AMD Instinct MI300X VF"}
    (cpu_pid,) = {e["pid"] for e in events if _cat(e) == "cuda_runtime"}
    assert {r["pid"] for r in recs} == {cpu_pid}


def test_short_name_is_the_function_name(external):
    """``std::enable_if<(((8)>(0)))&&...::type vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(...)`` is the
    function ``fused_add_rms_norm_kernel`` (it used to become ``8``)."""
    recs = _records("tracelens_b200_eager_trace.json.gz")
    fused = [r for r in recs if "vllm::fused_add_rms_norm_kernel<" in r["kLongName"]]
    assert len(fused) == 72 and {r["kShortName"] for r in fused} == {"fused_add_rms_norm_kernel"}
    for name in README_COUNTS:
        for r in _records(name):
            if r["kind"] != "kernel":
                continue
            short = r["kShortName"]
            assert short and not short[0].isdigit() and "<" not in short and "(" not in short, (name, short)


def test_backward_summary_counts_every_backward_kernel(external, capsys):
    from pyprof.parse import cli

    assert cli.main(["-o", "/dev/null", str(external / TBPLUGIN)]) == 0
    err = capsys.readouterr().err
    assert "3228 backward kernels" in err and "no backward kernels" not in err


def test_timestamps_become_integer_nanoseconds(external):
    """Kineto writes microseconds; records keep nanoseconds as integers (1.5 us -> 1500 ns)."""
    events, _ = _events("hta_ns_resolution_rank-0.pt.trace.json.gz")
    starts = sorted(int(e["ts"] * 1000) for e in events if _cat(e) == "kernel")
    recs = [r["start_ns"] for r in _records("hta_ns_resolution_rank-0.pt.trace.json.gz") if r["kind"] == "kernel"]
    assert recs == starts


def test_pytorch_1_9_convolutions_get_their_output_shape_from_their_backward_node(external):
    """PyTorch 1.9 traces record a convolution's stride as a type without a value; the op's backward node has its
    output's gradient as first input, whose shape is the output's: recounted here by sequence number."""
    events, _ = _events(TBPLUGIN)
    grads = {}
    for e in events:
        a = e.get("args", {})
        if _cat(e) == "operator" and NODE.search(e["name"]) and "Sequence number" in a and a.get("Input Dims"):
            grads.setdefault((e["pid"], a["Sequence number"]), a["Input Dims"][0])
    convs = [r for r in _records(TBPLUGIN) if r["kind"] == "kernel" and r["dir"] == "fprop" and r["op"][:1] == ["conv2d"]]
    assert convs and all(r["outputs"] == [grads[(r["pid"], r["seqId"][0])]] for r in convs)
