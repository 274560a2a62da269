"""The overview's GPU idle share on real Kineto traces, against Holistic Trace Analysis and against a plain
recount of the trace's JSON.

Reference: HolisticTraceAnalysis 0.5.0 (PyPI), ``get_temporal_breakdown()`` ``idle_time_pctg``, printed by
``/work/hta-venv/bin/python bench/hta_reference.py TRACE...`` (2026-11). HTA's idle = (last GPU event end - first
GPU event start - union of the GPU events) / that span, per rank. Like with like: pyprof's steps partition the
worker's profiled span (first GPU activity to last GPU end), so its idle over all steps (the mean row) is
compared with HTA's ``include_last_profiler_step=True``; with the default (False) HTA drops the kernels launched
in the last ProfilerStep, a span pyprof keeps. Two known differences remain, both HTA's:
- by default HTA rounds each event of a sub-microsecond trace inward to whole microseconds (start up, end down),
  which shortens every kernel by up to 2 us and raises the idle share of traces of short kernels; with
  ``HTA_DISABLE_NS_ROUNDING=1`` it does not (the ``*_exact`` figures). With rounding, HTA's own breakdown
  asserts on the committed H200 traces (a kernel under 1 us gets a negative duration): None there;
- HTA counts the GPU side of user annotations (``gpu_user_annotation``) as busy; pyprof (and the recount) do
  not, as they are not GPU work.
On the MI300X trace (one ProfilerStep, so HTA filters nothing) the default rounding alone moves HTA's figure by
3.22 points (11.76 against 8.54 without it, the recount's figure): there the bound on HTA's default figure is 3
points plus that shift. 463 of its kernels have no launch event (they ran first, launched before the capture
began): a parse that gives them no process puts them in the worker 'unknown', and the process's own span then
holds the other 1054 (10.22% idle); a parse that gives them the trace's process holds all 1517 (8.54%). The
recount follows whichever set the process holds, checked by count.
"""
from __future__ import annotations

import ast
import gzip
import json
import subprocess
from pathlib import Path
from typing import NamedTuple

import pytest
from report_helpers import DATA, ROOT

from pyprof.prof.aggregate import aggregate
from pyprof.prof.steps import no_process
from pyprof.prof.views import build

HTA_VERSION = "0.5.0"


class Hta(NamedTuple):
    """HTA 0.5.0's idle %: include_last_profiler_step False / True, as HTA runs by default (None where it
    raises), then the same with HTA_DISABLE_NS_ROUNDING=1."""

    default: float | None
    include_last: float | None
    default_exact: float
    include_last_exact: float


HTA = {
    "external/hta_ns_resolution_rank-0.pt.trace.json.gz": Hta(2.63, 2.53, 1.68, 1.58),
    "external/hta_trace_filter_sampled_rank-0.json.gz": Hta(53.56, 55.21, 53.56, 55.21),
    "external/hta_trace_filter_sampled_rank-1.json.gz": Hta(54.72, 52.89, 54.72, 52.89),
    "external/kineto_tbplugin_resnet50_nw0_2021-06.pt.trace.json.gz": Hta(39.43, 39.43, 39.43, 39.43),
    "external/tracelens_b200_eager_trace.json.gz": Hta(87.2, 87.2, 86.19, 86.19),
    "external/tracelens_mi300_Qwen1.5-0.5B-Chat.json.gz": Hta(11.76, 11.76, 8.54, 8.54),
    "kineto/compiled.pt.trace.json.gz": Hta(None, None, 71.98, 71.98),
    "kineto/custom_function.pt.trace.json.gz": Hta(None, None, 98.28, 98.28),
    "kineto/custom_module.pt.trace.json.gz": Hta(None, None, 98.09, 98.09),
    "kineto/lenet.pt.trace.json.gz": Hta(94.19, 94.19, 92.06, 92.06),
    "kineto/resnet.pt.trace.json.gz": Hta(70.61, 70.61, 68.23, 68.23),
    "kineto/transformer.pt.trace.json.gz": Hta(None, None, 63.38, 63.38),
    "kineto/user_annotation.pt.trace.json.gz": Hta(23.4, 23.4, 21.16, 21.16),
}
#: Where HTA's default rounding alone moves its figure by more than 3 points (11.76 with it, 8.54 without, on
#: the MI300X trace), its default figure is held to 3 points plus that shift (both are HTA's own figures).
_ROUNDING_OVER_3 = {"external/tracelens_mi300_Qwen1.5-0.5B-Chat.json.gz"}
TRACES = list(HTA)

_GPU = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}  # PyTorch 2.x and 1.8/1.9 spellings
_LAUNCH = {"cuda_runtime", "cuda_driver", "runtime"}


class Recount(NamedTuple):
    activities: int
    span_ms: float
    idle_pct: float


