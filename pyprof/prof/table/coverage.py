"""What share of the kernels' GPU time got modelled FLOPs and bytes, and why the rest did not: the end-of-run
lines of ``pyprof prof`` and the views' coverage."""
from __future__ import annotations

from dataclasses import dataclass, field

from pyprof.common import printable
from pyprof.prof.table.formats import PROG
from pyprof.prof.model.modeller import Result
from pyprof.prof.model.registry import COUNTED_FAMILIES


@dataclass
class Coverage:
    """What share of kernel time got modelled numbers, and why the rest did not."""

    kernels: int = 0  # GPU activities: kernels, copies and memsets
    copies: int = 0  # of which copies and memsets
    time_ns: int = 0
    own_ns: int = 0  # the kernel carries its call's numbers
    elsewhere_ns: int = 0  # another kernel of the same call carries them
    flops: int = 0
    counted_flops: int = 0  # GEMM/conv/attention: comparable with torch.utils.flop_counter
    bytes: int = 0
    reasons: dict = field(default_factory=dict)  # reason -> ns

    def add(self, dur: int, m: Result, kernels: int = 1) -> None:
        """Count ``kernels`` kernels that all got result ``m`` and took ``dur`` ns together."""
        self.kernels += kernels
        if m.is_copy:
            self.copies += kernels
        self.time_ns += dur
        if m.flops:
            self.flops += m.flops * kernels
            if m.family in COUNTED_FAMILIES:
                self.counted_flops += m.flops * kernels
        if m.bytes:
            self.bytes += m.bytes * kernels
        if m.flops is not None and m.bytes is not None:
            # modelled: both, as the roofline needs (a copy of an unknown dtype has its 0 FLOPs and no bytes)
            self.own_ns += dur
        elif m.reason and (m.reason.startswith("counted on") or m.reason.startswith("helper kernel")):
            self.elsewhere_ns += dur
        else:
            r = m.reason or "not modelled"
            if r.startswith("no formula for ") or r.startswith("no op"):
                pass
            elif m.family:
                r = f"{r} ({m.family})"
            self.reasons[r] = self.reasons.get(r, 0) + dur

    def swap(self, dur: int, given: Result, final: Result) -> None:
        """A kernel counted with ``given`` that has its share ``final`` now (the same kernel, the same time)."""
        self.add(-dur, given, -1)
        self.add(dur, final)

    def merge(self, other: "Coverage") -> None:
        """Add another coverage (a worker's) into this one."""
        for k in ("kernels", "copies", "time_ns", "own_ns", "elsewhere_ns", "flops", "counted_flops", "bytes"):
            setattr(self, k, getattr(self, k) + getattr(other, k))
        for r, ns in other.reasons.items():
            self.reasons[r] = self.reasons.get(r, 0) + ns

    def text(self) -> str:
        """The end-of-run lines for stderr, one per line break: a reason quotes an op name from the input, which
        is written ``printable`` (its own line break would forge a line of pyprof's)."""
        t = self.time_ns or 1
        # The words parse and the views use: activities are kernels, copies and memsets.
        lines = [f"{PROG}: {self.kernels} GPU activities ({self.kernels - self.copies} kernels, {self.copies} "
                 f"copies and memsets), {self.time_ns / 1e6:.3f} ms GPU time; FLOPs/bytes modelled "
                 f"for {100 * (self.own_ns + self.elsewhere_ns) / t:.1f}% of it ({100 * self.own_ns / t:.1f}% on the "
                 f"kernel itself, {100 * self.elsewhere_ns / t:.1f}% on another kernel of the same op call)",
                 f"{PROG}: total {self.flops} FLOPs, {self.bytes} bytes; GEMM/conv/attention FLOPs (comparable "
                 f"with torch.utils.flop_counter) {self.counted_flops}"]
        if self.reasons:
            top = sorted(self.reasons.items(), key=lambda kv: -kv[1])[:5]
            lines.append(f"{PROG}: not modelled: " + "; ".join(f"{printable(r)} {100 * ns / t:.1f}%" for r, ns in top))
        return "\n".join(lines)
