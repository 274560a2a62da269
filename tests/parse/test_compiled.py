"""torch.compile captures under pyprof.init() (tests/data/compiled, README there): every kernel of a compiled graph
carries the aten ops it fuses, their shapes and the user's line, in Nsight Systems exports and PyTorch-profiler
traces, in each of torch.compile's modes; a step's GEMM and attention FLOPs equal FlopCounterMode's count of the
same step run eagerly in the same run."""
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
from pyprof.prof.table.groups import callsite_key, op_key
from pyprof.prof.views import build
from pyprof.record import read_lines

DATA = Path(__file__).resolve().parents[1] / "data" / "compiled"
# capture -> its FlopCounterMode count (the eager step of the same run)
CAPTURES = {
    "compiled.sqlite.xz": "flops_compiled.json",  # default mode, the measured steps
    "compiled_templates.sqlite.xz": "flops_compiled_templates.json",  # max-autotune-no-cudagraphs: Triton GEMMs
    "compiled_reduce.sqlite.xz": "flops_compiled_reduce.json",  # reduce-overhead: CUDA graphs, the whole run
    "compiled_max.sqlite.xz": "flops_compiled_max.json",  # max-autotune: CUDA graphs, the whole run
    "compiled_lm.sqlite.xz": "flops_compiled_lm.json",  # a Llama-architecture LM from transformers
    "compiled.pt.trace.json.gz": "flops_compiled.json",  # PyTorch profiler, --capture compiled
    "compiled_lm.pt.trace.json.gz": "flops_compiled_lm.json",
}
# The example's MLP: x (512, 1024) -> Linear(1024, 4096) -> GELU -> Linear(4096, 1024), one training step:
# forward 2 GEMMs of 2*512*1024*4096 FLOPs, backward 3 (the second layer's input gradient and both weight
# gradients: x needs none)
MLP_STEP_FLOPS = 5 * 2 * 512 * 1024 * 4096
_cache: dict = {}


def _records(name: str) -> tuple[list[dict], object]:
    if name not in _cache:
        out = io.StringIO()
        stats = parse_file(str(DATA / name), out)
        _cache[name] = (list(read_lines(records_of(out.getvalue().splitlines()))), stats)
    return _cache[name]


def _one_step(recs: list[dict]) -> tuple[list[dict], int]:
    """The activities of the measured steps and how many: launched from the first ProfilerStep's first launch to
    the next step's (a closed window; whole-run captures go on after the last step), or the whole trace of the
    harness's 2 measured steps where it records no step range (the PyTorch profiler without a schedule)."""
    def t(d):
        return d["api_start_ns"] if d["api_start_ns"] is not None else d["start_ns"]

    starts: dict = {}
    for d in recs:
        step = next((r for r in d["ranges"] if r.startswith("ProfilerStep#")), None)
        if step is not None:
            starts[step] = min(starts.get(step, t(d)), t(d))
    if len(starts) < 2:
        return recs, 2
    first, second = sorted(starts.values())[:2]
    return [d for d in recs if first <= t(d) < second], 1


def _gemm_flops(recs: list[dict]) -> int:
    (ops,) = build(aggregate([("x", recs)]), ["operators"])
    c = ops.columns
    return sum(r[c.index("flops")] or 0 for r in ops.rows
               if str(r[c.index("op")]).split(" ")[0] in ("mm", "addmm", "bmm")
               or str(r[c.index("op")]).startswith("_scaled_dot_product"))


def test_the_mlp_count_is_the_arithmetic():
    # the reference itself, checked once against the shapes
    assert json.loads((DATA / "flops_compiled.json").read_text())["flops_per_step"] == MLP_STEP_FLOPS


@pytest.mark.parametrize("name", CAPTURES)
def test_a_step_has_the_flops_of_the_eager_step(name):
    recs, _ = _records(name)
    step, count = _one_step(recs)
    expected = json.loads((DATA / CAPTURES[name]).read_text())["flops_per_step"]
    assert abs(_gemm_flops(step) / count - expected) <= 0.03 * expected, name


@pytest.mark.parametrize("name", CAPTURES)
def test_at_most_a_tenth_of_gpu_time_has_no_line(name):
    recs, _ = _records(name)
    step, _ = _one_step(recs)
    total = sum(d["kDuration"] for d in step)
    without = sum(d["kDuration"] for d in step if callsite_key(d) == "-")
    assert total > 0 and without <= 0.10 * total, (name, without / total)


