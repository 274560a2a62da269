"""``pyprof prof`` (also ``python -m pyprof.prof``): argument parsing and turning errors into messages and exit codes; the work
is done by pyprof.prof.table.per_kernel, summary and views."""
from __future__ import annotations

import argparse
import io
import os
import shutil
import sys
import tempfile
from typing import Iterator, Sequence

from pyprof.common import (OutputError, UsageError, open_input, parsed_args, refuse_overwriting_inputs,
                           run_command, write_stdout)
from pyprof.prof.table.columns import DEFAULT, help_text, parse_columns
from pyprof.common import printable
from pyprof.prof.table.formats import PROG

EPILOG = """columns (-c, comma separated, or 'all'):
{cols}

default columns: {default}
examples:
  pyprof parse net.sqlite > net.dict
  pyprof prof --group-by op --top 20 -w 150 net.dict   # per op: time, Comm%, FLOPs, TFLOP/s, Roofline%, TC%
  pyprof prof -w 150 net.dict   # per kernel: op, kernel, shapes, time, TC, FLOPs, TFLOP/s, Roofline%
  pyprof prof --csv -c idx,op,kernel,params,sil,tc,flops,bytes,roofline,note net.dict
  pyprof prof --view lines -w 160 net.dict   # GPU time per source line
  pyprof prof --view all rank0.dict rank1.dict
  pyprof parse net.sqlite | pyprof prof -
"""


def _peak(s: str) -> tuple[str, float]:
    unit, _, v = s.partition("=")
    try:
        return unit.strip(), float(v)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--peak expects UNIT=TFLOPS (e.g. bf16_tc=989.5), got {s!r}") from None


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed so that docs and tests can read its help)."""
    p = argparse.ArgumentParser(
        prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="One row per GPU kernel with FLOPs, bytes, Tensor Core use and roofline, from pyprof.parse "
                    "records (JSON Lines) or the original PyProf's dict lines.",
        epilog=EPILOG.format(cols=help_text(), default=",".join(DEFAULT)))
    p.add_argument("file", nargs="*", default=[],
                   help="records file; '-' or nothing reads stdin (with --view: several files, one per worker)")
    p.add_argument("-c", dest="columns", default=None, metavar="COLS",
                   help="columns of the per-kernel table (see below; not with --group-by or --view)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--csv", action="store_true", help="CSV output")
    g.add_argument("-w", dest="width", type=int, default=0, metavar="WIDTH",
                   help="columnated output, WIDTH wide where the numbers allow (the default: on a terminal its "
                        "width; in a pipe or a file every column whole, two or more spaces apart)")
    g.add_argument("--jsonl", action="store_true", help="JSON Lines output (null for na)")
    g.add_argument("--space", action="store_true",
                   help="space-separated, one row per line, spaces inside a value written as _ (for awk)")
    p.add_argument("--no-header", action="store_true", help="omit the header line")
    p.add_argument("--exact", action="store_true",
                   help="columnated output with every number whole (by default counts of FLOPs and bytes of a "
                        "million or more are shown with an SI prefix, as 2.72T)")
    p.add_argument("--group-by", choices=["op", "layer", "kernel", "callsite", "dir"],
                   help="print a summary grouped by this key instead of one row per kernel")
    p.add_argument("--top", type=int, default=None, metavar="N",
                   help="with --group-by or --view: the N longest groups (rows)")
    p.add_argument("--view", default=None, metavar="NAME",
                   help="print a view instead: overview, operators, operators_shapes, kernels, lines, layers, "
                        "recommendations, workers, or all (docs/views.md); notes go to stderr")
    p.add_argument("--step-marker", default=None, metavar="NAME",
                   help="with --view: a step is each range named NAME (* and ? match any text), whatever other "
                        "step ranges the records hold: for a loop without ProfilerStep ranges, as a serving "
                        "engine's profiler writes (vLLM's forwards: 'execute_*'); docs/views.md")
    p.add_argument("--worker", default=None, metavar="WORKER",
                   help="with --view: only this worker (a process id; with several files FILE or FILE:PID)")
    p.add_argument("--source-root", action="append", default=None, metavar="DIR",
                   help="with --view: the folder to read source text from (the lines and recommendations views "
                        "show a line's text only from .py files under it); repeatable (default: the current "
                        "folder; docs/robustness.md)")
    p.add_argument("--plugin", action="append", default=[], metavar="MODULE_OR_FILE",
                   help="load user formulas (registered with pyprof.prof.register); repeatable")
    p.add_argument("--gpu", default=None, help="use this GPU's peaks for every record (e.g. 'H100 PCIe')")
    p.add_argument("--peak", action="append", type=_peak, default=[], metavar="UNIT=TFLOPS",
                   help="override a peak: fp64, fp32, fp64_tc, tf32_tc, fp16_tc, bf16_tc, fp8_tc, int8_tc")
    p.add_argument("--bandwidth", type=float, default=None, metavar="GBPS", help="override memory bandwidth, GB/s")
    p.add_argument("-j", "--jobs", type=int, default=0, metavar="N",
                   help="worker processes for per-kernel output and --group-by (default: one per CPU for files >= "
                        "32 MB; 1: none), for --view over one records file of 32 MB or more, and for --view ranks over "
                        "several rank files (one file a task; with --engine dask, the local cluster's workers)")
    p.add_argument("--engine", default=None, metavar="ENGINE",
                   help="--view ranks: summarise the rank files on Dask, one task a file: 'dask' (a local cluster "
                        "of -j worker processes) or 'dask://HOST:PORT' (a running scheduler; needs --spill); "
                        "pip install pyprof[cluster] (docs/cluster.md)")
    p.add_argument("--spill", default=None, metavar="DIR",
                   help="--engine: the folder the tasks write their Parquet summaries to, kept (default: a "
                        "temporary folder, removed after; with dask://, a folder the workers share)")
    p.add_argument("--strict", action="store_true",
                   help="exit 1 when any kernel has no modelled FLOPs/bytes (the report says which ops)")
    p.add_argument("-q", "--quiet", action="store_true", help="nothing on stderr but errors")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="every note on stderr: how each view's numbers are made, what was not modelled and why "
                        "(by default one line: how much of the GPU time got modelled numbers)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the prof CLI; return the exit status (0 ok, 1 bad input, 2 usage)."""
    args = parsed_args(build_parser(), argv)
    if isinstance(args, int):  # argparse printed the usage or the help
        return args
    out = _stdout()
    try:
        return run_command(PROG, lambda: _run(args, out))
    finally:
        out.discard()


