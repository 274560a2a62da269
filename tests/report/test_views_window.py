"""Issue 39, the overview's sentences on traces pyprof had not seen (shared corpus, external-2026-12): the
PyTorch profiler's occupancy of 0 is not a measurement; the span is the profiled window, not the first to last
GPU activity; launches with no GPU activity say that the GPU side is missing."""
from __future__ import annotations

import gzip
import io
import json
import sqlite3
import subprocess
import sys

import pytest
from report_helpers import kernel
from shared_files import EXTERNAL, require_shared

from pyprof.parse import parse_file
from pyprof.prof.aggregate import aggregate, aggregate_files
from pyprof.prof.steps import steps
from pyprof.prof.views import build
from pyprof.record import read_lines

EXT = "external-2026-12/"
GPUMODEL = EXT + "gpumodel_a100_cu128_trace.json"


def _overview(records, name="x", view="overview"):
    """The view of hand-built records, or of a records file (parse's whole output: side lines too)."""
    agg = aggregate_files([str(records)]) if not isinstance(records, list) else aggregate([(name, records)])
    (t,) = build(agg, [view])
    return t, {c: i for i, c in enumerate(t.columns)}


@pytest.fixture(scope="module")
def parsed(corpus, tmp_path_factory):
    """``parsed(rel)``: the path of parse's output for a shared corpus file, header to end line (cached)."""
    cache: dict = {}

    def get(rel: str):
        if rel not in cache:
            out = tmp_path_factory.mktemp("parsed") / "x.dict"
            with open(out, "w") as f:
                parse_file(str(corpus / rel), f)
            cache[rel] = out
        return cache[rel]
    return get


def test_the_profilers_zero_occupancy_is_absent_and_computed_instead(corpus, parsed):
    # The trace's five fp16 GEMMs each say "est. achieved occupancy %": 0, with 234 registers per thread, 147456
    # bytes of shared memory, block 256, grid 100x50 on an A100-SXM4-80GB (its deviceProperties: 108 SMs, 2048
    # threads, 65536 registers and 167936 bytes of shared memory per SM; compute 8.0: 32 blocks per SM).
    events = json.loads((corpus / GPUMODEL).read_text())["traceEvents"]
    gemms = [e["args"] for e in events if e.get("cat") == "kernel"]
    assert len(gemms) == 5 and {a["est. achieved occupancy %"] for a in gemms} == {0}
    assert {(a["registers per thread"], a["shared memory"], tuple(a["block"])) for a in gemms} == {
        (234, 147456, (256, 1, 1))}
    # By hand: 256 threads = 8 warps a block; 64 warps an SM (2048 / 32) hold 8 blocks;
    # registers: 234 x 32 = 7488 a warp, allocated in units of 256: 7680; 65536 // 7680 = 8 warps = 1 block;
    # shared memory: 147456 + 1024 reserved = 148480 a block; 167936 // 148480 = 1 block;
    # the grid gives 5000 / 108 = 46.3 blocks an SM (not the limit): 1 block resident = 8 / 64 warps = 12.5%.
    t, c = _overview(parsed(GPUMODEL))
    (row,) = t.rows
    assert row[c["occupancy_pct"]] == 12.5


def test_a_nonzero_profiler_occupancy_is_kept():
    from pyprof.prof.model.occupancy import kernel_occupancy

    # the profiler's own figure where it gives one (no limits needed); its 0 with no launch data: na, not 0
    assert kernel_occupancy({"est_occupancy_pct": 37.5}, None) == 0.375
    assert kernel_occupancy({"est_occupancy_pct": 0, "grid": [1, 1, 1], "block": [32, 1, 1]}, None) is None


# ---- item 5: the profiled window bounds the span where no step marker does ----------------------------------

WEATHER = EXT + "weatherbench2_nsys2025.5_memset_only.sqlite"


def _sql(path, query):
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


