"""Peaks looked up by the device names that traces and exports really carry, and a roofline that is na,
never 0%, when no peak applies."""
from __future__ import annotations

import gzip
import io
import json

import pytest

from pyprof.prof.peaks import GpuPeaks, lookup
from pyprof.prof.coverage import Coverage
from pyprof.prof.rows import rows
from pyprof.prof.modeller import Modeller
from pyprof.prof.roofline import Peaks, roofline
from pyprof.prof.summary import summarize

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


def test_groups_with_nothing_modelled_show_na():
    """--group-by op: an op whose kernels have no roofline (no formula, or an unknown GPU) shows na, not 0."""
    recs = [rec("k1", op="my_custom_op", mod="torch"),
            rec("elementwise_kernel", op="add", mod="torch", args=[T([10]), T([10])], seq=(2,), gpu="Radeon 780M")]
    out = io.StringIO()
    summarize(enumerate(recs, 1), out, "op", fmt="csv")
    table = {r.split(",")[0]: r.split(",") for r in out.getvalue().splitlines()[1:]}
    assert table["my_custom_op"][6] == "na" and table["add"][6] == "na"
    kept = list(rows(enumerate(recs, 1), Modeller(share=True), Peaks(), True, Coverage()))
    assert kept[1][2].flops == 10 and kept[1][3].roofline_pct is None  # modelled, but no peak for that GPU
