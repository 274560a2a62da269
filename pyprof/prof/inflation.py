"""The program's own step against the captured one (pyprof.prof.load.program's lines, pyprof.prof.steps' steps), and
what that makes of the capture's figures. Kernel time barely moves under a capture; the host's time per op does,
so a captured step is longer, and the extra is GPU idle time that the program does not have.

``program_step`` reads a worker's program line against its steps: the unprofiled step, the captured step, the
GPU's busy time per captured step, and from them the program's own idle per step (unprofiled step - busy per
step) and the factor that turns the trace's idle time into the program's (docs/views.md, recommendations)."""
from __future__ import annotations

from dataclasses import dataclass
from statistics import median

from pyprof.prof.steps import steps


@dataclass(frozen=True)
class ProgramStep:
    """A worker's program step against its captured steps (all per step, ns)."""

    unprofiled_ns: float  # median of the unprofiled steps (a step that ran a checkpoint or a GC pass moves it least)
    unprofiled_steps: int
    captured_ns: float  # median of the program line's captured steps where it has them, else the trace's mean step
    captured_from: str  # "the same timing" or "the trace's steps"
    busy_ns: float  # the GPU's busy time per captured step (the trace's)
    trace_idle_ns: float  # the GPU's idle time per captured step (the trace's: span - busy)
    steps: int  # captured steps in the trace
    how: str
    unit: str = "step"  # what a step is: "forward" where the program timed each outermost module call

    @property
    def inflation(self) -> float:
        """How many times longer the captured step is than the program's."""
        return self.captured_ns / self.unprofiled_ns

    @property
    def program_idle_ns(self) -> float:
        """The program's GPU idle per step: its step less the GPU's busy time, which the capture barely moves
        (never below 0: a busy time over the unprofiled step is the capture's own slowing of the GPU)."""
        return max(0.0, self.unprofiled_ns - self.busy_ns)

    @property
    def idle_factor(self) -> float:
        """What the trace's idle time is multiplied by to be the program's: the program's idle per step over the
        trace's (at most 1: the capture adds host time, it takes none away; 0 where the trace has no idle)."""
        if self.trace_idle_ns <= 0:
            return 0.0
        return min(1.0, self.program_idle_ns / self.trace_idle_ns)


def program_step(w) -> ProgramStep | None:
    """The worker's ProgramStep: None without a program line holding unprofiled steps, or without captured steps
    with GPU activity to set them beside."""
    runs = [r for r in w.program if r.unprofiled_step_ns]
    sts = steps(w)[0]
    if not runs or not sts:
        return None
    run = runs[0]
    span = sum(s.span_ns for s in sts)
    busy = sum(s.busy_ns for s in sts)
    if run.captured_step_ns:
        captured, source = median(run.captured_step_ns), "the same timing"
    else:
        captured, source = span / len(sts), "the trace's steps"
    n = len(sts)
    return ProgramStep(median(run.unprofiled_step_ns), len(run.unprofiled_step_ns),
                       captured, source, busy / n, max(0, span - busy) / n, n, run.how, run.unit)


__all__ = ["ProgramStep", "program_step"]
