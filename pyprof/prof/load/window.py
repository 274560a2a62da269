"""What parse's window lines say (record.window_line): the profiled window of a process's input, where it came
from, and the process's kernel launch calls. The steps bound the span with it where no step marker does
(pyprof.prof.steps), and the overview says when launches were recorded and no GPU activity was."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pyprof.common import InputError
from pyprof.record import WINDOW_SOURCES

_INT64 = (-(2 ** 63), 2 ** 63 - 1)


@dataclass(frozen=True)
class WindowRun:
    """One window line."""

    pid: int | None
    start_ns: int
    end_ns: int
    source: str  # one of record.WINDOW_SOURCES (another, a newer pyprof's, is kept as it is)
    launches: int  # the process's kernel launch calls

    KIND: ClassVar[str] = "window"  # its side lines' kind, and the WorkerData list it joins

    @classmethod
    def read(cls, d: dict, path: str, lineno: int) -> "WindowRun":
        """The run of a decoded window line. Raises InputError naming the line for one that is damaged."""
        pid, s, e, source, n = (d.get(k) for k in ("pid", "start_ns", "end_ns", "source", "launches"))
        ints = all(type(x) is int and _INT64[0] <= x <= _INT64[1] for x in (s, e, n))
        if not (pid is None or type(pid) is int) or not ints or e < s or n < 0 or type(source) is not str:
            raise InputError(path, f"line {lineno}: a damaged window line (expected a pid, start_ns <= end_ns, "
                                   "a source and a launch count)")
        return cls(pid, s, e, source, n)


def window_of(runs: list[WindowRun]) -> WindowRun | None:
    """The one window of a worker's window lines (several inputs' processes are several workers): the first; None
    without one (schema 4 files written before window lines, or an input with no CUDA API call)."""
    return runs[0] if runs else None


__all__ = ["WindowRun", "window_of", "WINDOW_SOURCES"]
