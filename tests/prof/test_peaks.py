"""Peaks looked up by the device names that traces and exports really carry, and a roofline that is na,
never 0%, when no peak applies."""
from __future__ import annotations

import gzip
import io
import json

import pytest

from pyprof.prof.model.peaks import GpuPeaks, lookup
from pyprof.prof.table.coverage import Coverage
from pyprof.prof.table.rows import rows
from pyprof.prof.model.modeller import Modeller
from pyprof.prof.model.roofline import Peaks, roofline
from pyprof.prof.table.summary import summarize

from .helpers import T, rec

from shared_files import EXTERNAL  # the shared corpus beside the repository: read in place, never copied


# (device name as the tool reports it, table row, bandwidth GB/s, dense bf16 matrix TFLOP/s): figures from the
# vendor pages docs/roofline.md names.
NAMES = [
    ("AMD Instinct MI300X VF", "MI300X", 5300, 1307.4),  # a cloud VM's virtual function (Azure ND MI300X v5)
    ("AMD Instinct MI300X", "MI300X", 5300, 1307.4),
    ("AMD Instinct MI325X", "MI325X", 6000, 1307.4),  # MI300X compute, HBM3E at 6 TB/s
    ("AMD Instinct MI355X", "MI355X", 8000, 2516.6),
    ("AMD Instinct MI250X", "MI250X (one GCD)", 1638.4, 191.5),  # 3276.8 GB/s and 383 TFLOP/s per module, / 2
    ("NVIDIA H20", "H20", 4000, 148),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "RTX PRO 6000 Blackwell", 1792, 500),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX PRO 6000 Blackwell", 1792, 500),
    ("NVIDIA B200", "B200", 7700, 2250),
    ("NVIDIA GB200", "GB200", 8000, 2500),
    ("NVIDIA H200", "H200 SXM", 4800, 989.5),  # not taken for the H20
]


@pytest.mark.parametrize("name,row,bandwidth,bf16", NAMES)
def test_device_names_find_their_row(name, row, bandwidth, bf16):
    p = lookup(name)
    assert (p.name, p.bandwidth_gbps, p.tflops["bf16_tc"]) == (row, bandwidth, bf16)


def test_the_mi300_trace_names_a_known_gpu(shared):
    """The name in the ROCm trace's deviceProperties (TraceLens' Qwen1.5 capture on an MI300X VM) is found."""
    with gzip.open(f"{EXTERNAL}/tracelens_mi300_Qwen1.5-0.5B-Chat.json.gz") as f:
        names = {d["name"] for d in json.load(f)["deviceProperties"]}
    assert names == {"AMD Instinct MI300X VF"}
    assert lookup("AMD Instinct MI300X VF").tflops["fp8_tc"] == 2614.9
    assert lookup("AMD Instinct MI300A") is None  # the APU is another part: not guessed


def test_roofline_is_na_without_a_peak_for_the_unit_and_without_bandwidth():
    bare = GpuPeaks("bare", {}, 0.0)
    assert roofline(10**9, 10**6, 1000, bare, "bfloat16", True).roofline_pct is None
    assert roofline(10**9, None, 1000, None, "bfloat16", True).roofline_pct is None  # GPU unknown
    only_bw = GpuPeaks("bw", {}, 1000.0)
    # 10^6 bytes at 1000 GB/s = 1000 ns of 2000 ns: 50%, the FLOPs having no peak to be set against
    assert roofline(10**9, 10**6, 2000, only_bw, "bfloat16", True).roofline_pct == 50.0
    # no work at all takes no time at any peak
    assert roofline(0, 0, 1000, lookup("NVIDIA H200"), None, None).roofline_pct == 0.0
    # but no FLOPs and unknown bytes (a concatenation whose dtype the trace leaves out) is not no work: it may have
    # run at the bandwidth; and FLOPs without their bytes may have been memory-bound: neither is judged
    h200 = lookup("NVIDIA H200")
    assert roofline(0, None, 1000, h200, None, None).roofline_pct is None
    assert roofline(10**9, None, 1000, h200, "bfloat16", True).roofline_pct is None
    assert roofline(None, 10**6, 1000, h200, None, None).roofline_pct is None


