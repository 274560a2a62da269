"""What the summaries and the views add up per group of activities (an op, a kernel, a source line, a layer):
small records with named fields, updated in place on the hot loop, and merged field by field across workers.

``ideal_ns`` is the time the group's kernels would take at the GPU's peaks (roofline % x duration);
``roof_ns`` the time of the kernels that have a roofline at all, so that a group with none shows na rather
than 0%.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace


class _Sums:
    """Merging adds every field (a subclass says where it does otherwise)."""

    __slots__ = ()

    def merge(self, other: "_Sums") -> None:
        """Add ``other``'s fields into this one's."""
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def copy(self):
        """A copy to merge others into."""
        return replace(self)


@dataclass(slots=True)
class Totals(_Sums):
    """Kernels of a summary group (prof ``--group-by``) or of a layer path (the layers view)."""

    kernels: int = 0
    ns: int = 0
    flops: int = 0
    ideal_ns: float = 0.0
    tc_ns: int = 0  # time of the kernels that used Tensor Cores
    roof_ns: int = 0


@dataclass(slots=True)
class OpGroup(_Sums):
    """Activities of an op, or of an op and its input shapes."""

    calls: int = 0
    kernels: int = 0
    ns: int = 0
    flops: int = 0
    ideal_ns: float = 0.0
    tc_ns: int = 0
    tiny_kernels: int = 0  # kernels shorter than aggregate.TINY_NS
    tiny_ns: int = 0
    roof_ns: int = 0


@dataclass(slots=True)
class KernelGroup(_Sums):
    """Launches of one kernel."""

    calls: int = 0
    ns: int = 0
    min_ns: int = 0
    max_ns: int = 0
    flops: int = 0
    ideal_ns: float = 0.0
    tc_ns: int = 0
    occ_x_ns: float = 0.0  # estimated occupancy x duration, over the kernels whose occupancy is known
    occ_known_ns: int = 0  # their time
    roof_ns: int = 0

    def merge(self, other: "KernelGroup") -> None:
        """Add ``other``'s fields into this one's; the shortest and longest of both."""
        min_ns, max_ns = min(self.min_ns, other.min_ns), max(self.max_ns, other.max_ns)
        _Sums.merge(self, other)
        self.min_ns, self.max_ns = min_ns, max_ns


@dataclass(slots=True)
class LineGroup(_Sums):
    """Activities launched from one source line (forward and backward)."""

    kernels: int = 0
    ns: int = 0
    flops: int = 0
    ideal_ns: float = 0.0
    tc_ns: int = 0
    fwd_ns: int = 0
    bwd_ns: int = 0
    roof_ns: int = 0


@dataclass(slots=True)
class TcMiss(_Sums):
    """fp16/bf16 GEMM/conv/attention kernels that ran without Tensor Cores, of one op, kernel, params and line."""

    kernels: int = 0
    ns: int = 0
    tc_dims: tuple = ()  # their formula's Estimate.tc_dims (the params, hence the sizes, are the group's)

    def merge(self, other: "TcMiss") -> None:
        """Add ``other``'s kernels and time into this one's."""
        self.kernels += other.kernels
        self.ns += other.ns


@dataclass(slots=True)
class CopyGroup(_Sums):
    """Copies between host and device of one kind from one line."""

    count: int = 0
    ns: int = 0
    bytes: int = 0
