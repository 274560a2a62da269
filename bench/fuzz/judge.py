"""Run one command as a user would, and judge what it did against issue 13's promise.

Each run gets a fresh working folder and TMPDIR inside its case folder, a wall-clock limit, and its peak RSS from
``os.wait4``. The promise: exit 0 with valid output (strict JSON lines with no NaN/Infinity; a complete HTML page
whose data is strict JSON; text tables with one line per row, no raw control characters, never wider than -w), or
a non-zero exit with exactly one stderr line naming the file, nothing on stdout and no file left behind.
"""
from __future__ import annotations

import os
import re
import resource
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from bench.fuzz.registry import Command
from bench.fuzz.seeds import parse_env
from bench.fuzz.validate import check_output

#: The promise (issue 13): under 500 MB for any input up to 100 MB. A larger input (a mutation can make one:
#: a 100 kB name in every record) is held to the same ratio, 5 MB of memory per MB of input.
MEMORY_LIMIT_MB = 500
PROMISED_INPUT_MB = 100
#: A hard cap so that a runaway input cannot take the shared machine down (the run is over-memory anyway: a
#: deeply nested trace once took all 24 GB of this machine in-process).
ADDRESS_SPACE_CAP = 2 << 30
FILE_SIZE_CAP = 2 << 30

#: Outcomes that break the promise, in the order they are judged.
FAILURES = ("hang", "crash", "over-memory", "traceback", "invalid-output", "partial-output", "multi-line-refusal",
            "nameless-refusal", "left-behind", "refused-valid")
OUTCOMES = ("ok", "refused") + FAILURES


@dataclass
class Run:
    """What one command did, and the judge's verdict."""

    stage: str
    command: str
    outcome: str
    why: str  # the condition, or for a traceback "ExcType in pyprof/x/y.py:function"
    where: str  # the innermost pyprof frame with its line (tracebacks), else ""
    last_stderr: str
    wall_s: float
    rss_mb: float
    cpu_s: float  # user + system CPU seconds of the command (and the children it waited for)
    stdout_path: str | None = None
    output_path: str | None = None


def _reset(folder: Path) -> None:
    if folder.exists():
        unlock_tree(folder)
        shutil.rmtree(folder)
    folder.mkdir()


def snapshot(folder: Path) -> set[str]:
    """Every path under ``folder`` (files and folders), relative."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(folder):
        rel = os.path.relpath(dirpath, folder)
        out.update(os.path.normpath(os.path.join(rel, n)) for n in dirnames + filenames)
    return out


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_CAP, ADDRESS_SPACE_CAP))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_CAP, FILE_SIZE_CAP))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def lock(folder: Path) -> bool:
    """Make ``folder`` read-only, also for root (who ignores modes): mode 0555 and the immutable attribute.
    False where that cannot be enforced (root on a file system without chattr)."""
    os.chmod(folder, 0o555)
    if os.geteuid() != 0:
        return True
    try:
        return subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode == 0
    except OSError:  # no chattr
        return False


def unlock_tree(folder: Path) -> None:
    """Undo ``lock`` on every folder under ``folder``, so that it can be removed."""
    for dirpath, dirnames, _ in os.walk(folder):
        for d in dirnames:
            path = os.path.join(dirpath, d)
            if d == "readonly" and os.geteuid() == 0:
                subprocess.run(["chattr", "-i", path], capture_output=True)
            try:
                os.chmod(path, 0o755)
            except OSError:
                pass


# Runs ``python -m pyprof.<stage>`` after reporting, at exit, its own high-water resident memory (VmHWM of its
# address space). The kernel's ru_maxrss of a child counts the parent's memory at the fork (a test process that
# imported torch makes every child look 1 GB large); VmHWM belongs to the address space exec made.
_LAUNCH = """import atexit, os, runpy, sys
def _peak(path=os.environ.pop("PYPROF_FUZZ_PEAK")):
    with open("/proc/self/status") as f:
        kb = next((line.split()[1] for line in f if line.startswith("VmHWM:")), "0")
    with open(path, "w") as out:
        out.write(kb)
