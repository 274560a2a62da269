"""Each recommendation fires on a hand-built record set designed to trigger it and stays silent on a near twin
just under its threshold; savings are checked against arithmetic written beside them (H200 SXM peaks:
4800 GB/s, TF32 Tensor Cores 494.5 TFLOP/s). On a real capture every row names what it is about."""
from __future__ import annotations

import pytest
from report_helpers import kernel

from pyprof.prof.aggregate import aggregate
from pyprof.prof.views import build
from pyprof.prof.views.recommend import at_target, misaligned

H200 = {"smCount": 132, "maxWarpsPerSm": 64, "maxRegistersPerSm": 65536, "maxShmemPerSm": 233472,
        "computeMajor": 9, "computeMinor": 0}
COLUMNS = ["rule", "about", "evidence", "saving_ms", "saving_pct", "action", "time_ms", "time_pct"]


def _table(recs):
    (t,) = build(aggregate([("x", recs)]), ["recommendations"])
    return t


def _rules(recs) -> dict:
    """rule -> its first (largest saving) row, as a dict of the columns."""
    out: dict = {}
    for r in _table(recs).rows:
        out.setdefault(r[0], dict(zip(COLUMNS, r)))
    return out


def _t(shape, dtype="bfloat16"):
    return {"type": "tensor", "shape": shape, "dtype": dtype}


def _k(start, dur, **kw):
    return kernel(start, dur, gpu="NVIDIA H200", **kw)


def _gemm(start, name, k_dim, dur=500_000, dtype="bfloat16", m=64, n=1003, **kw):
    return _k(start, dur, kShortName=name, kLongName=name, op=["linear"], mod=["torch.nn.functional"],
              dir="fprop", subSeqId=0, args=[_t([m, k_dim], dtype), _t([n, k_dim], dtype), {"type": "none"}],
              callsite="/x/train.py:12", **kw)


def _add(start, dur, n=1_000_000, line="/x/train.py:20", **kw):
    # add of two bf16 vectors of n elements: reads 2n, writes n -> 3n x 2 bytes = 6 MB for n = 1M;
    # at 4800 GB/s that is 6e6 / 4800 = 1250 ns at the roofline
    return _k(start, dur, kShortName="vectorized_elementwise_kernel", kLongName="vectorized_elementwise_kernel",
              op=["add"], mod=["torch"], dir="fprop", subSeqId=0, args=[_t([n]), _t([n])], callsite=line, **kw)


def test_columns_and_order():
    t = _table([_add(10_000, 10_000), _add(100_000, 20_000, line="/x/train.py:21")])
    assert t.columns == COLUMNS
    savings = [r[3] for r in t.rows]
    assert savings == sorted(savings, reverse=True) and len(savings) >= 2
    for r in t.rows:
        assert 0 <= r[3] <= r[6]  # never more than the time concerned


def test_at_target():
    assert at_target(100.0, 30.0) == pytest.approx(50.0)  # 100 - 30 / 0.6
    assert at_target(100.0, 90.0) == 0.0  # already past the target: nothing, never negative
    assert at_target(100.0, 0.0) == 100.0


def test_misaligned_dimensions():
    assert misaligned((("M", 64), ("N", 1003), ("K", 1001))) == ["N=1003", "K=1001"]
    assert misaligned((("C", 3), ("K", 64))) == ["C=3"]
    assert misaligned((("M", 64), ("N", 1024), ("K", 1024))) == []
    assert misaligned(()) == []  # attention, einsum: no sizes given


def test_tensor_cores_rule_names_kernel_line_and_dimensions():
    row = _rules([_gemm(10_000, "gemmSN_NN_kernel", 1001)])["tensor_cores"]
    assert "gemmSN_NN_kernel" in row["about"] and "train.py:12" in row["about"]
    assert "N=1003, K=1001" in row["evidence"]
    # 2 x 64 x 1003 x 1001 = 128,512,384 FLOPs at 989.5 TFLOP/s = 129.9 ns (bytes: (64x1001 + 1003x1001 +
    # 64x1003) x 2 = 2,264,526 at 4800 GB/s = 471.8 ns, longer) -> 500 us - 471.8 / 0.6 = 499,213.7 ns
    assert row["saving_ms"] == pytest.approx(0.4992, abs=1e-4)
    assert "tensor_cores" not in _rules([_gemm(10_000, "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", 1001)])


