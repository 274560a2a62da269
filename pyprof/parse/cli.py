"""Command line of the parse stage: argument parsing, and errors turned into one line and an exit code."""
from __future__ import annotations

import argparse
import os
import shutil
import sys
from typing import IO

from pyprof import cleanup
from pyprof.common import (InputError, UsageError, no_cyclic_gc, output_stream, parsed_args, refuse_overwriting_inputs,
                           run_command)

from pyprof.record import end_line, launched_no_gpu
from pyprof.parse.attribute.correlate import Stats

#: How messages and usage name the command: as users type it, also when it was started as python -m pyprof.parse,
#: so that a message reads the same in both and names the command to run again.
PROG = "pyprof parse"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, description="Turn profiler exports (Nsight Systems or nvprof SQLite, PyTorch profiler "
        "JSON) into one JSON record per GPU kernel, memcpy and memset. Next: pyprof prof")
    p.add_argument("inputs", nargs="+", metavar="PROFILE", help="export file(s), one per rank; '-' is stdin")
    p.add_argument("-o", "--output", default="-", help="output file (default: stdout)")
    p.add_argument("-j", "--jobs", type=int, default=1, help="parse several files in this many processes")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary on stderr")
    p.add_argument("--sweep-process", choices=("auto", "on", "off"), default="auto",
                   help="sweep ranges in a second process (auto: for large files when a core is free, three with "
                        "the compiled core)")
    p.add_argument("--worker", choices=("auto", "on", "off"), default=None, help=argparse.SUPPRESS)
    p.add_argument("--raw-markers", action="store_true",
                   help="keep the raw texts of PyTorch's autograd ranges in seqMarker (emit_nvtx: about a quarter "
                        "of the output; nothing in prof or report reads them)")
    p.add_argument("--timing", metavar="LIGHT",
                   help="a second capture of the same steps with the lightest profiler (nsys -t cuda; the PyTorch "
                        "profiler with CUDA activity only): write its activities, with their times, carrying the "
                        "attribution of PROFILE's (docs/parse.md, 'A timing pass')")
    p.add_argument("--strict", action="store_true",
                   help="refuse an input with rows left out as unreadable (by default they are counted on stderr)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the parse CLI; return the exit code (0 ok, 1 bad input, 2 usage)."""
    args = parsed_args(_parser(), argv)
    if isinstance(args, int):  # argparse printed the usage or the help
        return args

    def body() -> int:
        if args.worker is not None:  # the old name, until the next release (prof's --worker picks a process)
            print(f"{PROG}: --worker is deprecated, use --sweep-process", file=sys.stderr)
            args.sweep_process = args.worker
        if args.jobs < 1:
            raise UsageError("--jobs must be at least 1")
        if args.inputs.count("-") > 1:
            raise UsageError("stdin ('-') can be read only once")
        if args.timing is not None and len(args.inputs) > 1:
            raise UsageError("--timing pairs one capture with one: give one PROFILE")
        if args.timing is not None and "-" in (args.timing, *args.inputs):
            raise UsageError("--timing: both captures must be files (each is read whole)")
        refuse_overwriting_inputs([args.output], args.inputs + ([args.timing] if args.timing else []))
        return _run(args)

    return run_command(PROG, body)


def _run(args: argparse.Namespace) -> int:
    # The collector off for the whole parse, not only inside the readers' and the writer's loops: each time it
    # comes back on, its next pass walks every object read so far (0.1-0.3 s on a 35 MB PyTorch profiler trace),
    # and the parse makes no cycles (common.no_cyclic_gc).
    with no_cyclic_gc():
        return _join_inputs(args) if args.timing is not None else _parse_inputs(args)


def _parse_inputs(args: argparse.Namespace) -> int:
    from pyprof.parse import close_source, open_source

    # Open and check every input before writing a byte, so that bad input leaves no partial output.
    sources: list = []
    try:
        for path in args.inputs:
            sources.append(open_source(path))
            if args.strict:
                _refuse_oddities(sources[-1].path, sources[-1].oddities)
        with output_stream(args.output) as out:
            cleanup.pause_point("parse-output")  # (tests: the output's temporary exists, the inputs are open)
            if args.jobs > 1 and len(sources) > 1:
                all_stats = _run_parallel(sources, out, args.jobs, args.raw_markers)
            else:
                worker = {"auto": None, "on": True, "off": False}[args.sweep_process]
                all_stats = [_write(src, out, progress=_want_progress(args), worker=worker,
                                    raw_markers=args.raw_markers) for src in sources]
            if args.strict:
                for src, st in zip(sources, all_stats):
                    _refuse_oddities(src.path, st.oddities)
    finally:
        for src in sources:
            close_source(src)
    if not args.quiet:
        for src, st in zip(sources, all_stats):
            print(_summary(src.path, st), file=sys.stderr)
    return 0


def _join_inputs(args: argparse.Namespace) -> int:
    """--timing: both captures parsed whole and joined (pyprof.parse.side.join) before a byte is written."""
    from pyprof.parse import close_source, open_source
    from pyprof.parse.side.join import join, read_pass

    worker = {"auto": None, "on": True, "off": False}[args.sweep_process]
    passes = []
    for path, raw in ((args.inputs[0], args.raw_markers), (args.timing, False)):
        src = open_source(path)
        try:
            if args.strict:
                _refuse_oddities(src.path, src.oddities)
            passes.append(read_pass(src, worker, raw))
        finally:
            close_source(src)
        if args.strict:
            _refuse_oddities(src.path, passes[-1].stats.oddities)
    lines, joined = join(*passes)
    with output_stream(args.output) as out:
        for line in lines:
            out.write(line)
            out.write("\n")
    if not args.quiet:
        for p in passes:
            print(_summary(p.path, p.stats), file=sys.stderr)
        print(f"{PROG}: {joined.summary()}", file=sys.stderr)
    return 0


def _refuse_oddities(path: str, oddities: dict) -> None:
    """--strict: what would be counted and left out is an error (raised before the output is kept)."""
    if oddities:
        reason, count = next(iter(sorted(oddities.items())))
        raise InputError(path, f"--strict: {count} {reason}")


def _want_progress(args: argparse.Namespace) -> bool:
    return not args.quiet and sys.stderr.isatty()


def _write(src, out: IO[str], progress: bool = False, worker: bool | None = None, raw_markers: bool = False) -> Stats:
    from pyprof.parse.write.writer import text

    pieces, stats = text(src, worker, raw_markers)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(desc=os.path.basename(src.path), unit=" records", file=sys.stderr, mininterval=0.5)
    write = out.write
    for piece in pieces:
        write(piece)
        if bar is not None:
            bar.update(piece.count("\n"))  # lines, as the records' count is the core's only at the end
    write(end_line(stats.records))
    write("\n")
    if bar is not None:
        bar.close()
    src.close()
    return stats


def _parse_to_file(job: tuple[str, str, bool]) -> Stats:
    """Worker: parse one input (already checked by the parent) into a temporary file."""
    from pyprof.parse import open_source

    path, dest, raw_markers = job
    src = open_source(path)
    cleanup.pause_point("parse-job")  # (tests: a worker of the pool runs)
    with open(dest, "w", encoding="utf-8", buffering=1 << 20) as f:
        return _write(src, f, worker=False, raw_markers=raw_markers)  # the files already use the cores


def _run_parallel(sources: list, out: IO[str], jobs: int, raw_markers: bool = False) -> list[Stats]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from pyprof import forked

    # forked where the system can (rank_files does the same): the workers inherit the signal handlers and the
    # registry of temporaries (pyprof.cleanup), where spawned ones would print a KeyboardInterrupt each
    ctx = multiprocessing.get_context("fork") if forked.available() else None
    tmpdir = cleanup.temp_folder("pyprof-parse-")
    try:
        dests = [os.path.join(tmpdir, f"{i}.jsonl") for i in range(len(sources))]
        paths = [s.temp_path or s.path for s in sources]
        for s in sources:
            s.close()
        with ProcessPoolExecutor(max_workers=min(jobs, len(sources)), mp_context=ctx) as pool:
            stats = list(pool.map(_parse_to_file, [(p, d, raw_markers) for p, d in zip(paths, dests)]))
        for d in dests:  # concatenated in input order: the output does not depend on -j
            with open(d, encoding="utf-8") as f:
                shutil.copyfileobj(f, out, 1 << 20)
        return stats
    finally:
        cleanup.remove(tmpdir)


def _summary(path: str, st: Stats) -> str:
    if st.kernels == 0:
        if not st.records and st.kernel_launches:  # the GPU side is missing, not a program that used no GPU
            return f"{PROG}: {path}: {launched_no_gpu(st.kernel_launches)}" + _oddities(st)
        extra = f" ({st.records} memcpy/memset records)" if st.records else ""
        # the rows left out are said here too: they may be why there are none
        return f"{PROG}: {path}: no GPU kernels in this profile{extra}" + _oddities(st)
    op_pct = 100.0 * st.kernels_with_op / st.kernels
    line = (f"{PROG}: {path}: {st.records} records, {st.kernels} kernels; {op_pct:.1f}% of kernels "
            f"attributed to an op")
    if st.bprop_kernels:
        line += f"; {st.bprop_kernels} backward kernels"
        if st.bprop_numbered:
            line += (f", {st.bprop_numbered} of them in numbered autograd nodes, "
                     f"{100.0 * st.bprop_with_fwd / st.bprop_numbered:.1f}% of those linked to their forward op")
        else:
            line += " (no autograd sequence numbers in this profile: none can be linked to its forward op)"
    else:
        line += "; no backward kernels"
    if st.recompute_kernels:
        line += f"; {st.recompute_kernels} kernels of forward ops recomputed during backward"
    if st.no_launch:
        line += f"; {st.no_launch} activities without a launch call in the export (empty op)"
    if st.graph_kernels:
        line += (f"; {st.graph_kernels} kernels replayed from CUDA graphs, {st.graph_kernels_tied} of them tied to "
                 "the ranges of their graph node's capture")
        if st.graph_kernels_tied == 0:
            line += (" (graphs captured before the profiled range: their captures' ranges are not in the export; "
                     "call pyprof.init() before the capture to keep them, docs/capture.md)")
        elif st.graph_kernels_tied < st.graph_kernels:
            line += (" (the rest were captured outside pyprof's ranges: a graph captured before pyprof.init(), or a "
                     "backward pass not started by torch.autograd.backward or grad, whose nodes' ranges come from "
                     "C++)")
    if st.graph_launch_kernels:
        line += (f"; {st.graph_launch_kernels} kernels replayed from CUDA graphs without their graph node in the "
                 "profile: each has the op that launched the graph, not the op captured into it")
        if st.graph_untied:  # a reader that ties replays to their capture by order said why these are not
            line += " (" + "; ".join(f"{n}: {why}" for why, n in sorted(st.graph_untied.items())) + \
                "; docs/capture.md)"
        else:
            line += (" (the profile names no graph node for them: Nsight Systems does with "
                     "--cuda-graph-trace=node, docs/capture.md)")
    if st.graph_captured:
        replays = "" if st.graph_kernels or st.graph_launch_kernels else ", and this profile replays no graph"
        line += (f"; {st.graph_captured} kernel launches, copies and memsets made while a CUDA graph was captured "
                 f"ran nothing here (the capture records them for the graph's replays{replays})")
    if st.memory_events:
        line += f"; {st.memory_events} memory events (pyprof prof --view memory)"
    return line + _oddities(st)


def _oddities(st: Stats) -> str:
    said = "".join(f"; {count} {reason}" for reason, count in sorted(st.oddities.items()))
    if st.core_missing:
        said += ("; parsed without the compiled core (the install found no C compiler or no sqlite3.h: install "
                 "them and reinstall pyprof to parse nsys exports several times faster)")
    return said
