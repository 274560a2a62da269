"""Mutations of PyTorch-profiler (Kineto) JSON traces: truncation, a byte-order mark, invalid UTF-8, NaN and
Infinity and 1e999 tokens, deep nesting in ``args``, wrong types in fields, hostile and 20 MB names.

A trace is loaded, changed as objects, and written back; tokens JSON cannot hold (1e999, a nesting deeper than
``json`` can write) go in as placeholder strings replaced in the text.
"""
from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

from bench.fuzz.registry import Built, mutation, parse_commands
from bench.fuzz.seeds import choose
from bench.fuzz.sqlite_markers import HOSTILE

_CACHE: dict[Path, dict] = {}
_GPU_CATS = ("kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset")


def load(rng: random.Random, seeds) -> tuple[Path, dict]:
    """A random Kineto seed and a fresh copy of its JSON."""
    src = choose(rng, seeds.kineto)
    if src not in _CACHE:
        with open(src, "rb") as f:
            _CACHE[src] = json.loads(f.read())
    return src, json.loads(json.dumps(_CACHE[src]))  # a deep copy that never recurses in Python


def write(folder: Path, name: str, data, tokens: dict[str, str] | None = None, gz: bool = False,
          prefix: bytes = b"") -> Path:
    text = json.dumps(data)
    for placeholder, token in (tokens or {}).items():
        text = text.replace(json.dumps(placeholder), token)
    raw = prefix + text.encode("utf-8", "surrogatepass")
    path = folder / (name + (".gz" if gz else ""))
    with (gzip.open(path, "wb", compresslevel=1) if gz else open(path, "wb")) as f:
        f.write(raw)
    return path


def _events(data, rng, cats=None, k=None):
    evs = [e for e in data.get("traceEvents", []) if isinstance(e, dict) and (cats is None or e.get("cat") in cats)]
    if not evs:
        evs = [e for e in data.get("traceEvents", []) if isinstance(e, dict)]
    return rng.sample(evs, min(len(evs), k or rng.choice((1, 5, 50))))


def _built(rng, src: Path, folder: Path, detail: str, data, tokens=None, prefix=b"", must_succeed=False,
           chain=False) -> Built:
    path = write(folder, src.name, data, tokens, gz=rng.random() < 0.3, prefix=prefix)
    cmds = parse_commands(rng, str(path), must_succeed)
    cmds[0].chain = cmds[0].chain or chain
    return Built(f"{src.name}: {detail}", cmds)