def test_kernels_of_an_unknown_dtype_are_not_counted_as_modelled(shared, tmp_path):
    # TraceLens's Qwen1.5 trace on an H100: torch.cat's input is a list whose dtype Kineto does not write
    # ("Input type": ["TensorList", "Scalar"]), so a concatenation's bytes are unknown: its kernels get no
    # roofline, the coverage counts their time as not modelled, and no rule calls their line far from the roofline
    import subprocess
    import sys

    from pyprof.parse import parse_file

    src = f"{EXTERNAL}/tracelens_h100_Qwen1.5-0.5B-Chat.json.gz"
    with gzip.open(src) as f:
        cats = [e for e in json.load(f)["traceEvents"] if e.get("name") == "aten::cat"]
    assert len(cats) == 49 and all(e["args"]["Input type"][0] == "TensorList" for e in cats)
    recs = tmp_path / "q.dict"
    with open(recs, "w") as f:
        parse_file(src, f)
    p = subprocess.run([sys.executable, "-m", "pyprof.prof", str(recs), "--view", "recommendations", "-v", "--csv"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "dtype unknown: bytes not modelled (memory)" in p.stderr
    assert "modeling_qwen2.py:61" not in p.stdout  # the line of the cats (and a neg): not judged from them


def test_groups_with_nothing_modelled_show_na():
    """--group-by op: an op whose kernels have no roofline (no formula, or an unknown GPU) shows na, not 0."""
    recs = [rec("k1", op="my_custom_op", mod="torch"),
            rec("elementwise_kernel", op="add", mod="torch", args=[T([10]), T([10])], seq=(2,), gpu="Radeon 780M")]
    out = io.StringIO()
    summarize(enumerate(recs, 1), out, "op", fmt="csv")
    header, *lines = out.getvalue().splitlines()
    roofline = header.split(",").index("Roofline%")
    table = {r.split(",")[0]: r.split(",") for r in lines}
    assert table["my_custom_op"][roofline] == "na" and table["add"][roofline] == "na"
    kept = list(rows(enumerate(recs, 1), Modeller(share=True), Peaks(), True, Coverage()))
    assert kept[1][2].flops == 10 and kept[1][3].roofline_pct is None  # modelled, but no peak for that GPU


# Peaks worked out from the parts' SM counts and reference boost clocks (NVIDIA's architecture whitepapers):
# FP32 = SMs x clock x 2 x FP32 lanes per SM; the Tensor Core figures are dense, FP32 accumulation on GeForce.
ARITHMETIC = [
    # Turing TU102: 68 SMs x 1.545 GHz x 128 = 13.45 TFLOP/s FP32; fp16 FP32-accumulate x 512 = 53.8
    ("NVIDIA GeForce RTX 2080 Ti", "sm_75", 616, "fp32", 13.4),
    ("NVIDIA GeForce RTX 2080 Ti", "sm_75", 616, "fp16_tc", 53.8),
    # TU104 RTX 2070 SUPER: 40 SMs x 1.770 GHz x 128 = 9.06
    ("NVIDIA GeForce RTX 2070 SUPER", "sm_75", 448, "fp32", 9.1),
    # GA102 RTX 3090: 82 SMs x 1.695 GHz x 256 = 35.58; fp16 (FP32 accumulate) x 512 = 71.2
    ("NVIDIA GeForce RTX 3090", "sm_86", 936, "fp16_tc", 71.2),
    # AD102 RTX 4090: 128 SMs x 2.520 GHz x 256 = 82.58; fp8 (FP32 accumulate) x 1024 = 330.3
    ("NVIDIA GeForce RTX 4090", "sm_89", 1008, "fp8_tc", 330.3),
    # GB202 RTX 5090: 170 SMs x 2.407 GHz x 256 = 104.75
    ("NVIDIA GeForce RTX 5090", "sm_120", 1792, "fp32", 104.8),
    # GA106 RTX A2000: 26 SMs x 1.200 GHz x 1024 = 31.9 dense fp16 (datasheet: 63.9 with sparsity)
    ("NVIDIA RTX A2000 12GB", "sm_86", 288, "fp16_tc", 32.0),
    # GA100 A30: 56 SMs x 1.440 GHz x 2048 = 165.2 dense fp16
    ("NVIDIA A30", "sm_80", 933, "fp16_tc", 165),
    # GA102 A10: 72 SMs x 1.695 GHz x 1024 = 125.0 dense fp16 (the row's figure, now with its arithmetic)
    ("NVIDIA A10", "sm_86", 600, "fp16_tc", 125),
    # H800 SXM: the H100 SXM's Tensor Cores (1979 sparse bf16 halved), FP64 cut to 1 TFLOP/s
    ("NVIDIA H800", "sm_90", 3350, "bf16_tc", 989.5),
    ("NVIDIA H800", "sm_90", 3350, "fp64", 1),
    ("NVIDIA TITAN RTX", "sm_75", 672, "fp16_tc", 130.5),  # 72 x 1.770 x 1024 = 130.5: full-rate accumulate
    ("Quadro RTX 6000", "sm_75", 672, "fp16_tc", 130.5),
    ("NVIDIA L40", "sm_89", 864, "fp16_tc", 181),  # datasheet: 362.1 with sparsity
    ("NVIDIA RTX 6000 Ada Generation", "sm_89", 960, "fp16_tc", 364.2),  # 142 x 2.505 x 1024
]


@pytest.mark.parametrize("name,arch,bandwidth,unit,tflops", ARITHMETIC)
def test_peaks_from_sm_arithmetic(name, arch, bandwidth, unit, tflops):
    p = lookup(name)
    assert (p.arch, p.bandwidth_gbps) == (arch, bandwidth)
    assert p.tflops[unit] == pytest.approx(tflops, abs=0.1)


def test_corpus_device_names_are_known():
    # the names the shared corpus's traces and exports carry (deviceProperties, TARGET_INFO_GPU)
    for name in ("NVIDIA GeForce RTX 2080 Ti", "Tesla V100-SXM2-32GB", "NVIDIA A100-SXM4-80GB", "NVIDIA H800",
                 "NVIDIA RTX A2000 12GB", "NVIDIA GeForce RTX 2070 SUPER", "NVIDIA GeForce RTX 3060",
                 "NVIDIA GeForce RTX 4060", "NVIDIA TITAN RTX", "Quadro RTX 6000", "Tesla T4"):
        assert lookup(name) is not None, name
    # a laptop part runs other clocks: not taken for the desktop card
    assert lookup("NVIDIA GeForce RTX 4090 Laptop GPU") is None


def test_gpu_features_by_architecture():
    from pyprof.prof.model.gpu_features import capability, feature_for

    v100, t4, a100, l4, h100 = (capability(lookup(n)) for n in ("Tesla V100-SXM2-32GB", "Tesla T4",
                                                                 "NVIDIA A100-SXM4-80GB", "NVIDIA L4", "NVIDIA H100"))
    assert v100.has("fp16_tc") and not v100.has("tf32_tc") and not v100.has("int8_tc")  # Volta: fp16 only
    assert t4.has("int8_tc") and t4.has("int4_tc") and not t4.has("bf16_tc")  # Turing adds int8/int4
    assert a100.has("tf32_tc") and a100.has("bf16_tc") and not a100.has("fp8_tc")  # Ampere: TF32, bf16
    assert l4.has("fp8_tc") and h100.has("fp8_tc") and not h100.has("fp4_tc")  # FP8 from Ada / Hopper
    assert capability(lookup("NVIDIA B200")).has("fp4_tc")  # FP4 from Blackwell
    assert feature_for("float32") == "tf32_tc" and feature_for("c10::BFloat16") == "bf16_tc"
    assert feature_for(None) is None and capability(None) is None


def _records_file(tmp_path, gpu):
    recs = tmp_path / "r.dict"
    recs.write_text("".join(json.dumps(r) + "\n" for r in [
        rec("elementwise_kernel", op="add", mod="torch", args=[T([10]), T([10])], seq=(2,), gpu=gpu),
        rec("elementwise_kernel", op="add", mod="torch", args=[T([10]), T([10])], seq=(3,), gpu=gpu)]))
    return recs


@pytest.mark.parametrize("view", [False, True])
def test_unknown_gpu_is_named_once(tmp_path, view):
    import subprocess
    import sys

    def run(gpu):
        path = _records_file(tmp_path, gpu)
        args = [sys.executable, "-c", "import sys; from pyprof.cli import run; sys.argv[0]='pyprof'; "
                "sys.exit(run())", "prof"] + (["--view", "overview"] if view else []) + [str(path)]
        return subprocess.run(args, capture_output=True, text=True, check=True).stderr

    err = run("Radeon 780M")
    assert err.count("not in the peaks table") == 1 and "'Radeon 780M'" in err and "--gpu" in err
    assert "not in the peaks table" not in run("NVIDIA H200")