atexit.register(_peak)
sys.argv = ["python -m pyprof." + sys.argv[1]] + sys.argv[2:]
runpy.run_module("pyprof." + sys.argv[0].rsplit(".", 1)[1], run_name="__main__", alter_sys=True)
"""


def _spawn(cmd: Command, python: str, work: Path, env: dict, stdout_path: Path, stderr_path: Path,
           timeout: float) -> tuple[int, bool, float, float, float]:
    """``python -m pyprof.<stage> *argv`` as a process: (exit status, killed for time, peak RSS MB, seconds,
    CPU seconds)."""
    peak_path = stderr_path.with_name("peak_kb")
    peak_path.unlink(missing_ok=True)
    env = {**env, "PYPROF_FUZZ_PEAK": str(peak_path)}
    argv = [python, "-c", _LAUNCH, cmd.stage, *cmd.argv]
    t0 = time.monotonic()
    with open(cmd.stdout_to or stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        proc = subprocess.Popen(argv, cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                preexec_fn=_limits, start_new_session=True)
    killed = threading.Event()

    def kill():
        killed.set()
        _killpg(proc.pid)

    timer = threading.Timer(timeout, kill)
    timer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        timer.cancel()
    proc.returncode = rc = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
    _killpg(proc.pid)  # any worker it left running
    try:
        peak_mb = int(peak_path.read_text()) / 1024
    except (OSError, ValueError):  # killed before its exit handlers ran: the kernel's figure, an upper bound
        peak_mb = usage.ru_maxrss / 1024
    return rc, killed.is_set(), peak_mb, time.monotonic() - t0, usage.ru_utime + usage.ru_stime


def run(cmd: Command, case_dir: Path, timeout: float, python: str = sys.executable, zygote=None) -> Run:
    """Run ``cmd`` in ``case_dir`` (its input under ``case_dir/in``) and judge it; through ``zygote`` (a
    bench.fuzz.zygote.Zygote) when given, else as a ``python -m`` process."""
    work, tmp, inp = case_dir / "work", case_dir / "tmp", case_dir / "in"
    _reset(work)
    _reset(tmp)
    before = snapshot(inp)
    env = parse_env()
    env["TMPDIR"] = str(tmp)
    stdout_path = case_dir / "stdout"
    stderr_path = case_dir / "stderr"
    # A stdout that fails (a full disk) fails at the interpreter's own exit: only a real process shows that.
    if zygote is not None and not cmd.stdout_to:
        reply = zygote.run({"stage": cmd.stage, "argv": list(cmd.argv), "cwd": str(work), "env": env,
                            "stdout": cmd.stdout_to or str(stdout_path), "stderr": str(stderr_path),
                            "timeout": timeout, "caps": [ADDRESS_SPACE_CAP, FILE_SIZE_CAP]})
        rc, killed, rss_mb, wall, cpu = (reply["rc"], reply["killed"], reply["rss_kb"] / 1024, reply["wall_s"],
                                         reply["cpu_s"])
    else:
        rc, killed, rss_mb, wall, cpu = _spawn(cmd, python, work, env, stdout_path, stderr_path, timeout)
    stderr = stderr_path.read_text("utf-8", "replace")
    after = snapshot(inp)
    outcome, why, where = judge(cmd, rc, killed, rss_mb, stderr, stdout_path, work, tmp, before, after,
                                timeout)
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    return Run(cmd.stage, cmd.line(), outcome, why, where, (lines[-1] if lines else "")[:300], round(wall, 3),
               round(rss_mb, 1), round(cpu, 3), None if cmd.stdout_to else str(stdout_path),
               str(work / cmd.output) if cmd.output else None)


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


_FRAME = re.compile(r'File "([^"]*)", line (\d+), in (\S+)')


def traceback_signature(stderr: str) -> tuple[str, str]:
    """("ExcType in pyprof/x.py:function", "pyprof/x.py:LINE") of the last traceback in ``stderr``."""
    last = stderr[stderr.rfind("Traceback (most recent call last)"):]
    frames = [m for m in _FRAME.finditer(last) if "/pyprof/" in m.group(1)]
    lines = [ln for ln in last.splitlines() if ln.strip() and not ln.startswith(" ")]
    exc = lines[-1].split(":")[0].strip() if len(lines) > 1 else "?"
    if not frames:
        return f"{exc} outside pyprof", ""
    f = frames[-1]
    rel = "pyprof/" + f.group(1).rsplit("/pyprof/", 1)[1]
    return f"{exc} in {rel}:{f.group(3)}", f"{rel}:{f.group(2)}"


def _still_device(path: str) -> bool:
    try:
        return os.path.islink(path) or stat.S_ISCHR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def _names_file(line: str, names: tuple[str, ...]) -> bool:
    for n in names:
        if not n:
            continue
        base = os.path.basename(n.rstrip("/"))
        if n in line or (len(base) >= 8 and "." in base and base in line):
            return True
    return False


def _cut_records(stdout: bytes) -> bool:
    """parse's records that a failure cut short (a corrupt page found part way): whole lines without the end
    line after the last record, which prof and report refuse (docs/robustness.md): honest, as the issue decides."""
    lines = [ln for ln in stdout.split(b"\n") if ln.strip()]
    return stdout.endswith(b"\n") and bool(lines) and not lines[-1].startswith(b'{"pyprof_end":')


def memory_limit_mb(cmd: Command, work: Path) -> float:
    """MEMORY_LIMIT_MB, or for inputs over PROMISED_INPUT_MB in all, the same share of their size."""
    total = 0
    for name in cmd.names:
        path = Path(name) if os.path.isabs(name) else work / name
        try:
            if path.is_file():
                total += path.stat().st_size
        except OSError:
            pass
    return MEMORY_LIMIT_MB * max(1.0, total / (PROMISED_INPUT_MB << 20))


def judge(cmd: Command, rc: int, killed: bool, rss_mb: float, stderr: str, stdout_path: Path, work: Path,
          tmp: Path, before: set, after: set, timeout: float) -> tuple[str, str, str]:
    """(outcome, why, where) of one run; the first broken promise wins, in FAILURES' order."""
    if killed:
        return "hang", f"still running after {timeout:g} s", ""
    if rc < 0:
        return "crash", f"killed by {signal.Signals(-rc).name}", ""
    limit_mb = memory_limit_mb(cmd, work)
    if rss_mb > limit_mb or "MemoryError" in stderr:
        return "over-memory", f"peak RSS {rss_mb:.0f} MB (limit {limit_mb:.0f} MB)", ""
    if "Traceback (most recent call last)" in stderr:
        sig, where = traceback_signature(stderr)
        return "traceback", sig, where
    expected = set()
    if rc == 0:
        expected = {p for p in (cmd.output, *(o for o, _ in cmd.extra_outputs)) if p}
    left = sorted(f"TMPDIR/{p}" for p in snapshot(tmp)) + \
        sorted(f"{p}" for p in snapshot(work) - expected) + sorted(f"next to the input: {p}" for p in after - before)
    stdout = b"" if cmd.stdout_to else stdout_path.read_bytes()
    if cmd.device and not _still_device(cmd.device):
        return "invalid-output", "replaced the output device node with a regular file", ""
    if rc == 0:
        problem = check_output(cmd, stdout, work)
        if problem:
            return "invalid-output", problem, ""
        if left:
            return "left-behind", "left " + ", ".join(left[:3]), ""
        return "ok", "", ""
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    if stdout.strip() and not (cmd.stage == "parse" and _cut_records(stdout)):
        n = stdout.count(b"\n")
        return "partial-output", f"exit {rc} after {n} lines on stdout", ""
    if len(lines) != 1:
        return "multi-line-refusal", f"{len(lines)} stderr lines, first: {(lines or [''])[0][:300]}", ""
    if not _names_file(lines[0], cmd.names):
        return "nameless-refusal", lines[0][:300], ""
    if left:
        return "left-behind", "left " + ", ".join(left[:3]), ""
    if cmd.must_succeed:
        return "refused-valid", lines[0][:300], ""
    return "refused", lines[0][:300], ""