@mutation("json.truncate")
def truncate(rng, seeds, folder) -> Built:
    src, data = load(rng, seeds)
    text = json.dumps(data).encode()
    cut = rng.choice((rng.randrange(1, len(text)), len(text) - 1, len(text) // 2, 1))
    path = folder / src.name
    if rng.random() < 0.3:
        path = path.with_name(path.name + ".gz")
        with gzip.open(path, "wb", compresslevel=1) as f:
            f.write(text[:cut])
    else:
        path.write_bytes(text[:cut])
    return Built(f"{src.name}: truncated to {cut} of {len(text)} bytes", parse_commands(rng, str(path)))


@mutation("json.bom")
def bom(rng, seeds, folder) -> Built:
    """A UTF-8 byte-order mark before a valid trace (Windows tools write one): must parse."""
    src, data = load(rng, seeds)
    return _built(rng, src, folder, "UTF-8 BOM before the trace", data, prefix=b"\xef\xbb\xbf", must_succeed=True)


@mutation("json.invalid_utf8")
def invalid_utf8(rng, seeds, folder) -> Built:
    src, data = load(rng, seeds)
    bad = rng.choice(("\udcff", "\udcc3(", "\udc80"))  # surrogate escapes: written as the raw bytes ff, c3 28, 80
    evs = _events(data, rng)
    field = rng.choice(("name", "cat", "args"))
    for e in evs:
        if field == "args":
            e.setdefault("args", {})["Input type"] = ["float" + bad]
        else:
            e[field] = str(e.get(field, "")) + bad
    path = folder / src.name
    raw = json.dumps(data, ensure_ascii=False).encode("utf-8", "surrogateescape")
    if rng.random() < 0.3:
        path = path.with_name(path.name + ".gz")
        with gzip.open(path, "wb", compresslevel=1) as f:
            f.write(raw)
    else:
        path.write_bytes(raw)
    return Built(f"{src.name}: invalid UTF-8 in {field} of {len(evs)} events", parse_commands(rng, str(path)))


@mutation("json.nonfinite")
def nonfinite(rng, seeds, folder) -> Built:
    src, data = load(rng, seeds)
    token = rng.choice(("NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1e308"))
    field = rng.choice(("ts", "dur", "args.device", "args.stream", "args.correlation", "args.External id",
                        "args.registers per thread", "args.est. achieved occupancy %", "args.grid", "baseTime"))
    evs = _events(data, rng, _GPU_CATS if field != "ts" or rng.random() < 0.5 else None)
    for e in evs:
        if field.startswith("args."):
            key = field[5:]
            e.setdefault("args", {})[key] = ["@T@", 1, 1] if key == "grid" else "@T@"
        elif field == "baseTime":
            data["baseTimeNanoseconds"] = "@T@"
        else:
            e[field] = "@T@"
    return _built(rng, src, folder, f"{token} in {field} of {len(evs)} events", data, {"@T@": token}, chain=True)


@mutation("json.deep", weight=0.5)
def deep(rng, seeds, folder) -> Built:
    """Arrays or objects nested 1,000 to 300,000 deep in an event's args, its Input Dims, or the whole trace."""
    src, data = load(rng, seeds)
    depth = rng.choice((1_000, 50_000, 300_000))
    where = rng.choice(("Input Dims", "args", "event", "top"))
    nest = "[" * depth + "]" * depth if rng.random() < 0.5 else '{"a":' * depth + "1" + "}" * depth
    evs = _events(data, rng, ("cpu_op", "Operator", "user_annotation") if where != "args" else _GPU_CATS)
    for e in evs:
        if where == "event":
            e["name"] = "@D@"
        else:
            e.setdefault("args", {})["Input Dims" if where == "Input Dims" else "deep"] = "@D@"
    if where == "top":
        data["deep"] = "@D@"
    return _built(rng, src, folder, f"{depth}-deep nesting in {where} of {len(evs)} events", data, {"@D@": nest})


#: Wrong-typed values for the fields a reader uses.
WRONG = ("string", None, True, [], {}, [1, [2]], {"a": 1}, -1, 1.5, 2 ** 64, "", "12")


@mutation("json.wrong_type")
def wrong_type(rng, seeds, folder) -> Built:
    src, data = load(rng, seeds)
    field = rng.choice(("ts", "dur", "pid", "tid", "name", "cat", "ph", "args", "id", "args.External id",
                        "args.correlation", "args.device", "args.stream", "args.grid", "args.block",
                        "args.Sequence number", "args.Fwd thread id", "args.Input Dims", "args.Input type",
                        "args.Concrete Inputs", "args.shared memory", "args.registers per thread", "event",
                        "traceEvents", "deviceProperties", "displayTimeUnit", "schemaVersion", "distributedInfo"))
    value = rng.choice(WRONG)
    evs = _events(data, rng)
    if field in ("traceEvents", "deviceProperties", "displayTimeUnit", "schemaVersion", "distributedInfo"):
        data[field] = value
        n = "the trace"
    else:
        for i, e in enumerate(evs):
            if field == "event":
                data["traceEvents"][data["traceEvents"].index(e)] = value
            elif field.startswith("args."):
                args = e.get("args")
                if not isinstance(args, dict):
                    args = e["args"] = {}
                args[field[5:]] = value
            else:
                e[field] = value
        n = f"{len(evs)} events"
    return _built(rng, src, folder, f"{field} = {json.dumps(value)} in {n}", data)


@mutation("json.hostile_name")
def hostile_name(rng, seeds, folder) -> Built:
    src, data = load(rng, seeds)
    name = rng.choice(HOSTILE)
    evs = _events(data, rng, _GPU_CATS + ("cpu_op", "Operator", "user_annotation") if rng.random() < 0.7 else None)
    for e in evs:
        e["name"] = (str(e.get("name", "")) + name) if rng.random() < 0.5 else name
    return _built(rng, src, folder, f"{len(evs)} names with {name[:40]!r}", data, chain=True)


@mutation("json.huge_name", weight=0.1)
def huge_name(rng, seeds, folder) -> Built:
    """A 20 MB kernel or op name (one line of the records then holds it)."""
    src, data = load(rng, seeds)
    evs = _events(data, rng, _GPU_CATS, k=1)
    for e in evs:
        e["name"] = "void k<" + "x" * 20_000_000 + ">()"
    return _built(rng, src, folder, "a 20 MB name", data, chain=True)
