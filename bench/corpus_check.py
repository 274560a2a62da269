"""Run parse, prof's overview and report on every profiler file under some folders, against independent counts.

    python bench/corpus_check.py ../shared/corpus /work/extra-traces [--timeout 300]
        [--counts /work/extra-traces/external.counts.json]

Each file (recursively; README, *.md, *.py and *counts.json skipped) goes through ``python -m pyprof.parse``,
``python -m pyprof.prof --view overview --jsonl`` and ``python -m pyprof.report``, each a subprocess with a
timeout. One line per file: exit codes, whether any stderr holds a traceback, records by kind against counts
made here with plain json/gzip/lzma/sqlite3 (never with pyprof's readers), the shares of kernels attributed to
an op and of backward kernels linked (from parse's summary line), and the overview's idle % against HTA's
temporal breakdown when a counts.json beside the file (or one given with --counts) holds it. Then the
failures by class, with each traceback's last frames. A refusal is exit 1 with one line on stderr: expected
for a file that is not a profile, a failure for one that is.
"""
from __future__ import annotations

import argparse
import gzip
import json
import lzma
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KINDS = ("kernel", "memcpy", "memset")
KINETO_CATS = {"kernel": "kernel", "Kernel": "kernel", "gpu_memcpy": "memcpy", "Memcpy": "memcpy",
               "gpu_memset": "memset", "Memset": "memset"}
NSYS = {"kernel": ["CUPTI_ACTIVITY_KIND_KERNEL"], "memcpy": ["CUPTI_ACTIVITY_KIND_MEMCPY"],
        "memset": ["CUPTI_ACTIVITY_KIND_MEMSET"]}
# nvprof writes kernels to CONCURRENT_KERNEL, or to KERNEL when kernel concurrency is off
NVPROF = {**NSYS, "kernel": ["CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL", "CUPTI_ACTIVITY_KIND_KERNEL"]}
HTA_POINTS = 3.0


def expected_counts(path: str) -> dict | str:
    """{kind: n} counted from the raw file, or a string saying why it is not a profile."""
    with open(path, "rb") as f:
        data = f.read()
    while data[:2] == b"\x1f\x8b" or data[:6] == b"\xfd7zXZ\x00":  # nested too (a .json.gz.xz)
        try:
            data = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else lzma.decompress(data)
        except (OSError, EOFError, lzma.LZMAError, zlib.error) as e:  # a fuzz case's cut or damaged stream
            return f"damaged compressed stream ({e})"
    if data.startswith(b"SQLite format 3\x00"):
        with tempfile.NamedTemporaryFile(suffix=".sqlite") as tmp:
            tmp.write(data)
            tmp.flush()
            con = sqlite3.connect(f"file:{tmp.name}?mode=ro", uri=True)
            con.text_factory = bytes  # a damaged export's names need not be UTF-8
            try:
                tables = {r[0].decode("utf-8", "replace") for r in
                          con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
                spec = NSYS if "StringIds" in tables else NVPROF if {"StringTable", "Version"} <= tables else None
                if spec is None:
                    return "SQLite of another tool"
                return {k: sum(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ts if t in tables)
                        for k, ts in spec.items()}
            # a fuzz case's damaged pages (whose error text need not be UTF-8 either)
            except (sqlite3.DatabaseError, UnicodeDecodeError) as e:
                return f"damaged SQLite ({e})"
            finally:
                con.close()
    try:
        doc = json.loads(data)
    except RecursionError:  # deeper than this recount's decoder goes: a fuzz case, not a trace
        return "JSON nested too deep"
    except ValueError:
        return "neither SQLite nor JSON"
    events = doc if isinstance(doc, list) else doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list) or not any(isinstance(e, dict) and "ph" in e for e in events[:100]):
        return "JSON without trace events"
    out = dict.fromkeys(KINDS, 0)
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") in KINETO_CATS:
            out[KINETO_CATS[e["cat"]]] += 1
    return out


