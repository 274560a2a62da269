"""What parse's join line says (pyprof.parse.side.join, docs/record.md ``join``): the records' times are a timing
pass's and their attribution another capture's, and how many activities paired. The line belongs to the input,
not to a process (it has no pid): aggregate keeps it on the Aggregate by input name (``Aggregate.joins``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pyprof.common import InputError

_INT64_MAX = 2 ** 63 - 1
_TEXTS = ("attribution", "timing", "attribution_format", "timing_format")
_COUNTS = ("matched", "attribution_records", "attribution_ns", "attribution_unmatched", "attribution_unmatched_ns",
           "timing_records", "timing_ns", "timing_unmatched", "timing_unmatched_ns")
_NAMES_BY = ("full name", "short name")
_STEPS_BY = ("ProfilerStep", "window")


def _count(v) -> bool:
    return type(v) is int and 0 <= v <= _INT64_MAX


def _names(v) -> bool:
    return type(v) is dict and all(type(k) is str and _count(c) and c > 0 for k, c in v.items())


@dataclass(frozen=True)
class JoinRun:
    """One join line: its two passes (paths and readers), how they paired, and what did not pair on each side
    (counts, GPU time in ns, the commonest names)."""

    attribution: str
    timing: str
    attribution_format: str
    timing_format: str
    names_by: str
    steps_by: str
    steps: int
    matched: int
    attribution_records: int
    attribution_ns: int
    attribution_unmatched: int
    attribution_unmatched_ns: int
    timing_records: int
    timing_ns: int
    timing_unmatched: int
    timing_unmatched_ns: int
    attribution_unmatched_names: tuple[tuple[str, int], ...]
    timing_unmatched_names: tuple[tuple[str, int], ...]

    KIND: ClassVar[str] = "join"  # its side lines' kind
    PER_INPUT: ClassVar[bool] = True  # the input's, not a process's: no worker list joins it (aggregate)
    pid: ClassVar[None] = None

    @classmethod
    def read(cls, d: dict, path: str, lineno: int) -> "JoinRun":
        """The run of a decoded join line. Raises InputError naming the line for one that is damaged: a field
        missing or of another type, or counts that cannot hold together (more unmatched than in all, an
        activity both paired and unmatched)."""
        ok = (all(type(d.get(k)) is str for k in _TEXTS) and all(_count(d.get(k)) for k in _COUNTS + ("steps",))
              and d.get("names_by") in _NAMES_BY and d.get("steps_by") in _STEPS_BY
              and _names(d.get("attribution_unmatched_names")) and _names(d.get("timing_unmatched_names")))
        if ok:  # parse counts each timing activity once, paired or not; a paired one pairs one attribution record
            ok = (d["matched"] + d["timing_unmatched"] == d["timing_records"]
                  and d["matched"] + d["attribution_unmatched"] == d["attribution_records"]
                  and d["timing_unmatched_ns"] <= d["timing_ns"]
                  and d["attribution_unmatched_ns"] <= d["attribution_ns"])
        if not ok:
            raise InputError(path, f"line {lineno}: a damaged join line (expected both passes' paths and readers, "
                                   "names_by, steps_by and counts in which matched + unmatched make each pass's "
                                   "records and unmatched GPU time is at most its total)")
        return cls(*(d[k] for k in _TEXTS), d["names_by"], d["steps_by"], d["steps"], *(d[k] for k in _COUNTS),
                   tuple(d["attribution_unmatched_names"].items()), tuple(d["timing_unmatched_names"].items()))


__all__ = ["JoinRun"]
