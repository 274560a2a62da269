"""``pyprof report``: records (or a profiler export, parsed on the way) -> one self-contained HTML page with the
views, and optionally the Chrome/Perfetto trace JSON. Argument parsing and errors-to-exit-codes only; the
work is in pyprof.report.page / perfetto and prof's views.
"""
from __future__ import annotations

import argparse
import datetime
import itertools
import os
from contextlib import ExitStack
from typing import IO, Callable, Iterator, NamedTuple

import pyprof
from pyprof import cleanup
from pyprof.common import (PARSED_EXPORT_HELD, InputError, OutputError, TellingWrites, UsageError, output_stream,
                           parsed_args, refuse_overwriting_inputs, run_command, write_error)
from pyprof.prof.load.reader import is_records  # (also where it was for its callers: report.cli.is_records)

PROG = "pyprof report"
#: Workers beyond this many get no per-worker tables of their own (the page would grow with each).
MAX_WORKER_TABLES = 16
#: The page's notice for input without GPU activity (parse writes a header and an end line for it, exit 0).
NO_ACTIVITY = ("No GPU activity in the input: no kernels, copies or memsets (a profile of a program that used no "
               "GPU, or one captured outside its GPU work). The views below are empty.")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed so that docs and tests can read its help)."""
    p = argparse.ArgumentParser(
        prog=PROG, description="Write one self-contained HTML report (views, charts, a timeline) of pyprof.parse "
        "records, or of a profiler export (parsed on the way); optionally the Chrome/Perfetto trace JSON.",
        epilog="examples:\n  pyprof report net.dict -o report.html\n"
               "  pyprof report net.sqlite -o report.html --trace trace.json   # open trace.json in ui.perfetto.dev",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="records (JSON Lines) or exports, one per rank")
    p.add_argument("-o", "--output", required=True, help="the HTML file to write")
    p.add_argument("--trace", default=None, metavar="FILE", help="also write the Chrome/Perfetto trace JSON here")
    p.add_argument("--max-trace-events", type=int, default=None, metavar="N",
                   help="--trace: only the first N GPU activities (with their launches and flows)")
    p.add_argument("--timeline-events", type=int, default=10000, metavar="N",
                   help="GPU activities drawn in the page's timeline (default 10000; the page stays small)")
    p.add_argument("--title", default=None, help="page title (default: the input's name)")
    p.add_argument("--source-root", action="append", default=None, metavar="DIR",
                   help="the folder to read source text from: the page shows a line's text only from .py files "
                        "under it; repeatable (default: the current folder; docs/robustness.md)")
    p.add_argument("--step-marker", default=None, metavar="NAME",
                   help="a step is each range named NAME (* and ? match any text), whatever other step ranges the "
                        "records hold (vLLM's forwards: 'execute_*'; docs/views.md)")
    p.add_argument("-j", "--jobs", type=int, default=None, metavar="N",
                   help="worker processes for the views' pass over one large records file (default: one per CPU "
                        "core for records of 32 MB or more; 1: one process)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run ``pyprof report``; return the exit code (0 ok, 1 bad input, 2 usage)."""
    args = parsed_args(build_parser(), argv)
    if isinstance(args, int):  # argparse printed the usage or the help
        return args

    def body() -> int:
        if args.max_trace_events is not None and args.max_trace_events < 0:
            raise UsageError("--max-trace-events must be >= 0")
        if args.timeline_events < 0:
            raise UsageError("--timeline-events must be >= 0")
        if args.inputs.count("-") > 1:
            raise UsageError("stdin ('-') can be read only once")
        if args.jobs is not None and args.jobs < 1:
            raise UsageError("--jobs must be >= 1")
        run(args.inputs, args.output, args.trace, args.max_trace_events, args.timeline_events, args.title,
            jobs=args.jobs, source_roots=args.source_root, step_marker=args.step_marker)
        return 0

    return run_command(PROG, body)


class Source(NamedTuple):
    """One input of report or diff: the name its views give it, the records file read, and the path as the user
    gave it (what an error line names)."""

    name: str
    path: str
    given: str


