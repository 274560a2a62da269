"""Memory lines: the input's allocations and frees (Source.memory_events), each placed in the ranges of the CPU
call that made it by the sweep that attributes launches (correlate.Correlator, a second one run over the ranges
again), and written after the records in runs of one process, device and level (record.memory_line).

The sweep's attribution gives an event the op, direction, call site and layer a kernel launched at the same
place would get, so that the memory view groups memory by the same op and line names as time.
"""
from __future__ import annotations

import itertools
import json
from typing import Iterator

from pyprof.record import ATTRIBUTION, MEMORY_COLUMNS, MEMORY_RUN, memory_line
from pyprof.parse.readers.activities import MemoryEvent, Source
from pyprof.parse.attribute.correlate import Correlator, Stats

#: The attribution fields a memory event keeps (what prof's op, line and layer keys read), by their index in
#: the sweep's fields (record.ATTRIBUTION order).
_SITE_FIELDS = ("op", "dir", "recompute", "callsite", "layer", "fwd")
_INDEX = tuple(ATTRIBUTION.index(k) for k in _SITE_FIELDS)
_NO_SITE: dict = {"op": [], "dir": "", "recompute": False, "callsite": None, "layer": [], "fwd": None}


def memory_lines(source: Source, stats: Stats) -> Iterator[str]:
    """The memory lines of ``source`` (none when it records no memory events), counted in ``stats``. Events come
    from the reader in the order of their calls (Source.memory_events); a line holds up to MEMORY_RUN of one
    (pid, device, level), in that order."""
    events = source.memory_events()
    first = next(events, None)
    if first is None:
        return
    # (pid, device, level) -> (columns, sites, site number by attribution number, site number by the site's JSON):
    # the calls of one op at one line have different attributions (each its own call) but one site
    runs: dict = {}
    swept = _attributed(source, _chain(first, events), stats.oddities)
    for ev, att in swept:
        key = (ev.pid, ev.device, ev.level)
        run = runs.get(key)
        if run is None:
            run = runs[key] = ({c.name: [] for c in MEMORY_COLUMNS}, [], {}, {})
        cols, sites, numbers, same = run
        number = None if att is None else att[0]
        site = numbers.get(number)
        if site is None:
            d = _NO_SITE if att is None else _site(att[1])
            text = json.dumps(d, sort_keys=True)
            site = same.get(text)
            if site is None:
                site = same[text] = len(sites)
                sites.append(d)
            numbers[number] = site
        stats.memory_events += 1
        for name, value in zip(("t_ns", "bytes", "allocated", "reserved", "addr", "site"),
                               (ev.t_ns, ev.bytes, ev.allocated, ev.reserved, ev.addr, site)):
            cols[name].append(value)
        if len(cols["t_ns"]) >= MEMORY_RUN:
            yield memory_line(ev.pid, ev.device, ev.level, cols, sites)
            del runs[key]
    for (pid, device, level), (cols, sites, _n, _s) in runs.items():
        yield memory_line(pid, device, level, cols, sites)


def _chain(first: MemoryEvent, rest: Iterator[MemoryEvent]) -> Iterator[MemoryEvent]:
    yield first
    yield from rest


def _attributed(source: Source, events: Iterator[MemoryEvent], oddities: dict) -> Iterator[tuple]:
    """(event, the sweep's attribution: None or (number, fields)) per event, in the reader's order."""
    a, b = itertools.tee(events)
    # The sweep takes (thread, start, end) in start order; an event without a call (made before the capture)
    # sorts first and is enclosed by no range.
    calls = ((ev.thread, -1 if ev.call_ns is None else ev.call_ns, -1 if ev.call_ns is None else ev.call_ns)
             for ev in b)
    for ev, (att, _call, _flags) in zip(a, Correlator(source, oddities).sweep(calls)):
        yield ev, None if ev.call_ns is None else att


def _site(fields: list) -> dict:
    out = {k: fields[i] for k, i in zip(_SITE_FIELDS, _INDEX)}
    if out["fwd"] is not None:  # the sweep hands the forward link already as JSON text
        out["fwd"] = json.loads(out["fwd"])
    return out
