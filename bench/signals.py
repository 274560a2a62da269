"""What a signal leaves behind: parse, report and prof stopped by SIGINT, SIGTERM and SIGHUP at random points.

    python bench/signals.py [--trials 10] [--seed 40] [--export tests/data/speed/transformer_emit.sqlite.xz]
                            [--baseline ../main]

Each command runs once to the end first (its time T, and nothing may be left after it either), then ``--trials``
times per signal, stopped after a delay drawn uniformly from [0.05 T, 0.95 T] (seeded): the signal lands anywhere
from the interpreter's start to the last write. SIGINT and SIGHUP go to the command's process group (what a terminal
sends: Ctrl-C, a closed terminal), SIGTERM to the command's process alone (``kill PID``), so that its workers learn of
it only from it. The commands:

- parse: the xz export, with the sweep worker process, ``-o`` a file (decompressed export in TMPDIR, ``.pyprof-*``
  beside the output);
- report: the xz export, ``-o`` a page and ``--trace`` a trace (the export parsed into a working folder in TMPDIR);
- prof: ``--jobs 2 --group-by op`` on the export's records (forked workers; its output held in an unnamed file).

After each trial: what is left in the output folder (but the output of a run that exited 0) and in the run's private
TMPDIR, the processes left in its session (workers that outlived it), its exit code, and whether stderr holds a
traceback. One line per (command, signal): trials, runs that left something, the exit codes of the runs signalled
(0: the signal came as the command ended, after its work) and how many ended before their delay, tracebacks, and
the median time from the signal to the exit. On a shared machine a run's time varies by half: the point drawn is a
fraction of the uninterrupted run's T, and a run faster than that may end first.

``--baseline CHECKOUT``: each trial runs again, at the same fraction of that checkout's own T, with its pyprof (the
main branch's: the same measure before a change), in the same run; its lines are marked ``baseline``.
"""
from __future__ import annotations

import argparse
import collections
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
TO_GROUP = {signal.SIGINT, signal.SIGHUP}