def _report(text: str, verbose: bool = True, more: int = 0) -> None:
    """The coverage lines on stderr: all of them with -v, else the first, saying how many notes -v adds (``more``
    besides the coverage's own)."""
    # The coverage lines quote op names from the input: each line printable, as the rows are.
    lines = [printable(line) for line in text.split("\n")]
    if not verbose:
        more += len(lines) - 1
        lines = lines[:1]
        if more:
            lines[0] += f" (-v: {more} more note{'s' if more > 1 else ''})"
    print("\n".join(lines), file=sys.stderr)


def _not_an_export(path: str) -> None:
    """Raise UsageError when ``path`` is a profiler export (SQLite, xz, an Nsight Systems report) rather than
    parse's records, saying what to run."""
    from pyprof.parse.readers.detect import DECOMPRESS_FIRST, NSYS_REPORT_MAGIC, SQLITE_MAGIC, XZ_MAGIC, \
        compressed_records

    if path == "-" or not os.path.isfile(path):
        return  # stdin, or a file the reader will name as missing
    if compressed_records(path):
        raise UsageError(f"{path}: records, {DECOMPRESS_FIRST}", path=path)
    with open(path, "rb") as f:
        head = f.read(len(NSYS_REPORT_MAGIC))
    if head.startswith((SQLITE_MAGIC, XZ_MAGIC, NSYS_REPORT_MAGIC)):
        raise UsageError(f"{path} is a profiler export, not records: run `pyprof parse {path} > records.dict` and "
                         f"`pyprof prof records.dict`, or `pyprof parse {path} | pyprof prof -` "
                         f"(`pyprof report {path}` takes it as it is)", path=path)


