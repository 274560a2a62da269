"""The ``pyprof`` console command: one front door to the stages (``pyprof parse ...``, ``pyprof prof ...``)."""
from __future__ import annotations

import gc
import importlib
import sys

import pyprof
from pyprof import cleanup
from pyprof.common import one_blas_thread

STAGES = {
    "parse": ("pyprof.parse.cli", "profiler export (nsys/NvProf SQLite, PyTorch trace) -> JSON Lines records"),
    "prof": ("pyprof.prof.cli", "records -> per-kernel FLOPs, bytes, Tensor Cores, roofline; tables and summaries"),
    "report": ("pyprof.report.cli", "records or an export -> one self-contained HTML report; --trace: Perfetto JSON"),
    "diff": ("pyprof.diff.cli", "two runs (records or exports) -> the change per step, per op, line or kernel"),
    "run": ("pyprof.run.cli", "run a training script under a capture (no edit needed) -> records and report.html"),
}

USAGE = "usage: pyprof {" + ",".join(STAGES) + "} [options] ...   (pyprof STAGE -h for a stage's options)\n\n" + \
    "\n".join(f"  {name:6s} {text}" for name, (_, text) in STAGES.items()) + \
    "\n\ntypical:  pyprof run -o out -- python train.py\n" \
    "          pyprof parse net.sqlite > net.dict && pyprof prof -w 150 net.dict\n"


def main(argv: list[str] | None = None) -> int:
    """Run the stage named by the first argument; return its exit code (2 for a usage error)."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return 0 if argv else 2
    if argv[0] == "--version":
        print(f"pyprof {pyprof.__version__}")
        return 0
    stage = STAGES.get(argv[0])
    if stage is None:
        sys.stderr.write(f"pyprof: unknown command {argv[0]!r}\n{USAGE}")
        return 2
    one_blas_thread()  # before the stage's modules import numpy
    return importlib.import_module(stage[0]).main(argv[1:])


def run() -> None:
    """The ``pyprof`` command: main, then exit with its code. Before the interpreter tears down, the objects still
    alive (the stages' caches of decoded markers and parts, thousands of small dicts) are frozen, so that its last
    garbage collections skip them: 0.12 s to 0.06 s at the end of a parse of a 50k-kernel export. Not in main, which
    tests and notebooks call in a process that goes on."""
    cleanup.while_loading("pyprof")  # the stage's imports: a signal there is one line, no traceback
    code = main()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    run()