def test_a_capture_whose_gpu_ran_one_memset_is_busy_a_few_millionths(corpus, parsed):
    path = corpus / WEATHER
    ((duration,),) = _sql(path, "SELECT duration FROM ANALYSIS_DETAILS")  # the capture: 880,010,422 ns
    (memset,) = _sql(path, "SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMSET")  # its only GPU activity
    assert duration == 880_010_422 and memset[1] - memset[0] == 1472
    assert not _sql(path, "SELECT name FROM sqlite_master WHERE name = 'CUPTI_ACTIVITY_KIND_KERNEL'")
    # busy = 1472 / 880,010,422 = 1.67e-6 = 0.000167% (~1.5 us of 880 ms), where it said 100%
    t, c = _overview(parsed(WEATHER))
    (row,) = t.rows
    assert row[c["span_ms"]] == round(duration / 1e6, 4)  # 880.0104: the capture, not the memset's 0.0015
    assert row[c["gpu_util_pct"]] == pytest.approx(100 * 1472 / duration, rel=0.03)  # 0.00017
    assert row[c["idle_ms"]] == round((duration - 1472) / 1e6, 4)
    note = next(n for n in t.notes if n.startswith("Profiled window"))
    assert "880.0104 ms" in note and "ANALYSIS_DETAILS" in note and "busy 0.00017%" in note
    # the idle view charges the window's two edges: 554.35 ms before the memset, 325.66 ms after it
    idle, _ = _overview(parsed(WEATHER), view="idle")
    (edges,) = idle.rows
    assert edges[:4] == ["edges", "", "", 2] and edges[4] == round((duration - 1472) / 1e6, 4)
    assert edges[6] == round(memset[0] / 1e6, 4)  # the longest: the capture's start to the memset


def _with_window(recs, start_ns, end_ns, source="capture", launches=1):
    from pyprof.prof.load.window import WindowRun

    (w,) = aggregate([("x", recs)]).workers.values()
    w.window.append(WindowRun(1, start_ns, end_ns, source, launches))
    return w


def test_kernels_that_fill_the_window_keep_their_span():
    # kernels 1000..1100 and 1100..1400; the capture 1000..1400 (within it, or narrower: the GPU widens it)
    for window in ((1000, 1400), (1100, 1300)):
        w = _with_window([kernel(1000, 100), kernel(1100, 300)], *window)
        (s,), source = steps(w)
        assert source == "whole capture" and (s.start_ns, s.end_ns, s.busy_ns, s.idle_ns) == (1000, 1400, 400, 0)


def test_a_wider_capture_widens_the_span_and_steps_ignore_it():
    w = _with_window([kernel(1000, 100)], 0, 10_000)
    (s,), _ = steps(w)
    assert (s.span_ns, s.busy_ns, s.idle_ns) == (10_000, 100, 9_900)  # busy 1%
    # with step markers, the steps' windows are the span (unchanged): first GPU start to last GPU end
    marked = [kernel(1000, 100, ranges=["ProfilerStep#1"]), kernel(2000, 100, ranges=["ProfilerStep#2"])]
    w = _with_window(marked, 0, 10_000)
    sts, source = steps(w)
    assert source == "ProfilerStep" and (sts[0].start_ns, sts[-1].end_ns) == (1000, 2100)


def test_a_pytorch_trace_keeps_its_gpu_span_and_says_how_much_of_the_trace_it_is(corpus, parsed):
    # HTA's idle is over the GPU's own span (tests/report/test_steps_hta.py): the trace's bounds do not widen it
    events = json.loads((corpus / GPUMODEL).read_text())["traceEvents"]
    gpu = [e for e in events if e.get("cat") == "kernel"]
    timed = [e for e in events if e.get("ph") == "X" and e.get("cat") in (
        "kernel", "cpu_op", "cuda_runtime", "cuda_driver", "user_annotation", "python_function")]
    first, last = min(e["ts"] for e in gpu), max(e["ts"] + e["dur"] for e in gpu)
    t, c = _overview(parsed(GPUMODEL))
    (row,) = t.rows
    assert row[c["span_ms"]] == pytest.approx((last - first) / 1e3, abs=1e-3)
    trace_ms = (max(e["ts"] + e["dur"] for e in timed) - min(e["ts"] for e in timed)) / 1e3
    note = next(n for n in t.notes if n.startswith("Profiled window"))
    assert f"{trace_ms:.4f}".rstrip("0") in note and "the trace's first to last event" in note
    assert "Holistic Trace Analysis" in note