@pytest.mark.parametrize("other_ns,fires", [(49_000_000, True), (50_000_000, False)])
def test_fp32_matmul_rule(other_ns, fires):
    # 1024^3 fp32 GEMM on CUDA cores: 2 x 1024^3 = 2.147e9 FLOPs at the TF32 peak 494.5 TFLOP/s = 4342.6 ns
    # (bytes 3 x 1024^2 x 4 = 12.6 MB at 4800 GB/s = 2621 ns, shorter). Its share: 0.5 / 49.5 ms = 1.01% fires,
    # 0.5 / 50.5 = 0.99% does not.
    recs = [_gemm(10_000, "sgemm_largek_lds64", 1024, m=1024, n=1024, dtype="float32"),
            _k(1_000_000, other_ns, kShortName="other", kLongName="other")]
    rules = _rules(recs)
    assert ("fp32_matmul" in rules) is fires
    if fires:
        row = rules["fp32_matmul"]
        assert row["saving_ms"] == pytest.approx((500_000 - 4342.6 / 0.6) / 1e6, abs=1e-4)
        assert "set_float32_matmul_precision('high')" in row["action"] and "bfloat16" in row["action"]
        assert "sgemm_largek_lds64" in row["about"] and "linear" in row["about"]


@pytest.mark.parametrize("other_ns,fires", [(990_000, True), (1_000_000, False)])
def test_channels_last_rule(other_ns, fires):
    # conversion kernels 10 us of 1000 us = 1.0% fires; of 1010 us = 0.99% does not
    conv = _k(10_000, 10_000, kShortName="nchwToNhwcKernel", kLongName="void nchwToNhwcKernel<__half>(...)",
              op=["conv2d"], mod=["torch.nn.functional"], callsite="/x/train.py:30")
    rules = _rules([conv, _k(100_000, other_ns)])
    assert ("channels_last" in rules) is fires
    if fires:
        row = rules["channels_last"]
        assert row["saving_ms"] == 0.01 and "conv2d" in row["about"] and "nchwToNhwcKernel" in row["about"]
        assert "channels_last" in row["action"]


@pytest.mark.parametrize("dur,far", [(2_510, True), (2_500, False)])
def test_far_from_roofline_and_memory_bound(dur, far):
    # 1250 ns at the roofline: 1250 / 2510 = 49.8% is under 50%, 1250 / 2500 = 50.0% is not
    rules = _rules([_add(10_000, dur)])
    assert ("far_from_roofline" in rules) is far and ("memory_bound" in rules) is far
    assert "near_roofline" not in rules  # 50% is under 60%
    if far:
        row = rules["far_from_roofline"]
        assert "train.py:20" in row["about"] and "memory-bound" in row["evidence"]
        assert row["saving_ms"] == pytest.approx((2_510 - 1250 / 0.6) / 1e6, abs=1e-4)  # 426.7 ns
        assert rules["memory_bound"]["saving_ms"] == row["saving_ms"]


def test_a_memory_bound_gemm_is_told_of_its_shapes_not_of_fusing():
    # a decoding GEMM, one row against a 4096 x 4096 bf16 weight: 2 x 4096 x 4096 = 33.6 MFLOP over
    # (4096 + 4096 x 4096 + 4096) x 2 B = 33.57 MB, 6,993 ns at 4800 GB/s; run in 20 us it is at 35% of its
    # (bandwidth) roofline. Fusing element-wise ops would not move it; more rows per launch would
    gemm = _gemm(10_000, "nvjet_tst_64x8_64x16_1x1_h_bz_TNN", 4096, dur=20_000, m=1, n=4096)
    row = _rules([gemm])["memory_bound"]
    assert "nvjet" in row["about"] and "35." in row["evidence"]
    assert row["action"].startswith("A matrix multiply bound by the bytes it reads") and "fuse the" not in row["action"]
    assert _rules([_add(10_000, 2_510)])["memory_bound"]["action"].startswith("Small or strided accesses")


def test_near_roofline_is_one_row_saving_nothing():
    # 1250 / 2000 = 62.5% and 1250 / 1900 = 65.8%: both near, one summary row, saving 0, after the others
    t = _table([_add(10_000, 2_000), _add(100_000, 1_900, line="/x/train.py:21")])
    near = [r for r in t.rows if r[0] == "near_roofline"]
    assert len(near) == 1 and near[0][3] == 0.0
    assert "train.py:20" in near[0][1] and "train.py:21" in near[0][1]
    assert "far_from_roofline" not in {r[0] for r in t.rows}


