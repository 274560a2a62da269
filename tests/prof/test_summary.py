"""--group-by kernel: one row per kernel (its full name), labelled so that kernels sharing a short name differ."""
from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys

from shared_files import EXTERNAL
from pyprof.prof.reader import read_records
from pyprof.prof.groups import kernel_labels
from pyprof.prof.summary import summarize
from pyprof.record import read_lines

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRACE = str(EXTERNAL / "tracelens_b200_eager_trace.json.gz")


def test_labels():
    names = {"void k<int, A::copy_fn>(int)": "k", "void k<int, B::fill_fn>(int)": "k", "void other<1>()": "other"}
    assert kernel_labels(names) == {"void k<int, A::copy_fn>(int)": "k<A>", "void k<int, B::fill_fn>(int)": "k<B>",
                                    "void other<1>()": "other"}
    # nothing tells them apart but the order of the same words: their rank among the sorted full names
    assert kernel_labels({"k<1, 2>": "k", "k<2, 1>": "k"}) == {"k<1, 2>": "k<#1>", "k<2, 1>": "k<#2>"}


def test_group_by_kernel_on_the_b200_trace(shared):
    """Two elementwise_kernel<128, 4, ...> kernels of the TraceLens B200 trace: 72 direct copies and one masked
    fill, 380568 ns and 7712 ns by the JSON's own durations (sum of dur per full name, in us)."""
    with gzip.open(TRACE) as f:
        events = json.load(f)["traceEvents"]
    recount: dict = {}
    for e in events:
        if e.get("cat") == "kernel" and e["name"].startswith("void at::native::elementwise_kernel<128, 4,"):
            kind = "copy" if "direct_copy_kernel_cuda" in e["name"] else "fill"
            g = recount.setdefault(kind, [0, 0.0])
            g[0] += 1
            g[1] += e["dur"]
    assert {k: (n, round(us * 1000)) for k, (n, us) in recount.items()} == {"copy": (72, 380568), "fill": (1, 7712)}
    p = subprocess.run([sys.executable, "-m", "pyprof.parse", TRACE], capture_output=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": ROOT})
    assert p.returncode == 0
    out = io.StringIO()
    summarize(read_records(io.BytesIO(p.stdout), "b200"), out, "kernel", fmt="csv")
    rows = {r.split(",")[0]: r.split(",") for r in out.getvalue().splitlines()[1:]}
    # Time(ms) to 0.1 us: 380568 ns = 0.3806 ms, 7712 ns = 0.0077 ms
    assert rows["elementwise_kernel<direct_copy_kernel_cuda>"][1:3] == ["72", "0.3806"]
    assert rows["elementwise_kernel<masked_fill_kernel>"][1:3] == ["1", "0.0077"]
    assert "elementwise_kernel" not in rows


def test_group_by_op_keeps_recomputed_and_unlinked_backward_work_apart(tmp_path, shared):
    """Activation checkpointing's recomputed convolutions are 'conv2d (recompute)', not forward 'conv2d' nor the
    backward node they run in; backward work without a forward link (the engine's AccumulateGrad copies) is
    'op (bprop)', not the forward op of the same name. Counts are those of the records parse marked."""
    trace = os.path.join(ROOT, "tests", "data", "kineto", "checkpoint.pt.trace.json.gz")
    p = subprocess.run([sys.executable, "-m", "pyprof.parse", trace], capture_output=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": ROOT}, check=True)
    recs = list(read_lines(p.stdout.splitlines()))  # every key of each record, header and end lines skipped
    out = io.StringIO()
    summarize(read_records(io.BytesIO(p.stdout), "ckpt"), out, "op", fmt="csv")
    rows = {line.split(",")[0]: int(line.split(",")[1]) for line in out.getvalue().splitlines()[1:]}
    recomputed = sum(1 for r in recs if r["kind"] == "kernel" and r["recompute"] and r["op"][0] == "conv2d")
    assert recomputed > 0 and rows["conv2d (recompute)"] == recomputed
    assert rows["conv2d"] == sum(1 for r in recs if r["kind"] == "kernel" and r["dir"] == "fprop" and not r["recompute"]
                                 and r["op"][:1] == ["conv2d"])
    # TorchRec traces of HTA are sampled: most backward nodes' forward ops were dropped, so they have no link.
    sampled = os.path.join(os.path.dirname(TRACE), "hta_trace_filter_sampled_rank-0.json.gz")
    p = subprocess.run([sys.executable, "-m", "pyprof.parse", sampled], capture_output=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": ROOT}, check=True)
    recs = list(read_lines(p.stdout.splitlines()))  # every key of each record, header and end lines skipped
    out = io.StringIO()
    summarize(read_records(io.BytesIO(p.stdout), "sampled"), out, "op", fmt="csv")
    rows = {line.split(",")[0]: int(line.split(",")[1]) for line in out.getvalue().splitlines()[1:]}
    unlinked = [r for r in recs if r["kind"] == "kernel" and r["dir"] == "bprop" and not r["fwd"] and r["op"]]
    mm = sum(1 for r in unlinked if r["op"][0] == "mm")
    linked_mm = sum(1 for r in recs if r["kind"] == "kernel" and r["dir"] == "bprop" and r["fwd"]
                    and r["fwd"]["op"] == "mm")
    assert mm > 0 and rows["mm (bprop)"] == mm + linked_mm
    assert rows.get("mm", 0) == sum(1 for r in recs if r["kind"] == "kernel" and r["dir"] == "fprop"
                                    and r["op"][:1] == ["mm"])
