"""The nsys reader's work before and beside its records, against a raw scan of the same tables, in one run.

    python bench/nsys_prepass.py EXPORT.sqlite [--runs 3]

Each run measures, each in its own process: (a) merely reading, with Python's sqlite3, the columns that work reads
(kernels', memcpys' and memsets' times, the runtime calls' times, threads and ids, every NVTX row's type, times,
thread and text), no processing; (b) on the pure-Python path (``PYPROF_PURE_PYTHON=1``) and (c) on the compiled
path: NsysSource's check (rows left out, counted), its stored-order and JSON-payload checks (what native_queries
and range_query ask) and its host intervals (ranges by category and API calls, merged). It prints one line per
run: the seconds of each, and the ratios to (a).
"""
from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import time

RAW_QUERIES = {
    "CUPTI_ACTIVITY_KIND_KERNEL": "SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY": "SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET": "SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_RUNTIME": "SELECT start, end, globalTid, correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME",
    "NVTX_EVENTS": "SELECT eventType, start, end, globalTid, text, textId FROM NVTX_EVENTS",
}


def _raw(path: str) -> int:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    tables = {t for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    n = 0
    for table, sql in RAW_QUERIES.items():
        if table in tables:
            for _ in db.execute(sql):
                n += 1
    return n


def _prepass(path: str) -> int:
    from pyprof.parse.readers.nsys import NsysSource

    src = NsysSource(path)
    src.check()
    src.range_query()
    src.native_queries()
    host = src.host_intervals()
    src.close()
    return sum(len(v[0]) for v in host.values())


def _child(mode: str, path: str) -> None:
    if mode != "raw":
        import pyprof.parse.readers.nsys  # noqa: F401  (importing is not parsing: outside the timing)
    t0 = time.perf_counter()
    n = _raw(path) if mode == "raw" else _prepass(path)
    print(json.dumps({"seconds": time.perf_counter() - t0, "n": n}))


def _run(mode: str, path: str, pure: bool) -> dict:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=here + os.pathsep + os.environ.get("PYTHONPATH", ""),
               PYPROF_PURE_PYTHON="1" if pure else "0")
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", mode, path], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("export")
    p.add_argument("--child", choices=("raw", "prepass"), help=argparse.SUPPRESS)
    p.add_argument("--runs", type=int, default=3, help="runs of each (default 3)")
    a = p.parse_args(argv)
    if a.child:
        _child(a.child, a.export)
        return 0
    for i in range(a.runs):
        raw = _run("raw", a.export, True)
        py = _run("prepass", a.export, True)
        c = _run("prepass", a.export, False)
        print(f"run {i + 1}: raw scan {raw['seconds']:.3f} s ({raw['n']} rows); Python path {py['seconds']:.3f} s = "
              f"{py['seconds'] / raw['seconds']:.2f}x; compiled {c['seconds']:.3f} s = "
              f"{c['seconds'] / raw['seconds']:.2f}x ({py['n']} host intervals)")
    print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs (other work skews wall times)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