def records_sources(inputs: list[str], stack: ExitStack) -> list[Source]:
    """A Source per input: records as they are, an export parsed into a temporary file
    that ``stack`` removes when it closes, stdin (``-``) spooled first so that it can be sniffed and read twice.
    The name is the one prof's views give the input (pyprof.prof.load.input_names: the base name, or as many
    trailing folders as set it apart from the other inputs). Raises InputError for a folder, an unreadable file
    or an export parse refuses."""
    from pyprof.prof.load.input_names import input_names

    tmpdir = None
    sources = []
    for i, (given, display) in enumerate(zip(inputs, input_names(inputs))):
        path = given
        if path != "-" and os.path.isdir(path):
            raise InputError(path, "is a directory")
        if path == "-":
            from pyprof.parse.readers.detect import spool_stdin

            path = spool_stdin()
            stack.callback(cleanup.remove, path)
        if not is_records(path):
            from pyprof.parse import parse_file

            if tmpdir is None:
                tmpdir = stack.enter_context(cleanup.temporary_folder("pyprof-report-"))
            parsed = os.path.join(tmpdir, f"{i}.dict")
            with open(parsed, "w", encoding="utf-8") as f:
                out = TellingWrites(f, tmpdir, PARSED_EXPORT_HELD)  # a full TMPDIR: one line naming it
                parse_file(path, out)
                out.flush()
            path = parsed
        sources.append(Source(display, path, "<stdin>" if given == "-" else given))
    return sources


def analyse(sources: list[Source], jobs: int = 0, meanwhile=None, source=None, marker=None):
    """The views' Tables (all workers, then each worker when there are several), the table of every GPU
    activity, and the headline, from one pass over the records: spread over ``jobs`` worker processes for one
    large records file (pyprof.prof.aggregate_jobs), else in this process. ``meanwhile()`` runs while the
    workers do (else before the pass). ``source`` (a pyprof.prof.source_lines.SourceText) says where the views
    may read source text (None: the current folder); ``marker`` (a pyprof.prof.step_marker.StepMarker), the
    ranges that are steps (None: ProfilerStep or step-named ranges)."""
    from pyprof.prof import views
    from pyprof.prof.aggregate import aggregate, numbered_file
    from pyprof.prof.aggregate_jobs import Fallback, aggregate_file_jobs, parallel_ok
    from pyprof.report.activity_table import ActivityTable
    from pyprof.report.headline import headline

    agg = None
    if len(sources) == 1 and parallel_ok(sources[0][1], jobs):
        try:
            agg, acts = aggregate_file_jobs(sources[0][1], sources[0][0], jobs, make_observer=ActivityTable,
                                            merge_observer=ActivityTable.merge, meanwhile=meanwhile, marker=marker)
            meanwhile = None  # done
        except Fallback:
            agg = None
    if meanwhile is not None:
        meanwhile()
    if agg is None:
        acts = ActivityTable()
        agg = aggregate([(s.name, numbered_file(s.path, s.given)) for s in sources], observe=acts, marker=marker)
    if source is not None:
        agg.source = source
    tables = views.build(agg)
    head = headline(agg, tables, acts.flops_ns)
    if len(agg.workers) > 1:
        for w in list(agg.workers)[:MAX_WORKER_TABLES]:
            tables += views.build(agg, worker=w)
    return tables, acts, head


