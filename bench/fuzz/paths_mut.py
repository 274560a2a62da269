"""Output-path cases (a missing folder, a folder, a read-only folder, a full disk) and the seeds as they are (a
calibration: valid seeds must succeed, files that are not profiles must be refused cleanly)."""
from __future__ import annotations

import os
import shutil
import stat

from bench.fuzz.judge import lock
from bench.fuzz.registry import Built, Command, mutation, parse_commands, prof_command, report_command
from bench.fuzz.seeds import count_lines

#: A refusal about stdout may say so in words.
STDOUT_NAMES = ("stdout", "<stdout>")


def _small(rng, seeds, folder):
    src = rng.choice(sorted(seeds.exports(), key=lambda p: p.stat().st_size)[:6])
    dest = folder / src.name
    shutil.copyfile(src, dest)
    return dest


def _target(rng, folder, how: str) -> str:
    """The output path for ``how``: in a missing folder, an existing folder, or in a read-only folder."""
    if how == "missing folder":
        return str(folder / "no" / "such" / "out")
    if how == "a folder":
        d = folder / "adir"
        d.mkdir()
        (d / "keep.txt").write_text("a file the user had")
        return str(d)
    d = folder / "readonly"
    d.mkdir()
    if not lock(d):  # root without chattr: the folder would be writable, so test a missing one instead
        return _target(rng, folder, "missing folder")
    return str(d / "out")


@mutation("out.parse")
def parse_output(rng, seeds, folder) -> Built:
    inp = _small(rng, seeds, folder)
    how = rng.choice(("missing folder", "a folder", "read-only folder"))
    out = _target(rng, folder, how)
    cmd = Command("parse", [str(inp), "-o", out], (out, os.path.dirname(out)), stdout_kind=None)
    return Built(f"{inp.name}: parse -o into {how}", [cmd])


@mutation("out.report")
def report_output(rng, seeds, folder) -> Built:
    use_records = rng.random() < 0.5
    if use_records:
        src = rng.choice(seeds.records)
        inp = folder / src.name
        shutil.copyfile(src, inp)
    else:
        inp = _small(rng, seeds, folder)
    how = rng.choice(("missing folder", "a folder", "read-only folder"))
    out = _target(rng, folder, how)
    trace = rng.random() < 0.3
    argv = [str(inp), "-o", "out.html", "--trace", out] if trace else [str(inp), "-o", out]
    cmd = Command("report", argv, (out, os.path.dirname(out)), stdout_kind=None)
    return Built(f"{inp.name}: report {'--trace' if trace else '-o'} into {how}", [cmd])


def full_device(folder) -> str:
    """A private "disk full" device (the node of /dev/full, made here) or, where mknod is not allowed, a symlink
    to /dev/full. Never /dev/full itself: a command that renames a finished temporary file over its output would
    replace the machine's /dev/full with a regular file (``pyprof report -o /dev/full`` did, as root)."""
    path = folder / "full"
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    except OSError:
        os.symlink("/dev/full", path)
    return str(path)


@mutation("out.full_disk")
def full_disk(rng, seeds, folder) -> Built:
    """Output to a full disk (every write fails with ENOSPC): as -o, or as stdout."""
    how = rng.choice(("parse -o", "parse stdout", "prof stdout", "report -o", "report --trace"))
    full = full_device(folder)
    if how.startswith("prof"):
        src = rng.choice(seeds.records)
        inp = folder / src.name
        shutil.copyfile(src, inp)
        cmd = prof_command(rng, str(inp))
        cmd.stdout_to, cmd.names, cmd.device = full, STDOUT_NAMES + (str(inp), full), full
        return Built(f"{inp.name}: prof > full disk", [cmd])
    inp = _small(rng, seeds, folder)
    names = STDOUT_NAMES + (str(inp), full)
    if how == "parse -o":
        cmd = Command("parse", [str(inp), "-o", full], names, stdout_kind=None)
    elif how == "parse stdout":
        cmd = Command("parse", [str(inp)], names, stdout_to=full)
    elif how == "report -o":
        cmd = Command("report", [str(inp), "-o", full], names, stdout_kind=None)
    else:
        cmd = Command("report", [str(inp), "-o", "out.html", "--trace", full], names, stdout_kind=None)
    cmd.device = full
    return Built(f"{inp.name}: {how} a full disk", [cmd])


@mutation("seed.as_is", weight=0.5)
def as_is(rng, seeds, folder) -> Built:
    """An unchanged seed: a real export or records file must succeed; a file that is no profile must be refused
    with one line."""
    kind = rng.choice(("export", "records", "legacy", "other"))
    pool = {"export": seeds.exports(), "records": seeds.records, "legacy": seeds.legacy,
            "other": seeds.other}[kind] or seeds.exports()
    src = rng.choice(pool)
    inp = folder / src.name
    shutil.copyfile(src, inp)
    if kind in ("records", "legacy"):
        cmds = [prof_command(rng, str(inp), count_lines(inp), must_succeed=True)]
        if rng.random() < 0.5:
            cmds.append(report_command(rng, str(inp), must_succeed=True))
    else:
        cmds = parse_commands(rng, str(inp), must_succeed=kind == "export")
    return Built(f"{inp.name}: unchanged ({kind})", cmds)
