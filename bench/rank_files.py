"""Rank files per minute for the ranks view of a many-rank job: in this process, in -j worker processes, and on
a Dask local cluster of 1, 2, 4, 8 workers (pyprof.prof.ranks.rank_files, rank_dask; docs/cluster.md).

    python bench/rank_files.py [--ranks 64] [--repeat 1] [--jobs 1,4,8] [--dask 1,2,4,8]

The job: ``--ranks`` copies of the two-rank DDP run's traces (tests/data/dist; bench/scale_ranks.py: rank k
shifted k ms). ``--repeat R`` makes each rank file parse's records of R copies of its trace's steps one after
another (larger files: about 760 records a copy), instead of the trace itself (parsed in the task). One line
per figure: files a minute and the ratio to one process (-j 1) measured in the same run; the Dask lines come
twice, with the local cluster's start counted (what ``--engine dask`` costs) and on a cluster already running
(what each run costs against ``--engine dask://HOST:PORT``).
"""
from __future__ import annotations

import argparse
import gzip
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from scale_ranks import write_ranks  # noqa: E402

from pyprof.record import end_line  # noqa: E402

SOURCES = [ROOT / "tests" / "data" / "dist" / f"ddp.pt.trace.rank{r}.json.gz" for r in (0, 1)]


def _records_ranks(traces: list[Path], out_dir: Path, repeat: int) -> list[Path]:
    """Each trace as parse's records of ``repeat`` copies of its steps, one after another in time (steps and
    correlation ids renumbered, its header's rank kept)."""
    paths = []
    for t in traces:
        lines = subprocess.run([sys.executable, "-m", "pyprof.parse", str(t)], capture_output=True, check=True,
                               cwd=ROOT).stdout.splitlines()
        header, body = lines[0], [orjson.loads(x) for x in lines[1:] if x.startswith(b'{"kind"')]
        t0 = min(d.get("api_start_ns") or d["start_ns"] for d in body)
        span = max(d.get("end_ns") or d["start_ns"] for d in body) - t0 + 1_000_000
        steps = max(1, len({r for d in body for r in d.get("ranges") or () if r.startswith("ProfilerStep#")}))
        p = out_dir / (t.name.replace(".pt.trace.json.gz", ".dict"))
        with open(p, "wb") as out:
            out.write(header + b"\n")
            for rep in range(repeat):
                for d in body:
                    c = dict(d)
                    for k in ("start_ns", "end_ns", "api_start_ns", "api_end_ns"):
                        if c.get(k) is not None:
                            c[k] += rep * span
                    if c.get("correlation_id") is not None:
                        c["correlation_id"] += rep * 10_000_000
                    c["ranges"] = [f"ProfilerStep#{int(r[13:]) + rep * steps}" if r.startswith("ProfilerStep#")
                                   else r for r in c.get("ranges") or ()]
                    out.write(orjson.dumps(c) + b"\n")
            out.write(end_line(repeat * len(body)).encode() + b"\n")
        t.unlink()
        paths.append(p)
    return paths


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=0, help="records of R copies of the steps (0: the traces)")
    ap.add_argument("--jobs", default="1,4,8")
    ap.add_argument("--dask", default="1,2,4,8")
    a = ap.parse_args()
    from pyprof.prof.ranks.rank_dask import summarize_files_dask
    from pyprof.prof.ranks.rank_files import job_tables, summarize_files

    with tempfile.TemporaryDirectory(prefix="pyprof-bench-ranks-") as tmp:
        paths = write_ranks(SOURCES, Path(tmp) / "job", a.ranks)
        if a.repeat:
            paths = _records_ranks(paths, Path(tmp) / "job", a.repeat)
        paths = [str(p) for p in paths]
        size = sum(os.path.getsize(p) for p in paths)
        kind = f"records, {a.repeat} copies of the steps" if a.repeat else "PyTorch profiler traces, parsed in the task"
        print(f"{a.ranks} rank files ({kind}), {size / 1e6:.1f} MB; nproc {os.cpu_count()}")
        reference = None
        base = None

        def report(label: str, seconds: float, summaries) -> None:
            nonlocal reference, base
            tables = job_tables(summaries)[0]
            plain = [(t.rows, t.notes) for t in tables]
            if reference is None:
                reference = plain
            same = "same tables" if plain == reference else "TABLES DIFFER"
            base = base or seconds
            print(f"{label:34s} {seconds:7.2f} s  {60 * len(paths) / seconds:8.0f} files/min  "
                  f"x{base / seconds:5.2f} vs -j 1  {same}", flush=True)

        for j in [int(x) for x in a.jobs.split(",") if x]:
            out = []
            report(f"in-process -j {j}", _timed(lambda: out.append(summarize_files(paths, jobs=j))), out[-1])
        from distributed import Client, LocalCluster

        spill = os.path.join(tmp, "spill")
        for w in [int(x) for x in a.dask.split(",") if x]:
            out = []
            report(f"dask local, {w} workers (with start)",
                   _timed(lambda: out.append(summarize_files_dask(paths, workers=w, spill=spill))), out[-1])
            with LocalCluster(n_workers=w, threads_per_worker=1, processes=True, dashboard_address=None,
                              silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
                client.run(lambda: __import__("pyprof.prof.ranks.rank_parquet"))  # the workers' imports, as a warm one
                out = []
                report(f"dask scheduler, {w} workers (warm)",
                       _timed(lambda: out.append(summarize_files_dask(paths, address=cluster.scheduler_address,
                                                                      spill=spill))), out[-1])


if __name__ == "__main__":
    main()
