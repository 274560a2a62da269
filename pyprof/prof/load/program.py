"""What parse's program lines say (record.program_line): a process's own step times, measured with nothing of
the capture on, and the captured steps timed the same way. pyprof.prof.inflation sets them beside the trace's
steps."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pyprof.common import InputError

_INT64_MAX = 2 ** 63 - 1


@dataclass(frozen=True)
class ProgramRun:
    """One program line."""

    pid: int | None
    unprofiled_step_ns: tuple[int, ...]
    captured_step_ns: tuple[int, ...]
    how: str

    KIND: ClassVar[str] = "program"  # its side lines' kind, and the WorkerData list it joins

    @property
    def unit(self) -> str:
        """What one timed step is: "forward" where each outermost module call was one (pyprof.forward_steps,
        ``pyprof run --forward-steps``: its ``how`` says "at each forward's end"), else "step"."""
        return "forward" if "at each forward's end" in self.how else "step"

    @classmethod
    def read(cls, d: dict, path: str, lineno: int) -> "ProgramRun":
        """The run of a decoded program line. Raises InputError naming the line for one that is damaged."""
        pid, un, cap, how = (d.get(k) for k in ("pid", "unprofiled_step_ns", "captured_step_ns", "how"))
        lists = all(type(x) is list and all(type(v) is int and 0 < v <= _INT64_MAX for v in x) for x in (un, cap))
        if not (pid is None or type(pid) is int) or not lists or type(how) is not str:
            raise InputError(path, f"line {lineno}: a damaged program line (expected a pid, two lists of step "
                                   "times in ns > 0 and how they were timed)")
        return cls(pid, tuple(un), tuple(cap), how)


__all__ = ["ProgramRun"]
