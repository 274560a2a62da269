"""Each recommendation fires on a hand-built record set designed to trigger it and stays silent on a near
twin that does not; on a real capture every row names what it is about."""
from __future__ import annotations

import pytest
from report_helpers import kernel

from pyprof.prof.aggregate import aggregate
from pyprof.prof.views import build
from pyprof.prof.views.recommend import misaligned

H200 = {"smCount": 132, "maxWarpsPerSm": 64, "maxRegistersPerSm": 65536, "maxShmemPerSm": 233472,
        "computeMajor": 9, "computeMinor": 0}


def _rules(recs, worker=None) -> dict:
    (t,) = build(aggregate([("x", recs)]), ["recommendations"], worker=worker)
    return {r[0]: r for r in t.rows}


def _t(shape):
    return {"type": "tensor", "shape": shape, "dtype": "bfloat16"}


def _gemm(start, name, k_dim, **kw):
    return kernel(start, 500_000, kShortName=name, kLongName=name, op=["linear"], mod=["torch.nn.functional"],
                  dir="fprop", subSeqId=0, args=[_t([64, k_dim]), _t([1003, k_dim]), {"type": "none"}],
                  callsite="/x/train.py:12", **kw)


def test_misaligned_dimensions():
    assert misaligned((("M", 64), ("N", 1003), ("K", 1001))) == ["N=1003", "K=1001"]
    assert misaligned((("C", 3), ("K", 64))) == ["C=3"]
    assert misaligned((("M", 64), ("N", 1024), ("K", 1024))) == []
    assert misaligned(()) == []  # attention, einsum: no sizes given


def test_tensor_cores_rule_names_kernel_line_and_dimensions():
    row = _rules([_gemm(10_000, "gemmSN_NN_kernel", 1001)])["tensor_cores"]
    assert "gemmSN_NN_kernel" in row[1] and "train.py:12" in row[1]
    assert "N=1003, K=1001" in row[2]
    assert "tensor_cores" not in _rules([_gemm(10_000, "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", 1001)])


def test_gpu_idle_rule():
    busy = [kernel(10_000 + i * 20_000, 20_000) for i in range(10)]  # back to back
    assert "gpu_idle" not in _rules(busy)
    gappy = [kernel(10_000 + i * 100_000, 20_000) for i in range(10)]  # 80% idle
    assert "gpu_idle" in _rules(gappy)


def test_tiny_kernels_rule():
    tiny = [kernel(10_000 + i * 3_000, 2_000, op=["add"], mod=["torch"]) for i in range(100)]
    row = _rules(tiny)["tiny_kernels"]
    assert "100 of 100 kernels" in row[2] and "add (100)" in row[1]
    assert "tiny_kernels" not in _rules([kernel(10_000 + i * 60_000, 50_000) for i in range(100)])


def test_host_copies_rule():
    copy = kernel(10_000, 5_000, kind="memcpy", copy_kind="DtoH", bytes=4, callsite="/x/train.py:40")
    row = _rules([kernel(1_000, 9_000), copy])["host_copies"]
    assert "copies between host and device: 1" in row[2] and "train.py:40" in row[1]
    d2d = dict(copy, copy_kind="DtoD")
    assert "host_copies" not in _rules([kernel(1_000, 9_000), d2d])


def test_low_occupancy_rule():
    # one block of 32 threads on 132 SMs: occupancy (1/132) x 1 warp / 64, far under 25%
    small = kernel(10_000, 100_000, kShortName="small_grid", grid=[1, 1, 1], block=[32, 1, 1], registers=32,
                   static_smem_bytes=0, dynamic_smem_bytes=0, gpu_props=H200)
    row = _rules([small])["low_occupancy"]
    assert "small_grid" in row[1]
    full = dict(small, grid=[132 * 64, 1, 1], block=[1024, 1, 1])
    assert "low_occupancy" not in _rules([full])


def test_real_capture_rows_name_what_they_are_about(records):
    recs = records("nsys/pyprof/transformer.sqlite.xz")
    (rec, lines) = build(aggregate([("x", recs)]), ["recommendations", "lines"])
    assert rec.rows, "the transformer step leaves the GPU idle a large share of the time"
    for r in rec.rows:
        assert r[1] and r[2] and r[3]
    near = [r for r in rec.rows if r[0] == "near_roofline"]
    roof = {r[0]: r[lines.columns.index("roofline_pct")] for r in lines.rows}
    for r in near:
        line = r[1].split(" ", 1)[1].rsplit("/", 1)[-1]
        assert roof[line] >= 60.0


@pytest.mark.parametrize("rule", ["data_loading"])
def test_rules_without_facts_never_fire(rule, records):
    assert rule not in _rules(records("nsys/pyprof/resnet.sqlite.xz"))