def test_sm_efficiency_is_never_above_the_kernel_time():
    # two kernels of one block each on a 1-SM GPU, running together 0..10 us, then a memset 19..20 us: SM time
    # 2 x 10 us = 20 us, but kernels ran 10 us of the 20 us span: SM eff. 50% (it said min(100, 20/20) = 100%,
    # above the 55% the GPU was busy)
    props = {"smCount": 1}
    recs = [kernel(0, 10_000, gpu_props=props), kernel(0, 10_000, gpu_props=props, stream=2),
            kernel(19_000, 1_000, kind="memset", bytes=64, grid=[], block=[])]
    t, c = _overview(recs)
    (row,) = t.rows
    assert row[c["gpu_util_pct"]] == 55.0 and row[c["sm_efficiency_pct"]] == 50.0


def test_sm_efficiency_and_occupancy_need_the_grids_of_most_kernel_time():
    # a 10 us kernel on all of a 1-SM GPU, and a 90 us one whose grid the input lacks (a Kineto trace's replayed
    # graph kernel): counting the second as idle SMs read 10%; 90% of kernel time unknown is na, said once
    props = {"smCount": 1, "maxShmemPerSm": 233472, "maxRegistersPerSm": 65536, "maxWarpsPerSm": 64,
             "threadsPerWarp": 32, "computeMajor": 9, "computeMinor": 0}
    full = dict(gpu_props=props, registers=32, static_smem_bytes=0, dynamic_smem_bytes=0)
    recs = [kernel(0, 10_000, **full), kernel(10_000, 90_000, **{**full, "grid": [], "block": []})]
    t, c = _overview(recs)
    (row,) = t.rows
    assert row[c["gpu_util_pct"]] == 100.0
    assert row[c["sm_efficiency_pct"]] is None and row[c["occupancy_pct"]] is None
    (note,) = [n for n in t.notes if "are na" in n]
    assert "90.0% of kernel time ran in kernels whose grid the input does not record" in note
    # the same kernels with every grid known: both figures, and no such note
    recs[1] = kernel(10_000, 90_000, **full)
    t, c = _overview(recs)
    (row,) = t.rows
    assert row[c["sm_efficiency_pct"]] == 100.0 and row[c["occupancy_pct"]] is not None
    assert not [n for n in t.notes if "are na" in n]


def test_a_real_graph_replay_without_grids_has_no_sm_efficiency():
    # vLLM's decode trace (TraceLens): 4 of its 425 kernels carry a grid, 286.035 of 10,674.517 us (a JSON
    # recount): the SM efficiency read 2.58%, now na with the share said
    require_shared()
    events = json.load(gzip.open(EXTERNAL / "tracelens_vllm_decode_full_graph_execution.json.gz"))["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    known = sum(e["dur"] for e in kernels if "grid" in e.get("args", {}))
    share = 100 * (1 - known / sum(e["dur"] for e in kernels))
    assert f"{share:.1f}" == "97.3"
    out = io.StringIO()
    parse_file(str(EXTERNAL / "tracelens_vllm_decode_full_graph_execution.json.gz"), out)
    (t,) = build(aggregate([("v", read_lines(out.getvalue().splitlines()))]), ["overview"])
    (row,) = t.rows
    assert row[t.columns.index("sm_efficiency_pct")] is None
    assert any(f"{share:.1f}% of kernel time ran in kernels whose grid" in n for n in t.notes)


def test_a_first_step_that_began_long_before_the_gpu_is_said(tmp_path):
    # the TensorBoard plugin's ResNet-50 trace: ProfilerStep#5 began on the CPU 69.076 ms before the GPU's first
    # activity (a JSON recount), time no step window holds; HTA's trace_diff trace starts its GPU work at once
    require_shared()
    path = EXTERNAL / "kineto_tbplugin_resnet50_nw0_2021-06.pt.trace.json.gz"
    events = json.load(gzip.open(path))["traceEvents"]
    (step,) = [e for e in events if e.get("name") == "ProfilerStep#5" and e.get("cat") != "gpu_user_annotation"]
    first_gpu = min(e["ts"] for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset", "Kernel",
                                                                 "Memcpy", "Memset"))
    lead_ms = (first_gpu - step["ts"]) / 1e3
    assert round(lead_ms, 3) == 69.076
    for name, said in ((path, f"ProfilerStep#5 began on the CPU {lead_ms:.3f}"),
                       (EXTERNAL / "hta_trace_diff_test.json.gz", None)):
        records = tmp_path / "r.dict"
        with open(records, "w") as f:
            parse_file(str(name), f)  # with its host lines, where the steps' CPU ranges are
        (t,) = build(aggregate_files([str(records)]), ["overview"])
        notes = [n for n in t.notes if "began on the CPU" in n]
        assert (notes[0].startswith(said) and "before the GPU ran anything" in notes[0]) if said else not notes


