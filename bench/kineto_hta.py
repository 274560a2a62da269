"""Kineto parse speed and memory against Holistic Trace Analysis' load of the same trace, side by side in one run.

    python bench/kineto_hta.py TRACE.json.gz [TRACE ...] [--runs 3] [--hta-python /tmp/hta-venv/bin/python]

Each run starts two processes per trace, one after the other: (a) ``pyprof.parse.parse_file`` of this checkout
writing every line to /dev/null (``PYPROF_PURE_PYTHON`` as set here), (b) HTA's ``TraceAnalysis(trace_dir=...)``
with HTA's own interpreter (HTA reads a folder: the trace is linked alone into a temporary one). Each process
times its own call, after its imports (HTA's pandas import would otherwise dominate a small trace); peak memory
is the process's own peak RSS with its children's (os.wait4: HTA parses a rank in a forked pool worker),
imports included, since a user pays for them; beside them, each process's CPU seconds, imports and children
included (on a shared machine, wall seconds swell with the load, CPU seconds much less). One line per run: the
figures and the ratios pyprof / HTA.
Nothing of pyprof or HTA is imported here.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PYPROF = """
import os, sys, time
from pyprof.parse import parse_file
with open(os.devnull, "w") as out:
    t0 = time.perf_counter()
    parse_file(sys.argv[1], out)
    print(time.perf_counter() - t0)
"""

HTA = """
import logging, os, sys, tempfile, time
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
with tempfile.TemporaryDirectory(prefix="hta-load-") as folder:
    os.symlink(os.path.abspath(sys.argv[1]), os.path.join(folder, os.path.basename(sys.argv[1])))
    t0 = time.perf_counter()
    TraceAnalysis(trace_dir=folder)
    print(time.perf_counter() - t0)
"""


def measure(python: str, code: str, trace: str, env: dict) -> tuple[float, float, float]:
    """(seconds the process timed itself, its peak RSS in MB: its own or its largest child's, whichever is more,
    as os.wait4 reports it, and the CPU seconds of the whole process with its children's, imports included).
    Raises SystemExit if it fails."""
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([python, "-c", code, trace], stdout=subprocess.PIPE, stderr=err, env=env)
        out = proc.stdout.read()
        proc.stdout.close()
        _pid, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
        if proc.returncode:
            err.seek(0)
            raise SystemExit(f"{python} on {trace} failed: {err.read().decode(errors='replace')[-2000:]}")
    return float(out.split()[-1]), usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("traces", nargs="+", metavar="TRACE")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--hta-python", default="/tmp/hta-venv/bin/python", help="an interpreter with HTA installed")
    args = p.parse_args(argv)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")  # as the commands run (pyprof.common.run_command)
    ours_env = dict(env, PYTHONPATH=ROOT + os.pathsep + env.get("PYTHONPATH", ""))
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}; pure Python path: "
          f"{os.environ.get('PYPROF_PURE_PYTHON', '0')}", flush=True)
    for trace in args.traces:
        name = os.path.basename(trace)
        for run in range(1, args.runs + 1):
            ours_s, ours_mb, ours_cpu = measure(sys.executable, PYPROF, trace, ours_env)
            hta_s, hta_mb, hta_cpu = measure(args.hta_python, HTA, trace, env)
            print(f"{name} run {run}: pyprof {ours_s:.2f} s {ours_mb:.0f} MB (process CPU {ours_cpu:.2f} s); "
                  f"HTA {hta_s:.2f} s {hta_mb:.0f} MB (process CPU {hta_cpu:.2f} s); time x{ours_s / hta_s:.2f}, "
                  f"memory x{ours_mb / hta_mb:.2f} of HTA's (load {os.getloadavg()[0]:.2f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
