"""Helpers of the report tests: fixture locations and a hand-built record."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


def kernel(start_ns: int, dur_ns: int, **kw) -> dict:
    """A hand-built kernel record (launched 1 us before it starts, on thread 1 of process 1)."""
    d = {"kind": "kernel", "kShortName": "k", "kLongName": "k", "kDuration": dur_ns, "start_ns": start_ns,
         "end_ns": start_ns + dur_ns, "pid": 1, "tid": 1, "api_start_ns": start_ns - 1000,
         "api_end_ns": start_ns - 500, "ranges": [], "op": [], "mod": [], "args": [], "dir": "",
         "grid": [1, 1, 1], "block": [128, 1, 1], "subSeqId": None}
    d.update(kw)
    return d
