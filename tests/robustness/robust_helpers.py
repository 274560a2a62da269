"""Running a command in-process and judging it against issue 13's promise, with the fuzz harness's own judge
(bench/fuzz/judge.py, which knows nothing of pyprof's internals), so that the tests and the bench agree.

A run is ``pyprof.<stage>.cli.main(argv)`` with stdout and stderr captured as bytes, in a fresh working folder
with ``tempfile`` pointed at a fresh TMPDIR, under a wall-clock alarm; an exception escaping ``main`` is what a
user would see as a traceback. Only time and memory bounds need a process around the command: ``bounded`` runs
one through the harness.
"""
from __future__ import annotations

import contextlib
import io
import lzma
import os
import signal
import sys
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.fuzz import judge as fuzz_judge  # noqa: E402
from bench.fuzz.registry import Command  # noqa: E402

DATA = ROOT / "tests" / "data"
from shared_files import CORPUS  # noqa: E402  (where ../shared is, said once)


class Hang(Exception):
    """The command ran past its time limit."""


@dataclass
class Verdict:
    outcome: str
    why: str
    rc: int | None
    stdout: bytes
    stderr: str
    cpu_s: float = 0.0  # CPU seconds, measured for bounded runs only

    def __str__(self) -> str:
        return f"{self.outcome}: {self.why} (exit {self.rc}; stderr: {self.stderr.strip()[-400:]!r})"


@contextlib.contextmanager
def _captured():
    out, err = io.BytesIO(), io.BytesIO()
    old = sys.stdout, sys.stderr
    sys.stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    sys.stderr = io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace", write_through=True)
    try:
        yield out, err
    finally:
        for s in (sys.stdout, sys.stderr):
            try:
                s.flush()
                s.detach()
            except ValueError:  # a command closed or detached it
                pass
        sys.stdout, sys.stderr = old