def _foreach(start, call, dur=100_000):
    # _foreach_add_(params, grads): one list of 1M bf16 (2 MB); reads both lists, writes the first: 3 passes
    lst = {"type": "tensorlist", "items": [_t([1_000_000])]}
    return _k(start, dur, kShortName="multi_tensor_apply_kernel", kLongName="multi_tensor_apply_kernel",
              op=["_foreach_add_"], mod=["torch"], dir="fprop", subSeqId=0, args=[lst, lst],
              marker=[{"call": call}], ranges=["ProfilerStep#1", "Optimizer.step#AdamW.step"],
              callsite="/x/train.py:60")


@pytest.mark.parametrize("other_ns,fires", [(13_000_000, True), (13_700_000, False)])
def test_optimizer_foreach_rule(other_ns, fires):
    # 7 calls x 3 passes = 21 passes over the 2 MB list; a fused step makes 7: saves 1 - 7/21 = 2/3 of 700 us.
    # Share: 0.7 / (0.7 + 13) ms = 5.1% fires, 0.7 / (0.7 + 13.7) = 4.86% does not.
    recs = [_foreach(10_000 + i * 200_000, i) for i in range(7)] + [_k(2_000_000, other_ns,
                                                                         callsite="/x/train.py:99")]
    rules = _rules(recs)
    assert ("optimizer" in rules) is fires
    if fires:
        row = rules["optimizer"]
        assert row["saving_ms"] == pytest.approx(0.7 * 2 / 3, abs=1e-4)
        assert row["about"].startswith("AdamW step at train.py:60") and "fused=True" in row["action"]
        assert "21.0 passes" in row["evidence"]
        assert "near_roofline" not in rules and "far_from_roofline" not in rules  # the optimizer's line


def test_optimizer_per_parameter_loop():
    # plain add_ kernels under the optimizer's range: a loop over the parameters; 100% optimizer time
    recs = [_add(10_000 + i * 20_000, 10_000, ranges=["Optimizer.step#SGD.step"], marker=[{"call": i}])
            for i in range(4)]
    row = _rules(recs)["optimizer"]
    assert "per-parameter loop" in row["evidence"] and "foreach=True" in row["action"]
    # each kernel 10 us with 1250 ns at the roofline: 4 x (10,000 - 1250 / 0.6) = 31,666.7 ns
    assert row["saving_ms"] == pytest.approx(0.0317, abs=1e-4)
    assert "optimizer" not in _rules([_add(10_000 + i * 20_000, 10_000, marker=[{"call": i}]) for i in range(4)])


@pytest.mark.parametrize("gap_ns,fires", [(2_300, True), (2_200, False)])
def test_launch_bound_rule(gap_ns, fires):
    # 100 kernels of 20 us, 99 gaps: idle 99 x 2.3 = 227.7 us of 2227.7 us = 10.2% fires;
    # 99 x 2.2 = 217.8 of 2217.8 = 9.8% does not
    recs = [_k(10_000 + i * (20_000 + gap_ns), 20_000, callsite="/x/train.py:70") for i in range(100)]
    rules = _rules(recs)
    assert ("launch_bound" in rules) is fires
    if fires:
        row = rules["launch_bound"]
        assert row["saving_ms"] == pytest.approx(0.2277, abs=1e-4) and "train.py:70" in row["about"]
        assert "CUDA graphs" in row["action"]


@pytest.mark.parametrize("gap_ns,rule", [(50_000, "idle_gaps"), (49_999, "launch_bound")])
def test_idle_gaps_rule_names_the_line_after_the_gap(gap_ns, rule):
    # two 10 us kernels; a gap of 50 us or more is host work before the second's line, a shorter one launch
    # overhead
    recs = [_k(10_000, 10_000, callsite="/x/train.py:40"),
            _k(20_000 + gap_ns, 10_000, op=["linear"], callsite="/x/train.py:50")]
    rules = _rules(recs)
    assert rule in rules and {"idle_gaps", "launch_bound"} - {rule} - set(rules)
    if rule == "idle_gaps":
        row = rules["idle_gaps"]
        assert row["about"].startswith("linear at train.py:50") and row["saving_ms"] == 0.05


def _copy(start, op, api, copy_kind="DtoH"):
    return _k(start, 2_000, kind="memcpy", kShortName="[CUDA memcpy DtoH]", copy_kind=copy_kind, bytes=4,
              op=[op], api=api, callsite="/x/train.py:80")


