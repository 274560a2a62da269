"""How fast the views are built from records, against a baseline measured in the same run.

Scales a real capture's records (default: the committed H200 transformer training steps, through
``pyprof.parse``) up to N records (default 1M) by replicating them with shifted times, correlation ids and
step numbers, then times:
- baseline: read every line and decode it (the JSON decoder prof uses), nothing else;
- views: ``aggregate_files`` (one pass: decode, model, roofline, group) and then every view's Table;
- report: the whole ``pyprof report`` (that pass with the per-activity table, the timeline, the page written),
  in one process and with a worker per CPU core (pyprof.prof.aggregate_jobs).
Prints one line per figure and the ratios to the baseline. Targets: views of 1M records well under a minute
(issue 6); the report of 1M records in at most 15 s (issue 15).

    python bench/report_speed.py [--rows 1000000] [--input RECORDS.dict] [--keep FILE]
    python bench/report_speed.py --records RECORDS.dict      # time these records as they are (no scaling)

Records written by the scaling carry every key (read_lines puts back what parse leaves out), so they are larger
than parse's own; ``--records`` on parse's output of a scaled export (bench/scale_export.py) times what users
get.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

import orjson  # noqa: E402

from pyprof.record import end_line, read_lines  # noqa: E402
from pyprof.prof.load.reader import loads  # noqa: E402
from pyprof.prof.aggregate import aggregate_files  # noqa: E402
from pyprof.prof.views import build  # noqa: E402
from pyprof.report.cli import run as report_run  # noqa: E402

DEFAULT_EXPORT = os.path.join(ROOT, "tests", "data", "nsys", "pyprof", "transformer.sqlite.xz")


def _templates(path: str | None) -> list[dict]:
    if path:
        with open(path, "rb") as f:
            return list(read_lines(f))
    p = subprocess.run([sys.executable, "-m", "pyprof.parse", DEFAULT_EXPORT], capture_output=True, check=True)
    # every key of each record (schema 3's left-out keys and GPU properties put back); parse's header and end
    # lines skipped: the end line is written again after the copies
    return list(read_lines(p.stdout.splitlines()))


def _step_count(recs: list[dict]) -> int:
    steps = {r for d in recs for r in d.get("ranges") or () if r.startswith("ProfilerStep#")}
    return max(len(steps), 1)


def write_scaled(recs: list[dict], rows: int, out) -> None:
    """Write ``rows`` records: copies of ``recs`` one after another in time, steps renumbered."""
    t0 = min(d["api_start_ns"] or d["start_ns"] for d in recs)
    t1 = max(d["end_ns"] for d in recs)
    shift = t1 - t0 + 1_000_000
    n_steps = _step_count(recs)
    written = rep = 0
    while written < rows:
        dt = rep * shift
        for d in recs:
            if written >= rows:
                break
            c = dict(d)
            for k in ("start_ns", "end_ns", "api_start_ns", "api_end_ns"):
                if c.get(k) is not None:
                    c[k] = c[k] + dt
            if c.get("correlation_id") is not None:
                c["correlation_id"] += rep * 1_000_000
            c["ranges"] = [f"ProfilerStep#{int(r[13:]) + rep * n_steps}" if r.startswith("ProfilerStep#") else r
                           for r in c.get("ranges") or ()]
            out.write(orjson.dumps(c) + b"\n")
            written += 1
        rep += 1
    out.write(end_line(written).encode() + b"\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--input", default=None, help="records to replicate (default: the transformer capture)")
    ap.add_argument("--keep", default=None, help="write the scaled input here and keep it")
    ap.add_argument("--records", default=None, help="time these records as they are (no scaling)")
    args = ap.parse_args()
    path = args.records or args.keep or tempfile.mkstemp(suffix=".dict")[1]
    try:
        if not args.records:
            with open(path, "wb") as f:
                write_scaled(_templates(args.input), args.rows, f)
        size_mb = os.path.getsize(path) / 1e6
        t = time.perf_counter()
        n = 0
        with open(path, "rb") as f:
            for line in f:
                loads(line)
                n += 1
        n -= 1  # the last line is parse's end line, decoded (the readers read it too) but not a record
        with open(path, "rb") as f:
            if f.readline().startswith(b'{"pyprof_header"'):
                n -= 1  # parse's header line: not a record either
        base_s = time.perf_counter() - t
        t = time.perf_counter()
        agg = aggregate_files([path])
        agg_s = time.perf_counter() - t
        t = time.perf_counter()
        tables = build(agg)
        views_s = time.perf_counter() - t
        total_s = agg_s + views_s
        print(f"input: {n} records, {size_mb:.0f} MB")
        print(f"baseline (read + decode): {base_s:.2f} s, {n / base_s:,.0f} records/s")
        print(f"aggregate (read + decode + model + group): {agg_s:.2f} s")
        print(f"views ({len(tables)} tables): {views_s:.2f} s")
        print(f"total: {total_s:.2f} s, {n / total_s:,.0f} records/s")
        print(f"ratio total / baseline: {total_s / base_s:.2f}x")
        del agg, tables
        page = tempfile.mkstemp(suffix=".html")[1]
        try:
            for jobs in sorted({1, os.cpu_count() or 1}):
                t = time.perf_counter()
                report_run([path], page, jobs=jobs)
                report_s = time.perf_counter() - t
                print(f"report with {jobs} process{'es' if jobs > 1 else ''} (the page of every view, every "
                      f"activity, the timeline): {report_s:.2f} s, {os.path.getsize(page) / 1e6:.0f} MB page; "
                      f"ratio to the baseline {report_s / base_s:.2f}x, to the views {report_s / total_s:.2f}x")
        finally:
            os.unlink(page)
    finally:
        if not args.keep and not args.records:
            os.unlink(path)


if __name__ == "__main__":
    main()
