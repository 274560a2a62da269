"""What the recommendations' rules share: the thresholds, the Finding record, the saving arithmetic, and the
context every rule reads, which also resolves the evidence a rule may lack (the GPU's peaks and features) and
collects the "cannot judge" notes, each said once (docs/views.md, recommendations)."""
from __future__ import annotations

from dataclasses import dataclass

from pyprof.prof.aggregate import Aggregate, WorkerData
from pyprof.prof.model.gpu_features import Capability, capability
from pyprof.prof.forwards import forwards
from pyprof.prof.inflation import ProgramStep, program_step
from pyprof.prof.model.peaks import GpuPeaks
from pyprof.prof.steps import steps
from pyprof.prof.views.helpers import merged, short_lines, total
from pyprof.prof.views.gaps import launch_times

# Percentages of GPU time (the sum of all activities' durations) unless named otherwise.
HOTSPOT_SHARE = 5.0  # a line (or kernel) with this much GPU time is a hotspot
FAR_ROOFLINE = 50.0  # roofline % under which a hotspot is reported as far from the roofline
NEAR_ROOFLINE = 60.0  # roofline % at or above which a hotspot is near what the GPU can do (one summary row)
TARGET_ROOFLINE = 60.0  # the roofline % a fixed kernel is assumed to reach: savings are time - ideal / 60%
MODELLED_SHARE = 50.0  # % of a hotspot's time with modelled FLOPs/bytes under which its roofline is not judged
MEM_SHARE = 2.0  # a memory-bound kernel with this much GPU time ...
MEM_FAR = 50.0  # ... reaching less than this % of the peak bandwidth is reported
TC_FP32_SHARE = 1.0  # fp32 matrix kernels not on Tensor Cores (TF32 off) with this much GPU time
LAYOUT_SHARE = 1.0  # NCHW <-> NHWC conversion kernels with this much GPU time
OPT_SHARE = 5.0  # optimizer kernels with this much GPU time
OPT_LOOP_SHARE = 50.0  # % of the optimizer's kernels outside _foreach_/_fused_ ops: a per-parameter loop
FUSED_ADAM_PASSES = 7  # a fused Adam(W) step reads param, grad, exp_avg, exp_avg_sq and writes three of them
ADAM_CLASSES = frozenset({"Adam", "AdamW"})  # the optimizers the 7-pass basis is written for
LAUNCH_IDLE_SHARE = 10.0  # % of the profiled span idle in short gaps
GAP_IDLE_SHARE = 5.0  # % of the profiled span idle in long gaps before one line's work
COPY_SHARE = 1.0  # copies between host and device with this much GPU time
LOW_OCCUPANCY = 25.0  # estimated occupancy %
LOW_OCC_SHARE = 10.0  # % of kernel time in low-occupancy kernels
MAX_ROWS_PER_RULE = 3
DATA_LOADING_SHARE = 5.0  # % of the profiled span the GPU idles while the host is in the DataLoader
#: Rules whose time is (or includes) GPU idle time rather than activities' time.
IDLE_RULES = frozenset({"launch_bound", "idle_gaps", "sync_copies", "data_loading"})
NO_SHAPES = "no input shapes or dtypes recorded (torch.profiler.profile(record_shapes=True) records them)"


@dataclass
class Finding:
    """One row: what a rule found. ``saving_ns`` never exceeds ``time_ns``, the time it is about (GPU time of
    its activities, or the idle time for the idle rules); None when the rule's basis for it is missing."""

    rule: str
    about: str
    evidence: str
    saving_ns: float | None
    action: str
    time_ns: float


def misaligned(tc_dims: tuple) -> list[str]:
    """The sizes among a formula's ``tc_dims`` (registry.Estimate: a GEMM's M, N, K, a convolution's C, K) that
    are not multiples of 8, as ``NAME=VALUE``. A negative size (a corrupt marker) names nothing to pad."""
    return [f"{name}={size}" for name, size in tc_dims if size >= 0 and size % 8]


def at_target(ns: float, ideal_ns: float, target_pct: float = TARGET_ROOFLINE) -> float:
    """Time saved when work measured at ``ns``, whose time at the roofline is ``ideal_ns``, reaches
    ``target_pct`` of the roofline: ``ns - ideal / target``, never below 0 nor above ``ns``."""
    return min(ns, max(0.0, ns - ideal_ns * 100.0 / target_pct))


def top(names: list[str], n: int = 3) -> str:
    """The first ``n`` names joined, and how many more there are."""
    return ", ".join(names[:n]) + (f" (+{len(names) - n} more)" if len(names) > n else "")


def fmt_ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms"


