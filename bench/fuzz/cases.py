"""One case: pick a mutation class from the case's own seeded generator, build the input, run its commands (and
prof on what a successful parse wrote, where asked), and return the judged runs."""
from __future__ import annotations

import random
import shutil
import sys
from dataclasses import asdict
from pathlib import Path

from bench.fuzz import judge
from bench.fuzz.registry import MUTATIONS, load_all, prof_command
from bench.fuzz.seeds import Seeds, count_lines

STAGES = ("parse", "prof", "report")


def case_rng(seed: int, index: int) -> random.Random:
    """The generator of case ``index`` of run ``seed``: a case is rebuilt alone from these two numbers."""
    return random.Random(f"pyprof-fuzz:{seed}:{index}")


def classes_for(stages: set[str], only: list[str] | None = None) -> list[str]:
    """Mutation classes that can feed one of ``stages`` (records classes feed prof and report; the others parse,
    and report, which parses exports on the way), optionally only those whose name starts with one of ``only``."""
    load_all()
    names = []
    for name, m in sorted(MUTATIONS.items()):
        feeds = {"prof", "report"} if m.stage == "prof" else {"parse", "report", "prof"}
        if name.startswith("out.") or name == "seed.as_is":
            feeds = set(STAGES)
        if stages & feeds and (not only or any(name.startswith(o) for o in only)):
            names.append(name)
    return names


def pick_class(rng: random.Random, classes: list[str]) -> str:
    return rng.choices(classes, weights=[MUTATIONS[c].weight for c in classes])[0]


def run_case(seeds: Seeds, seed: int, index: int, classes: list[str], stages: set[str], root: Path,
             timeout: float, keep: Path | None = None, zygote=None) -> dict:
    """Build and run case ``index``; return {index, mutation, detail, runs: [Run as dict], error}."""
    load_all()
    rng = case_rng(seed, index)
    name = pick_class(rng, classes)
    case_dir = root / f"case-{index}"
    inp = case_dir / "in"
    inp.mkdir(parents=True)
    result = {"index": index, "mutation": name, "detail": "", "runs": [], "error": None}
    try:
        try:
            built = MUTATIONS[name].fn(rng, seeds, inp)
        except Exception as e:  # a mutator bug: reported as such, never as pyprof's outcome
            result["error"] = f"mutator failed: {type(e).__name__}: {e}"
            return result
        result["detail"] = built.detail
        size = sum(p.stat().st_size for p in inp.rglob("*") if p.is_file())
        limit = timeout + size / (4 << 20)  # linear in the input: a quarter of a second per MB on top
        for cmd in built.commands:
            if cmd.stage not in stages:
                continue
            run = judge.run(cmd, case_dir, limit, sys.executable, zygote)
            result["runs"].append(asdict(run))
            if cmd.chain and run.outcome == "ok" and "prof" in stages:
                src = Path(run.output_path or run.stdout_path or "")
                if src.is_file():
                    chained = case_dir / "in" / "chained.dict"
                    shutil.copyfile(src, chained)
                    pc = prof_command(rng, str(chained), count_lines(chained))
                    result["runs"].append(asdict(judge.run(pc, case_dir, limit, sys.executable, zygote)))
        failed = any(r["outcome"] in judge.FAILURES for r in result["runs"])
        where = f"DIR/case-{index}"
        if keep and failed:
            dest = keep / f"case-{index}"
            if dest.exists():
                shutil.rmtree(dest)
            # Device nodes (the full disk) are not copied: reading one never ends. Rebuild the case for those.
            shutil.copytree(inp, dest, symlinks=True, ignore=_specials)
            judge.unlock_tree(dest)
            where = str(dest)
        for r in result["runs"]:
            r["command"] = r["command"].replace(str(inp), where)
            r["why"] = r["why"].replace(str(inp), where)
            r["last_stderr"] = r["last_stderr"].replace(str(inp), where)
    finally:
        _remove(case_dir)
    return result


def _specials(folder: str, names: list[str]) -> list[str]:
    import os
    import stat

    return [n for n in names if not stat.S_ISDIR(m := os.lstat(os.path.join(folder, n)).st_mode)
            and not stat.S_ISREG(m) and not stat.S_ISLNK(m)]


def _remove(folder: Path) -> None:
    if folder.exists():
        judge.unlock_tree(folder)
        shutil.rmtree(folder, ignore_errors=True)
