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
    arch: str = ""  # "sm_XY" (NVIDIA compute capability X.Y) or AMD's "gfxNNN": what gpu_features reads


def _p(name, bw, source, arch="", **tflops) -> GpuPeaks:
    return GpuPeaks(name, tflops, bw, source, arch)


# (regex on the CUDA device name, peaks); first match wins, so specific variants come before families.
TABLE: list[tuple[str, GpuPeaks]] = [
    (r"V100S", _p("V100S PCIe", 1134, "Tesla V100S datasheet", arch="sm_70", fp64=8.2, fp32=16.4, fp16_tc=130)),
    (r"V100.*(SXM|DGXS)", _p("V100 SXM2", 900, "Tesla V100 datasheet (SXM2)", arch="sm_70", fp64=7.8, fp32=15.7, fp16_tc=125)),
    (r"V100", _p("V100 PCIe", 900, "Tesla V100 datasheet (PCIe)", arch="sm_70", fp64=7.0, fp32=14.0, fp16_tc=112)),
    (r"\bT4\b", _p("T4", 320, "Tesla T4 datasheet", arch="sm_75", fp32=8.1, fp16_tc=65, int8_tc=130)),
    (r"A100.*80GB.*PCIe|A100-PCIE-80", _p("A100 80GB PCIe", 1935, "A100 datasheet (80GB PCIe)", arch="sm_80", fp64=9.7,
                                         fp64_tc=19.5, fp32=19.5, tf32_tc=156, fp16_tc=312, bf16_tc=312,
                                         int8_tc=624)),
    (r"A100.*(80GB|SXM4-80)", _p("A100 80GB", 2039, "A100 datasheet (80GB SXM)", arch="sm_80",
                                fp64=9.7, fp64_tc=19.5, fp32=19.5, tf32_tc=156, fp16_tc=312, bf16_tc=312,
                                int8_tc=624)),
    (r"A100", _p("A100 40GB", 1555, "A100 datasheet (40GB, SXM and PCIe)", arch="sm_80", fp64=9.7, fp64_tc=19.5, fp32=19.5,
                 tf32_tc=156, fp16_tc=312, bf16_tc=312, int8_tc=624)),
    (r"\bA10\b", _p("A10", 600, "A10 datasheet", arch="sm_86", fp32=31.2, tf32_tc=62.5, fp16_tc=125, bf16_tc=125,
                    int8_tc=250)),
    (r"\bL4\b", _p("L4", 300, "L4 datasheet (sparse TC figures halved)", arch="sm_89", fp32=30.3, tf32_tc=60, fp16_tc=121,
                   bf16_tc=121, fp8_tc=242.5, int8_tc=242.5)),
    (r"L40S", _p("L40S", 864, "L40S datasheet (sparse TC figures halved)", arch="sm_89", fp32=91.6, tf32_tc=183,
                 fp16_tc=362.05, bf16_tc=362.05, fp8_tc=733, int8_tc=733)),
    (r"H100.*PCIe", _p("H100 PCIe", 2000, "H100 datasheet (PCIe; sparse TC figures halved)", arch="sm_90", fp64=26, fp64_tc=51,
                       fp32=51, tf32_tc=378, fp16_tc=756.5, bf16_tc=756.5, fp8_tc=1513, int8_tc=1513)),
    (r"H100.*NVL", _p("H100 NVL", 3900, "H100 datasheet (NVL; sparse TC figures halved)", arch="sm_90", fp64=30, fp64_tc=60,
                      fp32=60, tf32_tc=417.5, fp16_tc=835.5, bf16_tc=835.5, fp8_tc=1670.5, int8_tc=1670.5)),
    (r"H100|GH200", _p("H100 SXM", 3350, "H100 datasheet (SXM; sparse TC figures halved)", arch="sm_90", fp64=34, fp64_tc=67,
                       fp32=67, tf32_tc=494.5, fp16_tc=989.5, bf16_tc=989.5, fp8_tc=1979, int8_tc=1979)),
    (r"H200.*NVL", _p("H200 NVL", 4800, "H200 datasheet (NVL; sparse TC figures halved)", arch="sm_90", fp64=30, fp64_tc=60,
                      fp32=60, tf32_tc=417.5, fp16_tc=835.5, bf16_tc=835.5, fp8_tc=1670.5, int8_tc=1670.5)),
    (r"H200", _p("H200 SXM", 4800, "H200 datasheet (SXM; sparse TC figures halved)", arch="sm_90", fp64=34, fp64_tc=67,
                 fp32=67, tf32_tc=494.5, fp16_tc=989.5, bf16_tc=989.5, fp8_tc=1979, int8_tc=1979)),
    (r"\bH20\b", _p("H20", 4000, "H20 figures as reported from NVIDIA's China-market spec sheet", arch="sm_90", fp64=1, fp32=44,
                      tf32_tc=74, fp16_tc=148, bf16_tc=148, fp8_tc=296, int8_tc=296)),
    (r"GB200", _p("GB200", 8000, "GB200 NVL72 spec table, per GPU (sparse TC figures halved)", arch="sm_100", fp64=40,
                  fp64_tc=40, fp32=80, tf32_tc=1250, fp16_tc=2500, bf16_tc=2500, fp8_tc=5000, int8_tc=5000)),
    (r"B200", _p("B200", 7700, "HGX B200 spec table, per GPU (sparse TC figures halved)", arch="sm_100",
                 fp64=37, fp64_tc=37, fp32=75, tf32_tc=1100, fp16_tc=2250, bf16_tc=2250, fp8_tc=4500,
                 int8_tc=4500)),
    (r"RTX PRO 6000", _p("RTX PRO 6000 Blackwell", 1792, "RTX PRO 6000 Blackwell datasheet (600 W; tensor figures "
                         "derived from its 4000 sparse FP4 TOPS)", arch="sm_120", fp32=125, tf32_tc=250, fp16_tc=500, bf16_tc=500,
                         fp8_tc=1000, int8_tc=1000)),
    (r"H800.*PCIe", _p("H800 PCIe", 2000, "H800 PCIe: the H100 PCIe's figures but FP64 (sparse TC halved)",
                       arch="sm_90", fp64=0.8, fp64_tc=0.8, fp32=51, tf32_tc=378, fp16_tc=756.5, bf16_tc=756.5,
                       fp8_tc=1513, int8_tc=1513)),
    (r"H800", _p("H800 SXM", 3350, "H800 SXM5: the H100 SXM's figures but FP64 (sparse TC halved)", arch="sm_90",
                 fp64=1, fp64_tc=1, fp32=67, tf32_tc=494.5, fp16_tc=989.5, bf16_tc=989.5, fp8_tc=1979,
                 int8_tc=1979)),
    (r"\bA30\b", _p("A30", 933, "A30 datasheet", arch="sm_80", fp64=5.2, fp64_tc=10.3, fp32=10.3, tf32_tc=82,
                    fp16_tc=165, bf16_tc=165, int8_tc=330)),
    (r"\bA10G\b", _p("A10G", 600, "AWS A10G (no NVIDIA datasheet): Baseten's A10 vs A10G table", arch="sm_86",
                     fp32=35, tf32_tc=35, fp16_tc=70, bf16_tc=70, int8_tc=280)),
    (r"\bL40\b", _p("L40", 864, "L40 datasheet (sparse TC figures halved)", arch="sm_89", fp32=90.5, tf32_tc=90.5,
                    fp16_tc=181, bf16_tc=181, fp8_tc=362, int8_tc=362)),
    # Workstation parts: full-rate FP32 accumulation, so the FP16 figure is the datasheet's dense one.
    (r"RTX A6000", _p("RTX A6000", 768, "RTX A6000 datasheet (sparse TC figure halved)", arch="sm_86", fp32=38.7,
                      tf32_tc=77.4, fp16_tc=154.8, bf16_tc=154.8, int8_tc=309.7)),
    (r"RTX A5000", _p("RTX A5000", 768, "RTX A5000 datasheet (sparse TC figure halved)", arch="sm_86", fp32=27.8,
                      tf32_tc=55.5, fp16_tc=111.1, bf16_tc=111.1, int8_tc=222.2)),
    (r"RTX A4000", _p("RTX A4000", 448, "RTX A4000 datasheet (sparse TC figure halved)", arch="sm_86", fp32=19.2,
                      tf32_tc=38.4, fp16_tc=76.7, bf16_tc=76.7, int8_tc=153.4)),
    (r"RTX A2000", _p("RTX A2000", 288, "RTX A2000 datasheet (sparse TC figure halved)", arch="sm_86", fp32=8.0,
                      tf32_tc=16.0, fp16_tc=32.0, bf16_tc=32.0, int8_tc=63.9)),
    (r"RTX 6000 Ada", _p("RTX 6000 Ada", 960, "RTX 6000 Ada datasheet (sparse FP8 halved)", arch="sm_89",
                         fp32=91.1, tf32_tc=182.1, fp16_tc=364.2, bf16_tc=364.2, fp8_tc=728.5, int8_tc=728.5)),
    (r"RTX 5000 Ada", _p("RTX 5000 Ada", 576, "RTX 5000 Ada datasheet (sparse FP8 halved)", arch="sm_89",
                         fp32=65.3, tf32_tc=130.6, fp16_tc=261.1, bf16_tc=261.1, fp8_tc=522.2, int8_tc=522.2)),
    (r"RTX 4000 Ada", _p("RTX 4000 Ada", 360, "RTX 4000 Ada datasheet (sparse FP8 halved)", arch="sm_89",
                         fp32=26.7, tf32_tc=40.95, fp16_tc=81.9, bf16_tc=81.9, fp8_tc=163.8, int8_tc=163.8)),
    (r"Quadro RTX [68]000$", _p("Quadro RTX 6000/8000", 672, "Quadro RTX 6000 / 8000 datasheets", arch="sm_75",
                                fp32=16.3, fp16_tc=130.5, int8_tc=261)),
    (r"TITAN RTX$", _p("TITAN RTX", 672, "NVIDIA Turing whitepaper, TITAN RTX specifications", arch="sm_75",
                       fp32=16.3, fp16_tc=130.5, int8_tc=261)),
    # GeForce: FP16/BF16 matrix products with FP32 accumulation (PyTorch's) run at half the FP16-accumulate rate
    # the spec pages lead with; the figures here are the FP32-accumulate ones. Reference boost clocks (Founders
    # Editions of the RTX 20 series ran faster). Exact names: laptop and other variants are other parts.
    (r"GeForce RTX 2060$", _p("RTX 2060", 336, "NVIDIA Turing whitepaper, appendix table", arch="sm_75", fp32=6.5,
        fp16_tc=25.8, int8_tc=103.2)),
    (r"GeForce RTX 2060 SUPER$", _p("RTX 2060 SUPER", 448, "NVIDIA Turing whitepaper, appendix table", arch="sm_75", fp32=7.2,
        fp16_tc=28.7, int8_tc=114.9)),
    (r"GeForce RTX 2070$", _p("RTX 2070", 448, "NVIDIA Turing whitepaper, appendix table", arch="sm_75", fp32=7.5,
        fp16_tc=29.9, int8_tc=119.4)),
    (r"GeForce RTX 2070 SUPER$", _p("RTX 2070 SUPER", 448, "NVIDIA Turing whitepaper, appendix table", arch="sm_75", fp32=9.1,
        fp16_tc=36.2, int8_tc=145.0)),
    (r"GeForce RTX 2080$", _p("RTX 2080", 448, "NVIDIA Turing whitepaper, appendix table", arch="sm_75", fp32=10.1,
        fp16_tc=40.3, int8_tc=161.1)),
    (r"GeForce RTX 2080 SUPER$", _p("RTX 2080 SUPER", 496, "NVIDIA Turing whitepaper, appendix table", arch="sm_75", fp32=11.2,
        fp16_tc=44.6, int8_tc=178.4)),
    (r"GeForce RTX 2080 Ti$", _p("RTX 2080 Ti", 616, "NVIDIA Turing whitepaper, appendix table", arch="sm_75", fp32=13.4,
        fp16_tc=53.8, int8_tc=215.2)),
    (r"GeForce RTX 3060$", _p("RTX 3060", 360, "NVIDIA GA102 (Ampere) whitepaper, appendix table", arch="sm_86", fp32=12.7,
        fp16_tc=25.5, tf32_tc=12.75, bf16_tc=25.5, int8_tc=101.9)),
    (r"GeForce RTX 3060 Ti$", _p("RTX 3060 Ti", 448, "NVIDIA GA102 (Ampere) whitepaper, appendix table", arch="sm_86", fp32=16.2,
        fp16_tc=32.4, tf32_tc=16.2, bf16_tc=32.4, int8_tc=129.6)),
    (r"GeForce RTX 3070$", _p("RTX 3070", 448, "NVIDIA GA102 (Ampere) whitepaper, appendix table", arch="sm_86", fp32=20.3,
        fp16_tc=40.6, tf32_tc=20.3, bf16_tc=40.6, int8_tc=162.5)),
    (r"GeForce RTX 3070 Ti$", _p("RTX 3070 Ti", 608, "NVIDIA GA102 (Ampere) whitepaper, appendix table", arch="sm_86", fp32=21.7,
        fp16_tc=43.5, tf32_tc=21.75, bf16_tc=43.5, int8_tc=174.0)),
    (r"GeForce RTX 3080$", _p("RTX 3080", 760, "NVIDIA GA102 (Ampere) whitepaper, appendix table", arch="sm_86", fp32=29.8,
        fp16_tc=59.5, tf32_tc=29.75, bf16_tc=59.5, int8_tc=238.1)),
    (r"GeForce RTX 3080 Ti$", _p("RTX 3080 Ti", 912, "NVIDIA GA102 (Ampere) whitepaper, appendix table", arch="sm_86", fp32=34.1,
        fp16_tc=68.2, tf32_tc=34.1, bf16_tc=68.2, int8_tc=272.8)),
    (r"GeForce RTX 3090$", _p("RTX 3090", 936, "NVIDIA GA102 (Ampere) whitepaper, appendix table", arch="sm_86", fp32=35.6,
        fp16_tc=71.2, tf32_tc=35.6, bf16_tc=71.2, int8_tc=284.7)),
    (r"GeForce RTX 3090 Ti$", _p("RTX 3090 Ti", 1008, "NVIDIA GA102 (Ampere) whitepaper, appendix table", arch="sm_86", fp32=40.0,
        fp16_tc=80.0, tf32_tc=40.0, bf16_tc=80.0, int8_tc=320.0)),
    (r"GeForce RTX 4060$", _p("RTX 4060", 272, "NVIDIA Ada Lovelace whitepaper, appendix table", arch="sm_89", fp32=15.1,
        fp16_tc=30.2, tf32_tc=15.1, bf16_tc=30.2, fp8_tc=60.4, int8_tc=120.9)),
    (r"GeForce RTX 4060 Ti$", _p("RTX 4060 Ti", 288, "NVIDIA Ada Lovelace whitepaper, appendix table", arch="sm_89", fp32=22.1,
        fp16_tc=44.1, tf32_tc=22.05, bf16_tc=44.1, fp8_tc=88.2, int8_tc=176.5)),
    (r"GeForce RTX 4070$", _p("RTX 4070", 504, "NVIDIA Ada Lovelace whitepaper, appendix table", arch="sm_89", fp32=29.1,
        fp16_tc=58.3, tf32_tc=29.15, bf16_tc=58.3, fp8_tc=116.6, int8_tc=233.2)),
    (r"GeForce RTX 4070 SUPER$", _p("RTX 4070 SUPER", 504, "NVIDIA Ada Lovelace whitepaper, appendix table", arch="sm_89", fp32=35.5,
        fp16_tc=71.0, tf32_tc=35.5, bf16_tc=71.0, fp8_tc=142.0, int8_tc=283.9)),
    (r"GeForce RTX 4070 Ti$", _p("RTX 4070 Ti", 504, "NVIDIA Ada Lovelace whitepaper, appendix table", arch="sm_89", fp32=40.1,
        fp16_tc=80.2, tf32_tc=40.1, bf16_tc=80.2, fp8_tc=160.4, int8_tc=320.7)),
    (r"GeForce RTX 4070 Ti SUPER$", _p("RTX 4070 Ti SUPER", 672, "NVIDIA Ada Lovelace whitepaper, appendix table", arch="sm_89", fp32=44.1,
        fp16_tc=88.2, tf32_tc=44.1, bf16_tc=88.2, fp8_tc=176.4, int8_tc=352.8)),
    (r"GeForce RTX 4080$", _p("RTX 4080", 716.8, "NVIDIA Ada Lovelace whitepaper, appendix table", arch="sm_89", fp32=48.7,
        fp16_tc=97.5, tf32_tc=48.75, bf16_tc=97.5, fp8_tc=195.0, int8_tc=389.9)),
    (r"GeForce RTX 4080 SUPER$", _p("RTX 4080 SUPER", 736, "NVIDIA Ada Lovelace whitepaper, appendix table", arch="sm_89", fp32=52.2,
        fp16_tc=104.4, tf32_tc=52.2, bf16_tc=104.4, fp8_tc=208.8, int8_tc=417.8)),
    (r"GeForce RTX 4090$", _p("RTX 4090", 1008, "NVIDIA Ada Lovelace whitepaper, appendix table", arch="sm_89", fp32=82.6,
        fp16_tc=165.2, tf32_tc=82.6, bf16_tc=165.2, fp8_tc=330.4, int8_tc=660.6)),
    (r"GeForce RTX 5070$", _p("RTX 5070", 672, "NVIDIA RTX Blackwell whitepaper, appendix table", arch="sm_120", fp32=30.9,
        fp16_tc=61.7, tf32_tc=30.85, bf16_tc=61.7, fp8_tc=123.4, int8_tc=246.9)),
    (r"GeForce RTX 5070 Ti$", _p("RTX 5070 Ti", 896, "NVIDIA RTX Blackwell whitepaper, appendix table", arch="sm_120", fp32=43.9,
        fp16_tc=87.9, tf32_tc=43.95, bf16_tc=87.9, fp8_tc=175.8, int8_tc=351.5)),
    (r"GeForce RTX 5080$", _p("RTX 5080", 960, "NVIDIA RTX Blackwell whitepaper, appendix table", arch="sm_120", fp32=56.3,
        fp16_tc=112.6, tf32_tc=56.3, bf16_tc=112.6, fp8_tc=225.2, int8_tc=450.2)),
    (r"GeForce RTX 5090$", _p("RTX 5090", 1792, "NVIDIA RTX Blackwell whitepaper, appendix table", arch="sm_120", fp32=104.8,
        fp16_tc=209.5, tf32_tc=104.75, bf16_tc=209.5, fp8_tc=419.0, int8_tc=838.0)),
    # AMD Instinct. An MI250X is two graphics compute dies that ROCm shows as two GPUs of that name: a kernel
    # runs on one, so the row is half of the module's figures.
    (r"MI250X", _p("MI250X (one GCD)", 1638.4, "Instinct MI250X spec page, per module, halved per GCD", arch="gfx90a",
                   fp64=23.95, fp64_tc=47.85, fp32=47.85, fp16_tc=191.5, bf16_tc=191.5, int8_tc=191.5)),
    (r"MI300X", _p("MI300X", 5300, "Instinct MI300X spec page (also the MI300X VF of cloud VMs)", arch="gfx942", fp64=81.7,
                   fp64_tc=163.4, fp32=163.4, tf32_tc=653.7, fp16_tc=1307.4, bf16_tc=1307.4, fp8_tc=2614.9,
                   int8_tc=2614.9)),
    (r"MI325X", _p("MI325X", 6000, "Instinct MI325X spec page", arch="gfx942", fp64=81.7, fp64_tc=163.4, fp32=163.4,
                   tf32_tc=653.7, fp16_tc=1307.4, bf16_tc=1307.4, fp8_tc=2614.9, int8_tc=2614.9)),
    (r"MI355X", _p("MI355X", 8000, "Instinct MI355X spec page (1400 W)", arch="gfx950", fp64=78.6, fp64_tc=78.6, fp32=157.3,
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
