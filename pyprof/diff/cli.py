"""``pyprof diff BASE NEW``: argument parsing, inputs, outputs and exit codes; the work is in pyprof.diff.runs
(one side) and pyprof.diff.compare (the tables).

Exit codes: 0 done, 1 bad input (with ``--fail-if-slower``, also runs whose mean steps do not compare), 2 usage,
3 ``--fail-if-slower``: NEW's mean step is slower than BASE's by more than the share given (the diff is written
all the same, and one line on stderr says by how much).
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import io
import os
import sys
from contextlib import ExitStack
from typing import Sequence

import pyprof
from pyprof.common import (InputError, UsageError, output_stream, refuse_overwriting_inputs, run_command,
                           write_stdout)
from pyprof.prof.cli import output_format
from pyprof.prof.step_marker import StepMarker
from pyprof.common import parsed_args, printable

PROG = "pyprof diff"
#: The exit code of --fail-if-slower when NEW is slower by more than allowed: neither bad input (1) nor usage (2).
SLOWER = 3

EPILOG = """each side is one run: a records file or an export (nsys .sqlite/.sqlite.xz, PyTorch profiler
.json/.json.gz), or several files joined by commas (one per rank: r0.json.gz,r1.json.gz).

examples:
  pyprof diff before.sqlite after.sqlite                       # per op, forward and backward apart
  pyprof diff before.sqlite after.sqlite --by kernel --top 20
  pyprof diff base.dict new.dict --csv > diff.csv               # or --jsonl; columns base_*, new_*, delta_*
  pyprof diff base.sqlite new.sqlite -o diff.html               # also the diff as one HTML page
  pyprof diff b0.json.gz,b1.json.gz n0.json.gz,n1.json.gz --fail-if-slower 5   # exit 3 past 5% slower