def run(inputs: list[str], output: str, trace_path: str | None = None, max_trace_events: int | None = None,
        timeline_events: int = 10000, title: str | None = None, jobs: int | None = None,
        source_roots: list[str] | None = None, step_marker: str | None = None):
    """Write the report (and the trace) for ``inputs``; return its headline (pyprof.report.headline.Headline).
    The page shows source text only from .py files under ``source_roots`` (None: the current folder;
    pyprof.prof.source_lines); ``step_marker``: the name of the ranges that are steps (pyprof.prof.step_marker).
    Every input is checked, and exports parsed, before
    anything is written; the files appear only when complete (written to a temporary name beside them, then
    renamed; a device such as /dev/null is written in place), and after a failure neither is left, nor any
    temporary. Raises InputError for bad input, OutputError for an output that cannot be written (a folder, a
    missing or read-only folder, a full disk) and UsageError for an impossible request."""
    from pyprof.prof.source_lines import SourceText
    from pyprof.report import page as page_html, perfetto
    from pyprof.report.headline import no_activity_notice

    from pyprof.prof.step_marker import StepMarker

    source = SourceText(source_roots)  # a root that is no folder is refused before anything is written
    marker = None if step_marker is None else StepMarker(step_marker)
    if trace_path is not None and _same_file(output, trace_path):
        raise UsageError(f"{output}: given as both -o and --trace", path=output)
    refuse_overwriting_inputs([output] + ([trace_path] if trace_path is not None else []), inputs)
    with ExitStack() as stack:
        # The outputs are opened before any work: a typo in -o should not cost a minute of parsing.
        page = stack.enter_context(output_stream(output))
        trace_out = None
        if trace_path is not None:
            trace_out = stack.enter_context(output_stream(trace_path))
        sources = records_sources(inputs, stack)
        cleanup.pause_point("report-sources")  # (tests: the outputs' temporaries and the parsed inputs exist)

        # Each input (rank) gets its share of the timeline, so that the ranks can be compared side by side.
        share = timeline_events // len(sources)
        timeline: list = []

        def timeline_events_of_the_firsts() -> None:
            if timeline:
                return  # made while the workers ran, before the one pass took over
            firsts = [(s.name, itertools.islice(_numbered(s.path, s.given), share)) for s in sources]
            timeline.append(list(perfetto.source_events(firsts)) if share else None)

        tables, acts, head = analyse(sources, (os.cpu_count() or 1) if jobs is None else jobs,
                                     timeline_events_of_the_firsts, source, marker)
        n_records = len(acts)
        tl_events = timeline[0]
        shown = sum(1 for e in tl_events or () if e["ph"] == "X" and e["pid"] >= perfetto.GPU_PID_BASE)
        given = ", ".join("<stdin>" if p == "-" else p for p in inputs)  # the paths as given, not the workers' names
        meta = {"title": title or f"pyprof report: {given}",
                "notice": None if n_records else no_activity_notice(tables, NO_ACTIVITY),
                "source": given, "summary": f"{n_records:,} GPU activities",
                "generated": f"pyprof {pyprof.__version__}, "
                             f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
                "trace_shown": shown, "trace_total": n_records, "trace_file": trace_path}

        # Written and flushed here, each under its own name: a full disk is told about the file it filled, and
        # both files are complete before the first is renamed into place (leaving the with block).
        if trace_out is not None:
            _write(trace_path, trace_out, lambda: perfetto.write_source_trace(
                [(s.name, _numbered(s.path, s.given)) for s in sources], trace_out, max_trace_events))
        _write(output, page, lambda: page_html.render(tables, meta, tl_events, page, acts.to_dict(), head.to_dict()))
    return head


def _same_file(a: str, b: str) -> bool:
    # Both outputs to one file: the page's rename would replace the trace. A device (/dev/null) takes both.
    if a == "-" or b == "-":
        return a == b
    # Through symlinks: an output that is a link is written through to its target (common.output_stream).
    return os.path.realpath(a) == os.path.realpath(b) and (os.path.isfile(a) or not os.path.exists(a))


def _write(path: str, out: IO[str], body: Callable[[], object]) -> None:
    """Run ``body`` (which writes ``out``) and flush ``out``; an OSError of either is an OutputError naming
    ``path``."""
    try:
        body()
        out.flush()
    except BrokenPipeError:
        raise
    except OSError as e:
        raise OutputError("<stdout>" if path == "-" else path, write_error(e)) from None


def _numbered(path: str, given: str) -> Iterator[tuple[int, dict]]:
    from pyprof.prof.load.reader import read_records

    with open(path, "rb") as f:
        yield from read_records(f, given)