def output_format(args) -> tuple[str, int]:
    """(format, width) the options ask for: without one, columnated, to the terminal's width when stdout is a
    terminal and at no width when it is piped or redirected (nothing cut; formats.ColumnsFormat)."""
    if args.csv:
        return "csv", 0
    if args.jsonl:
        return "jsonl", 0
    if getattr(args, "space", False):  # pyprof diff has no --space
        return "space", 0
    columns = "columns-exact" if getattr(args, "exact", False) else "columns"  # pyprof diff has no --exact
    if args.width:
        return columns, args.width
    if sys.stdout is not None and sys.stdout.isatty():  # None: started with stdout closed (>&-)
        return columns, shutil.get_terminal_size().columns
    return columns, 0


def _run(args, out) -> int:
    """The prof command proper: errors are raised, run_command turns them into messages and exit codes."""
    import pyprof.prof  # noqa: F401  (registers the built-in formulas)
    from pyprof.prof.plugins import load_plugin
    from pyprof.prof.table.per_kernel import run_stream
    from pyprof.prof.model.roofline import Peaks
    from pyprof.prof.table.summary import summarize_stream

    for spec in args.plugin:
        load_plugin(spec)
    if args.columns is not None and (args.group_by or args.view):
        raise UsageError(f"-c picks the per-kernel table's columns: {'--group-by' if args.group_by else '--view'} "
                         "prints its own")
    cols = parse_columns(args.columns or ",".join(DEFAULT))
    if args.width < 0:
        raise UsageError("-w WIDTH must be positive")
    if args.top is not None and args.top <= 0:
        raise UsageError("--top must be positive")
    if (args.engine is not None or args.spill is not None) and args.view != "ranks":
        raise UsageError("--engine and --spill summarise rank files for --view ranks")
    if args.source_root is not None and args.view is None:
        raise UsageError("--source-root is where --view reads source text: give --view lines, recommendations or all")
    if args.spill is not None and args.engine is None:
        raise UsageError("--spill is the folder of --engine's tasks: give --engine dask or dask://HOST:PORT")
    refuse_overwriting_inputs(["-"], args.file or ["-"])  # stdout appended to an input (>> net.dict)
    for path in args.file:
        if args.view != "ranks":  # the ranks view parses exports on the way (pyprof.prof.ranks.rank_summary)
            _not_an_export(path)
    fmt, args.width = output_format(args)
    if not args.file and sys.stdin.isatty():
        raise UsageError("no records file, and stdin is a terminal: give a file (pyprof prof net.dict), or pipe "
                         "parse's output in (pyprof parse net.sqlite | pyprof prof -)")
    peaks = Peaks(args.gpu, dict(args.peak) or None, args.bandwidth)
    if args.view is None and (len(args.file) > 1 or args.worker is not None or args.step_marker is not None):
        raise UsageError("several files, --worker and --step-marker need --view")
    if args.view is not None:
        if args.group_by:
            raise UsageError("--view and --group-by exclude each other")
        return _views(args, fmt, peaks, out)
    path = args.file[0] if args.file else "-"
    stream = open_input(path, "rb")
    try:
        name = "<stdin>" if path == "-" else path
        if args.group_by:
            cov = summarize_stream(stream, name, out, args.group_by, fmt, args.width, args.top, peaks,
                                   _jobs(args.jobs, path))
        else:
            cov = run_stream(stream, name, out, cols, fmt, args.width, peaks, header=not args.no_header,
                             jobs=_jobs(args.jobs, path))
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
    out.publish()
    if args.group_by == "layer" and args.verbose:
        # The same word means two sums: say which this one is.
        print(f"{PROG}: --group-by layer: each layer's own time (the activities launched directly in it, not in "
              "the layers inside it); --view layers adds those in (inclusive time)", file=sys.stderr)
    if not args.quiet or (args.strict and cov.reasons):
        _report(cov.text(), args.verbose or (args.strict and cov.reasons), int(args.group_by == "layer"))
    _unknown_gpus(args, peaks.unknown)  # the GPUs this process looked up (--jobs workers' are their own)
    if args.strict and cov.reasons:
        print(f"{PROG}: --strict: some kernels have no modelled FLOPs/bytes (see above)", file=sys.stderr)
        return 1
    return 0


