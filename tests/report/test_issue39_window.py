"""Issue 39, the overview's sentences on traces pyprof had not seen (shared corpus, external-2026-12): the
PyTorch profiler's occupancy of 0 is not a measurement; the span is the profiled window, not the first to last
GPU activity; launches with no GPU activity say that the GPU side is missing."""
from __future__ import annotations

import json

import pytest

from pyprof.prof.aggregate import aggregate
from pyprof.prof.views import build

EXT = "external-2026-12/"
GPUMODEL = EXT + "gpumodel_a100_cu128_trace.json"


def _overview(records, name="x"):
    (t,) = build(aggregate([(name, records)]), ["overview"])
    return t, {c: i for i, c in enumerate(t.columns)}


def test_the_profilers_zero_occupancy_is_absent_and_computed_instead(corpus, corpus_records):
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
    t, c = _overview(corpus_records(GPUMODEL))
    (row,) = t.rows
    assert row[c["occupancy_pct"]] == 12.5


def test_a_nonzero_profiler_occupancy_is_kept():
    from pyprof.prof.occupancy import kernel_occupancy

    # the profiler's own figure where it gives one (no limits needed); its 0 with no launch data: na, not 0
    assert kernel_occupancy({"est_occupancy_pct": 37.5}, None) == 0.375
    assert kernel_occupancy({"est_occupancy_pct": 0, "grid": [1, 1, 1], "block": [32, 1, 1]}, None) is None
