"""Parse speed and memory against a raw scan of the same rows, measured side by side in one run.

    python bench/parse_speed.py EXPORT.sqlite [--runs 3] [--floor]

Each run measures, each in its own process so that peak RSS is its own: (a) merely reading the rows parse needs
with Python's sqlite3 (kernels, memcpys, memsets, their launch calls, push/pop NVTX ranges, StringIds; no sorting,
no processing), (b) ``pyprof.parse`` writing every record to /dev/null with its compiled core (where it is built
and takes the export, docs/parse.md) and (c) with its pure-Python path (``PYPROF_PURE_PYTHON=1``), each with the
sweep worker process as parse decides (or as --worker says). It prints one line per run: the wall seconds of each
and the CPU seconds of all its threads and processes, the ratios to (a)
and the peak memory: the peak of its processes' summed PSS, sampled every 50 ms from the bench's own process (what
they hold together: a page a forked worker shares with its parent counts once), and in brackets their summed peak
RSS (an upper bound); then the CPU split of the last Python run.

``--pairs K`` adds, in each run, K - 1 more pairs of (a) and (b), alternated, and prints the median of the K
ratios of each (b) to the (a) just before it, with each ratio: on a shared machine a core's speed can change by
half from one second to the next, and a lone ratio then measures the machine as much as the parse.

``--floor`` adds (d): the least that the Python path's design can do, split as it splits it. Two processes read
what the sweep worker and the writer read, through the same readers, and touch each row once: the worker
side puts each range on its thread's list and looks up each launch's thread; the writer side joins each
activity to its launch call by key as the calls come (as parse's writer does) and writes one short line
per activity. No attribution, no markers, no record JSON. A Python parse with this design cannot take
less than (d), so (d) / (a) bounds the ratio it can reach.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

# As the commands do (pyprof.common.run_command): numpy's BLAS, which they never use, keeps one thread.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

RAW_QUERIES = (
    "SELECT * FROM StringIds",
    "SELECT start, end, deviceId, streamId, correlationId, globalPid, demangledName, shortName, gridX, gridY, "
    "gridZ, blockX, blockY, blockZ, registersPerThread, staticSharedMemory, dynamicSharedMemory "
    "FROM CUPTI_ACTIVITY_KIND_KERNEL",
    "SELECT start, end, deviceId, streamId, correlationId, globalPid, bytes, copyKind FROM CUPTI_ACTIVITY_KIND_MEMCPY",
    "SELECT start, end, deviceId, streamId, correlationId, globalPid, bytes FROM CUPTI_ACTIVITY_KIND_MEMSET",
    "SELECT start, end, globalTid, correlationId, nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId IN "
    "(SELECT correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL SELECT correlationId FROM "
    "CUPTI_ACTIVITY_KIND_MEMCPY UNION ALL SELECT correlationId FROM CUPTI_ACTIVITY_KIND_MEMSET)",
    "SELECT start, end, globalTid, text, textId, int64Value FROM NVTX_EVENTS WHERE eventType = 59",
)


def _raw(path: str) -> int:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    tables = {t for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    n = 0
    for q in RAW_QUERIES:
        if all(t in tables for t in _tables_of(q)):
            for _ in db.execute(q):
                n += 1
    return n


def _tables_of(q: str) -> list[str]:
    words = q.replace("(", " ").replace(")", " ").split()
    return [words[i + 1] for i, w in enumerate(words) if w == "FROM"]


def _parse(path: str, worker: bool | None) -> int:
    from pyprof.common import no_cyclic_gc
    from pyprof.parse import open_source
    from pyprof.parse.write.writer import text

    with no_cyclic_gc(), open(os.devnull, "w") as out:  # as parse does (cli._run, parse_file)
        src = open_source(path)
        pieces, stats = text(src, worker)  # as parse writes its output (cli._write)
        for piece in pieces:
            out.write(piece)
        src.close()
    return stats.records


def _floor(path: str) -> int:
    from pyprof.common import no_cyclic_gc

    with no_cyclic_gc():  # as parse does: the rows kept are acyclic
        return _floor_rows(path)


def _floor_rows(path: str) -> int:
    from pyprof.parse import open_source

    pid = os.fork()
    if pid == 0:  # the sweep worker's share
        src = open_source(path)
        stacks: dict = {}
        for row in src.ranges():
            st = stacks.get(row[0])
            if st is None:
                st = stacks[row[0]] = []
            elif len(st) > 64:  # bounded, as popped ranges are
                del st[:]
            st.append(row)
        for launch in src.launch_times():
            stacks.get(launch[0])
        os._exit(0)
    from pyprof.parse.write.writer import CLOCK_SKEW_NS

    src = open_source(path)  # the writer's share: launches joined as they come, as parse's writer does
    launches = iter(src.launches())
    nxt = next(launches, None)
    pending: dict = {}
    n = 0
    with open(os.devnull, "w") as out:
        for act in src.activities():
            while nxt is not None and nxt.start_ns <= act.start_ns + CLOCK_SKEW_NS:
                pending[nxt.key] = nxt
                nxt = next(launches, None)
            launch = pending.pop(act.launch_key, None)
            api_start = launch.start_ns if launch is not None else None
            out.write(f'{{"start_ns":{act.start_ns},"end_ns":{act.end_ns},"api_start_ns":{api_start}}}\n')
            n += 1
    _, status = os.waitpid(pid, 0)
    if status:
        raise RuntimeError(f"the floor's worker process failed ({status})")
    return n


def _pss_kib(pid: int) -> int:
    """The proportional set size of a process (Linux: its own pages, and each page it shares with n processes
    counted 1/n), 0 where it cannot be read."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return next((int(line.split()[1]) for line in f if line.startswith("Pss:")), 0)
    except (OSError, ValueError):
        return 0


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (Linux)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