def _views(args, fmt: str, peaks, out) -> int:
    """--view: aggregate the inputs once and print the named view(s); notes and coverage on stderr."""
    from pyprof.prof.aggregate import aggregate_files
    from pyprof.prof.step_marker import StepMarker
    from pyprof.prof.views import build, names

    wanted = None if args.view == "all" else [args.view]
    if wanted and wanted[0] not in names():
        raise UsageError(f"--view {args.view!r}: choose one of {', '.join(names())} or all")
    if args.top is not None and args.top <= 0:
        raise UsageError("--top must be positive")
    from pyprof.prof.source_lines import SourceText

    source = SourceText(args.source_root)  # a root that is no folder is refused before the work
    agg = None
    files = args.file or ["-"]
    marker = None if args.step_marker is None else StepMarker(args.step_marker)
    if args.view == "ranks" and _rank_files(files, args.engine):
        return _ranks(args, files, fmt, peaks, out)
    if len(files) == 1 and files[0] != "-":
        from pyprof.prof.aggregate_jobs import Fallback, aggregate_file_jobs, parallel_ok

        jobs = _jobs(args.jobs, files[0])
        if parallel_ok(files[0], jobs):
            try:
                agg, _ = aggregate_file_jobs(files[0], os.path.basename(files[0]), jobs, peaks, marker=marker)
            except Fallback:  # what the workers cannot judge: the one pass says it
                agg = None
    if agg is None:
        agg = aggregate_files(files, peaks, marker)
    agg.source = source
    rc = _print_views(args, build(agg, wanted, args.worker), agg.coverage, fmt, out)
    _unknown_gpus(args, {n for w in agg.workers.values() for n in w.gpus if peaks.for_gpu(n) is None})
    return rc


def _unknown_gpus(args, names) -> None:
    """One stderr line naming the GPUs the peaks table lacks (their roofline columns are na), unless --quiet."""
    from pyprof.prof.model.roofline import unknown_gpu_line

    line = unknown_gpu_line(names)
    if line and not args.quiet:
        print(f"{PROG}: {line}", file=sys.stderr)


def _print_views(args, tables: list, coverage, fmt: str, out) -> int:
    """Print the views' tables (--top rows each), then the coverage on stderr; 1 under --strict when some
    kernels were not modelled."""
    from pyprof.prof.terminal import print_tables

    if args.top:
        for t in tables:
            t.rows = t.rows[:args.top]
    said = io.StringIO()  # why a table has no rows: after the tables, as the notes come
    print_tables(tables, out, sys.stderr if args.verbose else None, fmt, args.width, header=not args.no_header,
                 said=None if args.quiet else said)
    out.publish()
    sys.stderr.write(said.getvalue())
    if not args.quiet or (args.strict and coverage.reasons):
        _report(coverage.text(), args.verbose or (args.strict and coverage.reasons),
                0 if args.verbose else sum(len(t.notes) for t in tables))
    if args.strict and coverage.reasons:
        print(f"{PROG}: --strict: some kernels have no modelled FLOPs/bytes (see above)", file=sys.stderr)
        return 1
    return 0


def _rank_files(files: list[str], engine: str | None) -> bool:
    """Whether --view ranks summarises each file on its own (pyprof.prof.ranks.rank_files): several files, an engine,
    or one export (parsed on the way); not stdin."""
    from pyprof.prof.load.reader import is_records

    if "-" in files:
        if engine is not None:
            raise UsageError("--engine reads rank files by name: not stdin ('-')")
        return False
    return len(files) > 1 or engine is not None or (os.path.isfile(files[0]) and not is_records(files[0]))