"""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed so that docs and tests can read its help)."""
    p = argparse.ArgumentParser(
        prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
        description="Compare two runs per step: the step time's change split into kernel, copy and idle time, GPU "
                    "time and calls per op (or op and shapes, line, kernel) in each run and the change, and the "
                    "kernels that ran in one run only. Runs from two profilers (nsys, PyTorch profiler) match.")
    p.add_argument("base", metavar="BASE", help="the run compared against: FILE or FILE,FILE,... (one per rank)")
    p.add_argument("new", metavar="NEW", help="the run compared: FILE or FILE,FILE,...")
    p.add_argument("--by", choices=["op", "shape", "line", "kernel"], default="op",
                   help="rows per op (default; backward apart as 'op (bprop)'), op and input shapes, source line "
                        "(file name:line), or kernel")
    p.add_argument("--top", type=int, default=None, metavar="N",
                   help="the N rows that changed most (and the N longest kernels of one run only)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--csv", action="store_true", help="CSV output, headed by the column keys (each table after a "
                                                      "'# title' line)")
    g.add_argument("--jsonl", action="store_true", help="JSON Lines output (each row with its table's name, "
                                                        "'view'; null for na)")
    g.add_argument("-w", dest="width", type=int, default=0, metavar="WIDTH",
                   help="columnated output, never wider than WIDTH (the default on a terminal: its width)")
    p.add_argument("--table", choices=["runs", "steps", "rows", "kernels_only"], default=None,
                   help="print only this table (rows: the --by table)")
    p.add_argument("--fail-if-slower", type=float, default=None, metavar="PCT",
                   help=f"exit {SLOWER} when NEW's mean step is more than PCT percent slower than BASE's")
    p.add_argument("-o", "--output", default=None, metavar="FILE.html",
                   help="also write the diff as one self-contained HTML page (as pyprof report -o)")
    p.add_argument("--step-marker", default=None, metavar="NAME",
                   help="a step of either run is each range named NAME (* and ? match any text), whatever other "
                        "step ranges the records hold (docs/views.md)")
    p.add_argument("-j", "--jobs", type=int, default=None, metavar="N",
                   help="worker processes for each side that is one records file of 32 MB or more (default: one per "
                        "CPU core; 1: one process)")
    p.add_argument("-q", "--quiet", action="store_true", help="no notes on stderr")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``pyprof diff``; return the exit code (0 ok, 1 bad input, 2 usage, 3 NEW slower than allowed)."""
    args = parsed_args(build_parser(), argv)
    if isinstance(args, int):  # argparse printed the usage or the help
        return args
    return run_command(PROG, lambda: _run(args))


def side(arg: str) -> list[str]:
    """The files of one side: ``arg`` itself when it names a file (a name may hold a comma), else its
    comma-separated parts. Raises UsageError for an empty part."""
    if "," not in arg or os.path.exists(arg):
        return [arg]
    parts = arg.split(",")
    if any(not p for p in parts):
        raise UsageError(f"{arg!r}: an empty file name in the comma-separated list")
    return parts


def _run(args) -> int:
    import pyprof.prof  # noqa: F401  (registers the built-in formulas)
    from pyprof.diff.compare import compare
    from pyprof.diff.runs import load
    from pyprof.prof.terminal import print_tables
    from pyprof.report.cli import records_sources

    if args.top is not None and args.top <= 0:
        raise UsageError("--top must be positive")
    if args.width < 0:
        raise UsageError("-w WIDTH must be positive")
    if args.fail_if_slower is not None and not args.fail_if_slower >= 0:
        raise UsageError("--fail-if-slower takes a share in percent, 0 or more")
    if args.jobs is not None and args.jobs < 1:
        raise UsageError("--jobs must be >= 1")
    jobs = (os.cpu_count() or 1) if args.jobs is None else args.jobs
    base_files, new_files = side(args.base), side(args.new)
    if (base_files + new_files).count("-") > 1:
        raise UsageError("stdin ('-') can be read only once")
    if args.output == "-":
        raise UsageError("-o -: stdout takes the tables; give the page a file name")
    refuse_overwriting_inputs(["-"] + ([args.output] if args.output else []), base_files + new_files)
    fmt, width = output_format(args)
    with ExitStack() as stack:
        # The page is opened before any work (a typo in -o should not cost the parsing) and renamed into place
        # only when complete; stdout gets the tables only once everything has succeeded.
        page = stack.enter_context(output_stream(args.output)) if args.output else None
        marker = None if args.step_marker is None else StepMarker(args.step_marker)
        base = load("base", records_sources(base_files, stack), jobs=jobs, marker=marker)
        new = load("new", records_sources(new_files, stack), jobs=jobs, marker=marker)
        diff = compare(base, new, args.by, args.top)
        tables = diff.tables
        if args.table:
            wanted = f"diff_{args.by}" if args.table == "rows" else f"diff_{args.table}"
            tables = [t for t in tables if t.name == wanted]
        if page is not None:
            _page(diff.tables, base, new, page)
        if fmt == "csv":  # a script reads CSV by column name: the keys (base_ms, delta_ms), as JSON Lines has them
            tables = [dataclasses.replace(t, headers=list(t.columns)) for t in tables]
        text = io.StringIO()
        print_tables(tables, text, None, fmt, width)
        # its error, too, before anything is written; it names the files as given (the views' short names may not)
        verdict = _verdict(args.fail_if_slower, diff, base, new, base_files, new_files)
    write_stdout([text.getvalue()])
    if not args.quiet:
        for t in tables:
            for note in t.notes + ([t.empty] if not t.rows and t.empty else []):
                print(printable(f"{PROG}: {t.name}: {note}"), file=sys.stderr)
    if verdict:
        print(verdict, file=sys.stderr)
        return SLOWER
    return 0


def _verdict(limit_pct: float | None, diff, base, new, base_files: list[str], new_files: list[str]) -> str | None:
    """None, or the line saying so when NEW's mean step (GPU time per step when a run has no step windows) is
    slower than BASE's by more than ``limit_pct`` percent; the line says when the runs ran on different GPUs.
    Raises InputError when BASE has no GPU time, or when the mean steps do not compare (one run has steps, the
    other only its whole capture)."""
    if limit_pct is None:
        return None
    what = "mean step"
    b, n = diff.base_step_ns, diff.new_step_ns
    if diff.not_per_step:
        raise InputError(_given(base_files + new_files), f"--fail-if-slower: {diff.not_per_step}")
    if b is None or n is None:
        what, b, n = "GPU time per step", base.gpu_ns / base.steps, new.gpu_ns / new.steps
    if not b:
        raise InputError(_given(base_files), f"no GPU activity: --fail-if-slower has no {what} to compare with")
    slower_pct = 100.0 * (n - b) / b
    if slower_pct <= limit_pct:
        return None
    gpus = "" if not diff.gpus else \
        f"; the runs ran on different GPUs (base: {', '.join(diff.gpus[0])}; new: {', '.join(diff.gpus[1])})"
    return (f"{PROG}: NEW is {slower_pct:.2f}% slower than BASE ({what} {n / 1e6:.4f} ms vs {b / 1e6:.4f} ms), "
            f"more than --fail-if-slower {limit_pct:g}%{gpus}")


def _page(tables, base, new, out) -> None:
    from pyprof.report.page import render

    source = f"base: {', '.join(base.inputs)} \u00b7 new: {', '.join(new.inputs)}"
    meta = {"title": f"pyprof diff: {', '.join(new.inputs)} against {', '.join(base.inputs)}", "source": source,
            "summary": f"base: {_steps_text(base)}; new: {_steps_text(new)}",
            "generated": f"pyprof {pyprof.__version__}, "
                         f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC"}
    render(tables, meta, None, out)


def _steps_text(run) -> str:
    """A run's steps as the page's summary says them: how many, and how they were found (a run without steps
    says so: its one window is not a step)."""
    from pyprof.diff.runs import FORWARDS

    plural = "" if run.steps == 1 else "s"
    unit = "forward" if run.step_sources == [FORWARDS] else "step"  # each figure per step is then per forward
    return f"{run.steps} {unit}{plural} ({', '.join(run.step_sources)})"


def _given(files: list[str]) -> str:
    """The input files as the user named them, for an error line."""
    return ", ".join("<stdin>" if f == "-" else f for f in files)