def _child(mode: str, path: str, worker: bool | None) -> None:
    if mode != "raw":
        importlib.import_module("pyprof.parse.write.writer")  # importing is not parsing: outside the timing
    before = resource.getrusage(resource.RUSAGE_SELF)  # of every thread of this process: the reading threads too
    t0 = time.perf_counter()
    n = _raw(path) if mode == "raw" else _floor(path) if mode == "floor" else _parse(path, worker)
    seconds = time.perf_counter() - t0
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)  # the sweep worker process, when one ran
    # Peak RSS (Linux: KiB) of this process plus its largest child: an upper bound of the two together.
    peak_mb = (me.ru_maxrss + kids.ru_maxrss) / 1024
    cpu_self = me.ru_utime + me.ru_stime - before.ru_utime - before.ru_stime
    cpu_worker = kids.ru_utime + kids.ru_stime
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu_self + cpu_worker, "cpu_self": cpu_self,
                      "cpu_worker": cpu_worker, "peak_mb": peak_mb, "rows": n}))


def _run(mode: str, path: str, worker: str = "auto", engine: str = "python") -> dict:
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.path.dirname(here) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               PYPROF_PURE_PYTHON="0" if engine == "c" else "1")
    cmd = [sys.executable, os.path.abspath(__file__), "--child", mode, "--worker", worker, path]
    # The memory the run's processes hold together, sampled from here: a sampling thread in the measured process
    # made its raw scan 40% slower (Python's sqlite3 hands the GIL over at every row).
    # Its output goes to files, not pipes: a pipe nobody reads while this polls would stop a child that fills it.
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err, text=True)
        peak_kib = 0
        while proc.poll() is None:
            peak_kib = max(peak_kib, sum(_pss_kib(p) for p in _tree(proc.pid)))
            time.sleep(0.05)
        out.seek(0)
        err.seek(0)
        if proc.returncode:
            raise subprocess.CalledProcessError(proc.returncode, cmd, out.read(), err.read())
        return {**json.loads(out.read().strip().splitlines()[-1]), "pss_mb": peak_kib / 1024}


def _pairs(path: str, worker: str, n: int, first: tuple[dict, dict]) -> str:
    """``n`` pairs of (raw scan, compiled parse), ``first`` the run's own: each parse against the scan just before it.
    On a shared machine a core's speed can change by half within seconds (docs/parse.md), which a scan measured
    once and a parse measured after it, apart, turn into a ratio; adjacent pairs share the speed of their moment."""
    pairs = [first] + [(_run("raw", path), _run("parse", path, worker, "c")) for _ in range(n - 1)]
    ratios = sorted(p["seconds"] / r["seconds"] for r, p in pairs)
    return (f"C core in {n} alternated pairs: median {statistics.median(ratios):.2f}x the scan before it (each: "
            f"{', '.join(f'{x:.2f}' for x in ratios)}; scans {min(r['seconds'] for r, _ in pairs):.2f}-"
            f"{max(r['seconds'] for r, _ in pairs):.2f} s, parses {min(p['seconds'] for _, p in pairs):.2f}-"
            f"{max(p['seconds'] for _, p in pairs):.2f} s)")


