"""Roofline numbers of one kernel: achieved FLOP/s and bytes/s, arithmetic intensity, and the fraction of the
roofline reached: max(FLOPs / peak FLOP/s, bytes / peak bandwidth) / measured time (docs/roofline.md).

The compute peak is chosen from the op's dtype and the ``tc`` column: a kernel that used Tensor Cores is held
to the Tensor Core peak of its dtype (fp32 -> TF32); any other kernel to the CUDA-core peak (fp64, else fp32:
half-precision CUDA-core math is held to the fp32 peak, a documented simplification).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from pyprof.common import UsageError
from pyprof.prof.model.args import dtype_info
from pyprof.prof.model.peaks import GpuPeaks, lookup

_TC_UNIT = {"fp16": "fp16_tc", "bf16": "bf16_tc", "fp32": "tf32_tc", "fp8": "fp8_tc", "int8": "int8_tc",
            "uint8": "int8_tc", "fp64": "fp64_tc"}


@dataclass
class Peaks:
    """Resolves peaks per GPU name, with user overrides (``--gpu``, ``--peak UNIT=TFLOPS``, ``--bandwidth``)."""

    gpu: str | None = None  # force this table entry for every record
    overrides: dict | None = None  # unit -> TFLOP/s
    bandwidth_gbps: float | None = None

    def __post_init__(self) -> None:
        self._cache: dict = {}
        self.unknown: set = set()  # GPU names asked for that the table lacks (unknown_gpu_line)
        if self.gpu is not None and lookup(self.gpu) is None and not (self.overrides and self.bandwidth_gbps):
            raise UsageError(f"--gpu {self.gpu!r} is not in the peaks table (docs/roofline.md); "
                             "give --peak and --bandwidth instead")

    def for_gpu(self, gpu_name: str | None) -> GpuPeaks | None:
        """The effective peaks for a record's GPU name (None when unknown and not given by hand)."""
        key = self.gpu or gpu_name
        try:
            return self._cache[key]
        except KeyError:
            pass
        base = lookup(key)
        if self.overrides or self.bandwidth_gbps:
            tf = dict(base.tflops) if base else {}
            tf.update(self.overrides or {})
            bw = self.bandwidth_gbps or (base.bandwidth_gbps if base else 0.0)
            base = GpuPeaks((base.name if base else "user") + " (overridden)", tf, bw, "command line",
                            base.arch if base else "")
        elif base is None and key:
            self.unknown.add(key)
        self._cache[key] = base
        return base


class Roofline(NamedTuple):
    """The roofline numbers of one kernel; None where not computable."""

    tflops: float | None  # achieved TFLOP/s: FLOPs / duration
    gbps: float | None  # achieved GB/s: bytes / duration
    flops_per_byte: float | None  # arithmetic intensity
    roofline_pct: float | None  # % of the roofline: the time at the GPU's peaks over the measured time


NO_ROOFLINE = Roofline(None, None, None, None)
# roofline() runs once per row of prof's hot loop: tuple.__new__ skips the named tuple's Python-level __new__
# (a third of the cost of making one).
_new_tuple = tuple.__new__


def peak_tflops(peaks: GpuPeaks, dtype: str | None, tc: bool | None) -> float | None:
    """The compute peak (TFLOP/s) that a kernel of ``dtype`` is held to: its Tensor Core peak when it ran on
    Tensor Cores (``tc`` True; tensorcores.tc_state)."""
    info = dtype_info(dtype)
    short = info[2] if info else "fp32"
    if tc:
        unit = _TC_UNIT.get(short)
        if unit and unit in peaks.tflops:
            return peaks.tflops[unit]
    if short == "fp64" and "fp64" in peaks.tflops:
        return peaks.tflops["fp64"]
    return peaks.tflops.get("fp32")


def roofline(flops: int | None, nbytes: int | None, duration_ns: int, peaks: GpuPeaks | None, dtype: str | None,
             tc: bool | None) -> Roofline:
    """The Roofline of one kernel: TFLOP/s, GB/s, FLOPs per byte and % of the roofline; None where not computable.

    The roofline share is None, never 0, when the FLOPs or the bytes are unknown (the roofline needs both: a
    kernel of no FLOPs whose bytes are unknown, a concatenation of an unknown dtype, may be far from the
    bandwidth or at it), or neither can be set against a peak: the GPU is unknown, or it has no peak for the unit
    the kernel needs and no bandwidth (zero work is 0%)."""
    if not duration_ns or duration_ns <= 0:
        return NO_ROOFLINE
    return at_duration(flops, nbytes, duration_ns, time_at_peaks(flops, nbytes, peaks, dtype, tc))


def time_at_peaks(flops: int | None, nbytes: int | None, peaks: GpuPeaks | None, dtype: str | None,
                  tc: bool | None) -> float | None:
    """The ns that ``flops`` and ``nbytes`` take at the GPU's peaks (the slower of the two), or None where either
    is unknown or neither can be set against a peak. It does not depend on the kernel's duration: the per-kernel
    table works it out once per distinct result (rows.RowStream) and each row only divides (``at_duration``)."""
    if peaks is None or flops is None or nbytes is None:
        return None
    t_ns = None
    if flops:
        pk = peak_tflops(peaks, dtype, tc)
        if pk:
            t_ns = flops / (pk * 1e3)
    if nbytes and peaks.bandwidth_gbps:
        t_ns = max(t_ns or 0.0, nbytes / peaks.bandwidth_gbps)
    if t_ns is None and not flops and not nbytes:  # nothing to do takes no time at any peak
        t_ns = 0.0
    return t_ns


def at_duration(flops: int | None, nbytes: int | None, duration_ns, t_ns: float | None) -> Roofline:
    """The Roofline of a kernel of ``duration_ns`` whose work takes ``t_ns`` at the peaks (time_at_peaks)."""
    if not duration_ns or duration_ns <= 0:
        return NO_ROOFLINE
    return _new_tuple(Roofline, (flops / duration_ns / 1e3 if flops is not None else None,  # FLOP/ns = GFLOP/s
                                 nbytes / duration_ns if nbytes is not None else None,  # byte/ns = GB/s
                                 flops / nbytes if flops is not None and nbytes else None,
                                 None if t_ns is None else 100.0 * t_ns / duration_ns))


def unknown_gpu_line(names) -> str | None:
    """The one line that names the GPUs among ``names`` that the peaks table lacks (their roofline columns are
    na) and the options that give their peaks; None when every one is known."""
    names = sorted(n for n in names if n)
    if not names:
        return None
    return (f"GPU {', '.join(repr(n) for n in names)} not in the peaks table (docs/roofline.md): roofline columns "
            "are na; pass --gpu NAME (a table row of the same GPU), or --peak UNIT=TFLOPS and --bandwidth GBPS")