# ---- item 7: launches recorded, no GPU activity ---------------------------------------------------------------

NO_GPU = {EXT + "zoology_a100_no_gpu_events.json": 260, EXT + "solangii_rtx4060_no_kernels.json": 10}


def _kernel_launch_events(path) -> int:
    """The trace's CUDA runtime / driver events named like a kernel launch, and no GPU event (json recount)."""
    events = json.loads(path.read_text())["traceEvents"]
    assert not [e for e in events if str(e.get("cat")).lower() in ("kernel", "gpu_memcpy", "gpu_memset")]
    return sum(1 for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver") and "Launch" in e.get("name", ""))


@pytest.mark.parametrize("rel", NO_GPU)
def test_launches_without_gpu_activity_say_the_gpu_side_is_missing(rel, corpus, parsed):
    n = _kernel_launch_events(corpus / rel)
    assert n == NO_GPU[rel]  # the corpus README: 236 cudaLaunchKernel + 24 cuLaunchKernel; 10 cudaLaunchKernel
    t, _ = _overview(parsed(rel))
    assert t.rows == [] and t.empty == (
        f"{n} kernel launches recorded but no GPU activity: the profiler's GPU (CUPTI) activity was off or lost "
        "(no kernel, copy or memset in the input), so no steps.")


def test_an_nsys_export_with_launches_and_no_activity_tables_says_so_too(sqlite_path, tmp_path):
    # lenet's export with its kernel, memcpy and memset tables dropped: the CUDA API calls stay
    export = tmp_path / "lenet_no_gpu.sqlite"
    export.write_bytes(sqlite_path("lenet").read_bytes())
    con = sqlite3.connect(export)
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        con.execute(f"DROP TABLE IF EXISTS {table}")
    ((n,),) = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
                          "WHERE s.value LIKE '%Launch%'").fetchall()
    con.commit()
    con.close()
    out = tmp_path / "x.dict"
    with open(out, "w") as f:
        parse_file(str(export), f)
    assert n > 0
    t, _ = _overview(out)
    assert t.empty.startswith(f"{n} kernel launches recorded but no GPU activity: the profiler's GPU (CUPTI)")


def test_no_launches_and_no_activity_stays_no_gpu_activity(corpus, tmp_path):
    # an nsys export with no CUDA table at all (corpus README: 0 kernels, no CUDA trace): nothing was launched
    out = tmp_path / "x.dict"
    with open(out, "w") as f:
        parse_file(str(corpus / "nsys/nsys2024.6_no_cuda.sqlite"), f)
    t, _ = _overview(out)
    assert t.empty.startswith("No GPU activity in the records") and "launches" not in " ".join(t.notes + [t.empty])


def test_a_trace_with_gpu_activity_says_nothing_of_missing_gpu_activity(parsed):
    t, _ = _overview(parsed(GPUMODEL))
    assert t.rows and not [n for n in t.notes if "no GPU activity" in n or "CUPTI" in n]


