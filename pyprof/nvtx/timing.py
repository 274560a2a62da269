"""The program's own step time: one timestamp per step boundary, taken where the step ends (the optimizer step
hook, a step marker, or ``pyprof.step()``), so that the steps nothing profiled can be set beside the captured ones.

With CUDA, a boundary is a CUDA event recorded on the current stream (``torch.cuda.Event(enable_timing=True)``):
nothing per op, one event per step, read only at the end (``elapsed_time`` after one synchronize), so the timing
does not change the program it times. A step's time is then the GPU's time from the previous step's end to this
one's, which is the step's wall time as long as the host keeps the GPU fed (a host-bound step makes the GPU wait,
and the wait is in it). Without CUDA (a CPU build of torch) the boundaries are ``time.perf_counter_ns()``: the host's
time between step ends.

This module is loaded in the script's interpreter (the boot module, ``pyprof.step()``): it imports torch only when
it is given it, and nothing of pyprof's later stages.
"""
from __future__ import annotations

import json
import os
import time

#: Steps timed per phase at most: a script that runs for days keeps this many events, not one per step.
MAX_TIMED = 1000

#: How the boundaries were taken (the program line's ``how``), with ``{unit}`` the step's unit: "step", or
#: "forward" where each outermost module call is one (step_window.ForwardCounter: generate(), serving loops).
_HOW_CUDA = "cuda events on the current stream at each {unit}'s end (elapsed_time after one synchronize)"
_HOW_CPU = "perf_counter at each {unit}'s end (no CUDA: the host's time between {unit} ends)"
HOW_CUDA, HOW_CPU = _HOW_CUDA.format(unit="step"), _HOW_CPU.format(unit="step")
#: The units a step can be.
UNITS = ("step", "forward")

#: A step's phase: "unprofiled" (nothing of the capture ran), "captured", or "skipped" (the first step, which pays
#: for one-time work; the first after the capture, which pays for ending it; a profiler's own warm-up step).
PHASES = ("unprofiled", "captured", "skipped")


class StepTimer:
    """Timestamps at step ends, each step labelled with its phase. ``torch``: the torch module (None: perf_counter)."""

    def __init__(self, torch=None, unit: str = "step") -> None:
        self.unit = unit
        self.cuda = torch is not None and torch.cuda.is_available()
        self._torch = torch
        self._last = None  # the previous boundary: a CUDA event or a perf_counter_ns value
        self._steps: list[tuple[str, object, object]] = []  # (phase, start mark, end mark)
        self._counts = dict.fromkeys(PHASES, 0)

    @property
    def how(self) -> str:
        return (_HOW_CUDA if self.cuda else _HOW_CPU).format(unit=self.unit)

    def _mark(self):
        if self.cuda:
            event = self._torch.cuda.Event(enable_timing=True)
            event.record()  # the current stream: where the script's step ran
            return event
        return time.perf_counter_ns()

    def boundary(self, phase: str) -> None:
        """A step ended now; ``phase`` is that step's (PHASES). The first boundary only starts the first step timed:
        the step before it (the script's first, with its one-time work) has no start and is not timed."""
        mark = self._mark()
        if self._last is not None and self._counts[phase] < MAX_TIMED:
            self._steps.append((phase, self._last, mark))
            self._counts[phase] += 1
        self._last = mark

    def results_ns(self) -> dict[str, list[int]]:
        """phase -> the steps' times in ns, in step order. Synchronizes once with CUDA (the events must be done).
        Raises RuntimeError where CUDA cannot read them (a device lost at exit)."""
        if self.cuda and self._steps:
            self._torch.cuda.synchronize()
        out: dict[str, list[int]] = {p: [] for p in PHASES}
        for phase, a, b in self._steps:
            out[phase].append(round(a.elapsed_time(b) * 1e6) if self.cuda else b - a)
        return out

    def program(self) -> dict:
        """What the program line holds (record.program_line): the unprofiled and captured steps, and how they were
        timed."""
        r = self.results_ns()
        return {"unprofiled_step_ns": r["unprofiled"], "captured_step_ns": r["captured"], "how": self.how}


def write(path: str, pid: int, program: dict) -> None:
    """Write the timing of one process to ``path`` (JSON), whole or not at all (a temporary name, renamed)."""
    tmp = f"{path}.{pid}.tmp"
    with open(tmp, "w") as f:
        json.dump({"pid": pid, **program}, f)
    os.replace(tmp, path)