def _session_members(sid: int) -> list[int]:
    """Processes alive in session ``sid`` (the command's: it was started as a session leader)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":  # fields: state, ppid, pgrp, session
            found.append(int(entry))
    return found


def _as_in_a_terminal() -> None:
    # The command's signals as a terminal's foreground job has them: the bench itself may run under nohup or in the
    # background, where SIGHUP or SIGINT are ignored, and pyprof keeps an ignored signal ignored.
    for signum in SIGNALS:
        signal.signal(signum, signal.SIG_DFL)


def _run(argv: list[str], out: Path, tmp: Path, delay: float | None, signum: int | None, root: Path = ROOT) -> dict:
    """Run ``argv`` (a ``python -m`` module and its arguments) in ``out`` with TMPDIR ``tmp``; after ``delay`` s send
    ``signum``. Returns the exit code, stderr, the seconds from the signal to the exit and what was left."""
    env = dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=str(root))
    env.pop("PYPROF_PAUSE_AT", None)
    with open(out.parent / "stderr", "w+b") as err:
        start = time.monotonic()
        p = subprocess.Popen([sys.executable, "-m", *argv], cwd=out, env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
                             preexec_fn=_as_in_a_terminal)
        sent = None
        if delay is not None:
            try:
                p.wait(timeout=delay)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signum) if signum in TO_GROUP else p.send_signal(signum)
                sent = time.monotonic()
        try:
            rc = p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            rc = "hang"
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        ended = time.monotonic()
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    left = [f"out/{f.name}" for f in out.iterdir() if rc != 0 or f.name.startswith(".pyprof-")]
    left += [f"tmp/{f.name}" for f in tmp.iterdir()]
    stray = _session_members(p.pid)
    for pid in stray:
        os.kill(pid, signal.SIGKILL)
    left += [f"process {pid}" for pid in stray]
    return {"rc": rc, "stderr": stderr, "left": left, "wall_s": ended - start,
            "stop_s": None if sent is None else ended - sent}


class _Tally:
    """What the trials of one (command, signal) left and how they ended."""

    def __init__(self) -> None:
        self.codes: collections.Counter = collections.Counter()
        self.left = self.tracebacks = self.before = 0
        self.stops: list = []
        self.examples: list = []

    def add(self, r: dict) -> None:
        if r["stop_s"] is None:
            self.before += 1  # it ended before the delay (the machine ran faster than for T): no signal sent
        else:
            self.codes[r["rc"]] += 1
            self.stops.append(r["stop_s"])
        if r["left"]:
            self.left += 1
            self.examples.append(r["left"][:3])
        if "Traceback" in r["stderr"]:
            self.tracebacks += 1
            self.examples.append(r["stderr"].strip().splitlines()[-1][:120])

    def line(self, trials: int) -> str:
        stop = f"{statistics.median(self.stops) * 1000:.0f} ms" if self.stops else "-"
        return (f"{trials} trials, left behind {self.left}/{trials}, exit codes "
                f"{dict(sorted(self.codes.items(), key=str))} (+{self.before} ended before the signal), tracebacks "
                f"{self.tracebacks}/{trials}, signal to exit median {stop}"
                + (f"  e.g. {self.examples[:2]}" if self.examples else ""))


def _fresh(work: Path) -> tuple[Path, Path]:
    for name in ("out", "tmp"):
        shutil.rmtree(work / name, ignore_errors=True)
        (work / name).mkdir()
    return work / "out", work / "tmp"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--seed", type=int, default=40)
    ap.add_argument("--export", default=str(ROOT / "tests/data/speed/transformer_emit.sqlite.xz"))
    ap.add_argument("--work", default=None, help="scratch folder (default: a new one in TMPDIR, removed after)")
    ap.add_argument("--baseline", default=None, metavar="CHECKOUT",
                    help="also run each trial, at the same point, with the pyprof of this checkout (e.g. the main "
                         "branch's): its lines are marked 'baseline'")
    args = ap.parse_args()
    export = os.path.abspath(args.export)
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-signals-"))
    work.mkdir(parents=True, exist_ok=True)
    records = work / "records.dict"
    made = subprocess.run([sys.executable, "-m", "pyprof.parse", "-q", export, "-o", str(records)],
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    if made.returncode:
        sys.exit("bench/signals.py: could not parse the export into records")
    commands = {
        "parse": ["pyprof.parse", "-q", export, "-o", "r.dict", "--sweep-process", "on"],
        "report": ["pyprof.report", export, "-o", "r.html", "--trace", "t.json"],
        "prof": ["pyprof.prof", "-q", "--jobs", "2", "--group-by", "op", str(records)],
    }
    rng = random.Random(args.seed)
    print(f"bench/signals.py: {args.trials} trials per (command, signal), seed {args.seed}, export {args.export}")
    roots = [("", ROOT)] + ([("baseline ", Path(args.baseline).resolve())] if args.baseline else [])
    for name, argv in commands.items():
        wholes = {}
        for label, root in roots:
            whole = wholes[label] = _run(argv, *_fresh(work), None, None, root)
            ok = whole["rc"] == 0 and not whole["left"]
            failed = "" if ok else f"  FAILED: {whole['left']} {whole['stderr'][-300:]!r}"
            print(f"{label}{name:6s} uninterrupted: {whole['wall_s']:.2f} s, exit {whole['rc']}, "
                  f"left {len(whole['left'])}{failed}")
        for signum in SIGNALS:
            tally = {label: _Tally() for label, _ in roots}
            for _ in range(args.trials):
                fraction = rng.uniform(0.05, 0.95)
                for label, root in roots:  # the same point of the run, for each checkout
                    tally[label].add(_run(argv, *_fresh(work), fraction * wholes[label]["wall_s"], signum, root))
            for label, _ in roots:
                print(f"{label}{name:6s} {signal.Signals(signum).name:7s}: {tally[label].line(args.trials)}")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