def test_the_page_of_launches_without_gpu_activity_says_so(corpus, parsed, tmp_path):
    from pyprof.report.cli import main

    rel = EXT + "zoology_a100_no_gpu_events.json"
    page = tmp_path / "r.html"
    assert main([str(parsed(rel)), "-o", str(page)]) == 0
    text = page.read_text()
    n = _kernel_launch_events(corpus / rel)
    assert (f'<p class="notice" id="notice">{n} kernel launches recorded but no GPU activity: the profiler&#x27;s '
            "GPU (CUPTI) activity was off or lost") in text
    assert "No GPU activity in the input" not in text  # the notice of a program that used no GPU (test_empty_input)


@pytest.mark.parametrize("rel", NO_GPU)
def test_parse_says_the_gpu_side_is_missing_too(rel, corpus):
    p = subprocess.run([sys.executable, "-m", "pyprof.parse", str(corpus / rel)], capture_output=True, text=True)
    n = _kernel_launch_events(corpus / rel)
    assert p.returncode == 0 and n == NO_GPU[rel]
    assert p.stderr.strip().endswith(f": {n} kernel launches recorded but no GPU activity: the profiler's GPU "
                                      "(CUPTI) activity was off or lost"), p.stderr


def test_parse_of_an_export_without_launches_says_no_gpu_kernels(corpus):
    # an nsys export without CUDA tables (nsys -t without cuda): no launch to speak of
    rel = "nsys/nsys2024.6_no_cuda.sqlite"
    con = sqlite3.connect(f"file:{corpus / rel}?mode=ro", uri=True)
    assert not con.execute("SELECT 1 FROM sqlite_master WHERE name LIKE 'CUPTI_ACTIVITY_KIND_%'").fetchall()
    p = subprocess.run([sys.executable, "-m", "pyprof.parse", str(corpus / rel)], capture_output=True, text=True)
    assert p.returncode == 0 and p.stderr.strip().endswith(": no GPU kernels in this profile"), p.stderr


def test_an_nvprof_export_is_bounded_by_its_first_and_last_api_call(corpus, parsed):
    rel = "nvprof/nvprof_v18_vectoradd.nvvp"
    path = corpus / rel
    bounds = [_sql(path, f"SELECT min(start), max(end) FROM CUPTI_ACTIVITY_KIND_{t}")[0] for t in ("RUNTIME", "DRIVER")]
    first, last = min(b[0] for b in bounds), max(b[1] for b in bounds)
    # 1736038487622506588 - 1736038487274680903 = 347,825,685 ns: the driver's first call to the runtime's last
    assert last - first == 347_825_685
    # cbid 211 is cudaLaunchKernel (CUPTI's cupti_runtime_cbid.h): the one kernel launch
    assert _sql(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE cbid = 211") == [(1,)]
    lines = [json.loads(x) for x in parsed(rel).read_text().splitlines() if '"pyprof_side":"window"' in x]
    assert [(d["start_ns"], d["end_ns"], d["source"], d["launches"]) for d in lines] == [(first, last, "API calls", 1)]
    t, c = _overview(parsed(rel))
    (row,) = t.rows
    assert row[c["span_ms"]] == 347.8257


def test_a_process_that_only_launched_is_named_beside_one_that_ran():
    from pyprof.prof.aggregate import WorkerData
    from pyprof.prof.load.window import WindowRun

    agg = aggregate([("x", [kernel(1000, 100)])])
    idle = agg.workers["x:2"] = WorkerData("x:2")  # a second process: 7 launches, no GPU activity
    idle.window.append(WindowRun(2, 0, 5000, "capture", 7))
    (t,) = build(agg, ["overview"])
    assert "x:2: 7 kernel launches recorded but no GPU activity: the profiler's GPU (CUPTI) activity was off or " \
           "lost for that process." in t.notes
    # hand-built records without window lines: no window note, and no launch note
    (t,) = build(aggregate([("x", [kernel(1000, 100)])]), ["overview"])
    assert not [n for n in t.notes if n.startswith("Profiled window") or "launches" in n]


def test_busy_keeps_two_significant_digits_below_a_hundredth_of_a_percent():
    from pyprof.prof.steps import busy_pct

    assert busy_pct(1472, 880_010_422) == 0.00017  # 1.6727e-4 %
    assert busy_pct(1, 3) == 33.33 and busy_pct(0, 10) == 0.0 and busy_pct(5, 0) is None
