"""Helpers of the report tests: fixture locations and a hand-built record."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


def _parse_synth():
    # The parse tests' helper module says where the shared corpus is; one definition for both test folders.
    mod = sys.modules.get("parse_synth")
    if mod is None:
        spec = importlib.util.spec_from_file_location("parse_synth", ROOT / "tests" / "parse" / "parse_synth.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules["parse_synth"] = mod
        spec.loader.exec_module(mod)
    return mod


#: The shared corpus of real exports from other people (../shared/corpus), when present.
CORPUS = _parse_synth().CORPUS


class ParseFailed(Exception):
    """``python -m pyprof.parse`` exited non-zero on a fixture (its own type, so that a test can expect a known
    parse bug, ``xfail(raises=ParseFailed)``, without hiding a wrong number)."""


def kernel(start_ns: int, dur_ns: int, **kw) -> dict:
    """A hand-built kernel record (launched 1 us before it starts, on thread 1 of process 1)."""
    d = {"kind": "kernel", "kShortName": "k", "kLongName": "k", "kDuration": dur_ns, "start_ns": start_ns,
         "end_ns": start_ns + dur_ns, "pid": 1, "tid": 1, "api_start_ns": start_ns - 1000,
         "api_end_ns": start_ns - 500, "ranges": [], "op": [], "mod": [], "args": [], "dir": "",
         "grid": [1, 1, 1], "block": [128, 1, 1], "subSeqId": None}
    d.update(kw)
    return d