def _recount(path, launched_only: bool) -> Recount:
    """Union of the trace's GPU activities (those with a launch event, or all), over their span, from the
    trace's JSON."""
    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    launched = {e["args"]["correlation"] for e in events if str(e.get("cat")).lower() in _LAUNCH
                and e.get("ph") == "X" and "correlation" in (e.get("args") or {})}
    gpu = [e for e in events if str(e.get("cat")).lower() in _GPU and e.get("ph") == "X"]
    if launched_only:
        gpu = [e for e in gpu if (e.get("args") or {}).get("correlation") in launched]
    iv = sorted((float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in gpu)
    lo, hi = iv[0][0], max(end for _, end in iv)
    covered, reach = 0.0, lo
    for s, e in iv:
        s = max(s, reach)
        if e > s:
            covered += e - s
            reach = e
    return Recount(len(gpu), (hi - lo) / 1e3, 100.0 * (1 - covered / (hi - lo)))


def _path(rel: str, corpus):
    return DATA / rel if rel.startswith("kineto/") else corpus / rel


@pytest.fixture
def trace_records(request, records):
    """parse's records of a trace under tests/data (always there) or the shared corpus (skips without it)."""
    def get(rel: str):
        if rel.startswith("kineto/"):
            return records(rel)
        return request.getfixturevalue("corpus_records")(rel)
    return get


@pytest.mark.parametrize("rel", TRACES)
def test_idle_share_agrees_with_hta_and_a_recount(rel, trace_records, request):
    corpus = None if rel.startswith("kineto/") else request.getfixturevalue("corpus")
    recs = trace_records(rel)
    agg = aggregate([(rel, recs)])
    (t,) = build(agg, ["overview"])
    procs = [w for w in agg.workers.values() if not no_process(w)]
    assert len(procs) == 1  # one process per trace: its GPU timeline is the one HTA measures
    c = t.columns
    rows = [r for r in t.rows if c[0] != "worker" or r[0] == procs[0].name]
    whole = rows[-1]  # the mean row (the whole profiled span), or the only step
    idle = round(100.0 - whole[c.index("gpu_util_pct")], 2)
    n_steps = len(rows) - (len(rows) > 1)
    span_ms = whole[c.index("span_ms")] * n_steps

    everything, launched = _recount(_path(rel, corpus), False), _recount(_path(rel, corpus), True)
    held = len(procs[0].start_ns)
    ref = everything if held == everything.activities else launched
    assert held == ref.activities  # the process holds every activity, or every one with a launch event
    assert sum(len(w.start_ns) for w in agg.workers.values()) == everything.activities
    # The exact check: the same activities, the same span, the same union, computed from the JSON.
    assert idle == pytest.approx(ref.idle_pct, abs=0.011)
    assert span_ms == pytest.approx(ref.span_ms, abs=1e-3 * n_steps)
    # Against HTA, like with like (all steps, the last included): within 3 points of its figure without its
    # rounding, and of its default figure where it works (see _ROUNDING_OVER_3 for the one exception).
    hta = HTA[rel]
    assert abs(idle - hta.include_last_exact) <= 3.0, (idle, hta)
    if hta.include_last is not None:
        slack = hta.include_last - hta.include_last_exact if rel in _ROUNDING_OVER_3 else 0.0
        assert abs(idle - hta.include_last) <= 3.0 + slack + 1e-9, (idle, hta)


def test_ns_resolution_steps_are_gpu_bound_as_hta_says(corpus_records, corpus):
    """The issue's trace: V100, 5 ProfilerSteps, the CPU about 90 ms ahead of the GPU. Each step's window is
    about 96 ms of a 480 ms span (480.03 ms / 5 = 96.0 ms), the GPU busy about 98.4% of it, as HTA's 1.58% idle
    (rounding off; 2.53% with it) says, where "first launch to last GPU end" gave 51-59% and 811 ms of steps."""
    rel = "external/hta_ns_resolution_rank-0.pt.trace.json.gz"
    agg = aggregate([("ns", corpus_records(rel))])
    (t,) = build(agg, ["overview"])
    c = t.columns
    steps = t.rows[:-1]
    assert [r[0] for r in steps] == [f"ProfilerStep#{n}" for n in range(101, 106)]
    assert sum(r[c.index("span_ms")] for r in steps) == pytest.approx(_recount(corpus / rel, False).span_ms, abs=1e-3)
    assert all(96.0 <= r[c.index("gpu_util_pct")] <= 100.0 for r in steps)
    # 4350 kernels in the trace (README count), 870 a step, each counted once
    assert [r[c.index("kernels")] for r in steps] == [870] * 5


HTA_PYTHON = Path("/work/hta-venv/bin/python")  # the HTA environment of the project's machines


def test_hta_reference_imports_nothing_of_pyprof():
    tree = ast.parse((ROOT / "bench" / "hta_reference.py").read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported and not any(m == "pyprof" or m.startswith("pyprof.") for m in imported)


def test_hta_reference_prints_the_figures_written_here():
    if not HTA_PYTHON.is_file():
        pytest.skip(f"no HTA environment at {HTA_PYTHON}: the figures above stay as written")
    rel = "kineto/lenet.pt.trace.json.gz"
    p = subprocess.run([str(HTA_PYTHON), str(ROOT / "bench" / "hta_reference.py"), str(DATA / rel)],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == f"HTA version: {HTA_VERSION}"
    got = [float(line.rsplit(" ", 1)[1]) for line in lines[1:]]
    hta = HTA[rel]
    # rounding on (default, include-last), then off (default, include-last)
    assert got == [hta.default, hta.include_last, hta.default_exact, hta.include_last_exact]
