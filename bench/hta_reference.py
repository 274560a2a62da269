"""Holistic Trace Analysis's GPU idle share of Kineto traces: the independent reference that the overview's idle
share is checked against (tests/report/test_steps_hta.py writes these numbers down with the HTA version).

Run it with the HTA environment, never pyprof's (it imports nothing of pyprof):

    /work/hta-venv/bin/python bench/hta_reference.py TRACE.json.gz [TRACE.json.gz ...]
    /work/hta-venv/bin/python bench/hta_reference.py --job RANK0.json.gz RANK1.json.gz   # the ranks view's figures

For each trace, one line per figure: HTA's temporal breakdown ``idle_time_pctg`` with
``include_last_profiler_step=False`` (HTA's default: kernels launched in the last ProfilerStep, and kernels
without a launch event, are dropped before the span is measured) and with ``True`` (kernels launched up to the
end of the last ProfilerStep kept); with fewer than two ProfilerSteps HTA filters nothing and both agree. Each
twice: as HTA runs by default, and with ``HTA_DISABLE_NS_ROUNDING=1``. By default HTA rounds every event of a
trace with sub-microsecond times inward to whole microseconds (start up, end down: PyTorch PR 122425), which
shortens each kernel by up to 2 us and so raises the idle share of a trace of short kernels; a kernel shorter
than that gets a negative duration, on which HTA's own compute/non-compute split asserts (the line then says
so instead of a figure).

HTA's idle = (last GPU event end - first GPU event start - union of GPU events) / that span, GPU events being
every event on a stream (kernels, copies, memsets, and the GPU side of user annotations). HTA reads a trace
from a folder, so each trace is linked alone into a temporary one.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile


def idle_pct(path: str, include_last: bool, ns_rounding: bool) -> float:
    """HTA's temporal-breakdown idle % of one trace (its first and only rank)."""
    from hta.trace_analysis import TraceAnalysis

    os.environ["HTA_DISABLE_NS_ROUNDING"] = "0" if ns_rounding else "1"  # read by HTA at each parse
    with tempfile.TemporaryDirectory(prefix="hta-ref-") as folder:
        name = os.path.basename(path)
        if not name.endswith((".json", ".gz")):
            raise SystemExit(f"{path}: HTA reads only .json or .gz traces")
        os.symlink(os.path.abspath(path), os.path.join(folder, name))
        ta = TraceAnalysis(trace_dir=folder, include_last_profiler_step=include_last)
        df = ta.get_temporal_breakdown(visualize=False)
    if len(df) != 1:
        raise SystemExit(f"{path}: HTA found {len(df)} ranks, expected one")
    return float(df["idle_time_pctg"].iloc[0])


def comm_figures(paths: list[str]) -> list[tuple[int, float, float]]:
    """(rank, communication ms, comm-comp overlap %) per rank of one job's traces (``--job``): the ranks view's
    reference (tests/report/test_views_ranks.py). Communication: get_gpu_kernel_breakdown's COMMUNICATION
    kernels (``^nccl.*Kernel``), their durations summed per rank; overlap: get_comm_comp_overlap. With
    include_last_profiler_step=True, the span pyprof keeps."""
    from hta.trace_analysis import TraceAnalysis

    with tempfile.TemporaryDirectory(prefix="hta-job-") as folder:
        for i, path in enumerate(paths):
            os.symlink(os.path.abspath(path), os.path.join(folder, f"rank-{i}.json.gz"))
        ta = TraceAnalysis(trace_dir=folder, include_last_profiler_step=True)
        _types, kernels = ta.get_gpu_kernel_breakdown(visualize=False)
        overlap = ta.get_comm_comp_overlap(visualize=False)
    comm = kernels[kernels["kernel_type"] == "COMMUNICATION"].groupby("rank")["sum (us)"].sum()
    pct = dict(zip(overlap["rank"], overlap["comp_comm_overlap_pctg"]))
    return [(int(r), float(comm.get(r, 0.0)) / 1000.0, float(pct[r])) for r in sorted(pct)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("traces", nargs="+", metavar="TRACE")
    p.add_argument("--job", action="store_true",
                   help="the traces are the ranks of one job: print HTA's communication time and overlap per rank")
    args = p.parse_args(argv)
    from importlib.metadata import version

    logging.disable(logging.WARNING)  # HTA logs each trace's parse; the figures are the output
    print(f"HTA version: {version('HolisticTraceAnalysis')}")
    if args.job:
        for rank, comm_ms, overlap_pct in comm_figures(args.traces):
            print(f"rank {rank}: communication {comm_ms:.3f} ms, comp-comm overlap {overlap_pct:.2f} %", flush=True)
        return 0
    for path in args.traces:
        for ns_rounding in (True, False):
            for include_last in (False, True):
                try:
                    figure = f"{idle_pct(path, include_last, ns_rounding):.2f}"
                except AssertionError as e:  # HTA's own check fails on some traces: say so, go on
                    figure = f"none (HTA raised AssertionError{': ' + str(e) if str(e) else ''})"
                print(f"{os.path.basename(path)}: include_last_profiler_step={include_last}, "
                      f"ns_rounding={'on' if ns_rounding else 'off'}: idle % {figure}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