def run(args: list[str], timeout: float, stdout_path: str | None = None) -> tuple[int | str, str]:
    """(exit code or 'T/O', stderr) of ``python -m ARGS`` in the repository root; stdout to a file if given."""
    with open(stdout_path or os.devnull, "w") as out:
        try:
            p = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, stdout=out, stderr=subprocess.PIPE,
                               text=True, timeout=timeout, stdin=subprocess.DEVNULL)
            return p.returncode, p.stderr
        except subprocess.TimeoutExpired:
            return "T/O", ""


def last_frames(stderr: str, n: int = 3) -> str:
    """The last n 'File ...' frames of the last traceback and its exception line, on one line."""
    tb = stderr[stderr.rindex("Traceback"):].splitlines()
    frames = [f"{m.group(1)}:{m.group(2)} {m.group(3)}" for m in
              (re.match(r'\s*File "(?:.*/)?([^/"]+)", line (\d+), in (\S+)', line) for line in tb) if m]
    exc = [line for line in tb if line and not line.startswith(" ")][-1]
    return " <- ".join(reversed(frames[-n:])) + " | " + exc[:160]


def refusal(code: int | str, stderr: str) -> bool:
    """Whether the command refused its input as the project promises: exit 1 and one line on stderr."""
    return code == 1 and len(stderr.strip().splitlines()) == 1 and "Traceback" not in stderr


def overview_idle(stdout_path: str) -> float | None:
    """Idle % of the overview's step rows together (the mean row left out), as HTA reckons: idle / span."""
    span = idle = 0.0
    with open(stdout_path) as f:
        for line in f:
            row = json.loads(line)
            if row.get("step") != "mean" and row.get("span_ms"):
                span += row["span_ms"]
                idle += row.get("idle_ms") or 0.0
    return 100.0 * idle / span if span else None


def hta_idle(entry: dict) -> float | str | None:
    # HTA's include_last_profiler_step=True keeps every step, as the overview does
    hta = (entry or {}).get("hta") or {}
    got = hta.get("include_last_true", hta.get("include_last_false"))
    if isinstance(got, dict) and got:
        return float(next(iter(got.values())))
    return got if isinstance(got, str) else None


