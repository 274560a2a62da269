"""Peak dense throughput and memory bandwidth of common GPUs, from NVIDIA's and AMD's datasheets and spec
pages (docs/roofline.md lists the document each row comes from). Dense means without 2:4 sparsity: where a
vendor gives only the sparse Tensor Core / matrix core figure, it is halved. FLOP/s in TFLOP/s, bandwidth in
GB/s (10^9 bytes/s).

Keys of ``tflops``: ``fp64``, ``fp32`` (CUDA cores; AMD: vector ALUs), ``fp64_tc``, ``tf32_tc``, ``fp16_tc``,
``bf16_tc``, ``fp8_tc``, ``int8_tc`` (TOPS; AMD: matrix cores). A missing key means the GPU has no such unit
(or no figure was found for it).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class GpuPeaks:
    """One GPU's peaks: name, TFLOP/s by unit, memory bandwidth in GB/s, and where the figures come from."""

    name: str
    tflops: dict = field(default_factory=dict)
    bandwidth_gbps: float = 0.0
    source: str = ""


def _p(name, bw, source, **tflops) -> GpuPeaks:
    return GpuPeaks(name, tflops, bw, source)


# (regex on the CUDA device name, peaks); first match wins, so specific variants come before families.
TABLE: list[tuple[str, GpuPeaks]] = [
    (r"V100S", _p("V100S PCIe", 1134, "Tesla V100S datasheet", fp64=8.2, fp32=16.4, fp16_tc=130)),
    (r"V100.*(SXM|DGXS)", _p("V100 SXM2", 900, "Tesla V100 datasheet (SXM2)", fp64=7.8, fp32=15.7, fp16_tc=125)),
    (r"V100", _p("V100 PCIe", 900, "Tesla V100 datasheet (PCIe)", fp64=7.0, fp32=14.0, fp16_tc=112)),
    (r"\bT4\b", _p("T4", 320, "Tesla T4 datasheet", fp32=8.1, fp16_tc=65, int8_tc=130)),
    (r"A100.*80GB.*PCIe|A100-PCIE-80", _p("A100 80GB PCIe", 1935, "A100 datasheet (80GB PCIe)", fp64=9.7,
                                         fp64_tc=19.5, fp32=19.5, tf32_tc=156, fp16_tc=312, bf16_tc=312,
                                         int8_tc=624)),
    (r"A100.*(80GB|SXM4-80)", _p("A100 80GB", 2039, "A100 datasheet (80GB SXM)",
                                fp64=9.7, fp64_tc=19.5, fp32=19.5, tf32_tc=156, fp16_tc=312, bf16_tc=312,
                                int8_tc=624)),
    (r"A100", _p("A100 40GB", 1555, "A100 datasheet (40GB, SXM and PCIe)", fp64=9.7, fp64_tc=19.5, fp32=19.5,
                 tf32_tc=156, fp16_tc=312, bf16_tc=312, int8_tc=624)),
    (r"\bA10\b", _p("A10", 600, "A10 datasheet", fp32=31.2, tf32_tc=62.5, fp16_tc=125, bf16_tc=125,
                    int8_tc=250)),
    (r"\bL4\b", _p("L4", 300, "L4 datasheet (sparse TC figures halved)", fp32=30.3, tf32_tc=60, fp16_tc=121,
                   bf16_tc=121, fp8_tc=242.5, int8_tc=242.5)),
    (r"L40S", _p("L40S", 864, "L40S datasheet (sparse TC figures halved)", fp32=91.6, tf32_tc=183,
                 fp16_tc=362.05, bf16_tc=362.05, fp8_tc=733, int8_tc=733)),
    (r"H100.*PCIe", _p("H100 PCIe", 2000, "H100 datasheet (PCIe; sparse TC figures halved)", fp64=26, fp64_tc=51,
                       fp32=51, tf32_tc=378, fp16_tc=756.5, bf16_tc=756.5, fp8_tc=1513, int8_tc=1513)),
    (r"H100.*NVL", _p("H100 NVL", 3900, "H100 datasheet (NVL; sparse TC figures halved)", fp64=30, fp64_tc=60,
                      fp32=60, tf32_tc=417.5, fp16_tc=835.5, bf16_tc=835.5, fp8_tc=1670.5, int8_tc=1670.5)),
    (r"H100|GH200", _p("H100 SXM", 3350, "H100 datasheet (SXM; sparse TC figures halved)", fp64=34, fp64_tc=67,
                       fp32=67, tf32_tc=494.5, fp16_tc=989.5, bf16_tc=989.5, fp8_tc=1979, int8_tc=1979)),
    (r"H200.*NVL", _p("H200 NVL", 4800, "H200 datasheet (NVL; sparse TC figures halved)", fp64=30, fp64_tc=60,
                      fp32=60, tf32_tc=417.5, fp16_tc=835.5, bf16_tc=835.5, fp8_tc=1670.5, int8_tc=1670.5)),
    (r"H200", _p("H200 SXM", 4800, "H200 datasheet (SXM; sparse TC figures halved)", fp64=34, fp64_tc=67,
                 fp32=67, tf32_tc=494.5, fp16_tc=989.5, bf16_tc=989.5, fp8_tc=1979, int8_tc=1979)),
    (r"\bH20\b", _p("H20", 4000, "H20 figures as reported from NVIDIA's China-market spec sheet", fp64=1, fp32=44,
                      tf32_tc=74, fp16_tc=148, bf16_tc=148, fp8_tc=296, int8_tc=296)),
    (r"GB200", _p("GB200", 8000, "GB200 NVL72 spec table, per GPU (sparse TC figures halved)", fp64=40,
                  fp64_tc=40, fp32=80, tf32_tc=1250, fp16_tc=2500, bf16_tc=2500, fp8_tc=5000, int8_tc=5000)),
    (r"B200", _p("B200", 7700, "HGX B200 spec table, per GPU (sparse TC figures halved)",
                 fp64=37, fp64_tc=37, fp32=75, tf32_tc=1100, fp16_tc=2250, bf16_tc=2250, fp8_tc=4500,
                 int8_tc=4500)),
    (r"RTX PRO 6000", _p("RTX PRO 6000 Blackwell", 1792, "RTX PRO 6000 Blackwell datasheet (600 W; tensor figures "
                         "derived from its 4000 sparse FP4 TOPS)", fp32=125, tf32_tc=250, fp16_tc=500, bf16_tc=500,
                         fp8_tc=1000, int8_tc=1000)),
    # AMD Instinct. An MI250X is two graphics compute dies that ROCm shows as two GPUs of that name: a kernel
    # runs on one, so the row is half of the module's figures.
    (r"MI250X", _p("MI250X (one GCD)", 1638.4, "Instinct MI250X spec page, per module, halved per GCD",
                   fp64=23.95, fp64_tc=47.85, fp32=47.85, fp16_tc=191.5, bf16_tc=191.5, int8_tc=191.5)),
    (r"MI300X", _p("MI300X", 5300, "Instinct MI300X spec page (also the MI300X VF of cloud VMs)", fp64=81.7,
                   fp64_tc=163.4, fp32=163.4, tf32_tc=653.7, fp16_tc=1307.4, bf16_tc=1307.4, fp8_tc=2614.9,
                   int8_tc=2614.9)),
    (r"MI325X", _p("MI325X", 6000, "Instinct MI325X spec page", fp64=81.7, fp64_tc=163.4, fp32=163.4,
                   tf32_tc=653.7, fp16_tc=1307.4, bf16_tc=1307.4, fp8_tc=2614.9, int8_tc=2614.9)),
    (r"MI355X", _p("MI355X", 8000, "Instinct MI355X spec page (1400 W)", fp64=78.6, fp64_tc=78.6, fp32=157.3,
                   fp16_tc=2516.6, bf16_tc=2516.6, fp8_tc=5033.2, int8_tc=5033.2)),
]
_COMPILED = [(re.compile(rx, re.IGNORECASE), p) for rx, p in TABLE]


def lookup(gpu_name: str | None) -> GpuPeaks | None:
    """The peaks for a device name such as ``NVIDIA H200``, ``NVIDIA A100-SXM4-80GB`` or ``AMD Instinct MI300X VF``;
    None if unknown."""
    if not gpu_name:
        return None
    for rx, peaks in _COMPILED:
        if rx.search(gpu_name):
            return peaks
    return None
