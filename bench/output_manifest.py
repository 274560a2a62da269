"""Hash every output of parse, prof and report for a set of profiles, to compare two versions of pyprof.

    python bench/output_manifest.py --out before.json tests/data examples/profiles ../shared/corpus /work/extra-traces
    (change the code)
    python bench/output_manifest.py --out after.json  ... the same folders ...
    python bench/output_manifest.py --diff before.json after.json

A reshaping of the code must leave these outputs byte for byte as they were. Each profile (recursively; READMEs,
*.md, *.py, *.sh and *counts.json skipped) goes through ``python -m pyprof.parse`` once; its records then go
through prof's per-kernel table (every column, JSON Lines), each ``--group-by``, ``--view all`` and report's
HTML page and Perfetto trace, each in a subprocess; the manifest holds a sha256 of each output and of each
stderr, and the exit codes.

The parse output itself is hashed as its records, not its bytes: one sha256 over each record's JSON with the
keys sorted, after dropping what a version of the record may carry differently on purpose (``schema``, the raw
``seqMarker`` texts, ``gpu_props``, which schema 3 writes once per device), putting back the keys schema 3
leaves out at their defaults (SCHEMA3_DEFAULTS, written here from docs/record.md, not taken from pyprof) and the
``"dtype": null`` it leaves out of a tensor argument, and skipping parse's end and header lines. So a new record
schema compares equal when it says the same about every activity.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import subprocess
import sys
import tempfile

SKIP_SUFFIXES = (".md", ".py", ".sh", "counts.json", ".txt")
VOLATILE_KEYS = ("schema", "seqMarker", "gpu_props")
SCHEMA3_DEFAULTS = {"correlation_id": None, "registers": None, "static_smem_bytes": None, "dynamic_smem_bytes": None,
                    "est_occupancy_pct": None, "gpu": None, "api": None, "api_start_ns": None,
                    "api_end_ns": None, "bytes": None, "copy_kind": None, "recompute": False, "args": [],
                    "outputs": [], "callsite": None, "fwd": None, "ranges": []}


def _tensor_dtypes(args) -> None:
    for a in args if type(args) is list else ():
        if type(a) is dict:
            if a.get("type") == "tensor":
                a.setdefault("dtype", None)
            _tensor_dtypes(a.get("items"))
PROF_RUNS = {
    "kernels": ["-c", "all", "--jsonl"],
    **{f"group_{g}": ["--group-by", g, "--jsonl"] for g in ("op", "layer", "kernel", "callsite", "dir")},
    "views": ["--view", "all", "--jsonl"],
}


def profiles(folders: list[str]) -> list[str]:
    """Every file under ``folders`` that may be a profile, sorted."""
    out = []
    for top in folders:
        if os.path.isfile(top):
            out.append(top)
            continue
        for dirpath, _dirs, files in os.walk(top):
            out += [os.path.join(dirpath, f) for f in files
                    if not f.endswith(SKIP_SUFFIXES) and not f.startswith(("README", "."))]
    return sorted(out)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def records_digest(path: str) -> tuple[str, int]:
    """(sha256 of the records with the volatile keys dropped, number of records) of a parse output file."""
    h = hashlib.sha256()
    n = 0
    with open(path, "rb") as f:
        for line in f:
            d = json.loads(line)
            if not isinstance(d, dict) or "pyprof_end" in d or "pyprof_header" in d:
                continue
            for k in VOLATILE_KEYS:
                d.pop(k, None)
            for k, v in SCHEMA3_DEFAULTS.items():
                d.setdefault(k, v)
            # What schema 3 leaves out where the other keys give it (docs/record.md): the end is start plus
            # duration, the shared memory the sum of its two parts.
            if "end_ns" not in d and isinstance(d.get("start_ns"), int):
                d["end_ns"] = d["start_ns"] + d["kDuration"]
            if "smem_bytes" not in d or d["smem_bytes"] is None:
                parts = (d.get("static_smem_bytes"), d.get("dynamic_smem_bytes"))
                d["smem_bytes"] = parts[0] + parts[1] if None not in parts else None
            _tensor_dtypes(d.get("args"))
            if type(d.get("fwd")) is dict:
                _tensor_dtypes(d["fwd"].get("args"))
            h.update(json.dumps(d, sort_keys=True).encode())
            n += 1
    return h.hexdigest()[:16], n


def _run(cmd: list[str], stdout) -> tuple[int, bytes]:
    p = subprocess.run([sys.executable, "-m", *cmd], stdout=stdout, stderr=subprocess.PIPE, timeout=900,
                       env={**os.environ, "PYTHONHASHSEED": "0"})
    return p.returncode, p.stderr


def one(path: str, display: str) -> dict:
    """The manifest entry of one profile."""
    entry: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        recs = os.path.join(tmp, "r.dict")
        with open(recs, "wb") as out:
            rc, err = _run(["pyprof.parse", path], out)
        entry["parse"] = {"rc": rc, "stderr": _sha(err.replace(path.encode(), b"<in>"))}
        if rc != 0:
            return entry
        entry["parse"]["records"], entry["parse"]["n"] = records_digest(recs)
        for name, extra in PROF_RUNS.items():
            p = subprocess.run([sys.executable, "-m", "pyprof.prof", "-q", *extra, recs], capture_output=True,
                               timeout=900, env={**os.environ, "PYTHONHASHSEED": "0"})
            entry[name] = {"rc": p.returncode, "out": _sha(p.stdout),
                           "stderr": _sha(p.stderr.replace(recs.encode(), b"<in>"))}
        html, trace = os.path.join(tmp, "r.html"), os.path.join(tmp, "r.json")
        rc, err = _run(["pyprof.report", "-q", recs, "-o", html, "--trace", trace], subprocess.DEVNULL)
        entry["report"] = {"rc": rc}
        for name, f in (("html", html), ("trace", trace)):
            if os.path.exists(f):
                with open(f, "rb") as fh:
                    entry["report"][name] = _sha(fh.read().replace(recs.encode(), b"<in>"))
    return entry


def diff(a: dict, b: dict) -> int:
    """Print what differs between two manifests; return the number of differences."""
    n = 0
    for f in sorted(set(a) | set(b)):
        if f not in a or f not in b:
            print(f"{f}: only in {'the second' if f in b else 'the first'}")
            n += 1
            continue
        for stage in sorted(set(a[f]) | set(b[f])):
            if a[f].get(stage) != b[f].get(stage):
                print(f"{f} {stage}: {a[f].get(stage)} -> {b[f].get(stage)}")
                n += 1
    print(f"{n} differences over {len(set(a) | set(b))} files")
    return n


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("folders", nargs="*")
    p.add_argument("--out")
    p.add_argument("--diff", nargs=2, metavar=("BEFORE", "AFTER"))
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = p.parse_args()
    if args.diff:
        with open(args.diff[0]) as fa, open(args.diff[1]) as fb:
            return 1 if diff(json.load(fa), json.load(fb)) else 0
    files = profiles(args.folders)
    manifest = {}
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = {pool.submit(one, os.path.abspath(f), f): f for f in files}
        for fut in concurrent.futures.as_completed(futures):
            f = futures[fut]
            manifest[os.path.relpath(f) if not f.startswith("/work/extra") else f] = fut.result()
            print(f"{len(manifest)}/{len(files)} {f}", file=sys.stderr, flush=True)
    with open(args.out, "w") as fh:
        json.dump(manifest, fh, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