@contextlib.contextmanager
def _alarm(seconds: float):
    def fire(signum, frame):
        raise Hang(f"still running after {seconds:g} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _main(stage: str):
    if stage == "parse":
        from pyprof.parse.cli import main
    elif stage == "prof":
        from pyprof.prof.cli import main
    else:
        from pyprof.report.cli import main
    return main


def run(cmd: Command, case_dir: Path, limit: float = 20.0) -> Verdict:
    """Run ``cmd`` in-process in ``case_dir`` (input under ``case_dir/in``) and judge it like the harness.
    Output to a device (a full disk) runs as a process: only a real stdout fails at the interpreter's exit."""
    if cmd.stdout_to:
        return bounded(cmd, case_dir, limit)
    work, tmp, inp = case_dir / "work", case_dir / "tmp", case_dir / "in"
    for d in (work, tmp, inp):
        d.mkdir(parents=True, exist_ok=True)
    before = fuzz_judge.snapshot(inp)
    cwd, tempdir, env_tmp = os.getcwd(), tempfile.tempdir, os.environ.get("TMPDIR")
    os.chdir(work)
    tempfile.tempdir = str(tmp)
    os.environ["TMPDIR"] = str(tmp)
    rc, killed, tb = None, False, ""
    try:
        with _captured() as (out, err):
            try:
                with _alarm(limit):
                    rc = _main(cmd.stage)(list(cmd.argv))
            except Hang:
                killed = True
            except BaseException:  # what escapes main reaches the user as a traceback
                tb = traceback.format_exc()
        stdout, stderr = out.getvalue(), err.getvalue().decode("utf-8", "replace") + tb
    finally:
        os.chdir(cwd)
        tempfile.tempdir = tempdir
        if env_tmp is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = env_tmp
    stdout_path = case_dir / "stdout"
    stdout_path.write_bytes(stdout)
    outcome, why, _ = fuzz_judge.judge(cmd, rc if rc is not None else 1, killed, 0.0, stderr, stdout_path, work,
                                       tmp, before, fuzz_judge.snapshot(inp), limit)
    return Verdict(outcome, why, rc, stdout, stderr)


def bounded(cmd: Command, case_dir: Path, limit: float) -> Verdict:
    """Run ``cmd`` as a process (its time limit and peak memory can only be measured around one)."""
    (case_dir / "in").mkdir(parents=True, exist_ok=True)
    r = fuzz_judge.run(cmd, case_dir, limit)
    stdout = Path(r.stdout_path).read_bytes() if r.stdout_path else b""
    return Verdict(r.outcome, f"{r.why} (peak RSS {r.rss_mb:.0f} MB, {r.wall_s:.1f} s)", None, stdout,
                   (case_dir / "stderr").read_text("utf-8", "replace"), r.cpu_s)


def linear_time(make, sizes: tuple[int, int], case_dir: Path, per_unit_s: float, limit: float = 60.0) -> str | None:
    """Does the command ``make(size, folder)`` returns take time linear in ``size``, and at most ``per_unit_s``
    CPU seconds per unit of size? Measured in CPU seconds beyond a run of size 0, and compared within the test,
    so that a loaded machine slows both sides alike: the larger run may take at most 2.5 times its linear share
    of the smaller (a quadratic cost takes big/small times more). The per-unit bound is generous (a second
    per MB of input): it catches a linear cost with a pathological constant. Returns why not, or None; each
    run must also keep the promise."""
    cpu = []
    for size in (0, *sizes):
        folder = case_dir / f"size-{size}"
        (folder / "in").mkdir(parents=True)
        v = bounded(make(size, folder / "in"), folder, limit)
        if v.outcome not in ("ok", "refused"):
            return f"size {size}: {v}"
        cpu.append(v.cpu_s)
    small, big = (max(c - cpu[0], 0.05) for c in cpu[1:])
    allowed = 2.5 * small * sizes[1] / sizes[0]
    if big > allowed:
        return (f"size {sizes[1]} took {big:.2f} CPU s beyond start-up, size {sizes[0]} {small:.2f} s: "
                f"more than the {allowed:.2f} s of a linear cost (x2.5)")
    if big > per_unit_s * sizes[1]:
        return f"size {sizes[1]} took {big:.2f} CPU s beyond start-up, more than {per_unit_s:g} s per unit"
    return None


def seeded_sweep(cls: str, seeds, folder: Path, seed: int, cases: int, bounded_classes: set, pick) -> list[str]:
    """Run ``cases`` seeded cases of mutation class ``cls`` (bench/fuzz) and return what broke the promise.
    ``pick(cmd)`` gives the command to run for each of a case's commands (None: skip it); a class in
    ``bounded_classes`` runs as a process with time and memory bounds."""
    from bench.fuzz.cases import case_rng
    from bench.fuzz.registry import MUTATIONS

    broken = []
    for k in range(cases):
        case_dir = folder / f"case-{k}"
        (case_dir / "in").mkdir(parents=True)
        built = MUTATIONS[cls].fn(case_rng(seed, k), seeds, case_dir / "in")
        for cmd in filter(None, map(pick, built.commands)):
            v = bounded(cmd, case_dir, 60) if cls in bounded_classes else run(cmd, case_dir)
            if v.outcome not in (("ok",) if cmd.must_succeed else ("ok", "refused")):
                broken.append(f"case {k} ({built.detail}): {v}")
    return broken


def keeps_promise(v: Verdict, must_succeed: bool = False) -> None:
    """Assert the promise: ok with valid output, or (unless the input is valid) one clean refusal line."""
    allowed = ("ok",) if must_succeed else ("ok", "refused")
    assert v.outcome in allowed, str(v)


def decompressed(src: Path, dest: Path) -> Path:
    """A committed ``.sqlite.xz`` capture, decompressed to ``dest``."""
    with lzma.open(src) as f:
        dest.write_bytes(f.read())
    return dest
