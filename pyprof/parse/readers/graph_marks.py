"""Graph marks (pyprof.nvtx.graphs, record.GRAPH_MARK_PREFIX) -> the ranges a CUDA graph's capture pushed.

A graph captured before the profiled range left its nodes' creation in the export but not pyprof's ranges around
them; pyprof wrote those ranges into the capture when profiling started, timed by the process's own clock, with
the clock's reading at each mark's push as its payload. A mark's place on the profile's timeline less that reading
is the offset between the two clocks plus the push's own delay; the least of a process's marks is taken (the
clocks tick alike, within 6 us over 6 s on the H100 machine, docs/markers.md), and places each range.
"""
from __future__ import annotations

import json

#: The oddity counted for a graph mark that is not what pyprof writes (its ranges left out).
DAMAGED = "graph marks left out (not a mark pyprof writes)"
_INT64 = (-(1 << 63), (1 << 63) - 1)


def ranges(rows, pid_mask: int, tid_mask: int, oddities: dict) -> list[tuple]:
    """RANGE_ROW tuples (thread, start, end, text, call id) of the marks ``rows`` ((globalTid, start, text, clock
    reading) each), in start order. The thread is the mark's process with the capturing thread's id."""
    marks = []
    offsets: dict = {}
    seen: set = set()
    for gtid, start, text, clock in rows:
        if (gtid & pid_mask, text) in seen:
            # written again at a later cudaProfilerStart of the same export (--capture-range-end=repeat): the same
            # ranges, which the sweep would nest inside themselves
            continue
        seen.add((gtid & pid_mask, text))
        body = _body(text)
        if body is None or not _int(clock):
            oddities[DAMAGED] = oddities.get(DAMAGED, 0) + 1
            continue
        process = gtid & pid_mask
        offsets[process] = min(offsets.get(process, start - clock), start - clock)
        marks.append((process, body))
    out: list[tuple] = []
    for process, (tid, rows_) in marks:
        offset = offsets[process]
        placed = [((process | (tid & tid_mask)), push + offset, pop + offset, text, call)
                  for push, pop, text, call in rows_]
        if all(_INT64[0] <= r[1] <= r[2] <= _INT64[1] for r in placed):
            out.extend(placed)
        else:
            oddities[DAMAGED] = oddities.get(DAMAGED, 0) + 1
    out.sort(key=lambda r: r[1])
    return out


def _body(text) -> tuple[int, list] | None:
    """(the capturing thread, its ranges) of a mark's text, or None where it is not what pyprof writes."""
    try:
        body = json.loads(text)
    except (TypeError, ValueError, RecursionError):
        return None
    if not isinstance(body, dict):
        return None
    tid, rows = body.get("tid"), body.get("ranges")
    if not (_int(tid) and tid >= 0 and isinstance(rows, list)):
        return None
    for r in rows:
        if not (isinstance(r, list) and len(r) == 4 and _int(r[0]) and _int(r[1]) and r[0] <= r[1]
                and isinstance(r[2], str) and (r[3] is None or _int(r[3]))):
            return None
    return tid, rows


def _int(v) -> bool:
    return type(v) is int and _INT64[0] <= v <= _INT64[1]
