"""Seeded mutation fuzzing of parse, prof and report (issue 13): counts per outcome, per stage and per mutation
class, then the failure signatures with a command that reproduces each.

    python bench/fuzz_run.py [--cases N] [--seed S] [--jobs J] [--commands parse,prof,report] [--keep DIR]
    python bench/fuzz_run.py --seed S --case K --keep DIR     # rebuild and rerun one case, inputs kept

Each case derives one input from a real seed file with one mutation (bench/fuzz), runs the commands on it as
processes (``python -m pyprof.<stage>`` of this checkout: forked from a server that has imported the modules once,
bench/fuzz/zygote.py, or with --exec started afresh, about 3x slower) in a fresh folder and TMPDIR, with a
wall-clock limit (--timeout, plus a quarter of a second per MB of input) and its peak RSS measured (os.wait4),
and judges the run: ok,
refused (one line naming the file, nothing on stdout, nothing left), or one of the broken promises (hang, crash,
over-memory (> 500 MB), traceback, invalid-output, partial-output, multi-line-refusal, nameless-refusal,
left-behind, refused-valid). Exit status 1 when any run broke the promise. Nothing of pyprof is imported here
(the fork server imports its modules by name only).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.fuzz import cases as fcases  # noqa: E402
from bench.fuzz.judge import FAILURES, OUTCOMES  # noqa: E402
from bench.fuzz.seeds import parse_env, prepare  # noqa: E402
from bench.fuzz.zygote import Zygote  # noqa: E402

_STATE: dict = {}


def _init(state: dict) -> None:
    _STATE.update(state)
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    if state["fork"]:
        env = parse_env()
        env["PYPROF_FUZZ_ROOT"] = str(ROOT)
        _STATE["zygote"] = Zygote(sys.executable, env)


def _one(index: int) -> dict:
    s = _STATE
    return fcases.run_case(s["seeds"], s["seed"], index, s["classes"], s["stages"], s["root"], s["timeout"],
                           s["keep"], s.get("zygote"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=200, help="how many cases (default 200)")
    p.add_argument("--seed", type=int, default=0, help="the run's seed: case K of seed S is always the same")
    p.add_argument("--case", type=int, default=None, help="run only this case index (with its details)")
    p.add_argument("--jobs", type=int, default=2, help="cases run in this many processes (default 2)")
    p.add_argument("--commands", default="parse,prof,report", help="stages to run (comma separated)")
    p.add_argument("--classes", default=None, help="only mutation classes starting with these (comma separated)")
    p.add_argument("--timeout", type=float, default=6.0,
                   help="seconds before a run counts as a hang (default 6; plus 0.25 s per MB of input)")
    p.add_argument("--exec", action="store_true",
                   help="start a python -m process per run (slower) instead of forking a process that has "
                        "imported the commands' modules once")
    p.add_argument("--keep", type=Path, default=None, help="copy the inputs of failing cases into this folder")
    p.add_argument("--results", type=Path, default=None, help="write every case's runs here (JSON Lines)")
    p.add_argument("--seeds-dir", type=Path, default=None, help="prepared seeds (reused between runs when given)")
    p.add_argument("--examples", type=int, default=3, help="examples printed per failing outcome (default 3)")
    p.add_argument("--summarize", type=Path, default=None, metavar="RESULTS",
                   help="print the summary of an earlier run's --results file instead of running")
    a = p.parse_args(argv)
    if a.summarize:
        with open(a.summarize, encoding="utf-8") as f:
            results = [json.loads(line) for line in f]
        summarize(results, a, 0.0, 0, 0, sys.stdout)
        return 0
    stages = {s.strip() for s in a.commands.split(",") if s.strip()}
    if not stages <= set(fcases.STAGES):
        p.error(f"--commands: choose among {', '.join(fcases.STAGES)}")
    classes = fcases.classes_for(stages, a.classes.split(",") if a.classes else None)
    if not classes:
        p.error("no mutation class matches --classes/--commands")
    if a.keep:
        a.keep.mkdir(parents=True, exist_ok=True)
        a.keep = a.keep.resolve()

    with tempfile.TemporaryDirectory(prefix="pyprof-fuzz-") as tmp:
        root = Path(tmp)
        t0 = time.monotonic()
        seeds = prepare(a.seeds_dir.resolve() if a.seeds_dir else root / "seeds",
                        log=lambda m: print(m, file=sys.stderr))
        state = {"seeds": seeds, "seed": a.seed, "classes": classes, "stages": stages, "root": root / "cases",
                 "timeout": a.timeout, "keep": a.keep, "fork": not a.exec}
        (root / "cases").mkdir()
        indices = [a.case] if a.case is not None else list(range(a.cases))
        results = []
        if a.jobs <= 1 or len(indices) == 1:
            _init(state)
            results = [_one(i) for i in indices]
            if _STATE.get("zygote"):
                _STATE["zygote"].close()
        else:
            ctx = multiprocessing.get_context("fork")
            with ctx.Pool(a.jobs, initializer=_init, initargs=(state,), maxtasksperchild=200) as pool:
                step = max(1, len(indices) // 10)
                for n, r in enumerate(pool.imap_unordered(_one, indices, chunksize=1), 1):
                    results.append(r)
                    if n % step == 0:
                        print(f"fuzz: {n}/{len(indices)} cases, {time.monotonic() - t0:.0f} s", file=sys.stderr)
        elapsed = time.monotonic() - t0
    results.sort(key=lambda r: r["index"])
    if a.results:
        with open(a.results, "w", encoding="utf-8") as f:
            for r in results:
                f.write(json.dumps(r) + "\n")
    n_seeds = sum(len(getattr(seeds, k)) for k in ("nsys", "nvprof", "kineto", "records", "legacy", "other"))
    summarize(results, a, elapsed, n_seeds, len(seeds.skipped), sys.stdout)
    return 1 if any(r["outcome"] in FAILURES for c in results for r in c["runs"]) else 0


def _shape(text: str) -> str:
    """A message with its numbers and paths blurred, so that one failure is one signature."""
    text = re.sub(r"(DIR)?/[^\s:'\"]+", "PATH", text)
    text = re.sub(r"\d+", "N", text)
    return text[:130]


def signature(run: dict) -> str:
    o = run["outcome"]
    if o == "traceback":
        return f"{run['stage']}: {run['why']}"
    if o in ("hang", "over-memory", "crash"):
        return f"{run['stage']}: {o}"
    shaped = _shape(run["why"])
    if o in ("multi-line-refusal", "nameless-refusal", "refused-valid"):
        # The command's own words after "error: FILE:", so that one message is one signature.
        count = re.match(r"N stderr lines, ", shaped)
        gist = re.split(r" \(|: ", re.sub(r"^.*?error: (PATH: ?)?", "", shaped))[0]
        shaped = (count.group(0) if count else "") + gist[:70]
    elif o == "invalid-output":  # the token that is not JSON, its first characters only
        shaped = re.sub(r"(not strict JSON at '[^']{0,4}).*", r"\1...'", shaped)
    return f"{run['stage']}: {shaped}"


def summarize(results: list[dict], a, elapsed: float, n_seeds: int, skipped: int, out) -> None:
    runs = [(c, r) for c in results for r in c["runs"]]
    errors = [c for c in results if c["error"]]
    print(f"fuzz: {len(results)} cases (seed {a.seed}), {len(runs)} runs in {elapsed:.0f} s on {a.jobs} jobs; "
          f"{n_seeds} seed files ({skipped} left out); {len(errors)} mutator errors", file=out)
    by = Counter(r["outcome"] for _, r in runs)
    for o in OUTCOMES:
        print(f"outcome {o:<20} {by.get(o, 0):>6}", file=out)
    cases_failing = sum(1 for c in results if any(r["outcome"] in FAILURES for r in c["runs"]))
    print(f"cases with a broken promise {cases_failing:>6}", file=out)
    print(f"peak RSS of any run (MB) {max((r['rss_mb'] for _, r in runs), default=0):>9.0f}", file=out)
    print(f"longest run (s) {max((r['wall_s'] for _, r in runs), default=0):>17.1f}", file=out)
    for stage in fcases.STAGES:
        c = Counter(r["outcome"] for _, r in runs if r["stage"] == stage)
        if c:
            print(f"stage {stage:<8} " + ", ".join(f"{o} {c[o]}" for o in OUTCOMES if c[o]), file=out)
    per_class: dict = defaultdict(Counter)
    for case, r in runs:
        per_class[case["mutation"]][r["outcome"]] += 1
    for name in sorted(per_class):
        c = per_class[name]
        print(f"class {name:<18} runs {sum(c.values()):>5}: " + ", ".join(f"{o} {c[o]}" for o in OUTCOMES if c[o]),
              file=out)
    sigs: dict = defaultdict(list)
    for case, r in runs:
        if r["outcome"] in FAILURES:
            sigs[(r["outcome"], signature(r))].append((case, r))
    if sigs:
        print("signatures (count, outcome, stage: signature; classes; one reproducing command):", file=out)
    for (o, sig), items in sorted(sigs.items(), key=lambda kv: -len(kv[1])):
        case, r = items[0]
        classes = Counter(c["mutation"] for c, _ in items)
        print(f"  {len(items):>5}  {o:<18} {sig}", file=out)
        print(f"         classes: {', '.join(f'{k} {v}' for k, v in classes.most_common(4))}", file=out)
        print(f"         e.g. case {case['index']} ({case['mutation']}: {case['detail'][:100]}) {r['where']}",
              file=out)
        print(f"         {_repro(a, case, r)}", file=out)
    shown = Counter()
    for case, r in runs:
        o = r["outcome"]
        if o in FAILURES and shown[o] < a.examples:
            if not shown[o]:
                print(f"examples of {o}:", file=out)
            shown[o] += 1
            print(f"  case {case['index']} {case['mutation']}: {case['detail'][:140]}", file=out)
            print(f"    {r['command'][:300]}", file=out)
            print(f"    {r['why'][:200]} | last stderr line: {r['last_stderr'][:200]}", file=out)
    for c in errors[: a.examples]:
        print(f"mutator error: case {c['index']} {c['mutation']}: {c['error']}", file=out)


def _repro(a, case: dict, run: dict) -> str:
    # This checkout's pyprof, wherever it is run from (an installed pyprof may be another checkout's).
    cmd = f"PYTHONPATH={ROOT} {run['command']}"
    rebuild = f"python bench/fuzz_run.py --seed {a.seed} --case {case['index']} --keep DIR"
    if a.keep:
        return f"{cmd[:300]}   (input kept; rebuild: {rebuild})"
    return f"{rebuild}   then: {cmd[:200]}"


if __name__ == "__main__":
    sys.exit(main())