def share(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "na"


class Ctx:
    """What every rule reads: the workers shown, GPU time, the lines shortened to the common folder, the GPU
    (its table row and features, when every record names the same known one), and the notes of what could not
    be judged."""

    def __init__(self, agg: Aggregate, ws: list[WorkerData]) -> None:
        self.ws = ws
        self.gpu_ns = total(ws, "gpu_ns")
        self.kernel_ns = total(ws, "kernel_ns")
        self.prefix, self.short = short_lines(merged(ws, "lines"))
        # What a saving is a share of: the program's own steps (a worker's steps x its unprofiled step, where a
        # program line measured it; pyprof.prof.inflation), else the profiled span (the steps' windows, wall time on
        # the GPU's clock), which includes the capture's own cost.
        self.programs: dict[int, ProgramStep | None] = {id(w): program_step(w) for w in ws}
        # the steps are forwards of an inference loop (pyprof.prof.forwards): the actions speak of decoding
        self.inference = any(forwards(w) is not None for w in ws)
        # training: backward work or an optimizer ran (the actions may speak of zero_grad and data loading)
        self.training = any(w.optimizer or any(k.endswith(" (bprop)") for k in w.ops) for w in ws)
        # the share of kernel time replayed from CUDA graphs: advice to use them is moot where they run already
        self.graph_share = total(ws, "graph_ns") / self.kernel_ns if self.kernel_ns else 0.0
        self.trace_span_ns = sum(s.span_ns for w in ws for s in steps(w)[0])
        self.span_ns = sum(self.worker_span_ns(w) for w in ws)
        self.notes: dict[tuple[str, str], str] = {}
        self.peaks, self.cap, self.gpu_reason = _the_gpu(agg, ws)
        self.source = agg.source
        self.text_asked: set[str] = set()  # the lines whose text a finding shows (or would): source.note's

    def line(self, key: str, text: bool = False) -> str:
        """A line as the findings name it: relative to the common folder, with its source text when ``text``
        and a source root holds its file."""
        if key == "-":
            return "(no call site)"
        out = self.short.get(key, key)
        src = None
        if text:
            self.text_asked.add(key)
            src = self.source.line(key)
        return f"{out} ({src})" if src else out

    def cannot(self, rule: str, what: str, reason: str) -> None:
        """Note, once per rule and subject, that ``rule`` cannot judge ``what`` for ``reason``."""
        self.notes.setdefault((rule, what), f"{rule}: cannot judge {what}: {reason}.")

    def worker_span_ns(self, w: WorkerData) -> float:
        """The worker's steps as the program runs them (steps x unprofiled step) where measured, else its span."""
        p = self.programs[id(w)]
        return p.unprofiled_ns * p.steps if p is not None else sum(s.span_ns for s in steps(w)[0])

    def program_idle(self, w: WorkerData, idle_ns: float) -> float:
        """``idle_ns``, GPU idle time of the worker's captured steps, as the program's: times its idle factor
        (ProgramStep.idle_factor: its idle per step without the capture over the capture's) where a program line
        measured it, never more than its steps' own idle; else as it is (the capture's, said once by idle_said)."""
        p = self.programs[id(w)]
        if p is None:
            return float(idle_ns)
        return min(idle_ns * p.idle_factor, p.program_idle_ns * p.steps)

    def idle_said(self, rule: str) -> None:
        """A rule about GPU idle time fired: say once how its figures stand to the program's own. Where every worker
        measured its program step, the scaling with each worker's numbers; where one did not, that its figures are
        the capture's, whose own cost they include, unmeasured."""
        many = len(self.ws) > 1
        for w in self.ws:
            p = self.programs[id(w)]
            if p is None:
                if steps(w)[0]:
                    self.notes.setdefault(("idle", "unmeasured"), (
                        f"{', '.join(sorted(IDLE_RULES))}: their idle figures are the capture's and include its own "
                        "cost, unmeasured: no unprofiled step was recorded (pyprof run times the program's own steps "
                        "around the capture; docs/capture.md)."))
                continue
            whose = f"{w.name}: " if many else ""
            self.notes.setdefault(("idle", w.name), (
                f"{whose}the idle rules' figures are the program's: the capture's idle time x "
                f"{p.idle_factor:.3f} = min(1, the program's idle per step {fmt_ms(p.program_idle_ns)} (its "
                f"unprofiled step "
                f"{fmt_ms(p.unprofiled_ns)}, {p.unprofiled_steps} steps, - the GPU's busy time per captured step "
                f"{fmt_ms(p.busy_ns)}) / the capture's idle per step {fmt_ms(p.trace_idle_ns)}); a saving is a "
                f"share of the program's {p.steps} steps ({fmt_ms(p.unprofiled_ns * p.steps)})."))

    def has_launches(self, w: WorkerData) -> bool:
        """Whether the worker's activities carry launch (CUDA API) times (gaps.launch_times)."""
        return launch_times(w)


def _the_gpu(agg: Aggregate, ws: list[WorkerData]) -> tuple[GpuPeaks | None, Capability | None, str]:
    """(table row, features, reason): the row and features of the one GPU every record names (after
    ``--gpu``), or None and why not."""
    names = sorted({g for w in ws for g in w.gpus})
    rows = {n: agg.peaks.for_gpu(n) for n in names}
    if agg.peaks.gpu:  # --gpu: one row for every record, named or not
        rows = {agg.peaks.gpu: agg.peaks.for_gpu(None)}
    if not rows:
        return None, None, "the records name no GPU (pass --gpu NAME)"
    unknown = [n for n, p in rows.items() if p is None]
    if unknown:
        return None, None, f"GPU {unknown[0]!r} is not in the peaks table (docs/roofline.md; pass --gpu NAME)"
    distinct = {(p.name, p.arch) for p in rows.values()}
    if len(distinct) > 1:
        return None, None, f"the records name several GPU models ({', '.join(sorted(n for n, _ in distinct))})"
    p = next(iter(rows.values()))
    cap = capability(p)
    return p, cap, "" if cap else f"the architecture of {p.name} is not known (a --peak/--bandwidth GPU)"


def groups_over(c: Ctx, attr: str, share_pct: float) -> tuple[dict, int, int] | None:
    """The workers' groups named ``attr`` merged, their GPU time and activities, when that time is at least
    ``share_pct`` % of GPU time; else None."""
    groups = merged(c.ws, attr)
    ns = sum(g.ns for g in groups.values())
    if not ns or 100.0 * ns / c.gpu_ns < share_pct:
        return None
    return groups, ns, sum(g.count for g in groups.values())


def cap_rows(found: list[Finding]) -> list[Finding]:
    """The MAX_ROWS_PER_RULE findings with the largest savings."""
    return sorted(found, key=lambda f: -(f.saving_ns or 0.0))[:MAX_ROWS_PER_RULE]
