"""A ROCm trace (TraceLens' Qwen1.5-0.5B-Chat capture on an MI300X VM, ../shared/corpus/external): Tensile GEMMs
are the main kernels of their op calls, on the matrix cores."""
from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys

from shared_files import EXTERNAL
from pyprof.prof.table.per_kernel import run_stream

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The shared corpus beside the repository (tests/parse/parse_synth.py): read in place, never copied.
TRACE = str(EXTERNAL / "tracelens_mi300_Qwen1.5-0.5B-Chat.json.gz")


def test_linear_on_mi300_counts_its_flops_on_the_tensile_kernels(shared):
    """The issue: linear showed 0 FLOPs on MI300 (its Cijk_..._Bias_ kernels were taken for helpers). Expected:
    the sum over the trace's own aten::linear events of 2·M·N·K from their "Input Dims" (x [..., K], weight
    [N, K]), recounted here from the JSON: 5,514,536,681,472 FLOPs over 168 calls."""
    with gzip.open(TRACE) as f:
        events = json.load(f)["traceEvents"]
    expected = calls = 0
    for e in events:
        if e.get("cat") == "cpu_op" and e["name"] == "aten::linear":
            x, w = e["args"]["Input Dims"][:2]
            m = 1
            for v in x[:-1]:
                m *= v
            expected += 2 * m * w[0] * w[1]
            calls += 1
    assert (calls, expected) == (168, 5514536681472)
    p = subprocess.run([sys.executable, "-m", "pyprof.parse", TRACE], capture_output=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": ROOT})
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    out = io.StringIO()
    run_stream(io.BytesIO(p.stdout), "mi300", out, ["op", "kernel", "flops", "tc", "note"], "jsonl")
    rows = [json.loads(x) for x in out.getvalue().splitlines()]
    linear = [r for r in rows if r["op"] == "linear"]
    assert sum(r["flops"] or 0 for r in linear) == expected
    assert all(r["kernel"].startswith("Cijk_") and r["tc"] == "yes" for r in linear)
