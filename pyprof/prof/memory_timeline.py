"""Memory over time, from parse's memory lines (record.MEMORY_COLUMNS): the allocations and frees of one process
and device, the totals after each, the peak and what held it, and what each op and source line allocated.

Two levels, never mixed (record.LEVELS). ``allocator``: PyTorch's caching allocator, whose events carry its own
running totals (allocated, reserved): the peak is torch.cuda.max_memory_allocated()'s over the profiled window.
``driver``: what the process took from the CUDA driver (Nsight Systems' cudaMalloc/cudaFree events): its total
is their running sum, and what a ranged capture found already held is reported at its start.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from pyprof.common import InputError
from pyprof.record import LEVELS, MEMORY_COLUMNS

_SITE_KEYS = {"op": list, "dir": str, "recompute": bool, "callsite": (str, type(None)), "layer": list,
              "fwd": (dict, type(None))}
_INT64 = (-(2 ** 63), 2 ** 63 - 1)


@dataclass
class MemoryRun:
    """The events of one memory line: columns as int64 arrays (-1 where a nullable column is null: totals and
    addresses are never negative), in call order."""

    pid: int | None
    device: str
    level: str
    columns: dict[str, np.ndarray]
    known: dict[str, bool]  # column -> whether the input gave it (a nullable column may be all null)
    sites: list[dict]

    KIND: ClassVar[str] = "memory"  # its side lines' kind, and the WorkerData list it joins

    @classmethod
    def read(cls, d: object, path: str, lineno: int) -> "MemoryRun":
        """The run of a decoded memory line. Raises InputError naming the line for one that is damaged."""
        def bad(what: str) -> InputError:
            return InputError(path, f"line {lineno}: a damaged memory line ({what})")

        if type(d) is not dict:
            raise bad("not an object")
        pid, device, level, sites = d.get("pid"), d.get("device"), d.get("level"), d.get("sites")
        if not (pid is None or type(pid) is int) or type(device) is not str or level not in LEVELS:
            raise bad("pid, device or level")
        if type(sites) is not list or not all(type(s) is dict for s in sites):
            raise bad("sites: expected a list of objects")
        for s in sites:
            for k, t in _SITE_KEYS.items():
                if k in s and not isinstance(s[k], t):
                    raise bad(f"a site's {k}")
        n = None
        cols: dict = {}
        known: dict = {}
        for c in MEMORY_COLUMNS:
            v = d.get(c.name)
            if type(v) is not list or (n is not None and len(v) != n):
                raise bad(f"{c.name}: expected a list as long as t_ns")
            n = len(v)
            nullable = c.json == "int?"
            if not all((type(x) is int and _INT64[0] <= x <= _INT64[1]) or (nullable and x is None) for x in v):
                raise bad(f"{c.name}: expected integers{' or null' if nullable else ''}")
            known[c.name] = any(x is not None for x in v)
            cols[c.name] = np.array([-1 if x is None else x for x in v], dtype=np.int64)
        if n and (cols["site"].min() < 0 or cols["site"].max() >= len(sites)):
            raise bad("site: an index outside sites")
        return cls(pid, device, level, cols, known, sites)


@dataclass
class Timeline:
    """The events of one (process, device, level), in call order, with the totals after each."""

    pid: int | None
    device: str
    level: str
    t_ns: np.ndarray
    bytes: np.ndarray
    allocated: np.ndarray | None  # allocator level: the allocator's total after each event
    reserved: np.ndarray  # allocator level: the allocator's reserve; driver level: the running sum
    addr: np.ndarray
    site: np.ndarray
    sites: list[dict] = field(default_factory=list)

    @property
    def held(self) -> np.ndarray:
        """The total the peak is taken of: allocated (allocator level) or taken from the driver."""
        return self.allocated if self.allocated is not None else self.reserved

    def peak_index(self) -> int:
        """The first event at which the held total is highest."""
        return int(np.argmax(self.held))

    def before_bytes(self) -> int:
        """What was held before the first event: allocated before the profiled window (parameters, optimizer
        state; for a ranged nsys capture, everything nsys reports at its start is counted as events)."""
        return int(self.held[0] - self.bytes[0]) if self.allocated is not None else 0

    def live_at(self, i: int) -> np.ndarray:
        """Indices of the allocations made up to event ``i`` and not freed by then (paired by address: a free
        ends the latest earlier allocation at its address)."""
        live: dict = {}
        addr, size = self.addr[:i + 1].tolist(), self.bytes[:i + 1].tolist()
        for k, (a, b) in enumerate(zip(addr, size)):
            if b > 0:
                live[a if a >= 0 else ("anon", k)] = k
            elif b < 0:
                live.pop(a, None)
        return np.array(sorted(live.values()), dtype=np.int64)


def timelines(runs: list[MemoryRun]) -> list[Timeline]:
    """The runs joined per (pid, device, level), in the order each first appears; events stay in call order."""
    groups: dict = {}
    for r in runs:
        groups.setdefault((r.pid, r.device, r.level), []).append(r)
    out = []
    for (pid, device, level), rs in groups.items():
        sites: list = []
        index: dict = {}
        remapped = []
        for r in rs:
            to = np.array([_site_number(s, sites, index) for s in r.sites], dtype=np.int64)
            remapped.append(to[r.columns["site"]] if len(to) else r.columns["site"])
        col = {c.name: np.concatenate([r.columns[c.name] for r in rs]) for c in MEMORY_COLUMNS}
        site = np.concatenate(remapped)
        if level == "allocator" and all(r.known["allocated"] for r in rs if len(r.columns["t_ns"])):
            allocated, reserved = col["allocated"], col["reserved"]
        else:  # totals not given: the running sum of the events
            allocated, reserved = None, np.cumsum(col["bytes"])
        out.append(Timeline(pid, device, level, col["t_ns"], col["bytes"], allocated, reserved, col["addr"], site,
                            sites))
    return out


def _site_number(s: dict, sites: list, index: dict) -> int:
    import json

    key = json.dumps(s, sort_keys=True)
    k = index.get(key)
    if k is None:
        k = index[key] = len(sites)
        sites.append(s)
    return k


def series(t: Timeline, points: int = 1500) -> dict:
    """The held (and reserved) totals over time for a chart, at most ``points`` per line: each bucket of events
    keeps its highest value, so the peak is always drawn. Times in ms from the first event."""
    n = len(t.t_ns)
    if n == 0:
        return {"t_ms": [], "lines": {}}
    edges = np.linspace(0, n, min(points, n) + 1).astype(np.int64)
    starts = edges[:-1][np.diff(edges) > 0]
    t0 = int(t.t_ns[0])
    x = ((t.t_ns[starts] - t0) / 1e6).round(3).tolist()
    lines = {}
    named = [("allocated", t.allocated), ("reserved", t.reserved)] if t.allocated is not None else \
        [("taken from the driver", t.reserved)]
    for name, v in named:
        lines[name] = (np.maximum.reduceat(v, starts) / 2 ** 20).round(3).tolist()
    return {"t_ms": x, "lines": lines}