def check(path: str, hta_entry: dict | None, timeout: float, tmp: str) -> tuple[str, list[tuple[str, str]]]:
    """One line for the file and its failures as (class, detail)."""
    want = expected_counts(path)
    dict_path, ov_path, html = (os.path.join(tmp, n) for n in ("r.dict", "ov.jsonl", "r.html"))
    for p in (dict_path, ov_path, html):
        if os.path.exists(p):
            os.unlink(p)
    fails: list[tuple[str, str]] = []
    codes, errs = [], []
    steps = [["pyprof.parse", path, "-o", dict_path], ["pyprof.prof", "--view", "overview", "--jsonl", dict_path],
             ["pyprof.report", dict_path, "-o", html]]
    for i, step in enumerate(steps):
        code, err = run(step, timeout, ov_path if i == 1 else None)
        codes.append(code)
        errs.append(err)
        if i == 0 and code != 0:
            break
    tb = any("Traceback" in e for e in errs)
    line = f"exit {'/'.join(map(str, codes))}  tb {'YES' if tb else 'no'}"
    for stage, code, err in zip(("parse", "prof", "report"), codes, errs):
        if "Traceback" in err:
            fails.append(("traceback", f"{stage}: {last_frames(err)}"))
        elif code == "T/O":
            fails.append(("timeout", f"{stage} ran past {timeout:.0f} s"))
        elif code != 0 and not refusal(code, err):
            fails.append(("error exit", f"{stage} exit {code}: {err.strip().splitlines()[-1:]}"))
        elif code != 0 and stage != "parse" and os.path.getsize(dict_path) == 0:
            fails.append(("refused an empty records file", f"{stage}: {err.strip()[:200]}"))
        elif code != 0 and (stage != "parse" or isinstance(want, dict)):
            fails.append(("refused a valid input", f"{stage}: {err.strip()[:200]}"))
    if isinstance(want, str):
        line += f"  not a profile ({want})"
        if codes[0] == 0:
            fails.append(("accepted a non-profile", f"parse exit 0 on a file that is {want}"))
        elif refusal(codes[0], errs[0]):
            line += f": refused: {errs[0].strip().split(path + ': ', 1)[-1][:90]}"
        return line, fails
    if codes[0] != 0:
        return line + "  " + "  ".join(f"{k} -/{want[k]}" for k in KINDS), fails
    got = dict.fromkeys(KINDS, 0)
    with open(dict_path) as f:
        for rec in f:
            d = json.loads(rec)
            if "pyprof_end" not in d:  # parse's end line is not an activity
                got[d.get("kind")] = got.get(d.get("kind"), 0) + 1
    line += "  " + "  ".join(f"{k} {got[k]}/{want[k]}" for k in KINDS)
    if any(got[k] != want[k] for k in KINDS):
        fails.append(("wrong counts", ", ".join(f"{k} {got[k]} for {want[k]}" for k in KINDS if got[k] != want[k])))
    share = re.search(r"([\d.]+)% of kernels attributed", errs[0])
    linked = re.search(r"([\d.]+)% of those linked", errs[0])
    line += f"  op {share.group(1) + '%' if share else '-'}  fwd {linked.group(1) + '%' if linked else '-'}"
    idle = overview_idle(ov_path) if len(codes) > 1 and codes[1] == 0 else None
    ref = hta_idle(hta_entry)
    line += f"  idle {'-' if idle is None else f'{idle:.1f}'}"
    if isinstance(ref, float) and not any(got.values()):
        # HTA also reckons events outside the counting rule (MTIA accelerator ops): nothing to compare
        line += f" (HTA {ref:.1f} on events that are not GPU activities)"
    elif isinstance(ref, float):
        line += f" vs HTA {ref:.1f}"
        if idle is None or abs(idle - ref) > HTA_POINTS:
            fails.append(("HTA disagreement", f"idle {idle if idle is None else round(idle, 1)} vs HTA {ref}"))
    elif isinstance(ref, str):
        line += " (HTA failed)"
    return line, fails


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folders", nargs="+")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per command (default 300)")
    ap.add_argument("--counts", action="append", default=[], help="further counts.json, keyed by file name")
    args = ap.parse_args(argv)
    extra: dict = {}
    for c in args.counts:
        with open(c) as f:
            extra.update(json.load(f))
    classes: dict[str, list[str]] = {}
    details: list[str] = []
    n = refused = 0
    with tempfile.TemporaryDirectory() as tmp:
        for folder in args.folders:
            for d, _, files in sorted(os.walk(folder)):
                beside = {}
                if os.path.exists(os.path.join(d, "counts.json")):
                    with open(os.path.join(d, "counts.json")) as f:
                        beside = json.load(f)
                for name in sorted(files):
                    if name.endswith((".md", ".py", "counts.json")):
                        continue
                    path = os.path.join(d, name)
                    line, fails = check(path, beside.get(name, extra.get(name)), args.timeout, tmp)
                    n += 1
                    refused += ": refused:" in line
                    shown = os.path.relpath(path, folder)
                    print(f"{shown}  {line}" + ("  FAIL" if fails else ""), flush=True)
                    for cls, detail in fails:
                        classes.setdefault(cls, []).append(path)
                        details.append(f"  {cls}: {shown}: {detail}")
    print(f"{n} files; {n - len({f for v in classes.values() for f in v})} without failure "
          f"({refused} of them non-profiles refused as expected); failures by class: "
          + ("; ".join(f"{c} {len(v)}" for c, v in sorted(classes.items())) or "none"))
    print("\n".join(details))
    return 1 if classes else 0


if __name__ == "__main__":
    sys.exit(main())