def _ranks(args, files: list[str], fmt: str, peaks, out) -> int:
    """--view ranks over rank files summarised one file a task: in -j processes here, or on Dask (--engine)."""
    from pyprof.prof.ranks.rank_files import job_tables, summarize_files

    if args.engine is None:
        summaries = summarize_files(files, peaks, _jobs(args.jobs, files), args.step_marker)
    else:
        from pyprof.prof.ranks.rank_dask import scheduler_address, summarize_files_dask

        address = scheduler_address(args.engine)
        if address is not None and args.jobs:
            raise UsageError("-j sets the local cluster's workers: with --engine dask://HOST:PORT the "
                             "scheduler's workers run the tasks")
        summaries = summarize_files_dask(files, peaks, address, args.jobs or _cpus(), args.spill, args.step_marker)
    tables, coverage = job_tables(summaries, args.worker)
    return _print_views(args, tables, coverage, fmt, out)


#: Below this input size the workers' start-up costs more than they save (default --jobs only).
PARALLEL_MIN_BYTES = 32 << 20


def _jobs(n: int, path: str | list[str]) -> int:
    """Worker count: as given, or by default one per CPU for regular files of at least PARALLEL_MIN_BYTES
    together."""
    if n < 0:
        raise UsageError("--jobs must be >= 0")
    if n:
        return n
    try:
        paths = [path] if isinstance(path, str) else path
        if "-" in paths or sum(os.path.getsize(p) for p in paths) < PARALLEL_MIN_BYTES:
            return 1
    except OSError:
        return 1
    return _cpus()


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class Spool:
    """The command's output, held back until it has succeeded: ``publish`` hands it to stdout whole, so that a
    malformed line anywhere in the input leaves nothing on stdout. Up to MEMORY_CHARS characters are held in
    memory; beyond, the text moves to an unnamed temporary file (removed by the system however prof ends), at
    the ``commit`` checkpoints that the row loops call every 64k rows."""

    MEMORY_CHARS = 16 << 20

    def __init__(self, target) -> None:
        self._target = target
        self._parts: list[str] = []
        self._held = 0  # characters in _parts
        self._spill = None

    def write(self, s: str) -> int:
        self._parts.append(s)
        self._held += len(s)
        return len(s)

    def flush(self) -> None:  # the formats flush at close; only publish() writes
        pass

    def commit(self) -> None:
        """A checkpoint: move the text held in memory to the temporary file once there is much of it."""
        if self._held >= self.MEMORY_CHARS:
            self._to_spill()

    def _to_spill(self) -> None:
        try:
            if self._spill is None:
                self._spill = tempfile.TemporaryFile("w+", encoding="utf-8", errors="surrogatepass")
            self._spill.write("".join(self._parts))
        except OSError as e:
            raise OutputError(tempfile.gettempdir(), f"cannot hold the output in a temporary file here "
                                                     f"({e.strerror or e}; set TMPDIR)") from None
        self._parts.clear()
        self._held = 0

    def publish(self) -> None:
        """Write everything to the target (None: stdout, written whole: common.write_stdout). Raises OutputError
        naming stdout when it cannot take it (a full disk); a reader that went away stays a BrokenPipeError."""
        try:
            if self._target is None:
                write_stdout(self._chunks())
            else:
                for chunk in self._chunks():
                    self._target.write(chunk)
                self._target.flush()
        finally:
            self.discard()

    def _chunks(self) -> Iterator[str]:
        if self._spill is None:
            yield "".join(self._parts)
            return
        self._to_spill()
        self._spill.seek(0)
        while True:
            block = self._spill.read(1 << 20)
            if not block:
                return
            yield block

    def discard(self) -> None:
        """Forget what is held (after a failure, or once published)."""
        self._parts.clear()
        self._held = 0
        if self._spill is not None:
            self._spill.close()
            self._spill = None


def _stdout() -> Spool:
    return Spool(None)
