"""``pyprof run [-o DIR] [--backend nsys|torch] [--steps N] -- python train.py ARGS``: run a training script
under a capture without editing it, then parse it and write the records and the report into DIR.

The script's interpreter loads ``pyprof/run/boot/sitecustomize.py`` first (its folder leads PYTHONPATH; the
script gets that folder alone, and the packages the capture needs besides torch through $PYPROF_RUN_PACKAGES,
never the rest of the environment pyprof is installed in). That module counts training steps by the optimizers'
steps (a global optimizer step hook), skips ``--warmup`` of them and captures ``--steps`` more: under Nsight
Systems (the default when ``nsys`` is found) with pyprof.init()'s markers, between cudaProfilerStart/Stop
(docs/capture.md's flags), exported to SQLite; else with the PyTorch profiler (shapes, stacks, modules, memory)
on a schedule. Ctrl-C stops the script; what was captured is kept, parsed and reported. The exit status is the
script's. A capture that parse or report refuses leaves no records.dict or report.html (the capture itself
stays, for the user to look at). Names from the capture reach the terminal through ``printable``.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from pyprof.common import (InputError, PyprofError, UsageError, output_stream, parsed_args, run_command,
                           users_environment)
from pyprof.record import END_PREFIX, HEADER_PREFIX, SIDE_PREFIX, program_line

PROG = "pyprof run"
BOOT = Path(__file__).resolve().parent / "boot"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run a training script under a capture (no edit needed), then parse it and write the "
                    "records and report.html into DIR.",
        epilog="examples:\n  pyprof run -o out -- python train.py --epochs 1\n"
               "  pyprof run --backend torch --steps 5 -- python train.py      # no Nsight Systems needed")
    p.add_argument("-o", "--output", default="pyprof-run", metavar="DIR",
                   help="folder for the capture, records.dict and report.html (default: pyprof-run)")
    p.add_argument("--backend", choices=["nsys", "torch"], default=None,
                   help="Nsight Systems (default when nsys is on the PATH or $NSYS names it) or the PyTorch profiler")
    p.add_argument("--steps", type=int, default=3, metavar="N",
                   help="training steps to capture, counted by optimizer.step() (default 3; 0: every step after "
                        "the warm-up, to the script's end)")
    p.add_argument("--warmup", type=int, default=2, metavar="N",
                   help="training steps to run before the capture (default 2)")
    p.add_argument("--step-marker", metavar="NAME",
                   help="count steps by the script's own ranges named NAME (* and ? match any text; "
                        "torch.profiler.record_function(NAME), torch.cuda.nvtx.range(NAME) or range_push/range_pop) "
                        "instead of optimizer.step(): for inference loops, or a step that calls the optimizer more "
                        "than once"),
    p.add_argument("--forward-steps", action="store_true",
                   help="count each outermost nn.Module call (a forward of the model: each token of generate(), "
                        "each batch of a serving loop) as a step instead of optimizer.step(); --warmup and --steps "
                        "then count forwards")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command: python train.py ARGS")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parsed_args(build_parser(), argv)
    if isinstance(args, int):  # argparse printed the usage or the help
        return args
    # A refusal can quote the capture (a name with a line break): run_command prints it as one printable line.
    return run_command(PROG, lambda: _run(args))


#: The packages the capture (pyprof.init) imports besides torch and the standard library.
CAPTURE_PACKAGES = ("pyprof", "nvtx")


def capture_packages() -> dict[str, str]:
    """Each of CAPTURE_PACKAGES that this interpreter finds, and the folder it lies in (the site-packages of
    pyprof's environment, or a checkout): what the script's interpreter may import from there."""
    folders = {}
    for name in CAPTURE_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            folders[name] = str(Path(list(spec.submodule_search_locations)[0]).resolve().parent)
    return folders


def _nsys() -> str | None:
    return os.environ.get("NSYS") or shutil.which("nsys")


def _run(args) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise UsageError("give the command after --: pyprof run -- python train.py ARGS")
    if args.steps < 0 or args.warmup < 0:
        raise UsageError("--steps and --warmup must be >= 0")
    backend = args.backend or ("nsys" if _nsys() else "torch")
    if backend == "nsys" and not _nsys():
        raise UsageError("--backend nsys: no nsys on the PATH (nor $NSYS); --backend torch needs none")
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    env = users_environment()
    env.pop("PYPROF_RUN_ACTIVE", None)
    # Only the boot folder: the folder above the pyprof package is the site-packages of pyprof's environment
    # when pyprof is installed, whose every package would shadow or add to the script's own. The boot module
    # finds pyprof and the capture's NVTX binding alone there (PYPROF_RUN_PACKAGES).
    env["PYTHONPATH"] = os.pathsep.join([str(BOOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["PYPROF_RUN_PACKAGES"] = json.dumps(capture_packages())
    timing = out / "timing.json"  # the program's own step times (pyprof.nvtx.timing), written at the script's exit
    timing.unlink(missing_ok=True)
    env.update(PYPROF_RUN_BACKEND=backend, PYPROF_RUN_STEPS=str(args.steps), PYPROF_RUN_WARMUP=str(args.warmup),
               PYPROF_RUN_TRACE=str(out / "trace.json"), PYPROF_RUN_TIMING=str(timing))
    if args.forward_steps and args.step_marker is not None:
        raise UsageError("--forward-steps and --step-marker: give one way to count steps")
    env["PYPROF_RUN_FORWARD_STEPS"] = "1" if args.forward_steps else ""
    if args.step_marker is not None:
        if not args.step_marker.strip():
            raise UsageError("--step-marker: give the name of the script's step ranges")
        env["PYPROF_RUN_STEP_MARKER"] = args.step_marker
    else:
        env.pop("PYPROF_RUN_STEP_MARKER", None)
    if backend == "nsys":
        capture = out / "capture"
        for suffix in (".nsys-rep", ".qdstrm", ".sqlite"):
            Path(f"{capture}{suffix}").unlink(missing_ok=True)
        window = ["--capture-range=cudaProfilerApi", "--capture-range-end=stop"] if args.steps else []
        # --cuda-graph-trace=node: each kernel a CUDA graph replays is reported with its node, which parse ties to
        # the ranges of the node's capture (docs/capture.md); without it a replay is one activity
        cmd = [_nsys(), "profile", "-t", "cuda,nvtx", "-s", "none", "--cpuctxsw=none", "--cuda-graph-trace=node", *window,
               "-o", str(capture), "-f", "true", *command]
    else:
        Path(env["PYPROF_RUN_TRACE"]).unlink(missing_ok=True)
        cmd = command
    _note(f"{backend}: {' '.join(command)}")
    status = _child(cmd, env)
    export = _export(out, backend)
    if export is None:
        _note(f"nothing was captured: the script exited with status {status} before its step {args.warmup + 1}"
              if status else f"nothing was captured (the script ended before its step {args.warmup + 1}?)")
        return status or 1
    if status:
        _note(f"the script exited with status {status}")
    _analyse(export, out, _source_roots(command), _program_lines(timing), failed=bool(status))
    return status


def _program_lines(timing: Path) -> list[str]:
    """The program line (record.program_line) of the step times the script's interpreter wrote, or none: a script
    that died without running its exit handlers, or a file that is not what pyprof.nvtx.timing writes (said once)."""

    if not timing.exists():
        return []
    try:
        d = json.loads(timing.read_text())
        pid, how = d["pid"], d["how"]
        lists = [d["unprofiled_step_ns"], d["captured_step_ns"]]
        ok = type(pid) is int and type(how) is str and all(
            type(x) is list and all(type(v) is int and v > 0 for v in x) for x in lists)
    except (ValueError, KeyError, TypeError):
        ok = False
    if not ok:
        _note(f"{timing}: not the step times pyprof run writes; the report has no unprofiled step")
        return []
    return [program_line(pid, *lists, how)]


def _source_roots(command: list[str]) -> list[str]:
    """The folders the report may read source text from: the current one, and the script's (the first argument
    naming a .py file, as in ``python train.py`` or ``torchrun --nproc 2 train.py``), both named by the user."""
    roots = [os.getcwd()]
    script = next((a for a in command[1:] if a.endswith(".py") and os.path.isfile(a)), None)
    if script is not None:
        roots.append(os.path.dirname(os.path.abspath(script)))
    return list(dict.fromkeys(roots))


def _child(cmd: list[str], env: dict) -> int:
    """Run the script; Ctrl-C goes to it (the terminal sends it to the whole group) and is not ours: we wait for
    it to end and keep what it captured. A handler that does nothing rather than SIG_IGN: an ignored signal
    stays ignored in the child, a handler does not cross exec."""
    previous = signal.signal(signal.SIGINT, lambda _sig, _frame: None)
    try:
        try:
            proc = subprocess.Popen(cmd, env=env)
        except OSError as e:
            raise UsageError(f"cannot start {cmd[0]}: {e.strerror}") from None
        code = proc.wait()
        return 128 - code if code < 0 else code  # killed by signal N: 128 + N, as a shell says it
    finally:
        signal.signal(signal.SIGINT, previous)


def _export(out: Path, backend: str) -> Path | None:
    """The capture as a file parse reads, or None when there is none."""
    if backend == "torch":
        trace = out / "trace.json"
        return trace if trace.exists() and trace.stat().st_size else None
    capture = out / "capture"
    rep, raw = Path(f"{capture}.nsys-rep"), Path(f"{capture}.qdstrm")
    if not rep.exists() and raw.exists() and os.environ.get("QDSTRM_IMPORTER"):
        # An nsys whose importer did not run (the one bundled with Nsight Compute): its importer, named by
        # $QDSTRM_IMPORTER (with $KIT_LD for its libraries), turns the raw stream into the report.
        env = dict(os.environ)
        if env.get("KIT_LD"):
            env["LD_LIBRARY_PATH"] = env["KIT_LD"]
        subprocess.run([env["QDSTRM_IMPORTER"], "-i", str(raw)], env=env, stdout=subprocess.DEVNULL, check=False)
    if not rep.exists():
        return None
    sqlite = Path(f"{capture}.sqlite")
    done = subprocess.run([_nsys(), "export", "--type", "sqlite", "-o", str(sqlite), "-f", "true", str(rep)],
                          stdout=subprocess.DEVNULL, check=False)
    if done.returncode != 0 or not sqlite.exists():
        raise InputError(str(rep), f"nsys export failed (exit {done.returncode})")
    return sqlite


def _analyse(export: Path, out: Path, source_roots: list[str], side: list[str], failed: bool = False) -> None:
    """Parse the capture and write the report; the next commands to run only where there is GPU work to read. A
    script that failed before any GPU work gets no report (it would be empty)."""
    from pyprof.parse import parse_file
    from pyprof.report.cli import run as report

    records, page = out / "records.dict", out / "report.html"
    # Written to a temporary name and renamed into place (output_stream): a capture that parse refuses leaves
    # no records.dict; one that report refuses takes its records.dict away again.
    with output_stream(str(records)) as f:
        parse_file(str(export), f, side_lines=side)
    try:
        h = report([str(records)], str(page), source_roots=source_roots)
    except PyprofError:
        records.unlink(missing_ok=True)
        raise
    _headline(h)
    if not h.activities:
        if failed and not _holds_anything(records):
            records.unlink(missing_ok=True)
            page.unlink(missing_ok=True)
            _note("no report: the script failed before any GPU work (its error is above)")
            return
        _note(f"wrote {records} and {page}: the host's side alone (CPU ops and steps, no kernel to time or model; "
              "run on a machine with a CUDA GPU for those)")
        return
    _note(f"wrote {records} and {page}")
    # The next commands read source text from the folder they run in: the script's, when it is elsewhere, named.
    roots = "".join(f" --source-root {shlex.quote(r)}" for r in source_roots[1:])
    print(f"next:\n  pyprof prof --group-by op {records}\n  pyprof prof --view lines{roots} {records}\n"
          f"  pyprof prof --view recommendations{roots} {records}\n  open {page}", file=sys.stderr)


def _holds_anything(records: Path) -> bool:
    """Whether parse's records hold a GPU activity or the host's side (host or memory lines), beyond the header,
    window and end lines that every capture has."""
    kinds = (b'{"pyprof_side":"host"', b'{"pyprof_side":"memory"')
    with open(records, "rb") as f:
        return any(not line.startswith((HEADER_PREFIX, END_PREFIX, SIDE_PREFIX)) or line.startswith(kinds)
                   for line in f if line.strip())


def _note(text: str) -> None:
    """One line of run's on stderr. It can quote the capture (op names, findings) or the command: printable,
    so that a name's line break or escape sequence is shown, not acted on by the terminal."""
    from pyprof.common import printable

    print(printable(f"{PROG}: {text}"), file=sys.stderr)


