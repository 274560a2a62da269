"""Per-kernel estimates that need only the launch configuration and the GPU's limits: the share of the SMs a
grid can keep busy, and an estimated achieved occupancy (docs/views.md, "overview").

The exports name the GPU's limits differently (nsys ``smCount``/``maxWarpsPerSm``..., Kineto's
``deviceProperties`` ``numSms``/``maxThreadsPerMultiprocessor``..., nvprof ``numMultiprocessors``); ``limits``
reads any of them. Where a limit is missing the estimate is None (shown as ``na``), never a guess.
"""
from __future__ import annotations

from typing import NamedTuple

from pyprof.common import BoundedDict

# Resident blocks per SM by compute capability (CUDA programming guide, "Technical specifications"): the exports
# do not carry it. Architectures not listed get 32 (every data-center part since Volta).
_MAX_BLOCKS_PER_SM = {(7, 5): 16, (8, 6): 16, (8, 7): 16, (8, 9): 24, (12, 0): 32}
REG_ALLOC_UNIT = 256  # registers are allocated to a warp in units of 256 (sm_70 and later)
SMEM_RESERVED_PER_BLOCK = 1024  # bytes the runtime reserves per block on sm_80 and later


class Limits(NamedTuple):
    """What one SM holds; None where the export does not say."""

    sm_count: int | None
    max_warps: int | None
    max_registers: int | None
    max_smem_bytes: int | None
    max_blocks: int
    smem_reserved_bytes: int


_cache = BoundedDict(1024)  # id(props) -> (props, Limits): props kept, so that the id stays theirs


def limits(props: dict | None) -> Limits | None:
    """The SM limits named by a record's ``gpu_props`` (None without props)."""
    if not props:
        return None
    key = id(props)
    hit = _cache.get(key)
    if hit is not None and hit[0] is props:
        return hit[1]

    def first(*names):
        for n in names:
            v = props.get(n)
            if isinstance(v, (int, float)) and v > 0:
                return int(v)
        return None

    warp = first("threadsPerWarp", "warpSize") or 32
    max_warps = first("maxWarpsPerSm")
    if max_warps is None:
        threads = first("maxThreadsPerMultiprocessor", "maxThreadsPerSm")
        max_warps = threads // warp if threads else None
    cc = (first("computeMajor") or 0, first("computeMinor") or 0)
    out = Limits(first("smCount", "numSms", "numMultiprocessors", "multiProcessorCount"), max_warps,
                 first("maxRegistersPerSm", "regsPerMultiprocessor"),
                 first("maxShmemPerSm", "sharedMemPerMultiprocessor"),
                 _MAX_BLOCKS_PER_SM.get(cc, 32), SMEM_RESERVED_PER_BLOCK if cc[0] >= 8 else 0)
    _cache.add(key, (props, out))
    return out


def _count(dims) -> int:
    """The product of a launch configuration's dimensions; 0 (unknown) when any is missing or not positive."""
    n = 1
    for v in dims or ():
        if type(v) is not int or v <= 0:
            return 0
        n *= v
    return n if dims else 0


def sm_fraction(grid, lim: Limits | None) -> float | None:
    """min(1, blocks / SM count): the share of the SMs the grid can occupy (None when unknown)."""
    if lim is None or not lim.sm_count or not grid:
        return None
    blocks = _count(grid)
    return min(1.0, blocks / lim.sm_count) if blocks else None


def est_occupancy(grid, block, registers, static_smem, dynamic_smem, lim: Limits | None) -> float | None:
    """Estimated achieved occupancy (0..1) of one kernel: the blocks an SM can hold at once (limited by warps,
    registers, shared memory and the per-SM block limit), capped by the blocks the grid gives each SM, times
    the warps per block, over the SM's warp capacity. None when a needed number is missing."""
    if lim is None or not lim.max_warps or not lim.sm_count or not grid or not block:
        return None
    if registers is None or (static_smem is None and dynamic_smem is None):
        return None
    threads = _count(block)
    blocks = _count(grid)
    if not threads or not blocks:
        return None
    warps_per_block = -(-threads // 32)
    fit = min(lim.max_blocks, lim.max_warps // warps_per_block)
    if registers and lim.max_registers:
        regs_per_warp = -(-registers * 32 // REG_ALLOC_UNIT) * REG_ALLOC_UNIT
        fit = min(fit, (lim.max_registers // regs_per_warp) // warps_per_block)
    smem = (static_smem or 0) + (dynamic_smem or 0)
    if smem and lim.max_smem_bytes:
        fit = min(fit, lim.max_smem_bytes // (smem + lim.smem_reserved_bytes))
    resident = min(fit, blocks / lim.sm_count)
    return max(0.0, min(1.0, resident * warps_per_block / lim.max_warps))


def kernel_occupancy(d: dict, lim: Limits | None) -> float | None:
    """The estimated achieved occupancy (0..1) of a kernel record: the PyTorch profiler's own figure
    (``est_occupancy_pct``) where it gives one above 0, else est_occupancy from the record's launch
    configuration, registers and shared memory. The profiler's 0 is taken as absent, not as a measurement: a
    kernel that ran keeps at least one warp resident, and the PyTorch profiler writes 0 where it had no estimate
    (15.7 ms GEMMs of an A100 trace carry 0, where their registers and shared memory give 12.5%)."""
    occ = d.get("est_occupancy_pct")
    if isinstance(occ, (int, float)) and not isinstance(occ, bool) and 0 < occ <= 100:
        return occ / 100.0
    static, dynamic = d.get("static_smem_bytes"), d.get("dynamic_smem_bytes")
    if static is None and dynamic is None:
        static = d.get("smem_bytes")  # the PyTorch profiler gives only the sum (ROCm traces too)
    return est_occupancy(d.get("grid"), d.get("block"), d.get("registers"), static, dynamic, lim)
