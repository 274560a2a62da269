"""Each recommendation rule speaks only on the evidence it rests on: where a dtype, shapes, the GPU's peaks or
features, launch times or the optimizer's class are missing, it stays silent and says once, in the notes,
what it cannot judge and why. The firing cases are in test_views_recommend.py (H200 records); here their near
twins lose one piece of evidence each, and three real traces from other people are checked."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from report_helpers import ROOT, kernel

from pyprof.prof.aggregate import aggregate
from pyprof.prof.model.roofline import Peaks
from pyprof.prof.views import build
from shared_files import CORPUS

from test_views_recommend import _add, _copy, _foreach, _gemm, _k, _t

EXTERNAL2 = CORPUS / "external-2026-12"


def _view(recs, peaks=None):
    (t,) = build(aggregate([("x", recs)], peaks), ["recommendations"])
    return {r[0] for r in t.rows}, t.notes, t


def _on(gpu, recs):
    return [dict(r, gpu=gpu) for r in recs]


def _cannot(notes, rule):
    found = [n for n in notes if n.startswith(f"{rule}: cannot judge")]
    assert len(found) == 1, notes  # said once
    return found[0]


# ---- tensor_cores


def test_tensor_cores_without_dtype_says_so_instead_of_claiming_aligned_dimensions():
    # the same miss with no arguments recorded (record_shapes off): no dtype, no dimensions, no FLOPs
    bare = _gemm(10_000, "gemmSN_NN_kernel", 1001)
    bare["args"] = []
    rules, notes, _ = _view([bare])
    assert "tensor_cores" not in rules
    assert "no input shapes or dtypes recorded" in _cannot(notes, "tensor_cores")


def test_tensor_cores_on_a_gpu_without_that_format():
    # bf16 on a T4 (Turing, sm_75): no bf16 Tensor Cores, so a bf16 GEMM off them is no missed chance
    rules, notes, _ = _view(_on("Tesla T4", [_gemm(10_000, "gemmSN_NN_kernel", 1001)]))
    assert "tensor_cores" not in rules
    assert "T4 (sm_75) has no bf16 Tensor Cores" in _cannot(notes, "tensor_cores")
    # fp16 on the T4: its Tensor Cores take it, and the T4 row has the 65 TFLOP/s fp16 peak: the rule fires
    rules, _, t = _view(_on("Tesla T4", [_gemm(10_000, "gemmSN_NN_kernel", 1001, dtype="float16")]))
    assert "tensor_cores" in rules and "T4 (sm_75)" in t.rows[0][2]


def test_tensor_cores_on_an_unknown_gpu():
    rules, notes, _ = _view(_on("Radeon 780M", [_gemm(10_000, "gemmSN_NN_kernel", 1001)]))
    assert "tensor_cores" not in rules
    assert "'Radeon 780M' is not in the peaks table" in _cannot(notes, "tensor_cores")
    # --gpu names a row for it: judged again
    rules, notes, _ = _view(_on("Radeon 780M", [_gemm(10_000, "gemmSN_NN_kernel", 1001)]), Peaks("H200 SXM"))
    assert "tensor_cores" in rules and not [n for n in notes if n.startswith("tensor_cores")]


# ---- fp32_matmul


def _fp32(gpu):
    # 1024^3 fp32 GEMM on CUDA cores, 0.5 ms of 1 ms of GPU time
    return _on(gpu, [_gemm(10_000, "sgemm_largek_lds64", 1024, m=1024, n=1024, dtype="float32"),
                     _k(1_000_000, 500_000, kShortName="other", kLongName="other")])


def test_fp32_matmul_fires_where_tf32_exists_and_not_on_volta():
    assert "fp32_matmul" in _view(_fp32("NVIDIA A100-SXM4-80GB"))[0]
    rules, notes, _ = _view(_fp32("Tesla V100-SXM2-32GB"))
    assert "fp32_matmul" not in rules
    note = _cannot(notes, "fp32_matmul")
    assert "V100 SXM2 (sm_70) has no TF32 Tensor Cores" in note and "fp16" in note


def test_fp32_matmul_on_turing_offers_no_bf16():
    # an RTX 2080 Ti (sm_75) has fp16 Tensor Cores only: neither TF32 nor a bf16 action
    note = _cannot(_view(_fp32("NVIDIA GeForce RTX 2080 Ti"))[1], "fp32_matmul")
    assert "RTX 2080 Ti (sm_75) has no TF32" in note


def test_fp32_matmul_on_an_ampere_card_without_bf16_action_only_where_it_exists():
    # RTX 3090 (sm_86): TF32 and bf16 Tensor Cores; the action offers both
    rules, _, t = _view(_fp32("NVIDIA GeForce RTX 3090"))
    row = [r for r in t.rows if r[0] == "fp32_matmul"][0]
    assert "set_float32_matmul_precision" in row[5] and "bfloat16" in row[5]


# ---- channels_last


def _conv(gpu):
    conv = _k(10_000, 10_000, kShortName="nchwToNhwcKernel", kLongName="void nchwToNhwcKernel<__half>(...)",
              op=["conv2d"], mod=["torch.nn.functional"], callsite="/x/train.py:30")
    return _on(gpu, [conv, _k(100_000, 500_000)])


def test_channels_last_needs_a_gpu_with_tensor_cores():
    assert "channels_last" in _view(_conv("NVIDIA H200"))[0]
    rules, notes, _ = _view(_conv("Radeon 780M"))
    assert "channels_last" not in rules and "not in the peaks table" in _cannot(notes, "channels_last")


# ---- far_from_roofline, memory_bound


def test_roofline_rules_on_an_unknown_gpu():
    # the add of test_far_from_roofline_and_memory_bound, far from its roofline on an H200, on a GPU not in
    # the table: no roofline, so neither rule speaks
    assert {"far_from_roofline", "memory_bound"} <= _view([_add(10_000, 2_510)])[0]
    rules, notes, _ = _view(_on("Radeon 780M", [_add(10_000, 2_510)]))
    assert not {"far_from_roofline", "memory_bound"} & rules
    assert "not in the peaks table" in _cannot(notes, "far_from_roofline")
    assert "not in the peaks table" in _cannot(notes, "memory_bound")


def test_far_from_roofline_needs_most_of_the_time_modelled():
    # the same add (2.51 us) on a line that also runs a 10 us kernel of no known op: 2.51 / 12.51 = 20% modelled,
    # under half: not judged, where the whole line's time would otherwise be claimed
    recs = [_add(10_000, 2_510), _k(20_000, 10_000, kShortName="custom", kLongName="custom",
                                    callsite="/x/train.py:20")]
    rules, notes, _ = _view(recs)
    assert "far_from_roofline" not in rules
    assert "modelled for under 50%" in _cannot(notes, "far_from_roofline")


# ---- optimizer


def test_optimizer_foreach_needs_shapes_and_an_adam_class():
    recs = [_foreach(10_000 + i * 200_000, i) for i in range(7)] + [_k(2_000_000, 13_000_000,
                                                                         callsite="/x/train.py:99")]
    assert "optimizer" in _view(recs)[0]
    sgd = [dict(r, ranges=["ProfilerStep#1", "Optimizer.step#SGD.step"]) if r["op"] == ["_foreach_add_"] else r
           for r in recs]
    rules, notes, _ = _view(sgd)
    assert "optimizer" not in rules and "Adam(W)'s, and the step is SGD's" in _cannot(notes, "optimizer")
    bare = [dict(r, args=[]) if r["op"] == ["_foreach_add_"] else r for r in recs]
    rules, notes, _ = _view(bare)
    assert "optimizer" not in rules and "no input shapes" in _cannot(notes, "optimizer")


# ---- launch_bound


def _launches(gap_ns, launch_before_ns):
    # 100 kernels of 20 us with gap_ns between them, each launched launch_before_ns before its start
    return [_k(10_000 + i * (20_000 + gap_ns), 20_000, callsite="/x/train.py:70",
               api_start_ns=10_000 + i * (20_000 + gap_ns) - launch_before_ns) for i in range(100)]


def test_launch_bound_counts_only_gaps_the_host_caused():
    # 99 gaps of 2.3 us = 10.2% of the span (test_launch_bound_rule). Launched 1 us before their start, the
    # kernels came 1.3 us after the GPU went idle: the host was late, the rule fires. Launched 5 us before
    # (queued before the GPU went idle), the gaps are the GPU's own: silent.
    assert "launch_bound" in _view(_launches(2_300, 1_000))[0]
    assert "launch_bound" not in _view(_launches(2_300, 5_000))[0]


def test_launch_bound_without_launch_times():
    recs = [dict(r, api_start_ns=None) for r in _launches(2_300, 1_000)]
    rules, notes, _ = _view(recs)
    assert "launch_bound" not in rules and "no launch (CUDA API) times" in _cannot(notes, "launch_bound")


# ---- low_occupancy


def test_low_occupancy_without_launch_configuration():
    rules, notes, _ = _view([kernel(10_000, 100_000, kShortName="small_grid", grid=None, block=None)])
    assert "low_occupancy" not in rules and "no launch configuration" in _cannot(notes, "low_occupancy")


# ---- real traces without shapes, and on a V100


@pytest.fixture(scope="module")
def external_views(shared):
    out = {}
    for name in ("param_linear_kineto_rtx2080ti.json.gz", "param_dlrm_v100_worker0.pt.trace.json"):
        p = subprocess.run([sys.executable, "-m", "pyprof.parse", str(EXTERNAL2 / name)], capture_output=True,
                           cwd=ROOT, check=True)
        recs = [json.loads(x) for x in p.stdout.splitlines() if x.startswith(b'{"kind"')]
        out[name] = _view(recs)
    return out


def test_no_shapes_trace_makes_no_tensor_core_claim(external_views):
    # param's linear MLP on an RTX 2080 Ti, recorded without shapes: its 2480 GEMM kernels (840 + 1640 in the
    # kernel listing of the trace, all sgemm) had a tensor_cores finding claiming their whole time
    rules, notes, t = external_views["param_linear_kineto_rtx2080ti.json.gz"]
    assert "tensor_cores" not in rules and "fp32_matmul" not in rules
    assert "no input shapes or dtypes recorded" in _cannot(notes, "tensor_cores")
    for r in t.rows:
        assert r[3] is None or r[3] <= r[6]


def test_v100_trace_is_not_offered_tf32(external_views):
    rules, notes, _ = external_views["param_dlrm_v100_worker0.pt.trace.json"]
    assert "fp32_matmul" not in rules
    assert "V100 SXM2 (sm_70) has no TF32 Tensor Cores" in _cannot(notes, "fp32_matmul")


def test_idle_gaps_counts_only_gaps_the_host_caused():
    # 99 gaps of 200 us between 20 us kernels: 90.9% of the span idle (99 x 200 / (100 x 20 + 99 x 200) = 19800 /
    # 21800). Launched 1 us before its start, each kernel came 199 us after the GPU went idle: the host was late,
    # idle_gaps fires. Launched 300 us before (queued before the GPU went idle: the GPU waited for something
    # else), silent, with no cause claimed.
    assert "idle_gaps" in _view(_launches(200_000, 1_000))[0]
    rules, notes, _ = _view(_launches(200_000, 300_000))
    assert "idle_gaps" not in rules and not any(n.startswith("idle_gaps:") for n in notes)


def test_idle_gaps_without_launch_times():
    recs = [dict(r, api_start_ns=None) for r in _launches(200_000, 1_000)]
    rules, notes, _ = _view(recs)
    assert "idle_gaps" not in rules and "no launch (CUDA API) times" in _cannot(notes, "idle_gaps")


# ---- sync_copies, near_roofline: their silent twins


def _untimed(recs):
    return [dict(r, start_ns=None, end_ns=None, api_start_ns=None, api_end_ns=None) for r in recs]


def test_sync_copies_without_start_times():
    # test_sync_copies_rule's .item() and the 100 us gap after it, with every time taken away: the idle time
    # after the copy cannot be measured, so the rule says so instead of a finding
    recs = [_k(10_000, 10_000), _copy(20_000, "item", "cudaMemcpyAsync"), _k(122_000, 10_000)]
    assert "sync_copies" in _view(recs)[0]
    rules, notes, _ = _view(_untimed(recs))
    assert "sync_copies" not in rules and "no start times" in _cannot(notes, "sync_copies")
    for rule in ("launch_bound", "idle_gaps"):  # one note per rule, each said once
        assert "no start times" in _cannot(notes, rule)


def test_sync_copies_leaves_out_a_gap_ended_by_queued_work():
    # the kernel after the .item() launched at 5 us, before the copy: already queued, the GPU did not wait for
    # the host's next launch; the copy's own 2 us stay its time at stake
    recs = [_k(10_000, 10_000), _copy(20_000, "item", "cudaMemcpyAsync"), _k(122_000, 10_000, api_start_ns=5_000)]
    rows = {r[0]: r for r in _view(recs)[2].rows}
    assert "the GPU did not wait after them" in rows["sync_copies"][2] and rows["sync_copies"][3] == 0.002


def test_near_roofline_needs_the_gpus_peaks():
    # test_near_roofline_is_one_row_saving_nothing's two adds on a GPU of no known peaks: neither near nor far
    recs = _on("Mystery GPU", [_add(10_000, 2_000), _add(100_000, 1_900, line="/x/train.py:21")])
    rules, notes, _ = _view(recs)
    assert not {"near_roofline", "far_from_roofline"} & rules
    assert "not in the peaks table" in _cannot(notes, "far_from_roofline")


def test_a_dtype_no_tensor_core_takes_is_not_called_unrecorded():
    # an int64 matrix product on Hopper: its dtype is recorded, and no Tensor Core format takes it: no finding,
    # and no "no input shapes or dtypes recorded" (that would send the user to record what is already there)
    rules, notes, _ = _view([_gemm(10_000, "gemm_kernel", 64, dtype="int64")])
    assert "tensor_cores" not in rules and not any(n.startswith("tensor_cores:") for n in notes)