def _core_takes(path: str) -> bool:
    """True when this checkout's compiled core is built and parses ``path`` (else both runs would be Python's)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    probe = ("import sys; from pyprof.parse import open_source, close_source; "
             "from pyprof.parse.write import native_lines; "
             "s = open_source(sys.argv[1]); print(native_lines.takes(s)); close_source(s)")
    # this checkout first, the environment's own path after it (where its packages may be: a machine's kit)
    env = dict(os.environ, PYTHONPATH=here + os.pathsep + os.environ.get("PYTHONPATH", ""), PYPROF_PURE_PYTHON="0")
    out = subprocess.run([sys.executable, "-c", probe, path], env=env, check=True, capture_output=True, text=True)
    return out.stdout.strip() == "True"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("export")
    p.add_argument("--child", choices=("raw", "parse", "floor"), help=argparse.SUPPRESS)
    p.add_argument("--runs", type=int, default=3, help="runs, each of the raw scan and both paths (default 3)")
    p.add_argument("--worker", choices=("auto", "on", "off"), default="auto",
                   help="the sweep worker process, of both paths (auto: as pyprof.parse decides)")
    p.add_argument("--pairs", type=int, default=1,
                   help="in each run, the raw scan and the compiled core this many times, alternated, each core "
                        "parse divided by the scan just before it; the run's median of those ratios is printed too")
    p.add_argument("--floor", action="store_true",
                   help="also measure the least work of the Python path's design (see the module docstring)")
    a = p.parse_args(argv)
    if a.child:
        _child(a.child, a.export, {"auto": None, "on": True, "off": False}[a.worker])
        return 0
    engines = ("c", "python") if _core_takes(a.export) else ("python",)
    if len(engines) == 1:
        print("compiled core:    not built, or it leaves this export to the Python path: Python only")
    for i in range(a.runs):
        raw = _run("raw", a.export)
        runs = {e: _run("parse", a.export, a.worker, e) for e in engines}
        figures = "; ".join(f"{'C core' if e == 'c' else 'Python'} {r['seconds']:.2f} s = "
                            f"{r['seconds'] / raw['seconds']:.2f}x (CPU {r['cpu_seconds']:.2f} s), "
                            f"peak {r['pss_mb']:.0f} MB ({r['peak_mb']:.0f})" for e, r in runs.items())
        print(f"run {i + 1}: raw sqlite3 scan {raw['seconds']:.2f} s (CPU {raw['cpu_seconds']:.2f} s, {raw['rows']} rows, "
              f"peak {raw['peak_mb']:.0f} MB); "
              f"{figures} ({runs['python']['rows']} records)")
        if a.pairs > 1 and "c" in engines:
            print(f"       {_pairs(a.export, a.worker, a.pairs, (raw, runs['c']))}")
    if a.floor:
        floor = _run("floor", a.export)
        print(f"design floor:     {floor['seconds']:.2f} s wall, {floor['cpu_seconds']:.2f} s CPU, {floor['rows']} "
              f"activities ({floor['cpu_self']:.2f} s writer side + {floor['cpu_worker']:.2f} s worker side); "
              f"ratio floor/raw {floor['seconds'] / raw['seconds']:.2f}x wall")
    parse = runs["python"]
    if parse["cpu_worker"] > 0.05:
        # Wall time depends on the other load of a shared machine; the CPU time of each process does not.
        # With two free cores the two processes overlap, so the longer one is the critical path.
        critical = max(parse["cpu_self"], parse["cpu_worker"])
        print(f"Python CPU split: {parse['cpu_self']:.2f} s writer + {parse['cpu_worker']:.2f} s sweep worker; "
              f"critical path {critical:.2f} s = {critical / raw['cpu_seconds']:.2f}x raw CPU")
    print(f"load average:     {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs (other work skews wall times)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