def test_sync_copies_rule():
    # .item(): a 2 us copy, then the GPU idle 100 us until the next kernel -> 102 us at stake
    recs = [_k(10_000, 10_000), _copy(20_000, "item", "cudaMemcpyAsync"), _k(122_000, 10_000)]
    row = _rules(recs)["sync_copies"]
    assert row["saving_ms"] == 0.102 and row["about"] == "item at train.py:80" and ".item()" in row["action"]
    # the same copy as an asynchronous .to(): not a synchronisation, a host copy (2 us of 22 us: over 1%)
    twin = _rules([recs[0], _copy(20_000, "to", "cudaMemcpyAsync"), recs[2]])
    assert "sync_copies" not in twin and "host_copies" in twin
    assert "sync_copies" in _rules([recs[0], _copy(20_000, "to", "cudaMemcpy"), recs[2]])  # synchronous API


@pytest.mark.parametrize("other_ns,fires", [(198_000, True), (200_000, False)])
def test_host_copies_rule(other_ns, fires):
    # a 2 us copy of 200 us of GPU time = 1.0% fires; of 202 us = 0.99% does not
    recs = [_k(1_000, other_ns), _copy(500_000, "to", "cudaMemcpyAsync", copy_kind="HtoD")]
    rules = _rules(recs)
    assert ("host_copies" in rules) is fires
    if fires:
        assert rules["host_copies"]["saving_ms"] == 0.002 and "train.py:80" in rules["host_copies"]["about"]
        assert "non_blocking=True" in rules["host_copies"]["action"]


def test_low_occupancy_rule():
    # one block of 32 threads on 132 SMs: occupancy (1/132) x 1 warp / 64, far under 25%
    small = kernel(10_000, 100_000, kShortName="small_grid", grid=[1, 1, 1], block=[32, 1, 1], registers=32,
                   static_smem_bytes=0, dynamic_smem_bytes=0, gpu_props=H200)
    row = _rules([small])["low_occupancy"]
    assert "small_grid" in row["about"]
    full = dict(small, grid=[132 * 64, 1, 1], block=[1024, 1, 1])
    assert "low_occupancy" not in _rules([full])


def test_real_capture_rows_name_what_they_are_about(records):
    recs = records("nsys/pyprof/transformer.sqlite.xz")
    (rec, lines) = build(aggregate([("x", recs)]), ["recommendations", "lines"])
    rules = {r[0] for r in rec.rows}
    # launch_bound is not among them: of the 2.40 ms of gaps under 50 us, 1.68 ms end with a kernel launched after
    # the GPU went idle (7.1% of the 23.63 ms span, under 10%); the rest were kernels already queued
    assert {"optimizer", "far_from_roofline"} <= rules
    for r in rec.rows:
        assert r[1] and r[2] and r[5] and 0 <= r[3] <= r[6]
    roof = {r[0]: r[lines.columns.index("roofline_pct")] for r in lines.rows}
    for r in rec.rows:
        if r[0] == "far_from_roofline":  # "line FILE:N (source); ops ..."
            assert roof[r[1].split(" ")[1]] < 50.0


@pytest.mark.parametrize("rule", ["data_loading"])
def test_rules_without_facts_never_fire(rule, records):
    assert rule not in _rules(records("nsys/pyprof/resnet.sqlite.xz"))


def test_data_loading_fires_where_the_gpu_idles_inside_the_dataloader():
    import numpy as np

    from pyprof.prof.aggregate import aggregate
    from pyprof.prof.host_time import HostRun
    from pyprof.prof.views import build
    from report_helpers import kernel

    # two steps of one 10 us kernel each, 1 ms apart: the profiled span runs from 0 to 1,010 us; the host was in
    # the DataLoader from 100 us to 900 us, while the GPU ran nothing: 800 us idle, 79.2% of the span
    recs = [kernel(0, 10_000, ranges=["ProfilerStep#0"]), kernel(1_000_000, 10_000, ranges=["ProfilerStep#1"])]
    agg = aggregate([("x", recs)])
    (w,) = agg.workers.values()
    w.host.append(HostRun(1, "dataloader", np.array([100_000], np.int64), np.array([900_000], np.int64)))
    (t,) = build(agg, ["recommendations"])
    rows = [dict(zip(t.columns, r)) for r in t.rows if r[0] == "data_loading"]
    assert len(rows) == 1
    assert rows[0]["saving_ms"] == 0.8 and rows[0]["saving_pct"] == round(100 * 800 / 1010, 2)
    # without the loader's ranges the rule has nothing to read
    w.host.clear()
    (t,) = build(agg, ["recommendations"])
    assert not [r for r in t.rows if r[0] == "data_loading"]
