"""The ``pyprof`` console command: one front door to the stages (``pyprof parse ...``, ``pyprof prof ...``)."""
from __future__ import annotations

import gc
import importlib
import sys

import pyprof
from pyprof import cleanup
from pyprof.common import one_blas_thread, run_command, run_main, write_stdout

STAGES = {
    "parse": ("pyprof.parse.cli", "profiler export (nsys/NvProf SQLite, PyTorch trace) -> JSON Lines records"),
    "prof": ("pyprof.prof.cli", "records -> per-kernel FLOPs, bytes, Tensor Cores, roofline; tables and summaries"),
    "report": ("pyprof.report.cli", "records or an export -> one self-contained HTML report; --trace: Perfetto JSON"),
    "diff": ("pyprof.diff.cli", "two runs (records or exports) -> the change per step, per op, line or kernel"),
    "run": ("pyprof.run.cli", "run a training script under a capture (no edit needed) -> records and report.html"),
    "mcp": ("pyprof.agent.server", "serve the headline, views, findings, kernels and diffs to a coding agent (MCP)"),
}

USAGE = "usage: pyprof {" + ",".join(STAGES) + "} [options] ...   (pyprof STAGE -h for a stage's options)\n\n" + \
    "\n".join(f"  {name:6s} {text}" for name, (_, text) in STAGES.items()) + \
    "\n\ntypical:  pyprof run -o out -- python train.py\n" \
    "          pyprof parse net.sqlite > net.dict && pyprof prof -w 150 net.dict\n"


def main(argv: list[str] | None = None) -> int:
    """Run the stage named by the first argument; return its exit code (2 for a usage error)."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        return _show(USAGE, 0 if argv else 2)
    if argv[0] == "--version":
        return _show(f"pyprof {pyprof.__version__}\n", 0)
    stage = STAGES.get(argv[0])
    if stage is None:
        sys.stderr.write(f"pyprof: unknown command {argv[0]!r}\n{USAGE}")
        return 2
    one_blas_thread()  # before the stage's modules import numpy
    return importlib.import_module(stage[0]).main(argv[1:])


def _show(text: str, code: int) -> int:
    """Print ``text`` on stdout and return ``code``; 1, and one line, when stdout cannot take it (a full disk)."""
    return run_command("pyprof", lambda: write_stdout([text]) or code)


def run() -> None:
    """The ``pyprof`` command: main, then exit with its code. Before the interpreter tears down, the objects still
    alive (the stages' caches of decoded markers and parts, thousands of small dicts) are frozen, so that its last
    garbage collections skip them: 0.12 s to 0.06 s at the end of a parse of a 50k-kernel export. Not in main, which
    tests and notebooks call in a process that goes on. Exits through common.run_main: stdout's writes are whole
    and its last flush is checked."""
    cleanup.while_loading("pyprof")  # the stage's imports: a signal there is one line, no traceback

    def main_then_freeze() -> int:
        code = main()
        gc.freeze()
        return code

    stage = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] in STAGES else None
    run_main(f"pyprof {stage}" if stage else "pyprof", main_then_freeze)


if __name__ == "__main__":
    run()
