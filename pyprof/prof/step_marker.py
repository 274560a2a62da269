"""``--step-marker NAME``: steps counted at the user's own ranges, for traces whose loop has no ``ProfilerStep``
ranges (a serving engine's profiler, started and stopped around a few hundred forwards, writes none: vLLM names
each forward ``execute_...``).

A step is one instance of a range whose name matches NAME whole (``*`` and ``?`` match any text, as in a shell):
the activities launched inside it, by the records' range stacks. Instances are told apart by their push time,
which parse writes beside each range (``range_ns``, record schema 4 since its range times), counted from the
profile's origin, so never negative (NO_STEP, -1, is no time). A record without it (older records; a replayed
graph node's range, pushed at the capture) is placed as unmarked work is (pyprof.prof.steps.assign: by launch
time where its thread marked no step), and counted.
"""
from __future__ import annotations

from fnmatch import fnmatchcase

from pyprof.common import BoundedDict, UsageError

NO_STEP = -1


class StepMarker:
    """The ranges that make steps; ``label`` gives a record's step (the push time of its outermost such range)."""

    def __init__(self, pattern: str) -> None:
        if not pattern.strip():
            raise UsageError("--step-marker: give the name of the ranges that are steps")
        self.pattern = pattern
        # only * and ? are wildcards: a [ is itself (PARAM's ranges are named "[param|...]"), which fnmatch
        # reads as a character class unless written [[]
        self._glob = pattern.replace("[", "[[]") if "*" in pattern or "?" in pattern else None
        self._seen = BoundedDict(1 << 14)  # range name -> whether it matches

    def matches(self, name: str) -> bool:
        hit = self._seen.get(name)
        if hit is None:
            hit = fnmatchcase(name, self._glob) if self._glob is not None else name == self.pattern
            self._seen.add(name, hit)
        return hit

    def label(self, d: dict) -> tuple[int, bool]:
        """(the push time of the record's outermost range the marker names, or NO_STEP; whether it named one whose
        time the record lacks)."""
        ranges = d.get("ranges")
        if not ranges or type(ranges) is not list:
            return NO_STEP, False
        for i, name in enumerate(ranges):
            if type(name) is str and self.matches(name):
                ns = d.get("range_ns")
                t = ns[2 * i] if type(ns) is list and len(ns) > 2 * i else None
                return (t, False) if type(t) is int and t >= 0 else (NO_STEP, True)
        return NO_STEP, False


def unmarked(agg, marker: StepMarker) -> None:
    """Raise UsageError when no activity of ``agg`` (an Aggregate) ran under a range the marker names with its push
    time: the steps would silently be the whole capture. Called where an aggregate with a marker is complete
    (aggregate.aggregate, aggregate_jobs.aggregate_file_jobs)."""
    workers = agg.workers.values()
    if any(w.step_marker is not None for w in workers):
        return
    untimed = sum(w.marker_untimed for w in workers)
    if untimed:
        raise UsageError(f"--step-marker {marker.pattern!r}: {untimed} activities ran under ranges so named, but the "
                         "records lack their push times (parsed by a pyprof before range times): parse the profile "
                         "again")
    raise UsageError(f"--step-marker {marker.pattern!r}: no activity ran under a range so named (a name is matched "
                     "whole: * and ? match any text, as in 'execute_*')")
