"""The mutation classes and the commands a mutated input is run with.

A mutator is ``fn(rng, seeds, folder) -> Built``: it derives one input from a seed file into ``folder`` (a fresh,
empty one) and says which commands to run on it. Registered with ``@mutation(name, weight)``; the weight is its
share of the cases (a class whose inputs are slow to run, like the 20 MB name, gets a small one).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable

#: prof's output formats, each as its arguments and how its stdout is judged.
PROF_FORMATS = (
    (["--jsonl"], "jsonl", None),
    ([], "text", None),
    (["-w", "100"], "text", 100),
    (["--csv"], "csv", None),
    (["--group-by", "op", "--jsonl"], "jsonl", None),
    (["--view", "all", "--jsonl"], "jsonl", None),
)


@dataclass
class Command:
    """One run of one stage: ``python -m pyprof.<stage> *argv`` in a fresh working folder."""

    stage: str  # parse | prof | report
    argv: list[str]
    names: tuple[str, ...]  # a refusal must name one of these (the input, or the output path at fault)
    stdout_kind: str | None = "jsonl"  # how stdout is judged on success (jsonl, text, csv); None: must be empty
    output: str | None = None  # the file it writes (relative to the working folder), judged on success
    output_kind: str | None = None  # jsonl | html | json
    extra_outputs: tuple[tuple[str, str], ...] = ()  # further (file, kind) written on success (report --trace)
    width: int | None = None  # -w WIDTH: no line may be wider
    expect_lines: int | None = None  # text formats: header + one row per record (names must not break lines)
    stdout_to: str | None = None  # e.g. a full-disk device; None: a file the judge reads
    device: str | None = None  # a device node given as output: it must still be one afterwards
    must_succeed: bool = False  # the input is valid: a refusal is wrong
    chain: bool = False  # on success, also run prof on what this command wrote

    def line(self, python: str = "python") -> str:
        """The command as a user would type it (for reproducing)."""
        import shlex

        out = f" > {self.stdout_to}" if self.stdout_to else ""
        return f"{python} -m pyprof.{self.stage} {' '.join(shlex.quote(a) for a in self.argv)}{out}"


@dataclass
class Built:
    """What a mutator made: a one-line description of the mutation and the commands to run."""

    detail: str
    commands: list[Command] = field(default_factory=list)


@dataclass
class Mutation:
    name: str
    fn: Callable
    weight: float
    stage: str  # the stage whose input it mutates (for --commands filtering of whole classes)


MUTATIONS: dict[str, Mutation] = {}


def mutation(name: str, weight: float = 1.0, stage: str = "parse"):
    """Register a mutator under ``name``; refuses a second one of the same name."""
    def deco(fn):
        if name in MUTATIONS:
            raise ValueError(f"mutation {name!r} registered twice: {MUTATIONS[name].fn.__qualname__} "
                             f"and {fn.__qualname__}")
        MUTATIONS[name] = Mutation(name, fn, weight, stage)
        return fn
    return deco


def parse_commands(rng: random.Random, path: str, must_succeed: bool = False) -> list[Command]:
    """parse on an export (to stdout or -o), sometimes report on it too (report parses exports itself); a
    successful parse is sometimes chained into prof, which then reads what parse wrote."""
    cmds = []
    if rng.random() < 0.25:
        cmds.append(Command("parse", [path, "-o", "out.dict"], (path,), stdout_kind=None, output="out.dict",
                            output_kind="jsonl", must_succeed=must_succeed, chain=rng.random() < 0.2))
    else:
        cmds.append(Command("parse", [path], (path,), must_succeed=must_succeed, chain=rng.random() < 0.2))
    if rng.random() < 0.1:
        cmds.append(report_command(rng, path, must_succeed))
    return cmds


def prof_command(rng: random.Random, path: str, n_records: int | None = None, must_succeed: bool = False,
                 fmt: int | None = None) -> Command:
    argv, kind, width = PROF_FORMATS[rng.randrange(len(PROF_FORMATS)) if fmt is None else fmt]
    # Only one row per record in per-kernel output: the text formats' line count is then known.
    expect = n_records + 1 if n_records is not None and kind in ("text", "csv") and argv[:1] != ["--group-by"] \
        else None
    return Command("prof", ["-q", *argv, path], (path,), stdout_kind=kind, width=width, expect_lines=expect,
                   must_succeed=must_succeed)


def report_command(rng: random.Random, path: str, must_succeed: bool = False) -> Command:
    extra = (("trace.json", "json"),) if rng.random() < 0.3 else ()
    argv = [path, "-o", "out.html"] + (["--trace", "trace.json"] if extra else [])
    return Command("report", argv, (path,), stdout_kind=None, output="out.html", output_kind="html",
                   extra_outputs=extra, must_succeed=must_succeed)


def records_commands(rng: random.Random, path: str, n_records: int | None = None,
                     must_succeed: bool = False) -> list[Command]:
    """prof in one of its formats, and report half the time."""
    cmds = [prof_command(rng, path, n_records, must_succeed)]
    if rng.random() < 0.35:
        cmds.append(report_command(rng, path, must_succeed))
    return cmds


def load_all() -> dict[str, Mutation]:
    """Import every mutator module (they register themselves) and return the registry."""
    from bench.fuzz import bytes_mut, paths_mut, records_mut, sqlite_markers, sqlite_mut, trace_mut  # noqa: F401

    return MUTATIONS