def _known(value, unit: str) -> str:
    """A headline number with its unit, or "na" where the report could not measure it."""
    return "na" if value is None else f"{value}{unit}"


def _headline(h) -> None:
    """The report's headline (pyprof.report.headline.Headline), in a few lines."""
    if not h.activities:
        _note("no GPU activity was captured (a run on the CPU, or before any GPU work)")
        return
    top = ", ".join(f"{e.label} {_known(e.pct, '%')}" for e in h.top_ops)
    _note(f"step {_known(h.step_ms, ' ms')} ({h.steps} steps), GPU busy {_known(h.gpu_busy_pct, '%')}, "
          f"{h.activities} GPU activities; top ops: {top}")
    if h.program_step_ms is None and h.steps:
        _note("the program's own step was not measured: the step and the findings' idle figures include the "
              "capture's own cost")
    elif h.program_step_ms is not None:
        verb = f"inflated the step {h.inflation}x" if h.inflation > 1 else "did not lengthen the step"
        _note(f"the program's own step {h.program_step_ms} ms unprofiled, captured {h.captured_step_ms} ms: the "
              f"capture {verb}; the findings' idle figures are the program's")
    for e in h.findings:
        saving = "saving not estimated" if e.saving_ms is None else f"saves up to {e.saving_ms} ms"
        _note(f"finding: {e.label[:120]} ({saving})")