def _inductor(d: dict) -> bool:
    return bool(d["mod"]) and d["mod"][0] == "inductor"


@pytest.mark.parametrize("name", ["compiled.sqlite.xz", "compiled_templates.sqlite.xz", "compiled_lm.sqlite.xz"])
def test_every_kernel_launched_in_a_kernel_range_carries_it(name, tmp_path):
    # sqlite3 recount: kernels whose launch call lies inside an NVTX range of a compiled kernel's marker on the
    # launching thread
    db = tmp_path / "c.sqlite"
    db.write_bytes(lzma.decompress((DATA / name).read_bytes()))
    con = sqlite3.connect(db)
    (inside,) = con.execute("""
        SELECT count(DISTINCT k.correlationId) FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
        JOIN NVTX_EVENTS n ON n.globalTid = r.globalTid AND n.start <= r.start AND r.end <= n.end AND n.eventType = 59
        LEFT JOIN StringIds s ON s.id = n.textId
        WHERE coalesce(n.text, s.value) LIKE '%"mod":"inductor"%'""").fetchone()
    con.close()
    recs, _ = _records(name)
    kernels = [d for d in recs if d["kind"] == "kernel" and _inductor(d)]
    assert len(kernels) == inside > 0
    # each names its kernel and what it fused, with a line for each fused op where the graph had one
    markers = [d["marker"][0] for d in kernels]
    assert all(m["kernel"] and m["fused"] and m["graph"] in ("forward", "backward") for m in markers)


def test_compiled_backward_kernels_are_named_by_what_they_compute():
    recs, _ = _records("compiled.sqlite.xz")
    backward = [d for d in recs if d["kind"] == "kernel" and _inductor(d) and d["dir"] == "bprop"]
    # the three backward GEMMs, and the fused kernels of the GELU's and the biases' gradients
    assert {op_key(d) for d in backward} >= {"mm (bprop)", "fused:gelu+gelu_backward (bprop)", "fused:sum (bprop)"}
    assert sum(1 for d in backward if d["op"][0] == "mm" and d["subSeqId"] == 0) == 2 * 3  # 2 steps


def test_triton_gemm_templates_are_modelled_as_their_gemm():
    recs, _ = _records("compiled_templates.sqlite.xz")
    templates = [d for d in recs if d["kind"] == "kernel" and d["kShortName"].startswith("triton_tem_")]
    assert templates and all(d["op"][0] in ("mm", "addmm") for d in templates)
    marker = templates[0]["marker"][0]
    assert marker["kernel"] == templates[0]["kShortName"]


@pytest.mark.parametrize("name", ["compiled_reduce.sqlite.xz", "compiled_max.sqlite.xz"])
def test_cuda_graph_replays_of_compiled_graphs_keep_their_kernels_ops(name):
    recs, stats = _records(name)
    assert stats.graph_kernels == stats.graph_kernels_tied > 0
    replayed = [d for d in recs if d["api"] == "cudaGraphLaunch" and d["kind"] == "kernel"]
    assert replayed and all(_inductor(d) for d in replayed)


def test_the_language_model_lines_are_the_model_code():
    recs, _ = _records("compiled_lm.sqlite.xz")
    step, _ = _one_step(recs)
    compiled = [d for d in step if _inductor(d)]
    files = {callsite_key(d).rsplit("/", 1)[-1].split(":")[0] for d in compiled}
    # transformers' Llama code (its attention, MLP, norms, rotary embedding) and its loss
    assert {"modeling_llama.py", "sdpa_attention.py", "loss_utils.py"} <= files
    attention = [d for d in compiled if d["op"][0].startswith("_scaled_dot_product")]
    assert attention and all(d["callsite"].endswith(("sdpa_attention.py:158",)) or d["dir"] == "bprop"
                             for d in attention)


def test_a_trace_made_without_pyprof_names_kernels_by_their_name():
    # the committed captures of tests/data/{nsys/pyprof,kineto} were made before compiled kernels had markers
    out = io.StringIO()
    parse_file(str(DATA.parent / "kineto" / "compiled.pt.trace.json.gz"), out)
    recs = list(read_lines(records_of(out.getvalue().splitlines())))
    triton = {d["kShortName"]: d["op"][0] for d in recs if d["kShortName"].startswith("triton_")}
    assert triton["triton_poi_fused_gelu_0"] == "fused_gelu (kernel name)"
    assert triton["triton_poi_fused_gelu_gelu_backward_2"] == "fused_gelu_gelu_backward (kernel name)"
